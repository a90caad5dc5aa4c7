//! A chat's conversation as a tree, derived from its log.
//!
//! The log stays one gap-free, append-only line of envelopes. One envelope
//! type, `chat.branch {at}`, moves the chat's *pointer* (where the
//! conversation goes on) to an earlier envelope `at` (or to 0, before the
//! first); the next regular envelope is a child of the pointer. Nothing
//! logged is rewritten: an edit is a branch to the edited message's parent
//! followed by the new text, a regenerate a branch to the question followed
//! by the new run, a switch a branch to where the user last was in another
//! version. For a regular envelope `s`:
//!
//! ```text
//! parent(s) = 0          if s == 1
//!           = at(s - 1)  if s - 1 is a chat.branch (of several in a row, the last wins)
//!           = s - 1      otherwise
//! pointer   = the last envelope if it is regular, else the last branch's at
//! path(p)   = path(parent(p)) ++ [p], path(0) = []
//! ```
//!
//! A *segment* is a maximal run of regular envelopes between branches; the
//! segment after a branch hangs from its `at`. Everything here is computed
//! from the branches alone (their seq and `at`) and the log's last seq: a
//! chat that never branched has none, and its path is `1..=last`.

use std::ops::RangeInclusive;

/// One `chat.branch` of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch {
    pub seq: u64,
    /// Where it moved the pointer: a regular envelope below `seq`, or 0.
    pub at: u64,
}

/// The tree of a chat's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    /// By seq.
    branches: Vec<Branch>,
    /// The log's last seq (0: empty).
    last: u64,
    /// How many of the branches are switches (the rest made versions).
    switches: usize,
}

/// A point of the tree where the conversation has more than one version.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Point {
    /// The envelope the versions follow (0: the chat's start).
    pub at: u64,
    /// Each version's first envelope, oldest first.
    pub versions: Vec<u64>,
    /// The version on the active path, if one is.
    pub active: Option<u64>,
}

impl Tree {
    /// The tree of a log whose last seq is `last`, with these branches (in
    /// any order). Branches must point below themselves at a regular
    /// envelope or 0, as the actor checks before it logs one.
    pub fn new(mut branches: Vec<Branch>, last: u64) -> Self {
        branches.sort_unstable_by_key(|b| b.seq);
        debug_assert!(branches.iter().all(|b| b.at < b.seq && b.seq <= last));
        Self {
            branches,
            last,
            switches: 0,
        }
    }

    /// The tree of a log whose last seq is `last`, read from its `chat.branch`
    /// envelopes among `rows` (a transcript holds them all). A branch that
    /// cannot be read is left out, as the model's history leaves out what it
    /// cannot read.
    pub fn of_log(rows: &[crate::store::StoredEnvelope], last: u64) -> Self {
        let mut switches = 0;
        let branches = rows
            .iter()
            .filter(|e| e.kind == "chat.branch" && e.seq <= last)
            .filter_map(|e| {
                let v: serde_json::Value = serde_json::from_str(&e.json).ok()?;
                let at = v["at"].as_u64().filter(|&at| at < e.seq);
                if at.is_none() {
                    tracing::error!(seq = e.seq, "unreadable chat.branch left out of the tree");
                }
                let at = at?;
                switches += usize::from(v["reason"] == "switch");
                Some(Branch { seq: e.seq, at })
            })
            .collect();
        Self {
            switches,
            ..Self::new(branches, last)
        }
    }

    /// Whether `seq` lies on any of `ranges` (a path).
    pub fn within(ranges: &[RangeInclusive<u64>], seq: u64) -> bool {
        let i = ranges.partition_point(|r| *r.end() < seq);
        ranges.get(i).is_some_and(|r| r.contains(&seq))
    }

    /// The stretches of the log to read for `path` past `after`: its
    /// ranges, neighbours merged when at most `gap` envelopes of other
    /// branches lie between them (one read with a few rows to skip costs
    /// less than a read per range).
    pub fn read_spans(
        path: &[RangeInclusive<u64>],
        after: u64,
        gap: u64,
    ) -> Vec<RangeInclusive<u64>> {
        let mut out: Vec<RangeInclusive<u64>> = Vec::new();
        for r in path.iter().filter(|r| *r.end() > after) {
            let start = (*r.start()).max(after + 1);
            match out.last_mut() {
                Some(last) if start - last.end() - 1 <= gap => *last = *last.start()..=*r.end(),
                _ => out.push(start..=*r.end()),
            }
        }
        out
    }

    /// The log's last seq.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// How many versions the log's branches made (edits, regenerates).
    pub fn versions_made(&self) -> usize {
        self.branches.len() - self.switches
    }

    /// How many times the user switched versions.
    pub fn switch_count(&self) -> usize {
        self.switches
    }

    /// Takes a branch just logged at the log's end.
    pub fn push_branch(&mut self, b: Branch) {
        debug_assert!(b.seq > self.last && b.at < b.seq);
        self.branches.push(b);
        self.last = b.seq;
    }

    /// Takes regular envelopes just logged, up to `last`.
    pub fn grow_to(&mut self, last: u64) {
        self.last = self.last.max(last);
    }

    fn branch(&self, seq: u64) -> Option<&Branch> {
        self.branches
            .binary_search_by_key(&seq, |b| b.seq)
            .ok()
            .map(|i| &self.branches[i])
    }

    /// Whether `seq` is a `chat.branch`.
    pub fn is_branch(&self, seq: u64) -> bool {
        self.branch(seq).is_some()
    }

    /// Whether `seq` is a regular envelope of the log.
    pub fn is_regular(&self, seq: u64) -> bool {
        (1..=self.last).contains(&seq) && !self.is_branch(seq)
    }

    /// The envelope a regular envelope follows in its conversation.
    pub fn parent(&self, seq: u64) -> u64 {
        if seq <= 1 {
            return 0;
        }
        self.branch(seq - 1).map_or(seq - 1, |b| b.at)
    }

    /// Where the conversation goes on: the end of the active path.
    pub fn pointer(&self) -> u64 {
        match self.branches.last() {
            Some(b) if b.seq == self.last => b.at,
            _ => self.last,
        }
    }

    /// The regular envelopes from the start to `leaf` (a regular envelope
    /// or 0), as ascending ranges of seqs.
    pub fn path(&self, leaf: u64) -> Vec<RangeInclusive<u64>> {
        let mut out = Vec::new();
        let mut cur = leaf;
        while cur > 0 {
            let below = self.branches.partition_point(|b| b.seq < cur);
            match below.checked_sub(1).map(|i| self.branches[i]) {
                None => {
                    out.push(1..=cur);
                    break;
                }
                Some(b) => {
                    out.push(b.seq + 1..=cur);
                    cur = b.at;
                }
            }
        }
        out.reverse();
        out
    }

    /// The active path ([`Tree::path`] of the pointer).
    pub fn active(&self) -> Vec<RangeInclusive<u64>> {
        self.path(self.pointer())
    }

    /// Whether `seq` is on the path to `leaf`.
    pub fn on_path(&self, leaf: u64, seq: u64) -> bool {
        seq == 0 || Self::within(&self.path(leaf), seq)
    }

    /// Every segment: its first and last seq, and the envelope it hangs from.
    fn segments(&self) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::with_capacity(self.branches.len() + 1);
        let mut start = 1;
        let mut from = 0;
        for b in &self.branches {
            if b.seq > start {
                out.push((start, b.seq - 1, from));
            }
            start = b.seq + 1;
            from = b.at;
        }
        if self.last >= start {
            out.push((start, self.last, from));
        }
        out
    }

    /// The envelopes that follow `seq` directly, oldest first: its versions
    /// when there are two or more.
    pub fn children(&self, seq: u64) -> Vec<u64> {
        let mut out = Vec::new();
        for (start, end, from) in self.segments() {
            if from == seq {
                out.push(start);
            }
            if start <= seq && seq < end {
                out.push(seq + 1);
            }
        }
        out.sort_unstable();
        out
    }

    /// Every point with two versions or more, by seq.
    pub fn points(&self) -> Vec<Point> {
        let segments = self.segments();
        let mut by_point: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
        for &(start, _, from) in &segments {
            by_point.entry(from).or_default().push(start);
        }
        // A point inside a segment has its next envelope as a version too
        // (segments are by seq: the one that may hold `at` is the last that
        // starts at or below it).
        for (&at, versions) in &mut by_point {
            let i = segments.partition_point(|(s, _, _)| *s <= at);
            if let Some(&(_, end, _)) = i.checked_sub(1).map(|i| &segments[i])
                && at < end
            {
                versions.push(at + 1);
            }
            versions.sort_unstable();
        }
        let active = self.active();
        by_point
            .into_iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(at, versions)| Point {
                at,
                active: versions
                    .iter()
                    .copied()
                    .find(|v| active.iter().any(|r| r.contains(v))),
                versions,
            })
            .collect()
    }

    /// Where the pointer last was among `top` and what follows it: a switch
    /// to the version that starts at `top` goes back there, nested choices
    /// included. `top` must be regular.
    pub fn last_visit(&self, top: u64) -> u64 {
        // The pointer stood at each segment's end (when it was logged) and
        // at each branch's `at` (when the branch was): the latest of those
        // under `top` is where the user left that version.
        let mut stops: Vec<(u64, u64)> = self
            .segments()
            .into_iter()
            .map(|(_, end, _)| (end, end))
            .chain(self.branches.iter().map(|b| (b.seq, b.at)))
            .collect();
        stops.sort_unstable_by_key(|s| std::cmp::Reverse(s.0));
        stops
            .into_iter()
            .map(|(_, at)| at)
            .find(|&at| at >= top && self.on_path(at, top))
            .unwrap_or(top)
    }

    /// The first envelope after `at` on the path to `leaf`, if `at` is on
    /// that path and `leaf` goes past it.
    pub fn next_on_path(&self, leaf: u64, at: u64) -> Option<u64> {
        let path = self.path(leaf);
        if at == 0 {
            return path.first().map(|r| *r.start());
        }
        let i = path.iter().position(|r| r.contains(&at))?;
        if at < *path[i].end() {
            Some(at + 1)
        } else {
            path.get(i + 1).map(|r| *r.start())
        }
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
