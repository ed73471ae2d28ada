//! The step ops, one module each: the keys an op's table takes, how the
//! op is built from it, what it does to the task's regions as the steps
//! run in order (the checks made before anything runs), and the page
//! operations it asks for (`crate::work`).
//!
//! Adding an op on the spec side is one file here implementing [`StepOp`]
//! and one line in [`ALL`]; the `Op` variant it builds is in `model.rs`.
//! The engines execute the built `Op` on their own side (the simulator's
//! scheduler, the native runner's `ops/`).

use crate::error::{Reporter, SpecError};
use crate::model::{File, Op, Step};
use crate::parse::fields::{string, type_error, valid_name, Fields, NAME_WORDS};
use crate::parse::regions::{RegionCheck, Regions};
use crate::parse::Locations;
use crate::work::{Sizes, WorkCx};
use std::sync::LazyLock;

mod compute;
mod drop_caches;
mod file_io;
mod fork;
mod fsync;
mod kvstore;
mod madvise;
mod mmap;
mod munmap;
mod phase;
mod reclaim;
mod repeat;
mod set;
mod sleep;
mod stream;
mod swap;
mod thread;
mod touch;
pub(crate) use touch::{accesses, range_pages};
mod trace;
mod wait;

/// Every op, in the order messages list them (`OPS`). The registration of
/// an op: one line.
const ALL: &[&dyn StepOp] = &[
    &mmap::Mmap,
    &munmap::Munmap,
    &touch::Touch,
    &trace::Trace,
    &madvise::Madvise,
    &sleep::Sleep,
    &compute::Compute,
    &phase::Phase,
    &repeat::Repeat,
    &fork::Fork { exec: false },
    &fork::Fork { exec: true },
    &thread::Thread,
    &wait::Wait,
    &swap::Swap { on: false },
    &swap::Swap { on: true },
    &kvstore::KvStore,
    &file_io::FileIo { write: false },
    &file_io::FileIo { write: true },
    &fsync::Fsync,
    &drop_caches::DropCaches,
    &reclaim::Reclaim,
    &stream::Stream,
    &set::Set,
];

/// The words `op` takes, joined for messages: "mmap, munmap, …, set".
pub static OPS: LazyLock<String> =
    LazyLock::new(|| ALL.iter().map(|o| o.word()).collect::<Vec<_>>().join(", "));

/// The spec side of a step op.
pub(crate) trait StepOp: Sync {
    /// The word a step names it by (`op = "mmap"`).
    fn word(&self) -> &'static str;

    /// The keys its table takes (`op` included).
    fn keys(&self) -> &'static [&'static str];

    /// The keys it requires.
    fn required(&self) -> &'static [&'static str];

    /// What `field` takes, in words (for type errors and missing keys).
    fn words(&self, field: &str) -> &'static str {
        words(field)
    }

    /// Builds the op from its table, whose keys are known to be among
    /// `keys` and to include `required`.
    fn build(&self, cx: &mut StepCx, f: &Fields) -> Result<Op, SpecError>;

    /// Whether `op` is one this module builds: how the checks and the
    /// work count over built steps find the module of an op.
    fn owns(&self, op: &Op) -> bool;

    /// Checks `op` against the task's regions as its steps reach it and
    /// records what it changes in them; `key` is the step's key path.
    fn check(
        &self,
        _cx: &mut RegionCheck,
        _key: &str,
        _op: &Op,
        _regions: &mut Regions,
    ) -> Result<(), SpecError> {
        Ok(())
    }

    /// The page operations `op` asks for (`crate::work`), `sizes` holding
    /// the pages of the regions mapped so far by name. Every op counts at
    /// least one.
    fn work(&self, _cx: &WorkCx, _op: &Op, _sizes: &mut Sizes) -> u128 {
        1
    }
}

/// The op `op = word` names.
pub(crate) fn by_word(word: &str) -> Option<&'static dyn StepOp> {
    ALL.iter().copied().find(|o| o.word() == word)
}

/// The module of a built op.
pub(crate) fn of(op: &Op) -> &'static dyn StepOp {
    ALL.iter()
        .copied()
        .find(|o| o.owns(op))
        .expect("every Op variant has its module in ALL")
}

/// What a field takes, in words, where an op does not say otherwise.
pub(crate) fn words(field: &str) -> &'static str {
    match field {
        "region" => "a string: the name of a region mapped by an earlier mmap step",
        _ => "a value",
    }
}

/// What building a step needs besides its own table.
pub(crate) struct StepCx<'a> {
    pub rep: &'a Reporter<'a>,
    /// The `[[file]]`s a step may name.
    pub files: &'a [File],
    /// Where each step and each of its keys is, for the checks that run
    /// over the built steps.
    pub locs: Locations,
}

impl StepCx<'_> {
    /// The steps of a `repeat`, `fork` or `spawn` body: `f`'s `steps`.
    pub fn body(&mut self, f: &Fields) -> Result<Vec<Step>, SpecError> {
        crate::parse::tasks::build_steps(self, f.req("steps"), &f.path("steps"))
    }
}

/// A required string key that names something new (a region, a phase):
/// letters, digits, '_' or '-'.
pub(crate) fn name_field(
    rep: &Reporter,
    f: &Fields,
    op: &dyn StepOp,
    field: &str,
) -> Result<String, SpecError> {
    let n = f.req(field);
    let s = string(rep, n, &f.path(field), op.words(field))?;
    if !valid_name(s) {
        return Err(type_error(rep, n, &f.path(field), NAME_WORDS));
    }
    Ok(s.to_string())
}

/// A required string key naming a region (checked with the regions).
pub(crate) fn region_field(
    rep: &Reporter,
    f: &Fields,
    op: &dyn StepOp,
) -> Result<String, SpecError> {
    Ok(string(rep, f.req("region"), &f.path("region"), op.words("region"))?.to_string())
}

/// The cgroup a step's `field` names is a `[cgroup.NAME]` table.
fn check_cgroup(
    cx: &mut RegionCheck,
    key: &str,
    field: &str,
    cgroup: &str,
) -> Result<(), SpecError> {
    if cx.cgroups.iter().any(|c| c == cgroup) {
        return Ok(());
    }
    Err(cx.err(
        key,
        field,
        format!(
            "found the cgroup \"{}\", expected the NAME of a [cgroup.NAME] table: {}",
            crate::tree::quote(cgroup),
            if cx.cgroups.is_empty() {
                "none is defined".to_string()
            } else {
                cx.cgroups.join(", ")
            }
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_list_the_ops_in_their_order() {
        assert_eq!(
            OPS.as_str(),
            "mmap, munmap, touch, trace, madvise, sleep, compute, phase, repeat, fork, spawn, thread, wait, swapoff, swapon, kvstore, read, write, fsync, drop_caches, reclaim, stream, set"
        );
    }

    #[test]
    fn every_op_is_the_module_of_what_it_builds() {
        let spec = crate::parse_str(
            "[machine]\nmemory = \"128M\"\n[[swap]]\ndevice = \"zram\"\nsize = \"64M\"\n[[file]]\nname = \"f\"\nsize = \"1M\"\non = \"tmpfs\"\n[cgroup.w]\n[task.a]\nsteps = [\n\
             { op = \"mmap\", name = \"h\", kind = \"anon\", size = \"1M\" },\n\
             { op = \"touch\", region = \"h\" },\n\
             { op = \"madvise\", region = \"h\", advice = \"cold\" },\n\
             { op = \"sleep\", duration = \"1ms\" },\n\
             { op = \"compute\", duration = \"1ms\" },\n\
             { op = \"phase\", name = \"p\" },\n\
             { op = \"repeat\", times = 2, steps = [] },\n\
             { op = \"fork\", steps = [] },\n\
             { op = \"spawn\", steps = [] },\n\
             { op = \"thread\", steps = [] },\n\
             { op = \"wait\" },\n\
             { op = \"swapoff\", device = 0 },\n\
             { op = \"swapon\", device = 0 },\n\
             { op = \"kvstore\", region = \"h\", keys = 10, value_size = 100, requests = 10 },\n\
             { op = \"read\", file = \"f\" },\n\
             { op = \"write\", file = \"f\" },\n\
             { op = \"fsync\", file = \"f\" },\n\
             { op = \"drop_caches\" },\n\
             { op = \"reclaim\", cgroup = \"w\", amount = \"1M\" },\n\
             { op = \"stream\", file = \"f\" },\n\
             { op = \"set\", key = \"cgroup.w.memory_max\", value = \"1M\" },\n\
             { op = \"munmap\", region = \"h\" },\n]\n",
            "t.toml",
            &[],
        )
        .expect("spec");
        for s in &spec.tasks[0].steps {
            let word = s.key.clone();
            let owners = ALL.iter().filter(|o| o.owns(&s.op)).count();
            assert_eq!(owners, 1, "{word}: {:?}", s.op);
        }
        // Every word but trace's (which needs a file) was built above.
        assert_eq!(spec.tasks[0].steps.len(), ALL.len() - 1);
    }
}
