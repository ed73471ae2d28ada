//! Where simulated time goes, by call path, like `perf report --children`:
//! a tree of kernel functions; each node keeps the time charged while it
//! was the innermost function (self), and its total includes its callees.
//! Nodes are linked through indices (first child, next sibling), so the
//! hot path — charging time — allocates nothing once a path exists.

use crate::cost_model::{Fn, FN_NAMES, NR_FNS};
use mmsim_spec::output::ProfileRow;

const NONE: u32 = u32::MAX;

/// Every `Fn`, indexed by its number.
const FNS: [Fn; NR_FNS] = crate::cost_model::ALL_FNS;

/// A node's row of leaf charges in `leaf_ns`: a power of two, so that the
/// hot path's index is a shift whatever the number of functions (a
/// multiply by some counts costs an instruction more per charge).
const LEAF_ROW: usize = NR_FNS.next_power_of_two();

#[derive(Clone, Copy)]
struct Node {
    parent: u32,
    func: u8,
    self_ns: u64,
    first_child: u32,
    next_sibling: u32,
    /// The child found last: call patterns repeat, so this usually hits.
    last_child: u32,
    /// Its function, kept here so that a hit reads one node.
    last_func: u8,
}

#[derive(Clone)]
pub struct CallPaths {
    nodes: Vec<Node>,
    cur: u32,
    /// `cur`'s function, kept here for the hot path.
    cur_func: u8,
    /// Time charged to a function that was not entered as a call (a leaf
    /// of the current node), by node × function: one add on the hot path.
    leaf_ns: Vec<u64>,
}

impl Default for CallPaths {
    fn default() -> Self {
        let mut p = CallPaths::empty();
        // The root's "user" child always exists: user time is added to it
        // when rows are made (see `rows`).
        p.child(0, Fn::User);
        p
    }
}

impl CallPaths {
    fn empty() -> Self {
        CallPaths {
            nodes: vec![Node {
                parent: NONE,
                func: u8::MAX,
                self_ns: 0,
                first_child: NONE,
                next_sibling: NONE,
                last_child: NONE,
                last_func: u8::MAX,
            }],
            cur: 0,
            cur_func: u8::MAX,
            leaf_ns: vec![0; LEAF_ROW],
        }
    }
}

impl CallPaths {
    #[inline]
    fn child(&mut self, of: u32, f: Fn) -> u32 {
        let node = &self.nodes[of as usize];
        if node.last_func == f as u8 {
            return node.last_child;
        }
        let mut c = node.first_child;
        while c != NONE {
            if self.nodes[c as usize].func == f as u8 {
                let node = &mut self.nodes[of as usize];
                node.last_child = c;
                node.last_func = f as u8;
                return c;
            }
            c = self.nodes[c as usize].next_sibling;
        }
        let id = self.nodes.len() as u32;
        let first = self.nodes[of as usize].first_child;
        self.nodes.push(Node {
            parent: of,
            func: f as u8,
            self_ns: 0,
            first_child: NONE,
            next_sibling: first,
            last_child: NONE,
            last_func: u8::MAX,
        });
        let node = &mut self.nodes[of as usize];
        node.first_child = id;
        node.last_child = id;
        node.last_func = f as u8;
        self.leaf_ns.resize(self.nodes.len() * LEAF_ROW, 0);
        id
    }

    /// A call of `f` from the current function.
    pub fn enter(&mut self, f: Fn) {
        self.cur = self.child(self.cur, f);
        self.cur_func = f as u8;
    }

    pub fn leave(&mut self) {
        self.cur = self.nodes[self.cur as usize].parent;
        self.cur_func = self.nodes[self.cur as usize].func;
    }

    /// `ns` spent in `f`: the current function's own time if it is `f`,
    /// else a leaf call of `f` from it.
    #[inline]
    pub fn charge(&mut self, f: Fn, ns: u64) {
        let c = self.cur as usize;
        if self.cur_func == f as u8 {
            self.nodes[c].self_ns += ns;
        } else {
            self.leaf_ns[c * LEAF_ROW + f as usize] += ns;
        }
    }

    /// Leaves every open call (a context switch: each context's calls
    /// close before another runs).
    pub fn reset_to_root(&mut self) {
        self.cur = 0;
        self.cur_func = u8::MAX;
    }

    /// Depth-first rows, callees after their caller, heaviest first;
    /// `user_ns` is the user time charged outside the tree (a root row).
    pub fn rows(&self, user_ns: u64) -> Vec<ProfileRow> {
        self.with_leaves().tree_rows(user_ns)
    }

    /// A copy with every leaf charge made a node of its own (merged into
    /// an entered call of the same function, where there is one).
    fn with_leaves(&self) -> CallPaths {
        let mut p = self.clone();
        let n = self.nodes.len();
        for id in 0..n {
            for (f, &func) in FNS.iter().enumerate() {
                let ns = self.leaf_ns[id * LEAF_ROW + f];
                if ns > 0 {
                    let c = p.child(id as u32, func);
                    p.nodes[c as usize].self_ns += ns;
                }
            }
        }
        p
    }

    fn tree_rows(&self, user_ns: u64) -> Vec<ProfileRow> {
        let n = self.nodes.len();
        let mut total = vec![0u64; n];
        for i in (1..n).rev() {
            total[i] += self.nodes[i].self_ns;
            let p = self.nodes[i].parent as usize;
            let t = total[i];
            total[p] += t;
        }
        let mut rows = Vec::new();
        let user = self.child_of(0, Fn::User);
        if let Some(u) = user {
            total[u as usize] += user_ns;
            total[0] += user_ns;
        }
        let mut stack: Vec<(u32, String)> = self
            .children_sorted(0, &total)
            .into_iter()
            .rev()
            .map(|c| (c, String::new()))
            .collect();
        while let Some((id, prefix)) = stack.pop() {
            let node = self.nodes[id as usize];
            let name = FN_NAMES[node.func as usize];
            let path = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix};{name}")
            };
            let self_ns = node.self_ns + if Some(id) == user { user_ns } else { 0 };
            if total[id as usize] == 0 {
                continue;
            }
            rows.push(ProfileRow {
                path: path.clone(),
                self_ns,
                total_ns: total[id as usize],
            });
            for c in self.children_sorted(id, &total).into_iter().rev() {
                stack.push((c, path.clone()));
            }
        }
        rows
    }

    fn child_of(&self, of: u32, f: Fn) -> Option<u32> {
        let mut c = self.nodes[of as usize].first_child;
        while c != NONE {
            if self.nodes[c as usize].func == f as u8 {
                return Some(c);
            }
            c = self.nodes[c as usize].next_sibling;
        }
        None
    }

    fn children_sorted(&self, id: u32, total: &[u64]) -> Vec<u32> {
        let mut v = Vec::new();
        let mut c = self.nodes[id as usize].first_child;
        while c != NONE {
            v.push(c);
            c = self.nodes[c as usize].next_sibling;
        }
        v.sort_by_key(|&c| {
            (
                std::cmp::Reverse(total[c as usize]),
                self.nodes[c as usize].func,
            )
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_totals() {
        let mut p = CallPaths::default();
        p.charge(Fn::User, 5);
        p.enter(Fn::HandleMmFault);
        p.charge(Fn::HandleMmFault, 10);
        p.enter(Fn::DoSwapPage);
        p.charge(Fn::ZramRead, 7);
        p.charge(Fn::DoSwapPage, 3);
        p.leave();
        p.leave();
        let rows = p.rows(0);
        let get = |path: &str| {
            rows.iter()
                .find(|r| r.path == path)
                .unwrap_or_else(|| panic!("{path}"))
        };
        assert_eq!(get("handle_mm_fault").total_ns, 20);
        assert_eq!(get("handle_mm_fault").self_ns, 10);
        assert_eq!(get("handle_mm_fault;do_swap_page").total_ns, 10);
        assert_eq!(
            get("handle_mm_fault;do_swap_page;zram_read_page").self_ns,
            7
        );
        assert_eq!(get("user").self_ns, 5);
        assert_eq!(rows[0].path, "handle_mm_fault", "heaviest first");
    }
}
