//! zram: a compressed RAM block device with `rw_page`, so swap on it is
//! SWP_SYNCHRONOUS_IO: reads and writes complete in the calling task, which
//! pays the (de)compression time.
//!
//! The compressed copies live in zsmalloc's pool, which takes real page
//! frames from the page allocator (`nr_zspages`). Simplification: every
//! stored page costs the pool `costs.zram_stored_bytes` (measured on the
//! real kernel for pages holding one content token, fragmentation
//! included; cost_model::ZRAM_STORED_BYTES), and the pool grows and shrinks page
//! by page.

use crate::cost_model;
use crate::kernel::Kernel;
use crate::mm::folio::{Pfn, PG_KERNEL};
use crate::mm::page_alloc::Gfp;

pub struct Zram {
    /// Content token of each stored slot; `stored` marks which hold data.
    pub version: Vec<u32>,
    pub stored: Vec<bool>,
    pub nr_stored: u64,
    pub pool: Vec<Pfn>,
}

impl Zram {
    pub fn new(slots: u32) -> Self {
        Zram {
            version: vec![0; slots as usize],
            stored: vec![false; slots as usize],
            nr_stored: 0,
            pool: Vec::new(),
        }
    }

    fn pool_pages_needed(&self, stored_bytes: u64) -> usize {
        (self.nr_stored * stored_bytes).div_ceil(4096) as usize
    }
}

impl Kernel {
    /// `zram_rw_page` write: compress and store. False if the pool could not
    /// grow (the write fails with -ENOMEM and the folio stays dirty).
    pub fn zram_write_page(&mut self, ty: usize, offset: u32, version: u32) -> bool {
        self.charge_cost(cost_model::Fn::ZramWrite, self.costs.zram_compress);
        let stored_bytes = self.costs.zram_stored_bytes;
        let z = &mut self.swap[ty].zram;
        if !z.stored[offset as usize] {
            z.nr_stored += 1;
            if z.pool_pages_needed(stored_bytes) > z.pool.len() {
                match self.alloc_page(Gfp::Memalloc) {
                    Some(p) => {
                        self.folios.get_mut(p).set(PG_KERNEL);
                        self.swap[ty].zram.pool.push(p);
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

    /// 7.3's swap reaches zram through submit_bio (no rw_page any more),
    /// which counts each page in pgpgin or pgpgout (4 kB); through 6.12
    /// rw_page counted nothing.
    fn count_zram_bio(&mut self, item: crate::vmstat::Vm) {
        if self.release.zram_submit_bio {
            self.vm.add(item, 4);
        }
    }

    /// `zram_rw_page` read: decompress; returns the stored content token.
    pub fn zram_read_page(&mut self, ty: usize, offset: u32) -> u32 {
        self.charge_cost(cost_model::Fn::ZramRead, self.costs.zram_decompress);
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
        z.nr_stored -= 1;
        if z.pool_pages_needed(stored_bytes) < z.pool.len() {
            let p = z.pool.pop().expect("pool page");
            self.vm.add(crate::vmstat::Vm::NrZspages, -1);
            self.free_page(p);
        }
    }
}
