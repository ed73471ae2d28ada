//! Guests (`[vm.NAME]`): a second simulated kernel whose RAM is an
//! anonymous mapping of a host process, the VMM, run in the same
//! deterministic run as the host's.
//!
//! The host's spec gains one task per guest, named after it, in the
//! guest's host cgroup: it maps the guest's RAM (`guest_ram`, the guest's
//! memory size, MADV_HUGEPAGE as QEMU's `ram_block_add` asks, so THP
//! follows the host's setting) and then runs the guest
//! (player/guest.rs). Guest frame N is page N of that mapping.
//!
//! Accelerators. QEMU's TCG: its software MMU reaches guest RAM through
//! the VMM's own page tables, so every guest access of a frame is the
//! VMM's user access of that page: a frame the host has not mapped (never
//! touched, or reclaimed) faults in the host as any process's page does,
//! with no EPT and no MMU notifier. KVM (`accel = "kvm"`, kvm.rs): the
//! guest reaches its RAM through the EPT, and a frame its SPTE does not
//! let through is an EPT violation that asks the host for the page
//! (player/guest.rs `kvm_access`). The guest kernel logs the frames it
//! touches (`Kernel::frame_log`): a user access's, the allocator's fill of
//! a page it hands out (clear_page, a copy's target, a read into it, a
//! zram object), the read of a page being swapped out (the compressor or
//! the device reads it; the host may have to bring it back first: double
//! paging), a copy-on-write's and a collapse's sources, the page-cache
//! page a read(2) or write(2) copies, and the struct pages and page
//! tables its paths touch. Boot: the frames the guest kernel keeps for
//! itself (mmsim's boot reservation: its image, memmap, page tables) are
//! written before the guest's first slice; the zero page is one of them,
//! so its reads are not logged. So are the frames the booted kernel has
//! allocated for itself when the workload starts. Not modelled: the
//! guest kernel's later touches of its image and slab, which stay in the
//! frames boot wrote.
//!
//! Block devices: a guest's swap devices and disks other than zram and RAM
//! disks are virtio-blk on host files (`host_file`). The guest kernel
//! logs each request at the plug's flush (`Kernel::blk_log`); the VMM's
//! second thread, QEMU's I/O thread, makes them as read(2) and write(2)
//! of the host files (player/guest.rs `run_io`). Each completes when the
//! host has served it: the guest prices it from the host's state lent for
//! the slice (`lend_host_io`, dev/virtio_host.rs).
//!
//! Time: one vCPU, which runs only while its VMM task runs on a host CPU.
//! The VMM runs guest slices one at a time, each ending by the VMM's host
//! slice, or after the op whose access the host must handle first (the
//! host's map of guest RAM is lent to the guest for the slice:
//! kernel.rs `FrameLog`), as the vCPU stops at a host fault or an EPT
//! violation; then the host makes the slice's frame accesses in order.
//! The guest waits for them: its next slice starts when the host is done
//! (`Scheduler::hold_cpus_until`). A guest with nothing ready halts its
//! vCPU: under TCG the VMM's thread sleeps at once, under KVM it polls
//! first (kvm.rs `kvm_halt_done`). Simplifications: a slice's accesses
//! are made on the host after the guest slice, not at their instant
//! within it (the host's other CPUs run within the host's lockstep of the
//! VMM's slice, as they would); a guest op that touches many frames runs
//! whole first; a TCG guest's own code is not slowed down by emulation
//! (its times are those of the guest's kernel at native speed: the
//! counters are what a TCG run can check).

use crate::dev::virtio_host::HostIo;
use crate::kernel::{HostMap, Kernel};
use crate::mm::folio::Pfn;
use crate::sched::Stepped;
use crate::SimError;
use mmsim_spec::{Advice, MapKind, Op, Spec, Step};

/// The VMM's mapping of a guest's RAM.
pub const GUEST_RAM: &str = "guest_ram";
/// The VMM's own anonymous memory (`Vm::vmm_memory`).
pub const VMM_MEMORY: &str = "vmm_memory";
/// TCG's translation cache (`Vm::tb_size`).
pub const TCG_TB: &str = "tcg_tb";
/// How often the translation cache is executed from, at most: once per
/// tick of Debian's kernel (HZ=250) of the guest's execution. It is
/// read whole then, standing for code that runs all the time; any
/// period well below the time between two reclaim scans of the same
/// page gives the same counters (each page is referenced between them).
pub const TB_PERIOD_NS: u64 = 4_000_000;

/// A guest's request to one of its virtio-blk devices: `pages` pages from
/// block `offset` (a page of the host file backing the device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlkIo {
    pub dev: crate::mm::page_io::BioDev,
    pub offset: u64,
    pub pages: u64,
    pub write: bool,
}

/// What a VMM's I/O thread has to do: the guest's requests in order, and
/// the host files behind its devices (vm.rs's `host_spec` starts the
/// thread for a guest with any).
#[derive(Debug, Default)]
pub struct VmIo {
    pub queue: std::collections::VecDeque<BlkIo>,
    /// Pages of the queue's first request made so far.
    pub done: u64,
    /// The host file (its inode) behind each guest swap device and disk,
    /// and whether QEMU opened it O_DIRECT (`cache = "none"`).
    pub swap: Vec<mmsim_spec::Backing>,
    pub disk: Vec<mmsim_spec::Backing>,
    /// Each host file's readahead state, as QEMU's open file has one.
    pub ra: std::collections::HashMap<usize, crate::mm::readahead::FileRa>,
    /// The I/O thread's task (the player's), once started.
    pub thread: Option<usize>,
    /// Waits in a row for the same page's I/O (`MAX_FAULT_ATTEMPTS`).
    pub attempts: u32,
    /// The completion time of the queue's first request, made O_DIRECT and
    /// waited for.
    pub direct_done: Option<u64>,
}

/// Which of the VMM's regions an access of it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Guest RAM: the page is a guest frame.
    Ram,
    /// TCG's translation cache.
    Tb,
}

/// A guest being run: its machine as booted (kernel, scheduler), the
/// frame accesses its last slice left for the host, and what its end read.
pub struct Guest<'s> {
    pub(crate) m: crate::Booted<'s>,
    /// The host VMA of its RAM, once the VMM has mapped it.
    pub ram: Option<u32>,
    /// The host VMA of TCG's translation cache and its pages, likewise.
    pub tb: Option<(u32, u64)>,
    /// Run under KVM: its EPT's slot in the host kernel (kvm.rs) once its
    /// RAM is mapped, None until then. Not under KVM: TCG.
    pub kvm: bool,
    pub kvm_slot: Option<usize>,
    /// The frame whose EPT violation had to wait for the host's I/O: KVM's
    /// async page fault worker faults it in with FOLL_WRITE, and the vCPU
    /// faults on it again once it is in.
    pub async_pf: Option<u64>,
    /// The next page of the translation cache to execute from, while a
    /// read of it is due (`TB_PERIOD_NS`); None when none is.
    tb_next: Option<u64>,
    /// The guest's time at the last read of the translation cache.
    tb_last: u64,
    /// Frame accesses still to make on the host, from `pos`.
    pending: Vec<(Pfn, bool)>,
    pos: usize,
    /// Requests to its block devices its last slice made, for the VMM's
    /// I/O thread.
    pub blk: Vec<BlkIo>,
    /// The guest's last task has exited.
    pub done: bool,
    /// The guest's latest slice end: its elapsed time when done.
    pub elapsed: u64,
    /// What its cgroups and zram held as its last task finished, and its
    /// end's invariant checks.
    pub(crate) at_end: crate::AtEnd,
}

impl<'s> Guest<'s> {
    /// Boots guest `spec` (a validated `[vm.NAME]`).
    pub fn new(
        vm: &'s mmsim_spec::Vm,
        costs: &crate::machine_profile::CostProfile,
        check: bool,
    ) -> Result<Self, SimError> {
        let spec = &*vm.guest;
        let m = crate::boot(spec, costs, check, true)?;
        // Boot wrote the frames the guest kernel keeps for itself (its
        // image, memmap, page tables, the initramfs: mmsim's boot
        // reservation, the frames above those it manages); the VMM
        // makes those writes before the guest's first slice.
        // So are the managed frames the booted kernel holds when the
        // workload starts (slab, stacks, the initramfs unpacked in
        // rootfs: `boot_used_bytes`), which its allocator handed out
        // before the guest logged anything.
        let managed: u64 = m.kernel.zones.iter().map(|z| z.managed).sum();
        let present = spec.machine.memory / mmsim_spec::PAGE_SIZE;
        let kernel = &m.kernel;
        let used =
            (0..managed as Pfn).filter(|&p| kernel.folios.get(p).test(crate::mm::folio::PG_KERNEL));
        let boot = used
            .chain(managed as Pfn..present as Pfn)
            .map(|p| (p, true))
            .collect();
        Ok(Guest {
            m,
            ram: None,
            tb: None,
            kvm: vm.accel == mmsim_spec::Accel::Kvm,
            kvm_slot: None,
            async_pf: None,
            tb_next: None,
            tb_last: 0,
            pending: boot,
            pos: 0,
            blk: Vec::new(),
            done: false,
            elapsed: 0,
            at_end: crate::AtEnd::default(),
        })
    }

    /// The host's side of its virtio-blk devices on host files
    /// (dev/virtio_host.rs), from the host as booted: which host inode
    /// backs each device, on which host disk, and the host's costs.
    pub fn attach_host_io(&mut self, host: &Kernel, vm: &mmsim_spec::Vm) {
        let disk_of = |i: usize| {
            let inode = &host.inodes[i];
            inode.disk.map(|d| (d as usize, inode.block))
        };
        let (swap, disk) = vm.backings();
        let mut io = HostIo::new(&swap, &disk, disk_of);
        if io.files.is_empty() {
            return;
        }
        (io.syscall, io.lookup, io.copy) = (
            host.costs.syscall,
            host.costs.pagecache_lookup,
            host.costs.copy_page,
        );
        self.m.kernel.host_io = Some(io);
    }

    /// Lends the guest the host's state its virtio-blk requests are priced
    /// from, for a slice: each backing file's xarray, the host disks'
    /// queues, the host folios whose reads are in flight. Nothing on the
    /// host reads them meanwhile.
    pub fn lend_host_io(&mut self, host: &mut Kernel) {
        let Some(io) = &mut self.m.kernel.host_io else {
            return;
        };
        for f in &mut io.files {
            f.pages = std::mem::take(&mut host.inodes[f.inode].pages);
        }
        for d in &mut io.disks {
            std::mem::swap(&mut d.bdev, &mut host.disks[d.disk].bdev);
        }
        let folios = &host.folios;
        io.reading.extend(
            host.io_wait
                .iter()
                .filter(|(&pfn, _)| !folios.get(pfn).test(crate::mm::folio::PG_UPTODATE))
                .map(|(&pfn, &t)| (pfn, t)),
        );
    }

    /// What `lend_host_io` lent, back, as it was.
    pub fn return_host_io(&mut self, host: &mut Kernel) {
        let Some(io) = &mut self.m.kernel.host_io else {
            return;
        };
        for f in &mut io.files {
            host.inodes[f.inode].pages = std::mem::take(&mut f.pages);
        }
        for d in &mut io.disks {
            std::mem::swap(&mut d.bdev, &mut host.disks[d.disk].bdev);
        }
        io.end_slice();
    }

    /// The next access to make on the host, if any: the last slice's
    /// frames, then a read of TCG's cache when one is due (TCG runs the
    /// translated code). A page of the region the target names.
    pub fn next_access(&self) -> Option<(Target, u64, bool)> {
        match self.pending.get(self.pos) {
            Some(&(pfn, write)) => Some((Target::Ram, pfn as u64, write)),
            None => self.tb_next.map(|page| (Target::Tb, page, false)),
        }
    }

    /// The access `next_access` gave is made.
    pub fn access_made(&mut self) {
        if self.pos < self.pending.len() {
            self.pos += 1;
        } else if let Some(page) = self.tb_next {
            let pages = self.tb.map_or(0, |(_, n)| n);
            self.tb_next = (page + 1 < pages).then_some(page + 1);
        }
    }

    /// One guest slice from `now` (the host's time: the vCPU was held
    /// there) of what is ready before `start_by` (the end of the vCPU's
    /// halt polling; else the vCPU halts: `Idle`), ending by `cap` or after
    /// the op whose access the host must handle first (`host`: the host's
    /// map of guest RAM, lent for the slice, `FrameLog`); its frame
    /// accesses become pending.
    pub fn run_slice(
        &mut self,
        now: u64,
        (start_by, cap): (u64, u64),
        host: &mut HostMap,
    ) -> Result<Stepped, SimError> {
        debug_assert!(self.next_access().is_none());
        self.pending.clear();
        self.pos = 0;
        let m = &mut self.m;
        m.kernel.guest_meta.last = crate::mm::folio::NIL;
        m.sched.hold_cpus_until(now);
        let log = m.kernel.frame_log.as_mut().expect("a guest logs");
        log.host = std::mem::take(host);
        log.exit = false;
        let check = m.sched.player.check;
        let at_end = &mut self.at_end;
        let stepped = m.sched.step_by(&mut m.kernel, start_by, cap, &mut |gk| {
            at_end.read(gk, check)
        });
        let log = m.kernel.frame_log.as_mut().expect("a guest logs");
        *host = std::mem::take(&mut log.host);
        let stepped = stepped?;
        match stepped {
            Stepped::Ran { end, .. } => {
                self.elapsed = self.elapsed.max(end);
                // Under KVM the guest's code runs on the CPU: no cache.
                if !self.kvm && end >= self.tb_last.saturating_add(TB_PERIOD_NS) {
                    self.tb_last = end;
                    self.tb_next = Some(0);
                }
            }
            Stepped::Done => self.done = true,
            Stepped::Idle(_) => {}
        }
        let log = self.m.kernel.frame_log.as_mut().expect("a guest logs");
        std::mem::swap(&mut self.pending, &mut log.accesses);
        let blk = self.m.kernel.blk_log.as_mut().expect("a guest logs");
        self.blk.clear();
        std::mem::swap(&mut self.blk, blk);
        Ok(stepped)
    }
}

/// The host's spec: `spec` with one VMM task per guest after its own.
pub fn host_spec(spec: &Spec) -> Spec {
    let mut host = spec.clone();
    for vm in &spec.vms {
        let key = format!("vm.{}", vm.name);
        let step = |op| Step {
            line: 0,
            key: key.clone(),
            op,
        };
        let anon = |name: &str, bytes: u64| {
            step(Op::Mmap {
                name: name.into(),
                pages: bytes / mmsim_spec::PAGE_SIZE,
                kind: MapKind::Anon,
                file: None,
                offset: 0,
                exec: false,
                content: None,
            })
        };
        let hugepage = |name: &str| {
            step(Op::Madvise {
                region: name.into(),
                advice: Advice::Hugepage,
                offset: 0,
                length: None,
            })
        };
        let write = |name: &str| step(Op::Touch(write_all(name)));
        // QEMU's start: its heap (ROMs, the guest kernel and initramfs
        // for fw_cfg, device state), then TCG's translation cache, which
        // tcg_init madvises MADV_HUGEPAGE and the guest's start fills
        // (written here at once), then guest RAM (ram_block_add).
        let mut steps = Vec::new();
        if vm.vmm_memory > 0 {
            steps.extend([anon(VMM_MEMORY, vm.vmm_memory), write(VMM_MEMORY)]);
        }
        if vm.accel == mmsim_spec::Accel::Tcg {
            steps.extend([anon(TCG_TB, vm.tb_size), hugepage(TCG_TB), write(TCG_TB)]);
        }
        steps.extend([
            anon(GUEST_RAM, vm.guest.machine.memory),
            hugepage(GUEST_RAM),
        ]);
        host.tasks.push(vm.vmm_task(steps));
        // virtio-blk on host files: QEMU's I/O thread (player/guest.rs).
        let backed = vm
            .swap_files
            .iter()
            .chain(&vm.disk_files)
            .any(Option::is_some);
        if backed {
            let t = host.tasks.last_mut().expect("just pushed");
            t.steps.push(step(Op::Thread { steps: Vec::new() }));
        }
    }
    host
}

/// A touch writing every page of `region` once, in order.
fn write_all(region: &str) -> mmsim_spec::Touch {
    mmsim_spec::Touch {
        region: region.into(),
        order: mmsim_spec::Order::Seq,
        theta: 0.0,
        count: None,
        passes: 1,
        write: 1.0,
        offset: 0,
        length: None,
        seed: 0,
        trace: None,
    }
}

impl Kernel {
    /// The host's map of a guest's RAM (the VMM's mapping `ram`), lent to
    /// the guest for a slice: its EPT under KVM (`slot`), else the VMM's
    /// PTEs. Nothing on the host reads them meanwhile.
    pub(crate) fn lend_guest_map(&mut self, ram: u32, slot: Option<usize>) -> HostMap {
        match slot {
            Some(slot) => HostMap::Ept(self.kvm_lend_ept(slot)),
            None => HostMap::Ptes(
                std::mem::take(&mut self.vmas[ram as usize].ptes),
                self.hw_pte_young,
            ),
        }
    }

    /// The map `lend_guest_map` lent, back.
    pub(crate) fn return_guest_map(&mut self, ram: u32, slot: Option<usize>, map: HostMap) {
        match (map, slot) {
            (HostMap::Ept(sptes), Some(slot)) => self.kvm_return_ept(slot, sptes),
            (HostMap::Ptes(ptes, _), None) => self.vmas[ram as usize].ptes = ptes,
            _ => unreachable!("the map lent for this guest comes back"),
        }
    }

    /// The VMM's thread ran its guest for `ran` after its vCPU halted for
    /// `halted`: the run is user time, as TCG's translated code is (not
    /// stretched again by SMT: the guest's own clock already ran). The
    /// clock stops at u64::MAX, as a sleep that long does.
    pub(crate) fn charge_guest_run(&mut self, ran: u64, halted: u64) {
        let room = u64::MAX - self.now();
        let ran = ran.min(room);
        self.pending_ns += ran + halted.min(room - ran);
        self.fn_time_ns[crate::cost_model::Fn::User as usize] += ran;
        self.user_access_ns += ran;
    }
}
