//! `thread`: a thread of this process (clone with CLONE_VM, by
//! std::thread) runs a body of steps beside its creator on handles to the
//! creator's regions (the same mappings, the same tokens), and reports like
//! a forked child when its creator joins it (`wait`, or the creator's end).
//! The spec check keeps both sides from unmapping a region they share
//! until then; the regions the thread maps itself stay mapped in the
//! process after it exits, as the simulator keeps them until the process
//! exits.

use crate::exec::{Child, Report, Started};
use crate::region::Region;
use mmsim_spec::kv::KvDb;
use mmsim_spec::{Op, Step};
use std::any::Any;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::thread::{Scope, ScopedJoinHandle};

/// Starts threads in the scope a task process runs in
/// (`std::thread::scope`), which outlives every thread started in it, so a
/// thread may borrow the spec its process runs. A trait object, so that
/// `Child` names the scope by one lifetime.
pub(crate) trait Spawner<'s>: Sync {
    fn spawn(
        &'s self,
        name: String,
        f: Box<dyn FnOnce() -> ThreadEnd + Send + 's>,
    ) -> std::io::Result<ScopedJoinHandle<'s, ThreadEnd>>;
}

impl<'s> Spawner<'s> for Scope<'s, '_> {
    fn spawn(
        &'s self,
        name: String,
        f: Box<dyn FnOnce() -> ThreadEnd + Send + 's>,
    ) -> std::io::Result<ScopedJoinHandle<'s, ThreadEnd>> {
        // A Builder, not Scope::spawn: a thread that cannot be made is an
        // error of the step, not a panic.
        std::thread::Builder::new().name(name).spawn_scoped(self, f)
    }
}

/// A thread started and not yet joined.
pub(crate) struct Threaded<'s> {
    /// The `thread` step's line.
    line: usize,
    handle: ScopedJoinHandle<'s, ThreadEnd>,
}

/// What a thread hands its creator when it is joined.
pub(crate) struct ThreadEnd {
    report: Report,
    /// The regions it mapped itself (and those its own threads left).
    left: Vec<Region>,
}

impl<'s> Child<'s> {
    /// Starts a thread of this process, named `<name>/threadK` (K counts
    /// this one's thread steps from 0), that runs `steps` on this one's
    /// regions; this one goes on at once.
    pub(crate) fn thread(&mut self, steps: &'s [Step], line: usize) -> Result<(), String> {
        let spawner = self
            .spawner
            .ok_or_else(|| format!("line {line}: thread: no scope to start the thread in"))?;
        let kv_dbs = self.give_kv_dbs(steps);
        let k = self.threads;
        self.threads += 1;
        let shared: Vec<String> = self.regions.keys().cloned().collect();
        let t = Child {
            instance: self.instance,
            name: format!("{}/thread{k}", self.name),
            cgroup: self.cgroup.clone(),
            regions: (self.regions.iter())
                .map(|(n, r)| (n.clone(), r.share()))
                .collect(),
            kv_dbs,
            ..Child::new(self.spec, self.swaps, self.files, self.t0, self.spawner)
        };
        let name = t.name.clone();
        let handle = spawner
            .spawn(name, Box::new(move || t.run_thread(steps, line, &shared)))
            .map_err(|e| format!("line {line}: cannot start a thread: {e}"))?;
        self.pending
            .push(Started::Thread(Threaded { line, handle }));
        Ok(())
    }

    /// Gives the thread the key-value servers prefaulted for the regions
    /// its kvstore steps (nested bodies included) drive: regions it maps
    /// itself, as a forked child's would be (the spec refuses a kvstore on
    /// a region a thread shares, so no server is ever driven from two
    /// tasks).
    fn give_kv_dbs(&mut self, steps: &[Step]) -> HashMap<String, KvDb> {
        let mut names: Vec<String> = Vec::new();
        mmsim_spec::for_each_op_in(steps, &mut |op| {
            if let Op::KvStore(kv) = op {
                if !names.contains(&kv.region) {
                    names.push(kv.region.clone());
                }
            }
        });
        (names.iter())
            .filter_map(|n| self.kv_dbs.remove_entry(n))
            .collect()
    }

    /// The thread: its steps, its own threads and children joined (after
    /// a panic too, so that none outlives it), and what it hands back: its
    /// report, the regions it mapped, the servers of the regions it shares.
    fn run_thread(mut self, steps: &'s [Step], line: usize, shared: &[String]) -> ThreadEnd {
        let start = self.now();
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| self.main(steps, None)));
        let report = run.unwrap_or_else(|p| {
            let e = format!(
                "line {line}: the thread started here panicked: {}",
                panic_text(&*p)
            );
            let mut r = self.main(&[], Some(e));
            r.task.start_ns = start;
            r
        });
        let mut left = std::mem::take(&mut self.left);
        for (name, r) in std::mem::take(&mut self.regions) {
            // A handle to a region it shares is dropped: the region is its
            // creator's, and stays mapped.
            if !shared.contains(&name) {
                left.push(r);
            }
        }
        ThreadEnd { report, left }
    }

    /// Joins a thread: its report joins this one's, the regions it mapped
    /// stay mapped (until the process exits), its servers come back.
    pub(crate) fn join_thread(&mut self, t: Threaded<'s>) -> Result<(), String> {
        let end = t.handle.join().map_err(|p| {
            format!(
                "line {}: the thread started here panicked while reporting: {}",
                t.line,
                panic_text(&*p)
            )
        })?;
        self.reports.push(end.report);
        self.left.extend(end.left);
        Ok(())
    }
}

/// A panic's message.
fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::{touch, PAGE};
    use mmsim_spec::Spec;
    use std::time::Instant;

    /// A spec of one task, `main`, with these steps (TOML array items).
    fn spec(steps: &str) -> Spec {
        let text = format!("[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n{steps}]\n");
        mmsim_spec::parse_str(&text, "t.toml", &[]).unwrap()
    }

    /// Runs `f` on a process of `spec`'s task named `main`, in a scope for
    /// its threads (as the task process runs); its regions are unmapped
    /// after. `f` gets the spec back with the scope's lifetime, which the
    /// steps it runs must have.
    fn with_task<R>(spec: &Spec, f: impl for<'s> FnOnce(&mut Child<'s>, &'s Spec) -> R) -> R {
        std::thread::scope(|scope| {
            let mut c = Child {
                name: "main".into(),
                ..Child::new(spec, &[], &[], Instant::now(), Some(scope))
            };
            let r = f(&mut c, spec);
            c.unmap_all();
            r
        })
    }

    fn names(reports: &[Report]) -> Vec<&str> {
        reports.iter().map(|r| r.task.name.as_str()).collect()
    }

    /// Whether every page of `[addr, addr + len)` is mapped.
    fn mapped(addr: *mut u8, len: usize) -> bool {
        let mut vec = vec![0u8; len / PAGE];
        // SAFETY: mincore only reads the page tables; vec has a byte per page.
        unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) == 0 }
    }

    #[test]
    fn two_threads_write_and_drop_their_halves_of_one_private_region() {
        // Each thread writes its half, reads it back, drops it (zeros
        // next), reads the zeros and writes half its pages again, 30
        // times; then the task reads the whole region.
        let half = |at: &str| {
            let r = format!("region = \"r\", offset = \"{at}\", length = \"512K\"");
            format!(
                "{{ op = \"thread\", steps = [ {{ op = \"repeat\", times = 30, steps = [\n\
                 {{ op = \"touch\", {r}, write = 1 }},\n\
                 {{ op = \"touch\", {r}, order = \"shuffle\" }},\n\
                 {{ op = \"madvise\", {r}, advice = \"dontneed\" }},\n\
                 {{ op = \"touch\", {r} }},\n\
                 {{ op = \"touch\", {r}, order = \"uniform\", write = 0.5 }},\n\
                 ] }} ] }},\n"
            )
        };
        let spec = spec(&format!(
            "{{ op = \"mmap\", name = \"r\", kind = \"anon\", size = \"1M\" }},\n{}{}\
             {{ op = \"wait\" }},\n{{ op = \"touch\", region = \"r\" }},\n",
            half("0"),
            half("512K")
        ));
        let report = with_task(&spec, |c, spec| c.main(&spec.tasks[0].steps, None));
        assert_eq!(report.error, None);
        assert_eq!((report.pages_checked, report.violations), (256, 0));
        assert_eq!(names(&report.forks), ["main/thread0", "main/thread1"]);
        for t in &report.forks {
            assert_eq!(t.error, None, "{}", t.task.name);
            assert_eq!(t.violations, 0, "{}", t.task.name);
            // Two full reads of 128 pages per round, and the reads of the
            // half-writing touch.
            assert!(t.pages_checked > 30 * 256, "{}", t.task.name);
            assert!(t.forks.is_empty());
        }
    }

    #[test]
    fn a_threads_own_region_stays_mapped_until_the_process_ends() {
        let spec = spec(
            r#"{ op = "thread", steps = [
  { op = "mmap", name = "own", kind = "anon", size = "64K" },
  { op = "touch", region = "own", write = 1 },
  { op = "touch", region = "own" },
] },
{ op = "wait" },
{ op = "mmap", name = "own", kind = "shared_anon", size = "8K" },
{ op = "touch", region = "own", write = 1 },
"#,
        );
        with_task(&spec, |c, spec| {
            c.run(&spec.tasks[0].steps).unwrap();
            assert_eq!(names(&c.reports), ["main/thread0"]);
            let t = &c.reports[0];
            assert_eq!((t.pages_checked, t.violations, &t.error), (16, 0, &None));
            // The thread's region is left to the process, mapped, with
            // what the thread wrote; the task's own `own` is another.
            assert_eq!(c.left.len(), 1);
            assert_eq!((c.left[0].pages, c.regions["own"].pages), (16, 2));
            for p in 0..16 {
                assert_eq!(touch(&mut c.left[0], p, false), (1, 0), "page {p}");
            }
            let (addr, len) = (c.left[0].addr, 16 * PAGE);
            assert!(mapped(addr, len));
            // The end unmaps it: seen in a forked copy of this process,
            // where no other test's thread can map the hole again.
            // SAFETY: the child only unmaps, checks and _exit()s.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            if pid == 0 {
                c.unmap_all();
                // SAFETY: _exit has no preconditions.
                unsafe { libc::_exit(if mapped(addr, len) { 1 } else { 0 }) };
            }
            let mut status = 0;
            // SAFETY: our child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        });
    }

    #[test]
    fn threads_report_in_start_order_with_forks_and_spawns() {
        let spec = spec(
            r#"{ op = "mmap", name = "r", kind = "anon", size = "64K" },
{ op = "thread", steps = [ { op = "touch", region = "r", length = "32K", write = 1 } ] },
{ op = "fork", steps = [ { op = "touch", region = "r", write = 1 } ] },
{ op = "spawn", steps = [] },
{ op = "thread", steps = [
  { op = "thread", steps = [] },
  { op = "fork", steps = [] },
  { op = "wait" },
  { op = "touch", region = "r", offset = "32K", write = 1 },
] },
{ op = "touch", region = "r", offset = "32K", length = "4K" },
"#,
        );
        let report = with_task(&spec, |c, spec| c.main(&spec.tasks[0].steps, None));
        assert_eq!(report.error, None);
        assert_eq!(
            names(&report.forks),
            ["main/thread0", "main/fork0", "main/spawn0", "main/thread1"]
        );
        assert_eq!(
            names(&report.forks[3].forks),
            ["main/thread1/thread0", "main/thread1/fork0"]
        );
        assert!(report.forks.iter().all(|r| r.error.is_none()));
    }

    #[test]
    fn forks_in_a_row_beside_a_thread_each_report() {
        // Each child's report pipe is the next fork's to avoid: a read end
        // closed as soon as its report was read could be given to a later
        // pipe, which that later child would then close as a stale one.
        let spec = spec(
            r#"{ op = "mmap", name = "r", kind = "anon", size = "64K" },
{ op = "touch", region = "r", write = 1 },
{ op = "thread", steps = [ { op = "touch", region = "r", write = 1, passes = 200 } ] },
{ op = "repeat", times = 24, steps = [ { op = "fork", steps = [] } ] },
"#,
        );
        let report = with_task(&spec, |c, spec| c.main(&spec.tasks[0].steps, None));
        assert_eq!(report.error, None);
        assert_eq!(report.forks.len(), 25);
        assert!(report.forks.iter().all(|r| r.error.is_none()));
    }

    #[test]
    fn a_failing_thread_reports_its_error_and_the_task_goes_on() {
        let spec = spec(
            r#"{ op = "mmap", name = "r", kind = "shared_anon", size = "64K" },
{ op = "thread", steps = [ { op = "madvise", region = "r", advice = "free" } ] },
{ op = "wait" },
{ op = "touch", region = "r", write = 1 },
"#,
        );
        let report = with_task(&spec, |c, spec| c.main(&spec.tasks[0].steps, None));
        assert_eq!(report.error, None);
        let e = report.forks[0].error.as_deref().unwrap_or_default();
        assert!(e.starts_with("line 6: madvise(free) of r"), "{e}");
    }

    #[test]
    fn a_panic_in_a_thread_is_its_error() {
        let mut spec = spec(
            r#"{ op = "mmap", name = "r", kind = "anon", size = "64K" },
{ op = "thread", steps = [ { op = "touch", region = "r", write = 1 } ] },
"#,
        );
        // A touch past the region's end, which the spec check refuses: the
        // token array's bounds check panics before the write.
        let Op::Thread { steps } = &mut spec.tasks[0].steps[1].op else {
            unreachable!()
        };
        let Op::Touch(t) = &mut steps[0].op else {
            unreachable!()
        };
        t.length = Some(17);
        let report = with_task(&spec, |c, spec| c.main(&spec.tasks[0].steps, None));
        assert_eq!(report.error, None);
        assert_eq!(names(&report.forks), ["main/thread0"]);
        let e = report.forks[0].error.as_deref().unwrap_or_default();
        assert!(
            e.starts_with("line 6: the thread started here panicked: index out of bounds"),
            "{e}"
        );
    }

    #[test]
    fn a_thread_serves_key_values_from_a_region_of_its_own() {
        // A kvstore on a region the thread shares is refused when the spec
        // is read; one on a region it maps itself gets that name's server
        // (prefaulted for the name, as a forked child's is).
        let kv = |r: &str| {
            format!(
                r#"{{ op = "kvstore", region = "{r}", keys = 100, value_size = 100, requests = 2000 }}"#
            )
        };
        let map = |r: &str| {
            format!("{{ op = \"mmap\", name = \"{r}\", kind = \"anon\", size = \"256K\" }}")
        };
        let shared = format!(
            "[machine]\nmemory = \"512M\"\n[task.main]\nsteps = [\n{},\n{{ op = \"thread\", steps = [ {} ] }},\n]\n",
            map("r"),
            kv("r")
        );
        let e = mmsim_spec::parse_str(&shared, "t.toml", &[]).unwrap_err();
        assert!(e.message.contains("which a thread shares"), "{e}");
        let spec = spec(&format!(
            "{},\n{{ op = \"thread\", steps = [ {}, {} ] }},\n{{ op = \"wait\" }},\n",
            map("r"),
            map("db"),
            kv("db")
        ));
        with_task(&spec, |c, spec| {
            c.prefault_kv_dbs(&spec.tasks[0].steps);
            c.run(&spec.tasks[0].steps).unwrap();
            assert_eq!(c.reports.len(), 1);
            assert_eq!(c.reports[0].error, None);
            assert_eq!(c.reports[0].violations, 0);
            assert!(c.reports[0].task.kv.is_some());
        });
    }
}
