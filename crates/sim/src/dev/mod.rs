//! Swap and block device models.
pub mod blockdev;
pub mod zbud;
pub mod zram;
pub mod zsmalloc;
