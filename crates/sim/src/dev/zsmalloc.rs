//! zsmalloc: the allocator zram keeps its compressed pages in
//! (mm/zsmalloc.c). Objects are grouped by size class; a class's objects
//! are packed into zspages of 1 to ZS_MAX_PAGES_PER_ZSPAGE pages, the
//! count that wastes least. A zspage is freed only when its last object
//! is, so a pool that stored and freed in any order holds more pages than
//! its objects need (its fragmentation, what `mem_used_total` shows
//! beyond `compr_data_size`).
//!
//! Two generations, each as its release has it:
//! - through 6.2: zspages of at most 4 pages, four fullness groups
//!   (empty, almost empty up to 3/4 used, almost full, full), a zspage
//!   inserted after the list's head if it holds fewer objects than it;
//! - from 6.3 (fine-grained fullness) and 6.6 (CONFIG_ZSMALLOC_CHAIN_SIZE,
//!   8 in Debian's configs): zspages of up to 8 pages, eleven groups by
//!   tenths of use, a zspage inserted at the list's head.
//!
//! An object is found by its zspage's number; its place inside the zspage
//! changes nothing any counter shows, so it is not kept. Compaction
//! (`compact`, the shrinker) is not modelled: mmsim refuses the knobs.

use crate::mm::folio::Pfn;

const NIL: u32 = u32::MAX;
const PAGE_SIZE: u32 = 4096;
/// ZS_MIN_ALLOC_SIZE on x86-64 (5-level paging configured: 23 index bits,
/// so the 32-byte floor rules).
const MIN_ALLOC: u32 = 32;
/// ZS_SIZE_CLASS_DELTA: PAGE_SIZE >> CLASS_BITS (8).
const CLASS_DELTA: u32 = 16;
/// ZS_HANDLE_SIZE: zs_malloc stores the handle beside each object.
pub const HANDLE_SIZE: u32 = 8;
/// ZS_SIZE_CLASSES.
const NR_SIZES: usize = ((PAGE_SIZE - MIN_ALLOC).div_ceil(CLASS_DELTA) + 1) as usize;
/// Fullness groups of the later generation (ZS_INUSE_RATIO_0..100).
const NR_FULLNESS: usize = 12;

/// Which zsmalloc a release has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZsConfig {
    /// ZS_MAX_PAGES_PER_ZSPAGE.
    pub chain: u32,
    /// 6.3+: fullness by tenths of use, insertion at the head.
    pub inuse_ratio: bool,
}

struct SizeClass {
    size: u32,
    pages_per_zspage: u32,
    objs_per_zspage: u32,
    /// Each fullness group's list head (a zspage number, NIL: empty).
    heads: [u32; NR_FULLNESS],
}

#[derive(Clone, Copy)]
struct ZsPage {
    class: u16,
    fullness: u8,
    inuse: u32,
    prev: u32,
    next: u32,
}

pub struct ZsPool {
    cfg: ZsConfig,
    /// Size index (get_size_class_index) → class (merged classes share).
    class_of: Vec<u16>,
    classes: Vec<SizeClass>,
    zspages: Vec<ZsPage>,
    /// Each zspage's frames, `cfg.chain` slots per zspage.
    frames: Vec<Pfn>,
    free_ids: Vec<u32>,
    /// zs_get_total_pages.
    pub pages: u64,
    /// zs_huge_class_size: zram stores an object this large or larger as
    /// a whole page.
    pub huge_class_size: u32,
}

/// `get_pages_per_zspage`: the zspage size (in pages) wasting least.
fn pages_per_zspage(size: u32, chain: u32) -> u32 {
    let (mut best, mut best_pc) = (1, 0);
    for i in 1..=chain {
        let zs = i * PAGE_SIZE;
        let used_pc = (zs - zs % size) * 100 / zs;
        if used_pc > best_pc {
            (best, best_pc) = (i, used_pc);
        }
    }
    best
}

impl ZsPool {
    /// `zs_create_pool`: the classes from the largest down, a class
    /// merged into the next larger one when both pack the same pages and
    /// objects per zspage.
    pub fn new(cfg: ZsConfig) -> ZsPool {
        let mut class_of = vec![0u16; NR_SIZES];
        let mut classes: Vec<SizeClass> = Vec::new();
        let mut huge_class_size = 0;
        for i in (0..NR_SIZES).rev() {
            let size = (MIN_ALLOC + i as u32 * CLASS_DELTA).min(PAGE_SIZE);
            let ppz = pages_per_zspage(size, cfg.chain);
            let objs = ppz * PAGE_SIZE / size;
            if ppz != 1 && objs != 1 && huge_class_size == 0 {
                huge_class_size = size - (HANDLE_SIZE - 1);
            }
            if let Some(prev) = classes.last() {
                if prev.pages_per_zspage == ppz && prev.objs_per_zspage == objs {
                    class_of[i] = classes.len() as u16 - 1;
                    continue;
                }
            }
            class_of[i] = classes.len() as u16;
            classes.push(SizeClass {
                size,
                pages_per_zspage: ppz,
                objs_per_zspage: objs,
                heads: [NIL; NR_FULLNESS],
            });
        }
        ZsPool {
            cfg,
            class_of,
            classes,
            zspages: Vec::new(),
            frames: Vec::new(),
            free_ids: Vec::new(),
            pages: 0,
            huge_class_size,
        }
    }

    /// The class an allocation of `size` bytes (before the handle) takes.
    fn class_for(&self, size: u32) -> usize {
        let size = size + HANDLE_SIZE;
        let idx = if size > MIN_ALLOC {
            (size - MIN_ALLOC).div_ceil(CLASS_DELTA) as usize
        } else {
            0
        };
        self.class_of[idx.min(NR_SIZES - 1)] as usize
    }

    /// The pages a new zspage for `size` needs (`alloc_zspage`).
    pub fn pages_for(&self, size: u32) -> u32 {
        self.classes[self.class_for(size)].pages_per_zspage
    }

    fn fullness(&self, class: usize, inuse: u32) -> u8 {
        let objs = self.classes[class].objs_per_zspage;
        if self.cfg.inuse_ratio {
            return match inuse {
                0 => 0,
                n if n == objs => 11,
                n => (100 * n / objs / 10 + 1) as u8,
            };
        }
        // ZS_EMPTY, ZS_ALMOST_EMPTY, ZS_ALMOST_FULL, ZS_FULL.
        match inuse {
            0 => 0,
            n if n == objs => 3,
            n if n <= 3 * objs / 4 => 1,
            _ => 2,
        }
    }

    /// `find_get_zspage`: the first zspage of the fullest group with room.
    fn find_get_zspage(&self, class: usize) -> Option<u32> {
        let top = if self.cfg.inuse_ratio { 10 } else { 2 };
        (0..=top)
            .rev()
            .map(|g| self.classes[class].heads[g])
            .find(|&z| z != NIL)
    }

    fn insert(&mut self, z: u32, g: u8) {
        let c = self.zspages[z as usize].class as usize;
        let head = self.classes[c].heads[g as usize];
        self.zspages[z as usize].fullness = g;
        let after_head = !self.cfg.inuse_ratio
            && head != NIL
            && self.zspages[z as usize].inuse < self.zspages[head as usize].inuse;
        if after_head {
            let next = self.zspages[head as usize].next;
            self.link(z, head, next);
        } else {
            self.link(z, NIL, head);
            self.classes[c].heads[g as usize] = z;
        }
    }

    fn link(&mut self, z: u32, prev: u32, next: u32) {
        self.zspages[z as usize].prev = prev;
        self.zspages[z as usize].next = next;
        if prev != NIL {
            self.zspages[prev as usize].next = z;
        }
        if next != NIL {
            self.zspages[next as usize].prev = z;
        }
    }

    fn remove(&mut self, z: u32) {
        let ZsPage {
            class,
            fullness,
            prev,
            next,
            ..
        } = self.zspages[z as usize];
        if prev != NIL {
            self.zspages[prev as usize].next = next;
        } else {
            self.classes[class as usize].heads[fullness as usize] = next;
        }
        if next != NIL {
            self.zspages[next as usize].prev = prev;
        }
    }

    /// `fix_fullness_group`: moves the zspage if its group changed.
    fn fix_fullness(&mut self, z: u32) -> u8 {
        let p = self.zspages[z as usize];
        let g = self.fullness(p.class as usize, p.inuse);
        if g != p.fullness {
            self.remove(z);
            self.insert(z, g);
        }
        g
    }

    /// `zs_malloc` into an existing zspage; None: the class has none with
    /// room, and the caller allocates one (`new_zspage`).
    pub fn malloc(&mut self, size: u32) -> Option<u32> {
        let class = self.class_for(size);
        let z = self.find_get_zspage(class)?;
        self.zspages[z as usize].inuse += 1;
        self.fix_fullness(z);
        Some(z)
    }

    /// `alloc_zspage` from `frames` (the class's pages_per_zspage of
    /// them) and the first object in it.
    pub fn new_zspage(&mut self, size: u32, frames: &[Pfn]) -> u32 {
        let class = self.class_for(size);
        debug_assert_eq!(frames.len() as u32, self.classes[class].pages_per_zspage);
        let page = ZsPage {
            class: class as u16,
            fullness: 0,
            inuse: 1,
            prev: NIL,
            next: NIL,
        };
        let z = match self.free_ids.pop() {
            Some(z) => {
                self.zspages[z as usize] = page;
                z
            }
            None => {
                self.zspages.push(page);
                self.frames
                    .resize(self.zspages.len() * self.cfg.chain as usize, 0);
                self.zspages.len() as u32 - 1
            }
        };
        let at = z as usize * self.cfg.chain as usize;
        self.frames[at..at + frames.len()].copy_from_slice(frames);
        self.pages += frames.len() as u64;
        let g = self.fullness(class, 1);
        self.insert(z, g);
        z
    }

    /// `zs_free` of an object in zspage `z`; the zspage's frames if it is
    /// now empty (`free_zspage`), for the caller to free.
    pub fn free(&mut self, z: u32) -> Option<&[Pfn]> {
        self.zspages[z as usize].inuse -= 1;
        if self.fix_fullness(z) != 0 {
            return None;
        }
        self.remove(z);
        self.free_ids.push(z);
        let c = self.zspages[z as usize].class as usize;
        let n = self.classes[c].pages_per_zspage as usize;
        self.pages -= n as u64;
        let at = z as usize * self.cfg.chain as usize;
        Some(&self.frames[at..at + n])
    }

    /// The object size class `size` lands in (tests, docs).
    pub fn class_size(&self, size: u32) -> u32 {
        self.classes[self.class_for(size)].size
    }
}

impl crate::kernel::Kernel {
    /// A new zspage's `n` frames (at most 8) from the page allocator, as
    /// zsmalloc takes them for zram and zswap alike (`alloc_zspage`: the
    /// caller's gfp is reclaim's PF_MEMALLOC context here, below the
    /// watermarks if need be), counted in nr_zspages; None, with every
    /// frame given back, if one cannot be had.
    pub(crate) fn alloc_zspage_frames(&mut self, n: usize) -> Option<[Pfn; 8]> {
        let mut frames = [0 as Pfn; 8];
        for i in 0..n {
            match self.alloc_page(crate::mm::page_alloc::Gfp::Memalloc) {
                Some(p) => {
                    self.folios.get_mut(p).set(crate::mm::folio::PG_KERNEL);
                    frames[i] = p;
                }
                None => {
                    for &p in &frames[..i] {
                        self.free_page(p);
                    }
                    return None;
                }
            }
        }
        self.vm.add(crate::vmstat::Vm::NrZspages, n as i64);
        Some(frames)
    }

    /// The frames of a zspage `ZsPool::free` emptied, back to the page
    /// allocator (`__free_zspage`).
    pub(crate) fn free_zspage_frames(&mut self, frames: &[Pfn]) {
        self.vm
            .add(crate::vmstat::Vm::NrZspages, -(frames.len() as i64));
        for &p in frames {
            self.free_page(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V61: ZsConfig = ZsConfig {
        chain: 4,
        inuse_ratio: false,
    };
    const V612: ZsConfig = ZsConfig {
        chain: 8,
        inuse_ratio: true,
    };

    #[test]
    fn classes_follow_get_pages_per_zspage() {
        // 4096 % 32 == 0: one page of 128 objects.
        assert_eq!(pages_per_zspage(32, 4), 1);
        // 3264 = 4096·4/5 + 0.8: four pages hold five (99 % used).
        assert_eq!(pages_per_zspage(3264, 4), 4);
        let p = ZsPool::new(V61);
        // A 40-byte object plus its handle is 48: class 48.
        assert_eq!(p.class_size(40), 48);
        assert_eq!(p.class_size(4096), 4096);
    }

    /// zs_huge_class_size: 6.1's is 3264 - 7 (the first class from the
    /// top that packs several objects into several pages); with 8-page
    /// chains more sizes pack, so the huge threshold rises.
    #[test]
    fn huge_class_size_per_generation() {
        assert_eq!(ZsPool::new(V61).huge_class_size, 3264 - 7);
        assert!(ZsPool::new(V612).huge_class_size > 3264);
    }

    #[test]
    fn a_zspage_fills_then_a_new_one_is_needed() {
        let mut p = ZsPool::new(V61);
        // 2040 + 8 = 2048: two objects per one-page zspage.
        assert_eq!(p.malloc(2040), None);
        let z = p.new_zspage(2040, &[10]);
        assert_eq!(p.malloc(2040), Some(z));
        assert_eq!(p.malloc(2040), None);
        assert_eq!(p.pages, 1);
        assert!(p.free(z).is_none());
        assert_eq!(p.free(z), Some(&[10][..]));
        assert_eq!(p.pages, 0);
    }

    /// Freed objects leave partly used zspages, which keep their pages;
    /// the next object goes to the first zspage of the fullest group with
    /// room: in 6.1 both (3 of 4 and 2 of 4 used) are "almost empty" and
    /// the list's head, the one that joined it last, is taken; from 6.3
    /// the 75 % zspage's group comes before the 50 % one's.
    #[test]
    fn freeing_fragments_and_malloc_refills_the_fullest_first() {
        for cfg in [V61, V612] {
            let mut p = ZsPool::new(cfg);
            let size = 1016; // 1024 with the handle: 4 per page
            let mut objs = Vec::new();
            for f in 0..8u32 {
                let z = match p.malloc(size) {
                    Some(z) => z,
                    None => p.new_zspage(size, &[100 + f]),
                };
                objs.push(z);
            }
            assert_eq!(p.pages, 2);
            // Free 1 object of the first zspage, 2 of the second.
            let (a, b) = (objs[0], objs[4]);
            p.free(a);
            p.free(b);
            p.free(b);
            assert_eq!(p.pages, 2);
            let want = if cfg.inuse_ratio { a } else { b };
            assert_eq!(p.malloc(size), Some(want), "{cfg:?}");
        }
    }
}
