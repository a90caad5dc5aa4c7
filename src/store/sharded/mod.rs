//! Chats spread over several PostgreSQL databases (`[[databases]]`).
//!
//! - **A chat's database** is chosen by rendezvous hashing of its id over
//!   the databases' names ([`place`]): the database whose name hashes
//!   highest with the id. Adding a database moves only the chats it wins
//!   (about 1/(n+1) of them); the others stay where they are.
//! - **Everything of a chat** lives in its database, in the transactions
//!   a single database has: its row, its log, its lease and fence, its
//!   search rows, its usage rows, its webhook events and waits, its answers
//!   and its database link. A chat's calls go to its database alone, so one
//!   database down fails its own chats and no other's.
//! - **Everything of an owner's files** (files, their contents, the quota
//!   that counts them once) lives in the owner's database, placed the same
//!   way by the owner's id. A connection lives where its id is placed (an
//!   id is one user's in all the databases).
//! - **What belongs to no chat** (service keys, schedules, the operator's
//!   acts) lives in the first database, the home.
//! - **Lists** (a user's chats, searches, the usage ledger, the outbox, the
//!   operator's errors) ask every database and merge; one down fails them.

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::future::{join_all, try_join_all};
use uuid::Uuid;

use super::files::{Blobs, FileRecord, Kept, Put};
use super::{
    AppendBatch, ChatDatabaseRecord, ChatFlags, ChatRecord, ChatState, ConnectionRecord,
    ListCursor, Operations, Outbox, PgStore, Reindexed, Schedules, SearchHit, ServiceKeys, Store,
    StoreError, StoredEnvelope, Usage, search,
};

mod blobs;
mod open;
mod outbox;
mod place;

pub use outbox::SpreadOutbox;

pub use place::place;

/// The log over several PostgreSQL databases.
pub struct ShardedStore {
    /// Each database's store, in the order of `names`.
    shards: Vec<Arc<PgStore>>,
    names: Vec<String>,
    blobs: blobs::ShardedBlobs,
}

impl std::fmt::Debug for ShardedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedStore")
            .field("databases", &self.names)
            .finish_non_exhaustive()
    }
}

impl ShardedStore {
    /// The spread over `databases` (name and store), the first the home.
    ///
    /// # Panics
    /// `databases` is empty (the configuration refuses it before).
    pub fn new(databases: Vec<(String, PgStore)>) -> Self {
        assert!(!databases.is_empty(), "a spread of no database");
        let (names, shards): (Vec<String>, Vec<Arc<PgStore>>) = databases
            .into_iter()
            .map(|(name, store)| (name, Arc::new(store)))
            .unzip();
        let blobs = blobs::ShardedBlobs::new(names.clone(), shards.clone());
        Self {
            shards,
            names,
            blobs,
        }
    }

    /// The index of chat `id`'s database.
    pub fn shard_of(&self, id: Uuid) -> usize {
        place(&self.names, id.as_bytes())
    }

    /// Chat (or connection) `id`'s database.
    fn of(&self, id: Uuid) -> &PgStore {
        &self.shards[self.shard_of(id)]
    }

    /// Owner `owner`'s database (files and their contents).
    fn owners(&self, owner: &str) -> &PgStore {
        &self.shards[place(&self.names, owner.as_bytes())]
    }

    fn home(&self) -> &PgStore {
        &self.shards[0]
    }

    /// Each database's store, in order (the writer commits to each apart).
    pub fn stores(&self) -> Vec<Arc<PgStore>> {
        self.shards.clone()
    }

    /// Runs `f` on every database at once; the first error fails it all.
    async fn every<'a, T, F, Fut>(&'a self, f: F) -> Result<Vec<T>, StoreError>
    where
        F: Fn(&'a PgStore) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        try_join_all(self.shards.iter().map(|s| f(s))).await
    }
}

/// Merges pages of the list, each in the list's order, into one page.
fn merge_pages(pages: Vec<Vec<ChatRecord>>, limit: u32) -> Vec<ChatRecord> {
    let mut all: Vec<ChatRecord> = pages.into_iter().flatten().collect();
    // Pinned first, then the latest activity, then the id: all descending.
    all.sort_by(|a, b| {
        let key = |c: &ChatRecord| (c.listing.pinned, c.listing.active_at, c.id);
        key(b).cmp(&key(a))
    });
    all.truncate(limit as usize);
    all
}

#[async_trait]
impl Store for ShardedStore {
    /// The home's answer: a node with another database down still serves
    /// every other chat (`/healthz` keeps it in its balancer's rotation).
    async fn ping(&self) -> Result<(), StoreError> {
        self.home().ping().await
    }

    fn service_keys(&self) -> ServiceKeys {
        self.home().service_keys()
    }

    fn schedules(&self) -> Schedules {
        self.home().schedules()
    }

    fn outbox(&self) -> Outbox {
        Outbox::Sharded(Arc::new(SpreadOutbox::new(
            self.shards.iter().map(|s| s.outbox()).collect(),
            self.names.clone(),
        )))
    }

    fn enable_outbox(&self) {
        for s in &self.shards {
            s.enable_outbox();
        }
    }

    fn usage(&self) -> Usage {
        Usage::Sharded(self.shards.iter().map(|s| s.usage()).collect())
    }

    fn operations(&self) -> Operations {
        Operations::Sharded(self.shards.iter().map(|s| s.operations()).collect())
    }

    async fn create_chat(&self, chat: &ChatRecord) -> Result<ChatRecord, StoreError> {
        self.of(chat.id).create_chat(chat).await
    }

    async fn set_chat_flags(&self, id: Uuid, flags: ChatFlags) -> Result<(), StoreError> {
        self.of(id).set_chat_flags(id, flags).await
    }

    async fn list_chats(
        &self,
        owner: &str,
        archived: bool,
        after: Option<ListCursor>,
        limit: u32,
    ) -> Result<Vec<ChatRecord>, StoreError> {
        // Each database's first `limit` after the cursor holds every chat
        // of the merged page that lives there.
        let pages = self
            .every(|s| s.list_chats(owner, archived, after, limit))
            .await?;
        Ok(merge_pages(pages, limit))
    }

    async fn search_chats(
        &self,
        owner: &str,
        terms: &search::Terms,
        archived: bool,
        limit: u32,
        budget: std::time::Duration,
    ) -> Result<Vec<SearchHit>, StoreError> {
        // A chat lives in one database: its best hit is that database's.
        let found = self
            .every(|s| s.search_chats(owner, terms, archived, limit, budget))
            .await?;
        Ok(super::rank(
            found.into_iter().flatten().collect(),
            limit as usize,
        ))
    }

    async fn purge_chat(&self, id: Uuid) -> Result<bool, StoreError> {
        let store = self.of(id);
        let Some(chat) = store.chat(id).await? else {
            return Ok(false);
        };
        // Its files first (in the owner's database, when that is another):
        // a purge cut between the two leaves the chat, to be purged again;
        // and again after, for an upload that passed its check meanwhile.
        let owners = self.owners(&chat.owner);
        if std::ptr::eq(owners, store) {
            return store.purge_chat(id).await;
        }
        owners.purge_files(&chat.owner, id).await?;
        let purged = store.purge_chat(id).await?;
        owners.purge_files(&chat.owner, id).await?;
        Ok(purged)
    }

    async fn reindex(&self) -> Result<Reindexed, StoreError> {
        let all = self.every(|s| s.reindex()).await?;
        Ok(all
            .into_iter()
            .fold(Reindexed::default(), |a, r| Reindexed {
                chats: a.chats + r.chats,
                rows: a.rows + r.rows,
            }))
    }

    fn blobs(&self) -> &dyn Blobs {
        &self.blobs
    }

    async fn put_file(&self, file: &FileRecord, put: Put) -> Result<Kept, StoreError> {
        let owners = self.owners(&file.owner);
        let store = self.of(file.chat_id);
        // The chat's database says whose it is (the owner's checks its own
        // rows again, when it is the same database).
        if !std::ptr::eq(owners, store)
            && let Some(chat) = store.chat(file.chat_id).await?
            && chat.owner != file.owner
        {
            return Ok(Kept::ChatTaken);
        }
        owners.put_file(file, put).await
    }

    /// Asked of every database (an id does not say its owner): found in
    /// one that answers, it is found whatever the others do.
    async fn file(&self, id: Uuid) -> Result<Option<FileRecord>, StoreError> {
        let found = join_all(self.shards.iter().map(|s| s.file(id))).await;
        let mut failed = None;
        for result in found {
            match result {
                Ok(Some(file)) => return Ok(Some(file)),
                Ok(None) => {}
                Err(e) => failed = Some(e),
            }
        }
        failed.map_or(Ok(None), Err)
    }

    async fn sweep_staged(&self, older_than: std::time::Duration) -> Result<u64, StoreError> {
        Ok(self
            .every(|s| s.sweep_staged(older_than))
            .await?
            .into_iter()
            .sum())
    }

    async fn set_chat_model(&self, id: Uuid, model: Option<&str>) -> Result<(), StoreError> {
        self.of(id).set_chat_model(id, model).await
    }

    async fn chat(&self, id: Uuid) -> Result<Option<ChatRecord>, StoreError> {
        self.of(id).chat(id).await
    }

    /// Each database's batches in one transaction of its own (the writer
    /// gives each database its own commits: [`ShardedStore::stores`]).
    async fn append(&self, batches: &[AppendBatch]) -> Result<(), StoreError> {
        let mut by_shard: Vec<Vec<AppendBatch>> = vec![Vec::new(); self.shards.len()];
        for b in batches {
            by_shard[self.shard_of(b.chat_id)].push(b.clone());
        }
        let results = futures_util::future::join_all(
            self.shards
                .iter()
                .zip(&by_shard)
                .filter(|(_, b)| !b.is_empty())
                .map(|(s, b)| s.append(b)),
        )
        .await;
        let mut lost = Vec::new();
        for result in results {
            match result {
                Ok(()) => {}
                Err(StoreError::Fenced(chats)) => lost.extend(chats.iter().copied()),
                Err(e) => return Err(e),
            }
        }
        if lost.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Fenced(lost.into()))
        }
    }

    fn parts(&self) -> Vec<Arc<dyn Store>> {
        self.shards
            .iter()
            .map(|s| s.clone() as Arc<dyn Store>)
            .collect()
    }

    fn part_of(&self, chat_id: Uuid) -> usize {
        self.shard_of(chat_id)
    }

    fn commits_in_flight(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.commits_in_flight())
            .max()
            .unwrap_or(1)
    }

    async fn load_after(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        self.of(chat_id).load_after(chat_id, after, limit).await
    }

    async fn load_bounded(
        &self,
        chat_id: Uuid,
        after: u64,
        limit: u32,
        max_bytes: usize,
    ) -> Result<(Vec<StoredEnvelope>, bool), StoreError> {
        self.of(chat_id)
            .load_bounded(chat_id, after, limit, max_bytes)
            .await
    }

    async fn last(&self, chat_id: Uuid) -> Result<Option<(u64, String)>, StoreError> {
        self.of(chat_id).last(chat_id).await
    }

    async fn transcript(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        self.of(chat_id).transcript(chat_id).await
    }

    async fn branches(&self, chat_id: Uuid) -> Result<Vec<StoredEnvelope>, StoreError> {
        self.of(chat_id).branches(chat_id).await
    }

    async fn load_ranges(
        &self,
        chat_id: Uuid,
        ranges: &[std::ops::RangeInclusive<u64>],
        max_bytes: usize,
    ) -> Result<Vec<StoredEnvelope>, StoreError> {
        self.of(chat_id)
            .load_ranges(chat_id, ranges, max_bytes)
            .await
    }

    async fn has_client_msg_id(&self, chat_id: Uuid, id: &str) -> Result<bool, StoreError> {
        self.of(chat_id).has_client_msg_id(chat_id, id).await
    }

    async fn last_tool_call(
        &self,
        chat_id: Uuid,
        corr: &str,
    ) -> Result<Option<StoredEnvelope>, StoreError> {
        self.of(chat_id).last_tool_call(chat_id, corr).await
    }

    async fn run_start(&self, chat_id: Uuid, at: u64) -> Result<u64, StoreError> {
        self.of(chat_id).run_start(chat_id, at).await
    }

    async fn chats_in_state(&self, state: ChatState) -> Result<Vec<Uuid>, StoreError> {
        let all = self.every(|s| s.chats_in_state(state)).await?;
        Ok(all.into_iter().flatten().collect())
    }

    async fn put_answer(&self, chat_id: Uuid, corr: &str, answer: &str) -> Result<(), StoreError> {
        self.of(chat_id).put_answer(chat_id, corr, answer).await
    }

    async fn answer(&self, chat_id: Uuid, corr: &str) -> Result<Option<String>, StoreError> {
        self.of(chat_id).answer(chat_id, corr).await
    }

    async fn put_connection(&self, c: &ConnectionRecord) -> Result<bool, StoreError> {
        self.of(c.id).put_connection(c).await
    }

    async fn update_connection(&self, c: &ConnectionRecord) -> Result<bool, StoreError> {
        self.of(c.id).update_connection(c).await
    }

    async fn connections(&self, owner: &str) -> Result<Vec<ConnectionRecord>, StoreError> {
        let mut all: Vec<ConnectionRecord> = self
            .every(|s| s.connections(owner))
            .await?
            .into_iter()
            .flatten()
            .collect();
        all.sort_by_key(|c| (c.created_at, c.id));
        Ok(all)
    }

    async fn connection(
        &self,
        owner: &str,
        id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        self.of(id).connection(owner, id).await
    }

    async fn delete_connection(&self, owner: &str, id: Uuid) -> Result<bool, StoreError> {
        self.of(id).delete_connection(owner, id).await
    }

    async fn put_chat_database(
        &self,
        chat_id: Uuid,
        connection_id: Uuid,
        db_schema: &str,
    ) -> Result<(), StoreError> {
        self.of(chat_id)
            .put_chat_database(chat_id, connection_id, db_schema)
            .await
    }

    async fn put_sql_result(
        &self,
        chat_id: Uuid,
        connection_id: Uuid,
        sql_result: &str,
    ) -> Result<bool, StoreError> {
        self.of(chat_id)
            .put_sql_result(chat_id, connection_id, sql_result)
            .await
    }

    async fn chat_database(&self, chat_id: Uuid) -> Result<Option<ChatDatabaseRecord>, StoreError> {
        self.of(chat_id).chat_database(chat_id).await
    }
}
