//! The memory-management subsystem, file by file as in the kernel's mm/.
pub mod folio;
pub mod lruvec;
pub mod madvise;
pub mod memcontrol;
pub mod memory;
pub mod mmap;
pub mod page_alloc;
pub mod page_io;
pub mod pgtable;
pub mod rmap;
pub mod shmem;
pub mod swap;
pub mod swap_state;
pub mod swapfile;
pub mod vmscan;
pub mod workingset;
