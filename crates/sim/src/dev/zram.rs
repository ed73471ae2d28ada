//! zram: a compressed RAM block device with `rw_page`, so swap on it is
//! SWP_SYNCHRONOUS_IO: reads and writes complete in the calling task, which
//! pays the (de)compression time.
//!
//! The compressed copies live in zsmalloc's pool, which takes real page
//! frames from the page allocator (`nr_zspages`).
//!
//! - A page of a region that stated its `content` (mm/page_content.rs)
//!   is stored as the kernel stores it: a same-filled page (zeros, one
//!   repeated word) as its value alone (`same_pages`); any other as an
//!   object of the length its kind compresses to with the device's
//!   compressor (the profile's table, measured on the real kernel), in
//!   zsmalloc's size classes (dev/zsmalloc.rs), whole if at least
//!   zs_huge_class_size (`huge_pages`).
//! - A page without stated content holds the runner's 4-byte token and
//!   zeros. Simplification: it costs the pool `costs.zram_stored_bytes`
//!   (measured on the real kernel for such pages, fragmentation included;
//!   cost_model::ZRAM_STORED_BYTES), and that pool grows and shrinks page
//!   by page.

use super::zsmalloc::{ZsConfig, ZsPool};
use crate::cost_model;
use crate::kernel::Kernel;
use crate::membw::PAGE_BYTES;
use crate::mm::folio::{Pfn, PG_KERNEL};
use crate::mm::page_alloc::Gfp;

const PAGE_SIZE: u32 = 4096;
const NO_OBJECT: u32 = u32::MAX;

pub struct Zram {
    /// Content token of each stored slot; `stored` marks which hold data.
    pub version: Vec<u32>,
    pub stored: Vec<bool>,
    /// Pages without stated content stored, and their pool.
    pub nr_stored: u64,
    pub pool: Vec<Pfn>,
    /// Pages with stated content: each slot's zspage (NO_OBJECT: a
    /// same-filled page) and compressed length; sized at the first.
    object: Vec<u32>,
    comp_len: Vec<u16>,
    pub zs: Option<ZsPool>,
    pub stats: ZramStats,
    /// mem_limit, pages (None: none).
    pub limit_pages: Option<u64>,
}

/// zram's `mm_stat` counters of the pages with stated content (those
/// without are `nr_stored` pages of `zram_stored_bytes` each), and the
/// pool's high-water mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZramStats {
    /// pages_stored: orig_data_size in pages.
    pub pages_stored: u64,
    /// compr_data_size, bytes.
    pub compr_data_size: u64,
    pub same_pages: u64,
    pub huge_pages: u64,
    /// mem_used_max, pages.
    pub mem_used_max: u64,
}

impl Zram {
    pub fn new(slots: u32, limit_pages: Option<u64>) -> Self {
        Zram {
            limit_pages,
            version: vec![0; slots as usize],
            stored: vec![false; slots as usize],
            nr_stored: 0,
            pool: Vec::new(),
            object: Vec::new(),
            comp_len: Vec::new(),
            zs: None,
            stats: ZramStats::default(),
        }
    }

    /// mem_used_total in pages: both pools.
    pub fn mem_used_pages(&self) -> u64 {
        self.pool.len() as u64 + self.zs.as_ref().map_or(0, |z| z.pages)
    }

    /// `zram_write_page`'s mem_limit check: would the pool with `more`
    /// pages exceed it? The kernel allocates, finds zs_get_total_pages
    /// over the limit and frees the object again (-ENOMEM); mmsim does
    /// not allocate the pages it would give back at once (zram allocates
    /// without direct reclaim, so the round trip changes no counter).
    fn over_limit(&self, more: u64) -> bool {
        self.limit_pages
            .is_some_and(|l| self.mem_used_pages() + more > l)
    }

    fn pool_pages_needed(&self, stored_bytes: u64) -> usize {
        (self.nr_stored * stored_bytes).div_ceil(4096) as usize
    }
}

impl Kernel {
    /// `zram_rw_page` write: compress and store. False if the pool could not
    /// grow (the write fails with -ENOMEM and the folio stays dirty).
    pub fn zram_write_page(&mut self, ty: usize, offset: u32, version: u32) -> bool {
        if self.contents.kind_of(version) != 0 {
            return self.zram_write_content(ty, offset, version);
        }
        // The page read, its compressed form written (membw.rs).
        let bytes = PAGE_BYTES + self.costs.zram_stored_bytes.min(PAGE_BYTES);
        self.charge_mem(cost_model::Fn::ZramWrite, self.costs.zram_compress, bytes);
        let stored_bytes = self.costs.zram_stored_bytes;
        let z = &mut self.swap[ty].zram;
        if !z.stored[offset as usize] {
            z.nr_stored += 1;
            if z.pool_pages_needed(stored_bytes) > z.pool.len() {
                if z.over_limit(1) {
                    z.nr_stored -= 1;
                    return false;
                }
                match self.alloc_page(Gfp::Memalloc) {
                    Some(p) => {
                        self.folios.get_mut(p).set(PG_KERNEL);
                        let z = &mut self.swap[ty].zram;
                        z.pool.push(p);
                        z.stats.mem_used_max = z.stats.mem_used_max.max(z.mem_used_pages());
                        self.vm.inc(crate::vmstat::Vm::NrZspages);
                    }
                    None => {
                        self.swap[ty].zram.nr_stored -= 1;
                        return false;
                    }
                }
            }
        }
        let z = &mut self.swap[ty].zram;
        z.stored[offset as usize] = true;
        z.version[offset as usize] = version;
        self.count_zram_bio(crate::vmstat::Vm::Pgpgout);
        true
    }

    /// `zram_write_page` of a page with stated content: a same-filled page
    /// keeps its value, any other is compressed to its kind's length and
    /// stored in zsmalloc (whole when at least zs_huge_class_size). False
    /// if zsmalloc could not get a page.
    fn zram_write_content(&mut self, ty: usize, offset: u32, version: u32) -> bool {
        let kind = self.contents.kind_of(version);
        let cost = self.zram_kind_costs[ty][kind];
        self.charge_mem(
            cost_model::Fn::ZramWrite,
            cost.compress_ns,
            cost.compressed_bytes(),
        );
        let same = self.contents.kinds[kind].same_filled();
        let cfg = ZsConfig {
            chain: if self.release.zsmalloc_chain_8 { 8 } else { 4 },
            inuse_ratio: self.release.zsmalloc_chain_8,
        };
        let z = &mut self.swap[ty].zram;
        if z.object.is_empty() {
            z.object = vec![NO_OBJECT; z.stored.len()];
            z.comp_len = vec![0; z.stored.len()];
        }
        let zs = z.zs.get_or_insert_with(|| ZsPool::new(cfg));
        let mut len = cost.comp_len.min(PAGE_SIZE);
        let huge = !same && len >= zs.huge_class_size;
        if huge {
            len = PAGE_SIZE;
        }
        let object = match same {
            true => NO_OBJECT,
            false => match self.zs_malloc(ty, len) {
                Some(o) => o,
                None => return false,
            },
        };
        // Once stored, zram_write_page frees what the slot held before.
        self.zram_slot_free_notify(ty, offset);
        let z = &mut self.swap[ty].zram;
        let o = offset as usize;
        (z.object[o], z.comp_len[o]) = (object, len as u16);
        z.stored[o] = true;
        z.version[o] = version;
        z.stats.pages_stored += 1;
        z.stats.same_pages += same as u64;
        z.stats.huge_pages += huge as u64;
        z.stats.compr_data_size += if same { 0 } else { len as u64 };
        z.stats.mem_used_max = z.stats.mem_used_max.max(z.mem_used_pages());
        self.count_zram_bio(crate::vmstat::Vm::Pgpgout);
        true
    }

    /// `zs_malloc` of `len` bytes in device `ty`'s pool, a new zspage's
    /// pages from the page allocator if no zspage of its class has room.
    fn zs_malloc(&mut self, ty: usize, len: u32) -> Option<u32> {
        let zs = self.swap[ty].zram.zs.as_mut().expect("pool");
        if let Some(o) = zs.malloc(len) {
            return Some(o);
        }
        let n = zs.pages_for(len) as usize;
        if self.swap[ty].zram.over_limit(n as u64) {
            return None;
        }
        let frames = self.alloc_zspage_frames(n)?;
        let zs = self.swap[ty].zram.zs.as_mut().expect("pool");
        Some(zs.new_zspage(len, &frames[..n]))
    }

    /// mm_stat of each zram swap device, when a region states its content
    /// (none otherwise: the output of runs without content is as before).
    pub fn zram_mm_stat(&self) -> Vec<mmsim_spec::output::ZramMmStat> {
        if self.contents.is_empty() {
            return Vec::new();
        }
        let page = PAGE_SIZE as u64;
        let token_bytes = self.costs.zram_stored_bytes;
        self.swap
            .iter()
            .enumerate()
            .filter(|(_, si)| si.kind == mmsim_spec::SwapKind::Zram)
            .map(|(i, si)| {
                let z = &si.zram;
                mmsim_spec::output::ZramMmStat {
                    swap: i,
                    orig_data_size: (z.stats.pages_stored + z.nr_stored) * page,
                    compr_data_size: z.stats.compr_data_size + z.nr_stored * token_bytes,
                    mem_used_total: z.mem_used_pages() * page,
                    mem_used_max: z.stats.mem_used_max * page,
                    same_pages: z.stats.same_pages,
                    huge_pages: z.stats.huge_pages,
                }
            })
            .collect()
    }

    /// From 6.3 swap reaches zram through submit_bio (no rw_page any
    /// more), which counts each page in pgpgin or pgpgout (4 kB); 6.1's
    /// rw_page counted nothing.
    fn count_zram_bio(&mut self, item: crate::vmstat::Vm) {
        if self.release.zram_submit_bio {
            self.vm.add(item, 4);
        }
    }

    /// `zram_rw_page` read: decompress; returns the stored content token.
    pub fn zram_read_page(&mut self, ty: usize, offset: u32) -> u32 {
        let kind = self
            .contents
            .kind_of(self.swap[ty].zram.version[offset as usize]);
        let (ns, len) = match kind {
            0 => (self.costs.zram_decompress, self.costs.zram_stored_bytes),
            k => (
                self.zram_kind_costs[ty][k].decompress_ns,
                self.zram_kind_costs[ty][k].comp_len as u64,
            ),
        };
        // The compressed form read, the page written (membw.rs).
        let bytes = len.min(PAGE_BYTES) + PAGE_BYTES;
        self.charge_mem(cost_model::Fn::ZramRead, ns, bytes);
        self.count_zram_bio(crate::vmstat::Vm::Pgpgin);
        let z = &self.swap[ty].zram;
        debug_assert!(z.stored[offset as usize], "read of an empty zram slot");
        z.version[offset as usize]
    }

    /// `zram_slot_free_notify`: the slot was freed; drop the stored copy.
    pub fn zram_slot_free_notify(&mut self, ty: usize, offset: u32) {
        let stored_bytes = self.costs.zram_stored_bytes;
        let z = &mut self.swap[ty].zram;
        if !z.stored[offset as usize] {
            return;
        }
        z.stored[offset as usize] = false;
        if self.contents.kind_of(z.version[offset as usize]) != 0 {
            self.zram_free_content(ty, offset);
            return;
        }
        z.nr_stored -= 1;
        if z.pool_pages_needed(stored_bytes) < z.pool.len() {
            let p = z.pool.pop().expect("pool page");
            self.vm.add(crate::vmstat::Vm::NrZspages, -1);
            self.free_page(p);
        }
    }

    /// `zram_free_page` of a page with stated content.
    fn zram_free_content(&mut self, ty: usize, offset: u32) {
        let z = &mut self.swap[ty].zram;
        let (o, len) = (z.object[offset as usize], z.comp_len[offset as usize]);
        z.stats.pages_stored -= 1;
        if o == NO_OBJECT {
            z.stats.same_pages -= 1;
            return;
        }
        z.stats.compr_data_size -= len as u64;
        z.stats.huge_pages -= (len as u32 == PAGE_SIZE) as u64;
        let zs = z.zs.as_mut().expect("pool");
        let Some(freed) = zs.free(o) else {
            return;
        };
        // Copied out of the pool (no allocation: a zspage has at most 8).
        let (mut frames, n) = ([0 as Pfn; 8], freed.len());
        frames[..n].copy_from_slice(freed);
        self.free_zspage_frames(&frames[..n]);
    }
}
