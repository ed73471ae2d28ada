//! A VMM task running its guest (vm.rs): guest slices, each followed by
//! the host accesses of the frames it touched, until the host slice ends,
//! the guest idles, or its last task exits.

use super::{after_access, Access, Player};
use crate::kernel::Kernel;
use crate::sched::rq::{Slice, SliceEnd};
use crate::sched::Stepped;
use crate::vm::{Guest, Target, GUEST_RAM, TCG_TB};
use crate::SimError;

pub(super) fn run(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    g: usize,
) -> Result<Option<SliceEnd>, SimError> {
    let mut guest = p.guests[g].take().expect("a guest runs in one VMM");
    let r = run_guest(p, i, k, slice, &mut guest, g);
    p.guests[g] = Some(guest);
    r
}

fn run_guest(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    guest: &mut Guest,
    g: usize,
) -> Result<Option<SliceEnd>, SimError> {
    let ktask = p.tasks[i].ktask;
    let region = |name: &str| -> u32 {
        *p.tasks[i]
            .regions
            .get(name)
            .expect("the VMM's steps map the guest's RAM and TCG's cache")
    };
    let ram = *guest.ram.get_or_insert_with(|| region(GUEST_RAM));
    if guest.kvm && guest.kvm_slot.is_none() {
        // KVM_SET_USER_MEMORY_REGION: guest RAM is the VM's memory slot.
        guest.kvm_slot = Some(k.kvm_create_vm(ram));
    }
    let tb = match guest.kvm {
        true => None,
        false => Some(
            guest
                .tb
                .get_or_insert_with(|| {
                    let v = region(TCG_TB);
                    (v, k.vmas[v as usize].pages)
                })
                .0,
        ),
    };
    let pages = k.vmas[ram as usize].pages;
    loop {
        // The last guest slice's frames, made by the VMM's loads and
        // stores (TCG) or through the EPT (KVM), then TCG's cache when
        // due: the vCPU waits for each.
        while let Some((target, page, write)) = guest.next_access() {
            if target == Target::Ram && page >= pages {
                return Err(SimError::Invariant(format!(
                    "guest frame {page} is beyond its RAM of {pages} pages"
                )));
            }
            let access = match (target, guest.kvm_slot, tb) {
                (Target::Ram, Some(slot), _) => kvm_access(p, k, guest, slot, page, write)?,
                (Target::Ram, None, _) => p.play_access(k, ram, page as usize, write)?,
                (Target::Tb, _, Some(tb)) => p.play_access(k, tb, page as usize, write)?,
                (Target::Tb, _, None) => unreachable!("only TCG reads its translation cache"),
            };
            match access {
                Access::Sleep(until) => {
                    return Ok(Some(vcpu_out(k, guest, SliceEnd::Sleep(until))))
                }
                Access::Done => guest.access_made(),
                Access::Again => {}
            }
            if let Some(end) = after_access(k, ktask, slice) {
                return Ok(Some(vcpu_out(k, guest, end)));
            }
        }
        if guest.done {
            return Ok(None);
        }
        if let Some(slot) = guest.kvm_slot {
            // KVM_RUN: the vCPU is in guest mode on this CPU.
            k.kvm_vcpu_enter(slot);
        }
        let now = k.now();
        // A slice to u64::MAX has no end (a sleep that long runs last).
        let cap = slice.end();
        if now >= cap && cap != u64::MAX {
            return Ok(Some(SliceEnd::Preempted));
        }
        // What is ready by the end of the vCPU's halt polling runs; a later
        // start halts it: KVM polls its window first (kvm.rs), TCG's vCPU
        // thread waits at once (`qemu_wait_io_event`). The poll also ends
        // with the host slice. A host slice without an end runs whatever
        // is next (a sleep for ever, last).
        let window = guest
            .kvm_slot
            .map_or(0, |slot| k.kvm_halt_poll_window(slot));
        let start_by = match cap {
            u64::MAX => u64::MAX,
            _ => now.saturating_add(window).saturating_add(1).min(cap),
        };
        let mut host = k.lend_guest_map(ram, guest.kvm_slot);
        guest.lend_host_io(k);
        let stepped = guest.run_slice(now, (start_by, cap), &mut host);
        guest.return_host_io(k);
        k.return_guest_map(ram, guest.kvm_slot, host);
        let stepped = stepped?;
        // The slice's virtio-blk requests go to the I/O thread (the
        // virtqueue kick), which the guest's end wakes too, to exit.
        let io = &mut p.vm_io[g];
        io.queue.extend(guest.blk.drain(..));
        if let Some(t) = io.thread.filter(|_| !io.queue.is_empty() || guest.done) {
            slice.wake(t, k.now());
        }
        match stepped {
            Stepped::Ran { start, end } => {
                // A halted vCPU until `start` (a successful poll: the VMM
                // keeps its CPU), then the guest's own time.
                let ran = end.saturating_sub(now.max(start));
                let halted = start.saturating_sub(now);
                match guest.kvm_slot {
                    Some(slot) if halted > 0 => {
                        k.kvm_halt_done(slot, window, halted, halted, false);
                        k.charge_guest_run(ran, 0);
                    }
                    _ => k.charge_guest_run(ran, halted),
                }
            }
            // The guest's vCPU halts (HLT) past its poll: the VMM thread
            // sleeps until the guest's next entity is ready.
            Stepped::Idle(next) => {
                if let Some(slot) = guest.kvm_slot {
                    let polled = window.min(cap.saturating_sub(now));
                    k.kvm_halt_done(slot, window, polled, next.saturating_sub(now), true);
                }
                return Ok(Some(vcpu_out(k, guest, SliceEnd::Sleep(next))));
            }
            Stepped::Done => {}
        }
    }
}

/// The VMM's thread leaves the guest with `end`: a vCPU that sleeps
/// (halted, or waiting for the host) is out of guest mode, so a remote
/// TLB flush sends it no IPI (kvm.rs). One preempted stays marked: the
/// flush looks whether its CPU still runs the VMM.
fn vcpu_out(k: &mut Kernel, guest: &Guest, end: SliceEnd) -> SliceEnd {
    if let (Some(slot), SliceEnd::Sleep(_)) = (guest.kvm_slot, &end) {
        k.kvm_vcpu_leave(slot);
    }
    end
}

/// A guest access of frame `gfn` under KVM: through its SPTE, or an EPT
/// violation, whose host page `hva_to_pfn` asks for (get_user_pages, with
/// FOLL_WRITE for a write), and the SPTE installed from the host's PTE.
/// A read whose fault had to wait for I/O (VM_FAULT_RETRY under
/// FOLL_NOWAIT) goes to KVM's async page fault worker, which faults the
/// page in with FOLL_WRITE (`async_pf_execute`); the vCPU waits for it
/// and faults again. Simplifications: the worker's fault runs as the
/// vCPU's own when the vCPU faults again (its counters are the same; its
/// time lands on the VMM's CPU, not a kworker's), and the vCPU halts
/// meanwhile (a paravirtual guest in user mode would run another of its
/// tasks: a guest of one busy task has none to run). A guest whose
/// interrupts are off, where KVM waits for the page itself, is not
/// followed.
fn kvm_access(
    p: &mut Player,
    k: &mut Kernel,
    guest: &mut Guest,
    slot: usize,
    gfn: u64,
    write: bool,
) -> Result<Access, SimError> {
    let idx = gfn as usize;
    if !k.kvm_spte_lets_through(slot, idx, write) {
        k.kvm_ept_violation(slot);
        let ram = k.kvm[slot].vma;
        let foll_write = write || guest.async_pf == Some(gfn);
        k.fault.take_retry();
        k.get_user_pages_fault(ram, idx, foll_write)?;
        if let Some(until) = k.fault.take_blocked_until() {
            if k.fault.take_retry() {
                guest.async_pf = Some(gfn);
            }
            return Ok(Access::Sleep(until));
        }
        if k.fault.take_again() {
            return Ok(Access::Again);
        }
        guest.async_pf = None;
        k.kvm_map_spte(slot, idx);
    }
    k.kvm_guest_access(slot, idx, write);
    p.done_work += 1;
    Ok(Access::Done)
}

/// The VMM's I/O thread (QEMU's virtio-blk backend on a host file, the
/// default cache=writeback): each guest request, page by page, as a
/// pread or pwrite of the host file through the host's page cache (its
/// readahead, its dirtying and writeback), charged to the VMM's cgroup.
/// It waits for work while the guest runs; None once the guest has ended
/// and every request is made (the thread exits).
/// The guest priced each request from the host's state as its slice began
/// (dev/virtio_host.rs); this makes it on the host, which moves the
/// host's counters, cache and clock.
pub(super) fn run_io(
    p: &mut Player,
    i: usize,
    k: &mut Kernel,
    slice: &mut Slice,
    g: usize,
) -> Result<Option<SliceEnd>, SimError> {
    use crate::mm::memory::{FaultError, MAX_FAULT_ATTEMPTS};
    use crate::mm::page_io::BioDev;
    let ktask = p.tasks[i].ktask;
    let memcg = k.tasks[ktask].memcg;
    loop {
        let io = &mut p.vm_io[g];
        let Some(req) = io.queue.front().copied() else {
            let done = p.guests[g].as_ref().is_none_or(|g| g.done);
            return Ok((!done).then_some(SliceEnd::Wait));
        };
        let (file, direct) = match req.dev {
            BioDev::Swap(t) => io.swap[t],
            BioDev::Disk(d) => io.disk[d],
        }
        .expect("a guest's block device has its host file (validated)");
        let inode = file as u32;
        if direct && !k.inodes[file].is_shmem() {
            // cache=none: the whole request in one O_DIRECT call, past the
            // host's page cache; the thread waits for it.
            match io.direct_done.take() {
                Some(t) if t <= k.now() => {
                    io.queue.pop_front();
                    p.done_work += req.pages;
                }
                Some(t) => {
                    io.direct_done = Some(t);
                    return Ok(Some(SliceEnd::Sleep(t)));
                }
                None => {
                    let t = k.direct_io(inode, req.offset, req.pages, req.write);
                    io.direct_done = Some(t);
                    return Ok(Some(SliceEnd::Sleep(t.max(k.now()))));
                }
            }
            if let Some(end) = after_access(k, ktask, slice) {
                return Ok(Some(end));
            }
            continue;
        }
        let index = req.offset + io.done;
        k.process_io_completions(k.now());
        let r = if k.inodes[file].is_shmem() {
            k.shmem_file_io_page(inode, index, req.write, memcg)
        } else if req.write {
            k.filemap_write_page(inode, index, memcg)
        } else {
            let ra_pages = k.inodes[file]
                .disk
                .map_or(0, |d| k.disks[d as usize].ra_pages);
            let ra = io
                .ra
                .entry(file)
                .or_insert_with(|| crate::mm::readahead::FileRa::new(ra_pages));
            k.filemap_read_page(inode, index, req.offset + req.pages, ra, memcg)
        };
        let io = &mut p.vm_io[g];
        match r {
            Ok(()) => {
                io.attempts = 0;
                io.done += 1;
                if io.done == req.pages {
                    io.queue.pop_front();
                    io.done = 0;
                }
            }
            Err(FaultError::Wait(t) | FaultError::Retry(t)) => {
                // As read(2)'s bound (file_io.rs): a page reclaimed again
                // each time its read completes.
                io.attempts += 1;
                if io.attempts >= MAX_FAULT_ATTEMPTS {
                    return Err(SimError::Unmodelled(format!(
                        "the VMM's I/O thread waited for the host file's page {index} {MAX_FAULT_ATTEMPTS} times in a row, each time finding it reclaimed again: the host thrashes; expected more host memory for the guest's VMM"
                    )));
                }
                return Ok(Some(SliceEnd::Sleep(t.max(k.now()))));
            }
            Err(e) => return Err(e.into()),
        }
        p.done_work += 1;
        if let Some(end) = after_access(k, ktask, slice) {
            return Ok(Some(end));
        }
    }
}
