//! The durable session log.
//!
//! Owns the [`Store`] trait (chats and their append-only envelope logs), its
//! SQLite and PostgreSQL implementations, and the group-committing
//! [`LogWriter`]. Only this module speaks SQL or knows sqlx; each backend's SQL
//! stays in its own file.
//!
//! Depends on nothing else in the crate: envelopes arrive already serialized.

mod cluster;
mod error;
pub mod files;
mod keys;
mod migrations;
mod nats;
mod operations;
pub mod outbox;
mod outcomes;
mod pools;
mod postgres;
mod rebuild;
mod records;
mod schedules;
mod seal;
pub mod search;
mod sharded;
mod sqlite;
mod usage;
mod writer;

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

pub use cluster::{Lease, NodeMessage, PgCluster};
pub use error::StoreError;
pub use keys::{ServiceKeyRecord, ServiceKeys};
pub use nats::{NatsBus, Watch};
pub use operations::{LoggedError, Operations, OperatorAct};
pub use outbox::{Outbox, OutboxRow, Wait};
pub use outcomes::{Reindexed, Tidy};
pub use postgres::PgStore;
pub use postgres::notice::LogNotice;
pub use records::{ChatDatabaseRecord, ConnectionRecord};
pub use schedules::{ScheduleRecord, Schedules};
pub use seal::SealError;
pub use sharded::{ShardedStore, SpreadOutbox, place};
pub use sqlite::SqliteStore;
pub use usage::{Spent, Usage, UsageDay};
pub use writer::{LogWriter, OnCommit};

/// Now, in Unix milliseconds (the stores' `created_at`, `updated_at`, `ts`).
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Whether a chat has a run in flight. Kept in the store so that, after a
/// crash, start-up can find the runs that were cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatState {
    Idle,
    Running,
}

impl ChatState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Running => "running",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        if s == "running" {
            Self::Running
        } else {
            Self::Idle
        }
    }
}

/// A chat's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRecord {
    pub id: Uuid,
    pub owner: String,
    pub agent: String,
    pub state: ChatState,
    /// The `context` object given at `chat.start`, as JSON text.
    pub context: Option<String>,
    /// The model the chat switched to; `None`: the agent's own.
    pub model: Option<String>,
    /// Archived chats keep their log but take no new turns.
    pub archived: bool,
    /// The state of a template conversation (seed 004 §4); `None` for others.
    pub conversation_state: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
    /// What the list of one's chats shows of it.
    pub listing: Listing,
}

/// A chat as the list shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    /// The last `chat.title`'s title.
    pub title: Option<String>,
    /// Pinned chats come first.
    pub pinned: bool,
    /// The last `chat.text`'s first words.
    pub preview: Option<String>,
    /// When the last `chat.text` was logged (the chat's creation before
    /// any), Unix milliseconds.
    pub active_at: i64,
    /// The agents' texts since the owner last read the chat.
    pub unread: u64,
    /// Where the owner last read it (their last text, or a mark).
    pub read_seq: u64,
}

/// One chat a search found.
#[derive(Debug, Clone)]
pub struct SearchHit {
    pub chat: ChatRecord,
    /// The envelope that matched best (the chat's `chat.title` for a title hit).
    pub seq: u64,
    /// The chat's current title matched.
    pub title: bool,
    /// The store's relevance: higher is better.
    pub score: f64,
    /// The matched text, whole (cut to [`search::INDEXED_CHARS`]).
    pub body: String,
}

/// Orders hits best first (a title hit before any other, then by score,
/// then the latest activity) and keeps each chat's best.
pub fn rank(mut hits: Vec<SearchHit>, limit: usize) -> Vec<SearchHit> {
    hits.sort_by(|a, b| {
        b.title
            .cmp(&a.title)
            .then(b.score.total_cmp(&a.score))
            .then(b.chat.listing.active_at.cmp(&a.chat.listing.active_at))
    });
    let mut seen = std::collections::HashSet::new();
    hits.retain(|h| seen.insert(h.chat.id));
    hits.truncate(limit);
    hits
}

/// Where a page of the list stops: the last chat's place in its order
/// (pinned first, then the latest activity, then the id, all descending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListCursor {
    pub pinned: bool,
    pub active_at: i64,
    pub id: Uuid,
}

impl ListCursor {
    /// The cursor after `chat`.
    pub fn after(chat: &ChatRecord) -> Self {
        Self {
            pinned: chat.listing.pinned,
            active_at: chat.listing.active_at,
            id: chat.id,
        }
    }
}

/// A change to a chat's place in the list; `None` leaves a field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChatFlags {
    pub pinned: Option<bool>,
    pub archived: Option<bool>,
    /// Read up to a seq, with the agents' texts after it still unread.
    pub read: Option<(u64, u64)>,
}

/// One envelope to append.
#[derive(Debug, Clone)]
pub struct NewEnvelope {
    pub seq: u64,
    /// The wire `type`.
    pub kind: &'static str,
    /// Unix milliseconds (for queries; the JSON has the RFC 3339 `ts`).
    pub ts_ms: i64,
    /// The `corr` of the envelope, indexed for lookups by tool call.
    pub corr: Option<String>,
    /// The `client_msg_id` of the user message that produced it.
    pub client_msg_id: Option<String>,
    /// The whole envelope as JSON.
    pub json: Arc<str>,
}

/// The envelopes of one chat to append in one transaction, with the chat's new
/// state if it changes.
#[derive(Debug, Clone)]
pub struct AppendBatch {
    pub chat_id: Uuid,
    pub envelopes: Vec<NewEnvelope>,
    pub state: Option<ChatState>,
    /// A template conversation's new state, set with its `chat.state`.
    pub conversation_state: Option<&'static str>,
    /// On several nodes: the lease the appending node holds. The append is
    /// refused ([`StoreError::Fenced`]) unless the chat's lease is still
    /// exactly this one. `None` on SQLite (one process, one writer).
    pub fence: Option<Fence>,
}

/// A chat lease as granted to a node: the node and the lease's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub node: i64,
    pub epoch: i64,
}

/// A stored envelope, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEnvelope {
    pub seq: u64,
    pub kind: String,
    pub json: String,
}

/// The session log: chats and their envelopes.
///
/// Implementations must make [`Store::append`] atomic across all the batches
/// it is given for one database ([`Store::parts`]): every envelope is
/// committed, or none is.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Checks that the store answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// The service keys kept in this store.
    fn service_keys(&self) -> ServiceKeys;

    /// The schedules kept in this store.
    fn schedules(&self) -> Schedules;

    /// Webhooks' outbox in this store.
    fn outbox(&self) -> Outbox;

    /// From now on, appends write webhooks' events to the outbox.
    fn enable_outbox(&self);

    /// The usage ledger in this store.
    fn usage(&self) -> Usage;

    /// What the operator's page reads and records.
    fn operations(&self) -> Operations;

    /// Creates the chat unless a chat with that id exists.
    ///
    /// # Returns
    /// The chat as stored: the new one, or the existing one (which may belong to
    /// someone else; the caller checks).
    async fn create_chat(&self, chat: &ChatRecord) -> Result<ChatRecord, StoreError>;

    /// Pins or unpins, archives or restores the chat.
    async fn set_chat_flags(&self, id: Uuid, flags: ChatFlags) -> Result<(), StoreError>;

    /// Up to `limit` chats of `owner` that are `archived` or not, pinned
    /// first, then by latest activity, strictly after `after` if given.
    async fn list_chats(
        &self,
        owner: &str,
        archived: bool,
        after: Option<ListCursor>,
        limit: u32,
    ) -> Result<Vec<ChatRecord>, StoreError>;

    /// `owner`'s chats (`archived` or not) whose current title or texts
    /// hold every term, each chat's best hit, best first
    /// ([`rank`]), at most `limit`. The stores stop looking after
    /// about `budget` and rank what they found.
    async fn search_chats(
        &self,
        owner: &str,
        terms: &search::Terms,
        archived: bool,
        limit: u32,
        budget: std::time::Duration,
    ) -> Result<Vec<SearchHit>, StoreError>;

    /// Deletes the chat and all of it: its log, its search rows, its
    /// template answers, its database link and its row (a lease is left to
    /// its holder). The chat's actor calls it, with nothing of the chat in
    /// flight. `false`: there was no such chat.
    async fn purge_chat(&self, id: Uuid) -> Result<bool, StoreError>;

    /// Rebuilds the search index and every chat's title, preview and last
    /// activity from the log, as the appends would have written them.
    async fn reindex(&self) -> Result<Reindexed, StoreError>;

    /// Where file contents live.
    fn blobs(&self) -> &dyn files::Blobs;

    /// Records a file in its chat, with what `put.upload` staged as its
    /// blob (dropped if the owner has that content already), in one
    /// transaction, unless the chat is another user's (a chat not started
    /// yet takes files, for its first message) or the owner's contents
    /// would be over `put.max_owner_bytes` (checked inside the transaction,
    /// one upload of the owner's at a time: concurrent uploads cannot go
    /// over it together); then nothing changed (the staged chunks stay,
    /// for the caller to drop). A purge running meanwhile never leaves the
    /// file without its content.
    async fn put_file(
        &self,
        file: &files::FileRecord,
        put: files::Put,
    ) -> Result<files::Kept, StoreError>;

    /// The file with that id.
    async fn file(&self, id: Uuid) -> Result<Option<files::FileRecord>, StoreError>;

    /// Drops the chunks of uploads staged more than `older_than` ago and
    /// never recorded (their node died mid-upload); how many. SQLite's are
    /// dropped when the store opens (one process owns the file): nothing here.
    async fn sweep_staged(&self, _older_than: std::time::Duration) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Sets (or clears) the chat's model.
    async fn set_chat_model(&self, id: Uuid, model: Option<&str>) -> Result<(), StoreError>;

    /// The chat with that id.
    async fn chat(&self, id: Uuid) -> Result<Option<ChatRecord>, StoreError>;

    /// Appends every batch in one transaction (the group commit).
    async fn append(&self, batches: &[AppendBatch]) -> Result<(), StoreError>;

    /// How many group commits the writer may have in flight at once. Each
    /// chat has at most one batch in flight (its actor waits for each
    /// append), so concurrent commits never hold the same chat and its seq
    /// order holds. One for a store with a single write connection.
    fn commits_in_flight(&self) -> usize {
        1
    }

    /// The stores of the databases it spreads chats over, if several
    /// (each gets a writer of its own); none for a single database.
    fn parts(&self) -> Vec<Arc<dyn Store>> {
        Vec::new()
    }

    /// The index in [`Store::parts`] of chat `chat_id`'s database.
    fn part_of(&self, _chat_id: Uuid) -> usize {
        0
    }

    /// Work the store puts off while appends wait (the embedded store folds
    /// its journal), called by the writer task when no append waits.
    async fn tidy(&self) -> Result<Tidy, StoreError> {
        Ok(Tidy::Done)
    }

    /// Up to `limit` envelopes of the chat with `seq > after`, in order.
    async fn load_after(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
    ) -> Result<Vec<StoredEnvelope>, StoreError>;

    /// As [`Store::load_after`], stopping once the envelopes read hold
    /// `max_bytes` (the one that crosses the budget included: the first is
    /// always read). Rows are pulled one by one and the query is dropped at
    /// the budget, so large envelopes are never all in memory at once.
    ///
    /// # Returns
    /// The envelopes, and whether more may follow (the page is full, or the
    /// budget cut it short).
    async fn load_bounded(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<StoredEnvelope>, bool), StoreError>;

    /// The chat's highest `seq` and that envelope's type (`None` for an empty log).
    async fn last(&self, chat_id: Uuid) -> Result<Option<(u64, String)>, StoreError>;

    /// The `chat.text`, `chat.tool_call`, `chat.tool_response`,
    /// `chat.agent_state` and `chat.branch` envelopes of the chat, in order: what a new run's
    /// history is rebuilt from, along the path its branches make.
    async fn transcript(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError>;

    /// The `chat.branch` envelopes of the chat, in order: its tree, read by
    /// an index of their own (a chat that never branched reads nothing).
    async fn branches(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError>;

    /// The chat's envelopes whose seqs lie in `ranges` (ascending and
    /// disjoint: a path of its tree, a page's worth — PostgreSQL asks for
    /// each seq by key), in seq order, without reading out those between
    /// them; stops once they hold `max_bytes` (the one that crosses the
    /// budget included: the first is always read).
    async fn load_ranges(
        &self,
        chat_id: Uuid,
        ranges: &[std::ops::RangeInclusive<u64>],
        max_bytes: usize,
    ) -> Result<Vec<StoredEnvelope>, StoreError>;

    /// Whether an envelope of the chat carries this `client_msg_id`.
    async fn has_client_msg_id(&self, chat_id: Uuid, id: &str) -> Result<bool, StoreError>;

    /// The latest `chat.tool_call` envelope of the chat with this `corr`.
    async fn last_tool_call(
        &self,
        chat_id: Uuid,
        corr: &str,
    ) -> Result<Option<StoredEnvelope>, StoreError>;

    /// Where the run holding seq `at` begins (`u64::MAX`: the chat's last
    /// run): the seq after the last `chat.run_complete` below `at` (1 if
    /// there is none).
    async fn run_start(&self, chat_id: Uuid, at: u64) -> Result<u64, StoreError>;

    /// The ids of the chats in `state`.
    async fn chats_in_state(&self, state: ChatState) -> Result<Vec<Uuid>, StoreError>;

    /// Keeps the answer key (JSON) of the template question `corr` of a chat.
    async fn put_answer(&self, chat_id: Uuid, corr: &str, answer: &str) -> Result<(), StoreError>;

    /// The answer key of template question `corr`, if one was kept.
    async fn answer(&self, chat_id: Uuid, corr: &str) -> Result<Option<String>, StoreError>;

    /// Creates a connection, or replaces its spec and secret if it exists and
    /// is `owner`'s. `false`: the id is another user's.
    async fn put_connection(&self, c: &ConnectionRecord) -> Result<bool, StoreError>;

    /// Replaces the spec and secret of `c.owner`'s existing connection `c.id`;
    /// `false` if there is none (deleted meanwhile, or another user's).
    async fn update_connection(&self, c: &ConnectionRecord) -> Result<bool, StoreError>;

    /// `owner`'s connections, oldest first.
    async fn connections(&self, owner: &str) -> Result<Vec<ConnectionRecord>, StoreError>;

    /// `owner`'s connection `id`.
    async fn connection(
        &self,
        owner: &str,
        id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError>;

    /// Deletes `owner`'s connection `id`; `false` if there was none.
    async fn delete_connection(&self, owner: &str, id: Uuid) -> Result<bool, StoreError>;

    /// Binds a chat to a connection with its schema snapshot (the last SQL
    /// result is forgotten).
    async fn put_chat_database(
        &self,
        chat_id: Uuid,
        connection_id: Uuid,
        db_schema: &str,
    ) -> Result<(), StoreError>;

    /// Keeps the chat's last SQL result (JSON), if the chat is still bound to
    /// `connection_id` (the one that answered); `false` otherwise.
    async fn put_sql_result(
        &self,
        chat_id: Uuid,
        connection_id: Uuid,
        sql_result: &str,
    ) -> Result<bool, StoreError>;

    /// The chat's database, if it has one.
    async fn chat_database(&self, chat_id: Uuid) -> Result<Option<ChatDatabaseRecord>, StoreError>;
}

/// Takes envelopes from a query's rows until `limit` of them or until they
/// hold `max_bytes` (the one that crosses it included); the rest of the rows
/// are never read. What [`Store::load_bounded`] does on every backend.
async fn take_bounded(
    rows: impl futures_util::Stream<Item = Result<StoredEnvelope, StoreError>>,
    limit: u32,
    max_bytes: usize,
) -> Result<(Vec<StoredEnvelope>, bool), StoreError> {
    use futures_util::TryStreamExt;
    let mut rows = std::pin::pin!(rows);
    let (mut out, mut bytes) = (Vec::new(), 0usize);
    while let Some(env) = rows.try_next().await? {
        bytes += env.json.len();
        out.push(env);
        if bytes >= max_bytes {
            return Ok((out, true));
        }
    }
    let full = out.len() as u32 == limit;
    Ok((out, full))
}

#[cfg(test)]
mod tests;
