//! The journal: where a commit of words spread over many chats goes first.
//!
//! The `envelopes` table is clustered by `(chat_id, seq)`, so a commit holding
//! one word from each of N chats dirties N B-tree pages (N WAL frames of
//! 4 KiB). The `journal` table is ordered by insertion: the same commit fills
//! a page or two. A chat's journaled rows are moved into `envelopes` later, all
//! of them at once ("folded"), inside a later append's transaction: when the
//! chat goes quiet, or its rows grow large or old. The longer they wait, the
//! fewer clustered pages a row costs. What a commit folds for a chat other
//! than its own words (quiet, old) is bounded in rows, oldest rows first, a
//! chat's tail in several steps if it is long: after a burst, a hundred
//! chats' tails of ~150 rows each were folded one whole chat per commit while
//! the next streams' words waited in those commits (`bench/notes.md`).
//!
//! [`Tail`] is the in-memory copy of every journaled, not yet folded row. It
//! is what readers consult instead of an index on the journal (which would cost
//! a page per chat again), and it is exact because one process owns the file.
//! Invariant: a chat's rows in the journal are a suffix of its log (everything
//! in `envelopes` for that chat has a lower seq), because a chat's rows go
//! directly to `envelopes` only together with its whole journaled tail.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use uuid::Uuid;

use super::super::{AppendBatch, NewEnvelope, StoredEnvelope};

/// A chat's journaled bytes at which it is folded with its next append
/// (jittered per chat between ½ and 1½ of this, so chats that stream alike do
/// not all fold in the same commit). Folding writes a chat's rows into their
/// clustered pages, ~8 WAL frames for 25 rows but ~14 for 100: the longer a
/// chat's rows wait, the less a row costs to fold.
const FOLD_BYTES: usize = 64 * 1024;
/// A chat's new rows in one commit at which they skip the journal: they fill
/// their clustered page by themselves (a burst).
const DENSE_ROWS: usize = 8;
/// A chat with nothing journaled for this long has gone quiet (its run ended
/// or waits): it is folded, off the streaming words' path.
const QUIET: Duration = Duration::from_millis(500);
/// A chat's rows older than this (jittered like [`FOLD_BYTES`]) are folded
/// even while it streams, so the journal's head moves on.
const FOLD_AGE: Duration = Duration::from_secs(10);
/// Rows a commit folds for age or quiet (a chat's oldest rows first; a long
/// tail takes several commits): folds are spread over commits so that none
/// grows long (their rows are written on the commit path).
const AGE_FOLD_ROWS: usize = 64;
/// A commit of live words folds this many rows for age or quiet per row it
/// writes (at most [`AGE_FOLD_ROWS`], at least [`LIVE_FOLD_ROWS`]); when the
/// folds fall behind (the journal's oldest row is 4 × [`FOLD_AGE`] old, or
/// the tail holds [`TAIL_BYTES`]), this many per row it journals, past
/// [`AGE_FOLD_ROWS`].
const AGE_FOLD_ROWS_PER_JOURNALED: usize = 2;
/// Rows a commit of live words may always fold for age or quiet.
const LIVE_FOLD_ROWS: usize = 8;
/// The tail's bytes (all chats) past which folds catch up.
const TAIL_BYTES: usize = 64 * 1024 * 1024;
/// Oldest chats looked at for a fold in one commit.
const AGE_FOLD_SCAN: usize = 256;
/// Chats whose last seq is remembered; past this the memory starts again
/// (such a chat's next append goes to `envelopes`, which is only slower).
const KNOWN_CHATS: usize = 65_536;
/// Journal rows deleted at once (the head is deleted in ranges, not per fold).
const DELETE_EVERY: i64 = 256;
/// Most journal rows one commit deletes: after a wave of folds the head may
/// be free up to 100,000s of rows back, and deleting them at once held a
/// commit for a quarter of a second; 2,048 at a time still took 3–11 ms of
/// statements in the commits of the streams after a burst (`bench/notes.md`).
const DELETE_MOST: i64 = 512;
/// Most journal rows a commit of live words deletes.
const LIVE_DELETE_MOST: i64 = DELETE_EVERY;

/// What one commit brings to a chat, for [`Tail::plan`].
struct Journaling {
    /// The chat's last seq as far as known, then its rows' in this commit.
    last: Option<u64>,
    /// Every row of this commit follows the one before (and the known last).
    extends: bool,
    rows: usize,
    /// Journaled bytes with this commit's rows.
    bytes: usize,
    /// The chat has rows journaled.
    pending: bool,
}

/// A chat's oldest journaled rows that a commit folds into `envelopes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fold {
    pub chat: Uuid,
    /// How many (all of them when the chat's own rows go to the table).
    pub rows: usize,
}

/// Where the rows of one append go.
#[derive(Debug, Default)]
pub(super) struct Plan {
    /// Rows for the journal, each with its journal id.
    pub journal: Vec<(i64, usize, usize)>,
    /// Rows of this append for `envelopes`: (batch index, row index).
    pub direct: Vec<(usize, usize)>,
    /// Chats whose oldest journaled rows this commit folds into `envelopes`.
    pub folds: Vec<Fold>,
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
    /// Each of `rows`' journal id.
    ids: Vec<i64>,
    /// The last of `rows`' seq, kept beside them: every plan asks for it, and
    /// reaching into `rows` was a cache miss per chat per commit.
    last_seq: u64,
    bytes: usize,
    /// The journal id of `rows[0]`.
    first_id: i64,
    /// When the first and the last of `rows` were journaled.
    since: Instant,
    last: Instant,
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
    /// The JSON bytes of every chat's `rows`.
    bytes: usize,
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
            bytes: 0,
            known_last: HashMap::new(),
        }
    }

    /// Decides where each row of `batches` goes. A batch that does not extend
    /// what this process knows of its chat's log (a chat not seen since start,
    /// a seq taken or out of order) goes to `envelopes`, whose key refuses a
    /// taken seq; so does a chat's second batch in the same commit.
    pub fn plan(&self, batches: &[AppendBatch], now: Instant) -> Plan {
        // A chat's batches in this commit are journaled all together or none:
        // when, one after the other, they extend its log and stay under its
        // fold size, and either the chat has rows journaled already or they
        // are few (a dense first write fills its clustered page by itself).
        // A writer that fell behind then does not turn the words each chat
        // queued meanwhile into a fold of its whole tail in the next commit.
        let mut chats: HashMap<Uuid, Journaling> = HashMap::with_capacity(batches.len());
        for batch in batches {
            let chat = batch.chat_id;
            let j = chats.entry(chat).or_insert_with(|| {
                let pending = self.chats.get(&chat);
                Journaling {
                    last: self.last_known(&chat),
                    extends: true,
                    rows: 0,
                    bytes: pending.map_or(0, |p| p.bytes),
                    pending: pending.is_some(),
                }
            });
            for e in &batch.envelopes {
                j.extends &= j.last.is_some_and(|last| e.seq > last);
                j.last = Some(e.seq);
                j.rows += 1;
                j.bytes += e.json.len();
            }
        }
        let mut plan = Plan::default();
        let mut next_id = self.next_id;
        // Rows folded by chat.
        let mut folding: HashMap<Uuid, usize> = HashMap::new();
        let mut journaled: HashSet<Uuid> = HashSet::with_capacity(batches.len());
        for (b, batch) in batches.iter().enumerate() {
            let chat = batch.chat_id;
            let j = &chats[&chat];
            if j.extends && j.bytes < fold_bytes(&chat) && (j.pending || j.rows < DENSE_ROWS) {
                for r in 0..batch.envelopes.len() {
                    plan.journal.push((next_id, b, r));
                    next_id += 1;
                }
                journaled.insert(chat);
            } else {
                plan.direct
                    .extend((0..batch.envelopes.len()).map(|r| (b, r)));
                if let Some(p) = self.chats.get(&chat)
                    && folding.insert(chat, p.rows.len()).is_none()
                {
                    plan.folds.push(Fold {
                        chat,
                        rows: p.rows.len(),
                    });
                }
                if self.last_known(&chat).is_none() && !plan.probe.contains(&chat) {
                    plan.probe.push(chat);
                }
            }
        }
        // Fold the chats that are due (quiet, or old), oldest first, within
        // the budget: the last one only its oldest rows if it holds more.
        let behind = self.bytes > TAIL_BYTES
            || self
                .firsts
                .first()
                .is_some_and(|(_, chat)| now.duration_since(self.chats[chat].since) > 4 * FOLD_AGE);
        // A commit of live words carries folds in proportion to its own
        // rows (at least a few): twice what streams journal keeps up with
        // them, and what a burst left behind is spread over the next streams'
        // commits instead of filling each of them (and the WAL, and so the
        // checkpoints whose fsync those commits wait behind). An idle
        // writer's tidy takes the whole budget.
        let live = plan.journal.len() + plan.direct.len();
        let mut budget = if behind {
            AGE_FOLD_ROWS.max(plan.journal.len() * AGE_FOLD_ROWS_PER_JOURNALED)
        } else if batches.is_empty() {
            AGE_FOLD_ROWS
        } else {
            AGE_FOLD_ROWS.min(LIVE_FOLD_ROWS.max(live * AGE_FOLD_ROWS_PER_JOURNALED))
        };
        for (_, chat) in self.firsts.iter().take(AGE_FOLD_SCAN) {
            if budget == 0 {
                break;
            }
            let pending = &self.chats[chat];
            let due = behind
                || now.duration_since(pending.last) >= QUIET
                || now.duration_since(pending.since) >= fold_age(chat);
            if due && !journaled.contains(chat) && !folding.contains_key(chat) {
                let rows = pending.rows.len().min(budget);
                folding.insert(*chat, rows);
                plan.folds.push(Fold { chat: *chat, rows });
                budget -= rows;
            }
        }
        // What of the journal's head no chat needs any more: the first id of
        // the oldest chat left unfolded, or a partly folded chat's first row
        // left, whichever is lower.
        let mut oldest_kept: Option<i64> = None;
        for (id, chat) in &self.firsts {
            let p = &self.chats[chat];
            let kept = match folding.get(chat) {
                None => Some(*id),
                Some(&rows) => p.ids.get(rows).copied(),
            };
            oldest_kept = match (oldest_kept, kept) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if !folding.contains_key(chat) {
                break;
            }
        }
        let oldest_kept = oldest_kept.or_else(|| plan.journal.first().map(|(id, _, _)| *id));
        let below = oldest_kept.unwrap_or(next_id).min(
            self.deleted_below
                + if batches.is_empty() {
                    DELETE_MOST
                } else {
                    LIVE_DELETE_MOST
                },
        );
        if below - self.deleted_below >= DELETE_EVERY
            || (oldest_kept.is_none() && below > self.deleted_below)
        {
            plan.delete_below = Some(below);
        }
        plan
    }

    /// The chat's last seq as far as this process knows.
    fn last_known(&self, chat: &Uuid) -> Option<u64> {
        self.chats
            .get(chat)
            .map(|p| p.last_seq)
            .or_else(|| self.known_last.get(chat).copied())
    }

    /// Whether no row waits to be folded or deleted.
    pub fn is_empty(&self) -> bool {
        self.chats.is_empty() && self.deleted_below >= self.next_id
    }

    /// The rows `plan`'s folds write into `envelopes`, with their chat's id
    /// as text.
    pub fn folded_rows(&self, plan: &Plan) -> Vec<(String, NewEnvelope)> {
        let mut rows = Vec::new();
        for fold in &plan.folds {
            let id = fold.chat.to_string();
            let pending = self.chats.get(&fold.chat).map_or(&[][..], |p| &p.rows);
            let pending = &pending[..fold.rows.min(pending.len())];
            rows.extend(pending.iter().map(|e| (id.clone(), e.clone())));
        }
        rows
    }

    /// Records a committed plan, with the last seqs its commit read back;
    /// `now` is when its journaled rows count as written.
    pub fn commit(
        &mut self,
        plan: &Plan,
        batches: &[AppendBatch],
        probed: &[(Uuid, u64)],
        now: Instant,
    ) {
        if self.known_last.len() > KNOWN_CHATS {
            self.known_last.clear();
        }
        for &Fold { chat, rows } in &plan.folds {
            let Some(p) = self.chats.get_mut(&chat) else {
                continue;
            };
            self.firsts.remove(&(p.first_id, chat));
            if rows < p.rows.len() {
                // Its oldest rows only: the rest stay a suffix of its log.
                let gone: usize = p.rows.drain(..rows).map(|r| r.json.len()).sum();
                p.ids.drain(..rows);
                p.bytes -= gone;
                self.bytes -= gone;
                p.first_id = p.ids[0];
                self.firsts.insert((p.first_id, chat));
            } else if let Some(p) = self.chats.remove(&chat) {
                self.bytes -= p.bytes;
                self.known_last.insert(chat, p.last_seq);
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
        for &(id, b, r) in &plan.journal {
            let chat = batches[b].chat_id;
            let row = batches[b].envelopes[r].clone();
            let p = self.chats.entry(chat).or_insert_with(|| Pending {
                rows: Vec::new(),
                ids: Vec::new(),
                last_seq: 0,
                bytes: 0,
                first_id: id,
                since: now,
                last: now,
            });
            if p.rows.is_empty() {
                self.firsts.insert((id, chat));
                self.known_last.remove(&chat);
            }
            p.bytes += row.json.len();
            p.last = now;
            p.last_seq = row.seq;
            self.bytes += row.json.len();
            p.rows.push(row);
            p.ids.push(id);
            self.next_id = self.next_id.max(id + 1);
        }
        if let Some(below) = plan.delete_below {
            self.deleted_below = below;
        }
    }

    /// Forgets everything of `chat` (its rows were deleted with it).
    pub fn forget(&mut self, chat: &Uuid) {
        if let Some(p) = self.chats.remove(chat) {
            self.firsts.remove(&(p.first_id, *chat));
            self.bytes -= p.bytes;
        }
        self.known_last.remove(chat);
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

/// `chat`'s fold limits: [`FOLD_BYTES`] and [`FOLD_AGE`] jittered by its id
/// between ½ and 1½ of them, so chats that started together and stream alike
/// fall due in different commits.
fn fold_bytes(chat: &Uuid) -> usize {
    FOLD_BYTES / 2 + FOLD_BYTES * per_mille(chat) as usize / 1000
}

fn fold_age(chat: &Uuid) -> Duration {
    FOLD_AGE / 2 + FOLD_AGE * per_mille(chat) / 1000
}

fn per_mille(chat: &Uuid) -> u32 {
    u32::try_from(chat.as_u128() % 1000).unwrap_or(0)
}

fn stored(e: &NewEnvelope) -> StoredEnvelope {
    StoredEnvelope {
        seq: e.seq,
        kind: e.kind.to_owned(),
        json: e.json.to_string(),
    }
}

#[cfg(test)]
mod tests;
