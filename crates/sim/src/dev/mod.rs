//! Swap and block device models.
pub mod zram;
