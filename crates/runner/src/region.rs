//! The regions a task process maps, with the content tokens each page is
//! checked against: private ones in the process, shared ones in shared
//! memory (`SharedTokens`), one per page of the shared object.

use crate::exec::Child;
use crate::setup::SharedFile;
use crate::shared::SharedTokens;
use mmsim_spec::MapKind;

pub(crate) const PAGE: usize = 4096;

pub(crate) struct Region {
    pub(crate) addr: *mut u8,
    pub(crate) pages: u64,
    pub(crate) tokens: Tokens,
    /// One bit per page: freed by MADV_FREE and not written since, so it
    /// reads either its last token or zero (if reclaim discarded it). Empty
    /// until the region's first MADV_FREE (which only private anonymous
    /// regions take).
    pub(crate) lazy: Vec<u64>,
}

/// The content tokens a region's pages are checked against.
pub(crate) enum Tokens {
    /// Private anonymous: what this process last wrote to each page (0 =
    /// never written, or dropped by MADV_DONTNEED).
    Private(Vec<u32>),
    /// Shared: the shared object's token array, the region's page `i`
    /// being the object's page `base + i`; `owned` for a shared anonymous
    /// region's own array (unmapped with the region), not for a file's
    /// (the runner's, for the whole run).
    Shared {
        tokens: SharedTokens,
        base: usize,
        owned: bool,
    },
    /// MAP_PRIVATE of a file: page `i` reads the file's token `base + i`
    /// (its page-cache page, whatever any process last wrote to the file)
    /// until this process writes it through the mapping; the write fault
    /// copies the page (copy-on-write) and from then on it reads the
    /// process's own token in `own[i]` (0 = not copied). The file's array
    /// is never changed through such a mapping. A forked child inherits
    /// `own` with the memory, copy-on-write like a private anonymous
    /// region.
    FilePrivate {
        file: SharedTokens,
        base: usize,
        own: Vec<u32>,
    },
}

/// The private tokens of a MAP_PRIVATE file mapping carry this bit, so
/// that one written through to the file by mistake never equals a token
/// the file's array hands out (those count up from 1 per page).
pub(crate) const PRIVATE_TOKEN_BIT: u32 = 1 << 31;

impl Region {
    /// A private region's tokens.
    #[inline]
    pub(crate) fn versions(&mut self) -> &mut [u32] {
        match &mut self.tokens {
            Tokens::Private(v) => v,
            Tokens::Shared { .. } | Tokens::FilePrivate { .. } => {
                unreachable!("only a private anonymous region has versions")
            }
        }
    }

    pub(crate) fn is_lazy(&self, page: usize) -> bool {
        self.lazy
            .get(page / 64)
            .is_some_and(|w| w & (1 << (page % 64)) != 0)
    }

    pub(crate) fn set_lazy(&mut self, pages: std::ops::Range<usize>, on: bool) {
        if self.lazy.is_empty() {
            if !on {
                return;
            }
            self.lazy = vec![0; (self.pages as usize).div_ceil(64)];
        }
        for p in pages {
            if on {
                self.lazy[p / 64] |= 1 << (p % 64);
            } else {
                self.lazy[p / 64] &= !(1 << (p % 64));
            }
        }
    }
}

/// A private region's token array, locked in memory: the harness's
/// bookkeeping (one u32 per page of the region) must not be reclaimed and
/// faulted back in. A token page swapped out and read back by a read of
/// the region, then written by a write, would count a pgreuse (and a
/// pswpin) the simulator, which has no such array, does not see. mlock
/// charges the pages as the kernel would anyway (1/1024 of the region)
/// and only keeps them off the LRU.
pub(crate) fn locked_tokens(pages: usize) -> Vec<u32> {
    let v = vec![0u32; pages];
    if !v.is_empty() {
        // The array stays out of THPs (under THP "always" mlock would
        // fault it in as huge pages and show in the workload's THP
        // counters): MADV_NOHUGEPAGE over its pages, from the page that
        // holds its first byte. A kernel without THP refuses (EINVAL);
        // the result is not needed.
        let start = v.as_ptr() as usize & !(PAGE - 1);
        let end = (v.as_ptr() as usize + v.len() * 4).next_multiple_of(PAGE);
        // SAFETY: advice over pages of v's own allocation.
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                end - start,
                libc::MADV_NOHUGEPAGE,
            )
        };
        // SAFETY: the range is v's own buffer; a failed mlock (no
        // CAP_IPC_LOCK outside the guest) leaves it unlocked and harmless.
        unsafe { libc::mlock(v.as_ptr() as *const libc::c_void, v.len() * 4) };
    }
    v
}

impl Child<'_> {
    /// mmap(2) of a region of `pages` pages: private anonymous; a
    /// `[[file]]` (from file page `offset`) MAP_SHARED (`shmem` on tmpfs,
    /// `file` on a disk), checked against the file's token array, or
    /// MAP_PRIVATE (`file_private`), checked against it until written; or
    /// shared anonymous, with a token array of its own in shared memory,
    /// mapped here (charged to this process's cgroup), which the processes
    /// this one forks share. PROT_READ|PROT_WRITE, and PROT_EXEC if `exec`.
    pub(crate) fn map(
        &self,
        kind: MapKind,
        pages: u64,
        file: Option<usize>,
        offset: u64,
        exec: bool,
    ) -> Result<Region, String> {
        let len = pages as usize * PAGE;
        let mut fd = None;
        let (flags, tokens) = match kind {
            MapKind::Anon => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                Tokens::Private(locked_tokens(pages as usize)),
            ),
            MapKind::Shmem | MapKind::File | MapKind::FilePrivate => {
                let f = file
                    .and_then(|i| self.files.get(i))
                    .ok_or_else(|| format!("a {} mapping without its file", kind.name()))?;
                if (kind == MapKind::Shmem) != f.disk.is_none() {
                    return Err(format!(
                        "a {} mapping of {}, which is {}",
                        kind.name(),
                        f.path,
                        if f.disk.is_none() {
                            "on tmpfs"
                        } else {
                            "on a disk"
                        }
                    ));
                }
                if offset + pages > f.pages {
                    return Err(format!(
                        "pages {offset}..{} of {}, which has {} pages",
                        offset + pages,
                        f.path,
                        f.pages
                    ));
                }
                fd = Some(open_file(f)?);
                if kind == MapKind::FilePrivate {
                    (
                        libc::MAP_PRIVATE,
                        Tokens::FilePrivate {
                            file: f.tokens,
                            base: offset as usize,
                            own: vec![0; pages as usize],
                        },
                    )
                } else {
                    (
                        libc::MAP_SHARED,
                        Tokens::Shared {
                            tokens: f.tokens,
                            base: offset as usize,
                            owned: false,
                        },
                    )
                }
            }
            MapKind::SharedAnon => {
                let tokens = SharedTokens::map(pages as usize)
                    .map_err(|e| format!("cannot map the region's token array: {e}"))?;
                (
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                    Tokens::Shared {
                        tokens,
                        base: 0,
                        owned: true,
                    },
                )
            }
        };
        let raw_fd = fd.as_ref().map_or(-1, |f| {
            use std::os::fd::AsRawFd;
            f.as_raw_fd()
        });
        let prot = libc::PROT_READ | libc::PROT_WRITE | if exec { libc::PROT_EXEC } else { 0 };
        let thp = self
            .spec
            .sysfs
            .anon_large_possible(self.spec.features.anon_mthp);
        let at = if kind == MapKind::Anon && thp {
            aligned_hole(len)?
        } else {
            std::ptr::null_mut()
        };
        let fixed = if at.is_null() { 0 } else { libc::MAP_FIXED };
        // SAFETY: a fresh mapping, or one over the hole reserved for it;
        // the file (if any) is open for reading and writing, and the
        // mapping outlives the descriptor.
        let addr = unsafe {
            libc::mmap(
                at,
                len,
                prot,
                flags | fixed,
                raw_fd,
                (offset as usize * PAGE) as libc::off_t,
            )
        };
        drop(fd);
        if addr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            if let Tokens::Shared {
                tokens,
                owned: true,
                ..
            } = tokens
            {
                tokens.unmap();
            }
            return Err(format!("mmap of {len} bytes ({}) failed: {e}", kind.name()));
        }
        Ok(Region {
            addr: addr as *mut u8,
            pages,
            tokens,
            lazy: Vec::new(),
        })
    }
}

/// With anonymous THP on, a private anonymous region starts on a 2 MiB
/// boundary, as mmsim places it (6.1 does not align anonymous mappings,
/// so its THPs would depend on where mmap put the region), with
/// PROT_NONE guards on both sides that keep it from merging with a
/// neighbour (which would change which 2 MiB blocks lie inside the VMA).
/// Returns the reserved hole's aligned start; the guards stay mapped
/// (they hold no memory) until the process exits.
pub(crate) fn aligned_hole(len: usize) -> Result<*mut libc::c_void, String> {
    const PMD: usize = 2 << 20;
    let span = len + 2 * PMD;
    // SAFETY: a fresh inaccessible reservation.
    let r = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if r == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "reserving {span} bytes for a 2 MiB-aligned region failed: {e}"
        ));
    }
    // At least one guard page below; the rest of the span above.
    let start = (r as usize + PAGE).next_multiple_of(PMD);
    Ok(start as *mut libc::c_void)
}

/// munmap(2) of a region, and of its own token array if it has one. A
/// file's pages stay in the file; a shared anonymous region's stay while a
/// forked process still maps them.
pub(crate) fn unmap_region(r: Region) {
    // SAFETY: the whole mapping made by `map`, no longer used.
    unsafe { libc::munmap(r.addr as *mut libc::c_void, r.pages as usize * PAGE) };
    if let Tokens::Shared {
        tokens,
        owned: true,
        ..
    } = r.tokens
    {
        tokens.unmap();
    }
}

/// One access. A read checks the page's content token; a write stores the
/// next token with a plain store, so the hardware makes exactly one write
/// access (one write fault on a missing page). An atomic exchange would
/// check writes too, but QEMU's TCG performs it as a read probe and then a
/// write, which faults twice.
///
/// On a shared region the next token comes from an atomic fetch-and-add on
/// the shared token array (unique among all processes), and is then stored
/// to the page. Two processes writing one page at the same moment race
/// between the two stores (the page may end up with the older token), and
/// a read racing with a write may see the page and the array disagree:
/// either shows as a violation. Specs that share pages between concurrent
/// tasks should order their accesses (e.g. with `sleep` or `wait`).
#[inline]
pub(crate) fn touch(r: &mut Region, page: usize, write: bool) -> (u64, u64) {
    // SAFETY: page < r.pages, inside the mapping.
    let p = unsafe { r.addr.add(page * PAGE) } as *mut u32;
    if let Tokens::FilePrivate { file, base, own } = &mut r.tokens {
        if write {
            let next = own[page].wrapping_add(1) | PRIVATE_TOKEN_BIT;
            own[page] = next;
            // SAFETY: aligned, mapped, ours.
            unsafe { std::ptr::write_volatile(p, next) };
            return (0, 0);
        }
        let expected = match own[page] {
            0 => file.get(*base + page),
            t => t,
        };
        // SAFETY: aligned, mapped, ours.
        let found = unsafe { std::ptr::read_volatile(p) };
        return (1, (found != expected) as u64);
    }
    if let Tokens::Shared { tokens, base, .. } = &r.tokens {
        if write {
            let next = tokens.next(base + page);
            // SAFETY: aligned, mapped, ours.
            unsafe { std::ptr::write_volatile(p, next) };
            return (0, 0);
        }
        // SAFETY: aligned, mapped, ours.
        let found = unsafe { std::ptr::read_volatile(p) };
        return (1, (found != tokens.get(base + page)) as u64);
    }
    if write {
        let next = r.versions()[page].wrapping_add(1).max(1);
        r.versions()[page] = next;
        // SAFETY: aligned, mapped, ours.
        unsafe { std::ptr::write_volatile(p, next) };
        if !r.lazy.is_empty() {
            r.set_lazy(page..page + 1, false);
        }
        return (0, 0);
    }
    // SAFETY: aligned, mapped, ours.
    let found = unsafe { std::ptr::read_volatile(p) };
    if found == r.versions()[page] {
        return (1, 0);
    }
    if found == 0 && r.is_lazy(page) {
        // Reclaim discarded the lazily freed page: it reads zeros from now
        // on, until written.
        r.versions()[page] = 0;
        r.set_lazy(page..page + 1, false);
        return (1, 0);
    }
    (1, 1)
}

/// Opens a `[[file]]` for reading and writing.
pub(crate) fn open_file(f: &SharedFile) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f.path)
        .map_err(|e| format!("cannot open {}: {e}", f.path))
}
