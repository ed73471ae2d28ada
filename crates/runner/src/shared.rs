//! Content tokens that several processes share: one `u32` per page of a
//! shared memory object (a tmpfs file, a MAP_SHARED|MAP_ANONYMOUS region),
//! in a MAP_SHARED|MAP_ANONYMOUS mapping of the runner's own, so that every
//! process mapping the object checks its reads against what any of them
//! last wrote there.

use std::sync::atomic::{AtomicU32, Ordering};

const PAGE: usize = 4096;

/// A token array in shared memory. A plain handle: copies (and forked
/// processes) use the same array; `unmap` ends this process's mapping of it.
#[derive(Debug, Clone, Copy)]
pub struct SharedTokens {
    ptr: *mut AtomicU32,
    len: usize,
}

// SAFETY: the handle only reaches atomics, in a mapping that stays until
// `unmap`, which the runner calls when no thread of the process can use the
// array any more (a region's own array with its region, which no thread
// shares then; a file's at the teardown).
unsafe impl Send for SharedTokens {}
// SAFETY: as for Send: every access through a shared handle is atomic.
unsafe impl Sync for SharedTokens {}

impl SharedTokens {
    /// A zeroed array of `len` tokens, its pages faulted in now (by this
    /// process, so they are charged to this process's memory cgroup).
    /// MADV_NOHUGEPAGE first: under shmem_enabled `always` the array
    /// would otherwise take a PMD-size folio of its own and show in the
    /// workload's THP counters.
    pub fn map(len: usize) -> std::io::Result<SharedTokens> {
        let bytes = Self::bytes(len);
        // SAFETY: a fresh shared anonymous mapping.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the mapping just made; then one write per page faults
        // it in (what MAP_POPULATE did), each storing the zero it holds.
        // A kernel without THP refuses the advice (EINVAL) and has no huge
        // folios to avoid, so its result is not checked.
        unsafe {
            libc::madvise(addr, bytes, libc::MADV_NOHUGEPAGE);
            for off in (0..bytes).step_by(PAGE) {
                std::ptr::write_volatile((addr as *mut u8).add(off), 0);
            }
        }
        Ok(SharedTokens {
            ptr: addr as *mut AtomicU32,
            len,
        })
    }

    fn bytes(len: usize) -> usize {
        (len.max(1) * 4).div_ceil(PAGE) * PAGE
    }

    /// Unmaps this process's mapping. The handle must not be used after.
    pub fn unmap(self) {
        // SAFETY: the whole mapping made by `map`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, Self::bytes(self.len)) };
    }

    #[cfg(test)]
    pub fn ptr_for_test(&self) -> *mut AtomicU32 {
        self.ptr
    }

    fn at(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.len, "token {i} of {}", self.len);
        // SAFETY: inside the mapping, which lives until `unmap`.
        unsafe { &*self.ptr.add(i) }
    }

    /// The token page `i` holds now.
    pub fn get(&self, i: usize) -> u32 {
        self.at(i).load(Ordering::SeqCst)
    }

    /// A new token for a write to page `i`, unique among every process's
    /// writes to it (an atomic fetch-and-add; 0, "never written", is
    /// skipped when the counter wraps). The caller then stores it in the
    /// page with a plain store.
    pub fn next(&self, i: usize) -> u32 {
        loop {
            let t = self.at(i).fetch_add(1, Ordering::SeqCst).wrapping_add(1);
            if t != 0 {
                return t;
            }
        }
    }
}
