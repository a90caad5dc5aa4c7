//! The journal: where a commit of words spread over many chats goes first.
//!
//! The `envelopes` table is clustered by `(chat_id, seq)`, so a commit holding
//! one word from each of N chats dirties N B-tree pages (N WAL frames of
//! 4 KiB). The `journal` table is ordered by insertion: the same commit fills
//! a page or two. A chat's journaled rows are moved into `envelopes` later, all
//! of them at once ("folded"), inside a later append's transaction, when they
//! fill a page or grow old, so each clustered page is written about once.
//!
//! [`Tail`] is the in-memory copy of every journaled, not yet folded row. It
//! is what readers consult instead of an index on the journal (which would cost
//! a page per chat again), and it is exact because one process owns the file.
//! Invariant: a chat's rows in the journal are a suffix of its log (everything
//! in `envelopes` for that chat has a lower seq), because a chat's rows go
//! directly to `envelopes` only together with its whole journaled tail.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::super::{AppendBatch, NewEnvelope, StoredEnvelope};

/// A chat's journaled bytes at which it is folded (about two clustered pages).
const FOLD_BYTES: usize = 8 * 1024;
/// A chat's new rows in one commit at which they skip the journal: they fill
/// their clustered page by themselves (a burst).
const DENSE_ROWS: usize = 8;
/// Journaled rows older than this are folded, so a chat that went quiet does
/// not hold the journal's head back.
const FOLD_AGE: Duration = Duration::from_millis(500);
/// Most chats folded for age in one commit, so no commit grows long.
const AGE_FOLDS_PER_COMMIT: usize = 32;
/// Chats whose last seq is remembered; past this the memory starts again
/// (such a chat's next append goes to `envelopes`, which is only slower).
const KNOWN_CHATS: usize = 65_536;
/// Journal rows deleted at once (the head is deleted in ranges, not per fold).
const DELETE_EVERY: i64 = 1024;

/// Where the rows of one append go.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// Rows for the journal, each with its journal id.
    pub journal: Vec<(i64, usize, usize)>,
    /// Rows of this append for `envelopes`: (batch index, row index).
    pub direct: Vec<(usize, usize)>,
    /// Chats whose journaled rows are folded into `envelopes` by this commit.
    pub folds: Vec<Uuid>,
    /// Journal rows with a lower id may be deleted by this commit.
    pub delete_below: Option<i64>,
    /// Chats written directly whose last seq this process does not know: the
    /// commit reads it back (a first write may fill a hole below the last).
    pub probe: Vec<Uuid>,
}

/// A chat's journaled rows.
#[derive(Debug)]
struct Pending {
    rows: Vec<NewEnvelope>,
    bytes: usize,
    first_id: i64,
    since: Instant,
}

/// Every journaled, not yet folded row, by chat.
#[derive(Debug)]
pub(super) struct Tail {
    chats: HashMap<Uuid, Pending>,
    /// `(first journal id, chat)` of each chat with journaled rows: the oldest
    /// bounds what of the journal may be deleted.
    firsts: BTreeSet<(i64, Uuid)>,
    next_id: i64,
    /// Journal rows below this id are deleted (or were never written).
    deleted_below: i64,
    /// The last seq of chats with nothing journaled, as far as this process
    /// wrote them (forgotten in bulk past [`KNOWN_CHATS`]).
    known_last: HashMap<Uuid, u64>,
}

impl Tail {
    /// An empty tail over an empty journal whose next id is `next_id`.
    pub fn new(next_id: i64) -> Self {
        Self {
            chats: HashMap::new(),
            firsts: BTreeSet::new(),
            next_id,
            deleted_below: next_id,
            known_last: HashMap::new(),
        }
    }

    /// Decides where each row of `batches` goes. A batch that does not extend
    /// what this process knows of its chat's log (a chat not seen since start,
    /// a seq taken or out of order) goes to `envelopes`, whose key refuses a
    /// taken seq; so does a chat's second batch in the same commit.
    pub fn plan(&self, batches: &[AppendBatch]) -> Plan {
        let mut batches_of: HashMap<Uuid, usize> = HashMap::new();
        for batch in batches {
            *batches_of.entry(batch.chat_id).or_default() += 1;
        }
        let mut plan = Plan::default();
        let mut next_id = self.next_id;
        let mut folding: HashSet<Uuid> = HashSet::new();
        let mut journaled: HashSet<Uuid> = HashSet::new();
        for (b, batch) in batches.iter().enumerate() {
            let chat = batch.chat_id;
            let pending = self.chats.get(&chat);
            let last = pending
                .and_then(|p| p.rows.last().map(|r| r.seq))
                .or_else(|| self.known_last.get(&chat).copied());
            let extends = last.is_some_and(|last| {
                batch
                    .envelopes
                    .iter()
                    .try_fold(last, |prev, e| (e.seq > prev).then_some(e.seq))
                    .is_some()
            });
            let bytes = pending.map_or(0, |p| p.bytes)
                + batch.envelopes.iter().map(|e| e.json.len()).sum::<usize>();
            if batches_of[&chat] == 1
                && extends
                && batch.envelopes.len() < DENSE_ROWS
                && bytes < FOLD_BYTES
            {
                for r in 0..batch.envelopes.len() {
                    plan.journal.push((next_id, b, r));
                    next_id += 1;
                }
                journaled.insert(chat);
            } else {
                plan.direct
                    .extend((0..batch.envelopes.len()).map(|r| (b, r)));
                if pending.is_some() && folding.insert(chat) {
                    plan.folds.push(chat);
                }
                if last.is_none() && !plan.probe.contains(&chat) {
                    plan.probe.push(chat);
                }
            }
        }
        // Fold the chats that have waited longest, oldest first.
        let now = Instant::now();
        for (_, chat) in &self.firsts {
            if plan.folds.len() >= AGE_FOLDS_PER_COMMIT
                || now.duration_since(self.chats[chat].since) < FOLD_AGE
            {
                break;
            }
            if !journaled.contains(chat) && folding.insert(*chat) {
                plan.folds.push(*chat);
            }
        }
        // What of the journal's head no chat needs any more.
        let oldest_kept = self
            .firsts
            .iter()
            .find(|(_, chat)| !folding.contains(chat))
            .map(|(id, _)| *id)
            .or_else(|| plan.journal.first().map(|(id, _, _)| *id));
        let below = oldest_kept.unwrap_or(next_id);
        if below - self.deleted_below >= DELETE_EVERY
            || (oldest_kept.is_none() && below > self.deleted_below)
        {
            plan.delete_below = Some(below);
        }
        plan
    }

    /// The rows a fold of `chat` writes into `envelopes`.
    pub fn pending_rows(&self, chat: &Uuid) -> &[NewEnvelope] {
        self.chats.get(chat).map_or(&[], |p| &p.rows)
    }

    /// Records a committed plan, with the last seqs its commit read back.
    pub fn commit(&mut self, plan: &Plan, batches: &[AppendBatch], probed: &[(Uuid, u64)]) {
        if self.known_last.len() > KNOWN_CHATS {
            self.known_last.clear();
        }
        for chat in &plan.folds {
            if let Some(p) = self.chats.remove(chat) {
                self.firsts.remove(&(p.first_id, *chat));
                if let Some(last) = p.rows.last() {
                    self.known_last.insert(*chat, last.seq);
                }
            }
        }
        // A chat written directly had its last seq known (then the log's
        // last is the higher of it and what was written) or read back.
        for &(b, r) in &plan.direct {
            let (chat, seq) = (batches[b].chat_id, batches[b].envelopes[r].seq);
            if let Some(known) = self.known_last.get_mut(&chat) {
                *known = (*known).max(seq);
            }
        }
        self.known_last.extend(probed.iter().copied());
        let now = Instant::now();
        for &(id, b, r) in &plan.journal {
            let chat = batches[b].chat_id;
            let row = batches[b].envelopes[r].clone();
            let p = self.chats.entry(chat).or_insert_with(|| Pending {
                rows: Vec::new(),
                bytes: 0,
                first_id: id,
                since: now,
            });
            if p.rows.is_empty() {
                self.firsts.insert((id, chat));
                self.known_last.remove(&chat);
            }
            p.bytes += row.json.len();
            p.rows.push(row);
            self.next_id = self.next_id.max(id + 1);
        }
        if let Some(below) = plan.delete_below {
            self.deleted_below = below;
        }
    }

    /// The chat's journaled rows after `after` that match `keep`, and the
    /// lowest journaled seq (the table holds everything of the chat below it).
    pub fn read(
        &self,
        chat: &Uuid,
        after: u64,
        keep: impl Fn(&NewEnvelope) -> bool,
    ) -> (Vec<StoredEnvelope>, Option<u64>) {
        let Some(p) = self.chats.get(chat) else {
            return (Vec::new(), None);
        };
        let from = p.rows.partition_point(|r| r.seq <= after);
        let rows = p.rows[from..]
            .iter()
            .filter(|r| keep(r))
            .map(stored)
            .collect();
        (rows, p.rows.first().map(|r| r.seq))
    }
}

fn stored(e: &NewEnvelope) -> StoredEnvelope {
    StoredEnvelope {
        seq: e.seq,
        kind: e.kind.to_owned(),
        json: e.json.to_string(),
    }
}
