//! Swap and block device models.
pub mod blockdev;
pub mod virtio_host;
pub mod zbud;
pub mod zram;
pub mod zsmalloc;
