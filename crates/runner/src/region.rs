//! The regions a task process maps, with the content tokens each page is
//! checked against: private ones in the process (atomics its threads
//! share, `PageTokens`), shared ones in shared memory (`SharedTokens`), one
//! per page of the shared object.

use crate::exec::Child;
use crate::setup::SharedFile;
use crate::shared::SharedTokens;
use mmsim_spec::content::{Content, Kind};
use mmsim_spec::MapKind;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) const PAGE: usize = 4096;

pub(crate) struct Region {
    pub(crate) addr: *mut u8,
    pub(crate) pages: u64,
    pub(crate) tokens: Tokens,
    /// What its pages hold once written (None: the token and zeros).
    pub(crate) content: Option<Arc<RegionContent>>,
}

/// Templates per kind: pages of each kind's bytes a write copies from.
const TEMPLATES: usize = 16;

/// A region's stated content: each page's kind and the bytes the first
/// write of a page copies into it (`mmsim_spec::content::fill` of the
/// page's kind, one of TEMPLATES pages per kind by page number; zram
/// compresses each page alone, so repeating them changes no size).
pub(crate) struct RegionContent {
    /// Each page's kind, for a mix; else `kinds[0]` for all.
    per_page: Vec<u8>,
    kinds: Vec<Kind>,
    /// TEMPLATES pages per kind, in `kinds` order.
    templates: Vec<u8>,
}

impl RegionContent {
    pub(crate) fn new(name: &str, c: &Content, pages: u64) -> RegionContent {
        let kinds: Vec<Kind> = c.kinds().collect();
        let per_page = match kinds.len() {
            1 => Vec::new(),
            _ => (0..pages)
                .map(|p| {
                    let k = c.kind_of(name, p);
                    kinds.iter().position(|&x| x == k).expect("drawn") as u8
                })
                .collect(),
        };
        let mut templates = vec![0u8; kinds.len() * TEMPLATES * PAGE];
        for (i, page) in templates.chunks_exact_mut(PAGE).enumerate() {
            mmsim_spec::content::fill(kinds[i / TEMPLATES], (i % TEMPLATES) as u64, 0, page);
        }
        RegionContent {
            per_page,
            kinds,
            templates,
        }
    }

    fn kind(&self, page: usize) -> (usize, Kind) {
        let i = self.per_page.get(page).map_or(0, |&k| k as usize);
        (i, self.kinds[i])
    }

    /// A write of `token` to page `page` at `p` (`first`: the page held
    /// zeros): the simulator's `content_write_cost` prices the same.
    fn write(&self, p: *mut u32, page: usize, first: bool, token: u32) {
        let (i, kind) = self.kind(page);
        let dst = p as *mut u8;
        match kind {
            Kind::Zero => {
                if first {
                    // SAFETY: a whole page of the mapping, ours.
                    unsafe { std::ptr::write_bytes(dst, 0, PAGE) };
                }
                // SAFETY: aligned, mapped, ours.
                unsafe { std::ptr::write_volatile(p, 0) };
            }
            Kind::Same => {
                // SAFETY: a whole page of the mapping, ours.
                let page = unsafe { std::slice::from_raw_parts_mut(dst, PAGE) };
                mmsim_spec::content::fill_same(token, page);
            }
            _ => {
                if first {
                    let t = (i * TEMPLATES + page % TEMPLATES) * PAGE;
                    // SAFETY: a template page and a page of the mapping.
                    unsafe {
                        std::ptr::copy_nonoverlapping(self.templates[t..].as_ptr(), dst, PAGE)
                    };
                }
                // SAFETY: aligned, mapped, ours.
                unsafe { std::ptr::write_volatile(p, token) };
            }
        }
    }

    /// What a read of page `page` finds at its start if it holds `token`.
    fn expected(&self, page: usize, token: u32) -> u32 {
        match self.kind(page).1 {
            Kind::Zero => 0,
            _ => token,
        }
    }
}

/// True if a region of the spec states its content.
pub(crate) fn has_content(spec: &mmsim_spec::Spec) -> bool {
    let mut any = false;
    spec.for_each_op(&mut |op| {
        any |= matches!(
            op,
            mmsim_spec::Op::Mmap {
                content: Some(_),
                ..
            }
        );
    });
    any
}

// SAFETY: a Region is a handle to a mapping of this process and to token
// arrays of atomics (`PageTokens`, `SharedTokens`), which a thread may hold
// beside its creator (`share`). The mapping outlives every handle a thread
// uses: the spec check refuses the unmapping of a region a thread shares
// until the creator's `wait` has joined the thread, and the regions a
// thread maps itself go to its creator when it is joined, still mapped.
unsafe impl Send for Region {}

/// The content tokens a region's pages are checked against.
pub(crate) enum Tokens {
    /// Private anonymous: what this process last wrote to each page (0 =
    /// never written, or dropped by MADV_DONTNEED).
    Private(Arc<PageTokens>),
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
    /// process's own token in `own` (0 = not copied). The file's array
    /// is never changed through such a mapping. A forked child inherits
    /// `own` with the memory, copy-on-write like a private anonymous
    /// region.
    FilePrivate {
        file: SharedTokens,
        base: usize,
        own: Arc<PageTokens>,
    },
}

/// The private tokens of a MAP_PRIVATE file mapping carry this bit, so
/// that one written through to the file by mistake never equals a token
/// the file's array hands out (those count up from 1 per page).
pub(crate) const PRIVATE_TOKEN_BIT: u32 = 1 << 31;

impl Region {
    /// Another handle to this region for a thread of this process: the
    /// same mapping, the same tokens (so each side checks what the other
    /// last wrote). A shared anonymous region's own token array stays its
    /// creator's to unmap.
    pub(crate) fn share(&self) -> Region {
        let tokens = match &self.tokens {
            Tokens::Private(t) => Tokens::Private(Arc::clone(t)),
            Tokens::Shared { tokens, base, .. } => Tokens::Shared {
                tokens: *tokens,
                base: *base,
                owned: false,
            },
            Tokens::FilePrivate { file, base, own } => Tokens::FilePrivate {
                file: *file,
                base: *base,
                own: Arc::clone(own),
            },
        };
        Region {
            addr: self.addr,
            pages: self.pages,
            tokens,
            content: self.content.clone(),
        }
    }
}

/// A private mapping's tokens, one per page, and its lazily freed pages,
/// which the process's threads share (`Region::share`): atomics, so that a
/// thread and its creator may store and check them at once. Relaxed loads
/// and stores compile to the plain moves of an unshared array; a page two
/// threads write at the same moment may end up with either token, which
/// shows as a violation, as two processes racing on a shared page do. A
/// forked child gets a copy with the memory.
pub(crate) struct PageTokens {
    tokens: Vec<AtomicU32>,
    lazy: LazyBits,
}

impl PageTokens {
    /// `pages` zero tokens.
    pub(crate) fn new(pages: usize) -> PageTokens {
        PageTokens {
            tokens: zeroed(pages),
            lazy: LazyBits::new(pages),
        }
    }

    /// A private anonymous region's tokens, locked in memory: the
    /// harness's bookkeeping (one u32 per page of the region) must not be
    /// reclaimed and faulted back in. A token page swapped out and read
    /// back by a read of the region, then written by a write, would count
    /// a pgreuse (and a pswpin) the simulator, which has no such array,
    /// does not see. mlock charges the pages as the kernel would anyway
    /// (1/1024 of the region) and only keeps them off the LRU.
    pub(crate) fn locked(pages: usize) -> PageTokens {
        let v = zeroed(pages);
        if !v.is_empty() {
            // The array stays out of THPs (under THP "always" mlock would
            // fault it in as huge pages and show in the workload's THP
            // counters): MADV_NOHUGEPAGE over its pages, from the page
            // that holds its first byte. A kernel without THP refuses
            // (EINVAL); the result is not needed.
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
            // CAP_IPC_LOCK outside the guest) leaves it unlocked and
            // harmless.
            unsafe { libc::mlock(v.as_ptr() as *const libc::c_void, v.len() * 4) };
        }
        PageTokens {
            tokens: v,
            lazy: LazyBits::new(pages),
        }
    }

    /// The token page `page` should hold.
    #[inline]
    pub(crate) fn get(&self, page: usize) -> u32 {
        self.tokens[page].load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set(&self, page: usize, token: u32) {
        self.tokens[page].store(token, Ordering::Relaxed)
    }

    /// Pages dropped (MADV_DONTNEED): they read zeros next.
    pub(crate) fn clear(&self, pages: std::ops::Range<usize>) {
        for p in pages.clone() {
            self.set(p, 0);
        }
        self.set_lazy(pages, false);
    }

    /// Freed by MADV_FREE and not written since, so the page reads either
    /// its last token or zero (if reclaim discarded it).
    #[inline]
    pub(crate) fn is_lazy(&self, page: usize) -> bool {
        self.lazy
            .words()
            .is_some_and(|w| w[page / 64].load(Ordering::Relaxed) & (1 << (page % 64)) != 0)
    }

    pub(crate) fn set_lazy(&self, pages: std::ops::Range<usize>, on: bool) {
        let words = match (on, self.lazy.words()) {
            (false, None) => return,
            (false, Some(w)) => w,
            (true, _) => self.lazy.words_or_alloc(),
        };
        // A word's worth of pages at a time.
        let mut p = pages.start;
        while p < pages.end {
            let end = (p / 64 * 64 + 64).min(pages.end);
            let n = end - p;
            let mask = if n == 64 {
                !0
            } else {
                ((1u64 << n) - 1) << (p % 64)
            };
            let w = &words[p / 64];
            if on {
                w.fetch_or(mask, Ordering::Relaxed);
            } else {
                w.fetch_and(!mask, Ordering::Relaxed);
            }
            p = end;
        }
    }
}

/// `len` zero tokens allocated zeroed (calloc), as the plain arrays were:
/// a large array's pages stay untouched until first used, so the atomics
/// change neither when the harness's bookkeeping faults nor what it
/// charges.
fn zeroed(len: usize) -> Vec<AtomicU32> {
    const { assert!(std::mem::align_of::<u32>() == std::mem::align_of::<AtomicU32>()) };
    let mut v = std::mem::ManuallyDrop::new(vec![0u32; len]);
    // SAFETY: AtomicU32 has u32's size and bit validity and (asserted
    // above) its alignment, so v's allocation, zeroed, is a valid
    // Vec<AtomicU32> of the same length and capacity, with the same layout
    // to free; v itself is never used again.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut AtomicU32, v.len(), v.capacity()) }
}

/// One bit per page of a region, none until the region's first MADV_FREE
/// (which only private anonymous regions take). Whichever thread needs them
/// first makes them, installed by a compare-and-swap rather than under a
/// lock: a process forked while another of its threads held a lock would
/// find it held for ever.
struct LazyBits {
    words: AtomicPtr<AtomicU64>,
    len: usize,
}

impl LazyBits {
    fn new(pages: usize) -> LazyBits {
        LazyBits {
            words: AtomicPtr::new(std::ptr::null_mut()),
            len: pages.div_ceil(64),
        }
    }

    fn words(&self) -> Option<&[AtomicU64]> {
        let p = self.words.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is the boxed slice of `len` words
        // `words_or_alloc` installed, freed only when this is dropped.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, self.len) })
    }

    fn words_or_alloc(&self) -> &[AtomicU64] {
        if let Some(w) = self.words() {
            return w;
        }
        let fresh: Box<[AtomicU64]> = (0..self.len).map(|_| AtomicU64::new(0)).collect();
        let mine = Box::into_raw(fresh) as *mut AtomicU64;
        let null = std::ptr::null_mut();
        let p = match (self.words).compare_exchange(null, mine, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => mine,
            Err(theirs) => {
                // SAFETY: the box just made, never shared: another thread
                // installed its own first.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(mine, self.len)) });
                theirs
            }
        };
        // SAFETY: the installed box of `len` words, freed only on drop.
        unsafe { std::slice::from_raw_parts(p, self.len) }
    }
}

impl Drop for LazyBits {
    fn drop(&mut self) {
        let p = *self.words.get_mut();
        if !p.is_null() {
            // SAFETY: the box `words_or_alloc` installed; `&mut self` means
            // no one else can reach it.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, self.len)) });
        }
    }
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
                Tokens::Private(Arc::new(PageTokens::locked(pages as usize))),
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
                            own: Arc::new(PageTokens::new(pages as usize)),
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
            content: None,
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
/// either shows as a violation. A thread and its creator touching one page
/// at once race the same way, on any region. Specs that share pages
/// between concurrent tasks or threads should order their accesses (e.g.
/// with `sleep` or `wait`).
#[inline]
pub(crate) fn touch(r: &mut Region, page: usize, write: bool) -> (u64, u64) {
    // SAFETY: page < r.pages, inside the mapping.
    let p = unsafe { r.addr.add(page * PAGE) } as *mut u32;
    let t = match &r.tokens {
        Tokens::Private(t) => t,
        Tokens::Shared { tokens, base, .. } => {
            if write {
                let first = tokens.get(base + page) == 0;
                let next = tokens.next(base + page);
                match &r.content {
                    Some(c) => c.write(p, page, first, next),
                    // SAFETY: aligned, mapped, ours.
                    None => unsafe { std::ptr::write_volatile(p, next) },
                }
                return (0, 0);
            }
            // SAFETY: aligned, mapped, ours.
            let found = unsafe { std::ptr::read_volatile(p) };
            let mut expected = tokens.get(base + page);
            if let Some(c) = &r.content {
                expected = c.expected(page, expected);
            }
            return (1, (found != expected) as u64);
        }
        Tokens::FilePrivate { file, base, own } => {
            if write {
                let next = own.get(page).wrapping_add(1) | PRIVATE_TOKEN_BIT;
                own.set(page, next);
                // SAFETY: aligned, mapped, ours.
                unsafe { std::ptr::write_volatile(p, next) };
                return (0, 0);
            }
            let expected = match own.get(page) {
                0 => file.get(*base + page),
                t => t,
            };
            // SAFETY: aligned, mapped, ours.
            let found = unsafe { std::ptr::read_volatile(p) };
            return (1, (found != expected) as u64);
        }
    };
    if write {
        let prev = t.get(page);
        let next = prev.wrapping_add(1).max(1);
        t.set(page, next);
        match &r.content {
            Some(c) => c.write(p, page, prev == 0, next),
            // SAFETY: aligned, mapped, ours.
            None => unsafe { std::ptr::write_volatile(p, next) },
        }
        if t.is_lazy(page) {
            t.set_lazy(page..page + 1, false);
        }
        return (0, 0);
    }
    // SAFETY: aligned, mapped, ours.
    let found = unsafe { std::ptr::read_volatile(p) };
    let expected = match &r.content {
        Some(c) if t.get(page) != 0 => c.expected(page, t.get(page)),
        _ => t.get(page),
    };
    if found == expected {
        return (1, 0);
    }
    if found == 0 && t.is_lazy(page) {
        // Reclaim discarded the lazily freed page: it reads zeros from now
        // on, until written.
        t.clear(page..page + 1);
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
