//! The checks that run over a task's built steps, in the order they run:
//! every region a step names is mapped by an earlier step and not unmapped
//! since, and each op's own (`StepOp::check`).

use super::Locations;
use crate::error::{Reporter, SpecError};
use crate::model::{Cgroup, Step};
use crate::tree::At;
use indexmap::IndexMap;
use std::collections::HashMap;

/// Mapped regions by name, with their size in pages.
pub(crate) type Regions = IndexMap<String, u64>;

/// Checks that every region a step names is mapped by an earlier step of the
/// task and not unmapped since, that no mmap reuses a mapped name, and that a
/// touched sub-range lies inside its region, walking the steps in the order
/// they run.
pub(crate) struct RegionCheck<'a> {
    rep: &'a Reporter<'a>,
    locs: &'a Locations,
    /// Repeat bodies already walked from a given state, with the state they
    /// left: a body is a fixed function of the state, so a second walk from
    /// the same state would find nothing new.
    seen: HashMap<(usize, Vec<(String, u64)>), Regions>,
    /// Number of [[swap]] devices (swapoff/swapon name one).
    pub nswap: usize,
    /// The `[cgroup.NAME]`s (a set step names one).
    pub cgroups: Vec<String>,
    /// Regions the steps being walked share with a thread and may not
    /// unmap: in a thread's body, those it inherited from its creator
    /// (`inherited`); in the creator's, those it had when it started a
    /// thread it has not waited for since (`shared_with_threads`). A
    /// region unmapped under a thread that uses it would leave the thread
    /// touching memory that is gone.
    pub inherited: Vec<String>,
    pub shared_with_threads: Vec<String>,
}

impl<'a> RegionCheck<'a> {
    pub(crate) fn at(&self, key: &str, field: &str) -> At {
        self.locs
            .get(&format!("{key}.{field}"))
            .or_else(|| self.locs.get(key))
            .copied()
            .unwrap_or(At::Text(0))
    }

    pub(crate) fn err(&self, key: &str, field: &str, message: String) -> SpecError {
        self.rep
            .at(self.at(key, field), format!("{key}.{field}"), message)
    }

    pub(crate) fn new(
        rep: &'a Reporter<'a>,
        locs: &'a Locations,
        nswap: usize,
        cgroups: &[Cgroup],
    ) -> Self {
        RegionCheck {
            rep,
            locs,
            seen: HashMap::new(),
            nswap,
            cgroups: cgroups.iter().map(|c| c.name.clone()).collect(),
            inherited: Vec::new(),
            shared_with_threads: Vec::new(),
        }
    }

    /// `prefix`: the key path of the `steps` array (`task.main.steps`,
    /// `task.main.steps[3].steps`). Each op checks itself
    /// (`StepOp::check`).
    pub(crate) fn walk(
        &mut self,
        prefix: &str,
        steps: &[Step],
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        for (i, s) in steps.iter().enumerate() {
            let key = format!("{prefix}[{i}]");
            crate::ops::of(&s.op).check(self, &key, &s.op, regions)?;
        }
        Ok(())
    }

    /// A body of steps (a repeat's, a fork's, a spawn's), walked from the
    /// state `regions` and left in the state it ends in.
    pub(crate) fn body(
        &mut self,
        prefix: &str,
        steps: &[Step],
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let mut state: Vec<(String, u64)> = regions.iter().map(|(k, v)| (k.clone(), *v)).collect();
        state.sort_unstable();
        // The thread locks are part of the state a body starts from.
        let locks = (self.inherited.iter()).chain(&self.shared_with_threads);
        state.extend(locks.map(|n| (format!("\0{n}"), 0)));
        let memo = (steps.as_ptr() as usize, state);
        if let Some(after) = self.seen.get(&memo) {
            *regions = after.clone();
            return Ok(());
        }
        self.walk(prefix, steps, regions)?;
        self.seen.insert(memo, regions.clone());
        Ok(())
    }

    pub(crate) fn range(
        &self,
        key: &str,
        region: &str,
        offset: u64,
        length: Option<u64>,
        regions: &Regions,
    ) -> Result<(), SpecError> {
        let Some(&pages) = regions.get(region) else {
            return Err(self.unknown_region(key, region, regions));
        };
        let n = length.unwrap_or(pages.saturating_sub(offset));
        let end = offset.saturating_add(n);
        if offset >= pages || end > pages {
            let field = if offset >= pages { "offset" } else { "length" };
            return Err(self.err(
                key,
                field,
                format!(
                    "found the range of pages {offset}..{end}, expected it inside region \"{region}\" of {pages} pages",
                ),
            ));
        }
        Ok(())
    }

    /// Refuses the unmapping of a region a thread shares (`inherited`,
    /// `shared_with_threads`).
    pub(crate) fn may_unmap(&self, key: &str, region: &str) -> Result<(), SpecError> {
        let why = if self.inherited.iter().any(|n| n == region) {
            "which this thread shares with the task that started it; expected a region the thread mapped itself"
        } else if self.shared_with_threads.iter().any(|n| n == region) {
            "which a thread this task started still shares; expected a wait step before it"
        } else {
            return Ok(());
        };
        Err(self.err(key, "region", format!("found \"{region}\" unmapped, {why}")))
    }

    /// Walks a body that runs as a process of its own (a fork's or a
    /// spawn's child): no thread of the creator shares its copies.
    pub(crate) fn process_body(
        &mut self,
        prefix: &str,
        steps: &[Step],
        regions: &mut Regions,
    ) -> Result<(), SpecError> {
        let inherited = std::mem::take(&mut self.inherited);
        let shared = std::mem::take(&mut self.shared_with_threads);
        let r = self.body(prefix, steps, regions);
        self.inherited = inherited;
        self.shared_with_threads = shared;
        r
    }

    pub(crate) fn unknown_region(&self, key: &str, region: &str, regions: &Regions) -> SpecError {
        let known: Vec<&str> = regions.keys().map(|k| k.as_str()).collect();
        self.err(
            key,
            "region",
            format!(
                "found \"{region}\", expected a region mapped by an earlier mmap step ({})",
                if known.is_empty() {
                    "none mapped".to_string()
                } else {
                    known.join(", ")
                }
            ),
        )
    }
}
