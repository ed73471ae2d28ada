//! What a written page holds, as far as the kernel can tell: the
//! compressors of zram (and zswap) see it, nothing else does. A region's
//! `content` (mmsim_spec::content) gives each of its pages a kind on its
//! first write; the kind rides in the top bits of the page's content
//! token, so every copy of the page (copy-on-write, swap, khugepaged's
//! collapse, fork's expectations) carries it without another array.
//!
//! A token without kind bits is a page as the runner's touches leave it
//! without `content` (a 4-byte token and zeros), priced by the profile's
//! `zram_*` constants; token 0 is a page never written (zeros).

use crate::kernel::Kernel;
use crate::SimError;
use mmsim_spec::content::{Content, Kind};

/// The token's low bits count writes; the top 4 bits name the kind.
pub const KIND_SHIFT: u32 = 28;
pub const COUNTER_MASK: u32 = (1 << KIND_SHIFT) - 1;
/// Kind id 1 is always `zero`, so a zero page is known without the table.
pub const ZERO_KIND: u32 = 1;
/// Kind ids 1..=15.
pub const MAX_KINDS: usize = 15;

/// The kind id of a content token (0: none stated).
#[inline]
pub fn kind_id(token: u32) -> u32 {
    token >> KIND_SHIFT
}

/// The next token of a page written, given the one expected before: the
/// kind stays, the count moves on.
#[inline]
pub fn next_token(expected: u32) -> u32 {
    let kind = expected & !COUNTER_MASK;
    kind | (expected.wrapping_add(1) & COUNTER_MASK).max(1)
}

/// The run's kinds and the regions that stated a content.
pub struct PageContents {
    /// Kind of each id (index 0 unused: no content stated).
    pub kinds: Vec<Kind>,
    /// Vma::content - 1 indexes these.
    regions: Vec<RegionContent>,
}

struct RegionContent {
    name: String,
    content: Content,
    /// The kind id of each of `content.parts`.
    ids: Vec<u32>,
}

impl Default for PageContents {
    fn default() -> Self {
        PageContents {
            kinds: vec![Kind::Zero, Kind::Zero],
            regions: Vec::new(),
        }
    }
}

impl PageContents {
    /// The id of `kind`, assigned on first use.
    fn id_of(&mut self, kind: Kind) -> Result<u32, SimError> {
        if let Some(i) = self.kinds.iter().skip(1).position(|&k| k == kind) {
            return Ok(i as u32 + 1);
        }
        if self.kinds.len() > MAX_KINDS {
            return Err(SimError::Spec(format!(
                "found more than {MAX_KINDS} page contents in one run (zero counts as one), expected at most {MAX_KINDS}"
            )));
        }
        self.kinds.push(kind);
        Ok(self.kinds.len() as u32 - 1)
    }

    /// The number a VMA of region `name` with `content` keeps
    /// (`Vma::content`).
    pub fn register(&mut self, name: &str, content: &Content) -> Result<u32, SimError> {
        if let Some(i) = self
            .regions
            .iter()
            .position(|r| r.name == name && &r.content == content)
        {
            return Ok(i as u32 + 1);
        }
        let ids = content
            .kinds()
            .map(|k| self.id_of(k))
            .collect::<Result<Vec<_>, _>>()?;
        self.regions.push(RegionContent {
            name: name.to_string(),
            content: content.clone(),
            ids,
        });
        Ok(self.regions.len() as u32)
    }

    /// No region stated a content.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The kind id a content token carries, 0 for none. A page of a
    /// region without content written 2^28 times has a count that reaches
    /// the kind bits: in a run where no region states content they mean
    /// nothing, and an id the run does not have is none. (In a run with
    /// content such a page could pass for another kind's; no workload
    /// writes one page that often, and nothing breaks if one does.)
    #[inline]
    pub fn kind_of(&self, token: u32) -> usize {
        let k = kind_id(token) as usize;
        match self.regions.is_empty() || k >= self.kinds.len() {
            true => 0,
            false => k,
        }
    }

    /// Whether a page whose token is `found` holds what the user last
    /// wrote, token `expected`, though the two differ: a page written as
    /// zeros that came back from 6.12's zeromap (which keeps no token,
    /// only the fact that the page was zeros) holds the zeros written.
    pub fn reads_as(&self, found: u32, expected: u32) -> bool {
        found == 0 && self.is_zero_page(expected)
    }

    /// A page whose bytes are all zero: never written, or written as
    /// zeros.
    #[inline]
    pub fn is_zero_page(&self, token: u32) -> bool {
        token == 0 || self.kind_of(token) == ZERO_KIND as usize
    }

    /// The first token of page `page` of a region registered as `rc`.
    pub fn first_token(&self, rc: u32, page: u64) -> u32 {
        let r = &self.regions[rc as usize - 1];
        let kind = r.content.kind_of(&r.name, page);
        let part = r.content.kinds().position(|k| k == kind).expect("drawn");
        (r.ids[part] << KIND_SHIFT) | 1
    }
}

impl Kernel {
    /// Before the run: every content a region of the spec states, its
    /// kinds numbered, and what each kind costs each zram device's
    /// compressor by the run's profile (Err: the profile has not
    /// measured one).
    pub fn setup_page_contents(
        &mut self,
        spec: &mmsim_spec::Spec,
        table: &crate::machine_profile::CompressTable,
    ) -> Result<(), SimError> {
        let mut err = None;
        spec.for_each_op(&mut |op| {
            if let mmsim_spec::Op::Mmap {
                name,
                content: Some(c),
                ..
            } = op
            {
                if let Err(e) = self.contents.register(name, c) {
                    err.get_or_insert(e);
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        if self.contents.is_empty() {
            return Ok(());
        }
        self.zram_kind_costs = spec
            .swap
            .iter()
            .map(|dev| {
                let mut costs = vec![Default::default(); self.contents.kinds.len()];
                if dev.kind != mmsim_spec::SwapKind::Zram {
                    return Ok(costs);
                }
                for (id, &kind) in self.contents.kinds.iter().enumerate().skip(1) {
                    costs[id] = crate::machine_profile::kind_cost(
                        table,
                        dev.compressor(spec.machine.kernel),
                        kind,
                    )
                    .map_err(SimError::Spec)?;
                }
                Ok(costs)
            })
            .collect::<Result<_, SimError>>()?;
        Ok(())
    }

    /// A user write to page `idx` of VMA `vma` whose token was `expected`
    /// (0, or one with a kind): its next token, and for a region that
    /// states its content, user space's cost of writing it. Out of the
    /// access loop: a region without content comes here only for a
    /// page's first write (or after 2^28 writes to it, when its count
    /// has run into the kind bits: it counts on as before).
    #[inline(never)]
    pub fn token_written(&mut self, vma: u32, idx: usize, expected: u32) -> u32 {
        let rc = self.vmas[vma as usize].content;
        if rc == 0 {
            return expected.wrapping_add(1).max(1);
        }
        let first = expected == 0;
        let next = match first {
            true => self.contents.first_token(rc, idx as u64),
            false => next_token(expected),
        };
        // Each write that costs anything writes the page (membw.rs).
        match self.content_write_cost(first, next) {
            0 => {}
            ns => self.charge_user_mem(ns, crate::membw::PAGE_BYTES),
        }
        next
    }

    /// What user space does to a page of a region with content as it
    /// writes it (the runner's `content_write`): the first write fills
    /// the page from a template (a 4 KiB copy), a same-filled page is
    /// filled again with the new token at every write, a zero page only
    /// at its first. Priced as the kernel's page copy and clear
    /// (copy_page and clear_page are both measured as 4 KiB user-space
    /// memcpy and memset of cold pages, the runner's operations here).
    pub fn content_write_cost(&mut self, first: bool, token: u32) -> u64 {
        let kind = self.contents.kinds[kind_id(token) as usize];
        match (first, kind.same_filled()) {
            (true, false) => self.costs.copy_page,
            (_, true) if first || kind == Kind::Same => self.costs.clear_page,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_their_kind_as_they_count() {
        let t = (3 << KIND_SHIFT) | 1;
        assert_eq!(kind_id(next_token(t)), 3);
        assert_eq!(next_token(t) & COUNTER_MASK, 2);
        // The count wraps within its bits, never to 0.
        let top = (3 << KIND_SHIFT) | COUNTER_MASK;
        assert_eq!(next_token(top), (3 << KIND_SHIFT) | 1);
        let mut pc = PageContents::default();
        let zero_kind = (ZERO_KIND << KIND_SHIFT) | 5;
        // Without content, kind bits mean nothing.
        assert!(pc.is_zero_page(0) && !pc.is_zero_page(zero_kind));
        pc.register("a", &Content::one(Kind::Text)).unwrap();
        assert!(pc.is_zero_page(zero_kind) && !pc.is_zero_page(7));
    }

    #[test]
    fn regions_register_once_and_zero_is_id_one() {
        let mut pc = PageContents::default();
        let mix = Content {
            parts: vec![(Kind::Text, 1), (Kind::Zero, 1)],
        };
        let a = pc.register("heap", &mix).unwrap();
        assert_eq!(pc.register("heap", &mix).unwrap(), a);
        let b = pc.register("other", &Content::one(Kind::Random)).unwrap();
        assert_ne!(a, b);
        let zeros = (0..1000)
            .filter(|&p| kind_id(pc.first_token(a, p)) == ZERO_KIND)
            .count();
        assert!((400..600).contains(&zeros), "{zeros}");
        // Zero, text, random and 12 ratios: the 15 ids.
        for k in 0..12 {
            pc.register(&format!("r{k}"), &Content::one(Kind::Ratio(200 + k)))
                .unwrap();
        }
        assert!(pc.register("x", &Content::one(Kind::Ratio(900))).is_err());
    }
}
