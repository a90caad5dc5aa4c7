//! The registry's reads of a chat that need no actor: its record, the
//! user's chats, pages of its log. Ownership is checked against the store.

use uuid::Uuid;

use super::Registry;
use crate::session::SessionError;
use crate::store::ChatRecord;

/// About how long a search looks before it ranks what it found.
pub const SEARCH_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

impl Registry {
    /// The chat, if it is `user`'s, with its last seq.
    ///
    /// # Errors
    /// `NotFound` for a chat that is not the user's.
    pub async fn chat(&self, chat_id: Uuid, user: &str) -> Result<(ChatRecord, u64), SessionError> {
        let store = &self.inner.ctx.store;
        match store.chat(chat_id).await? {
            Some(chat) if chat.owner == user => {
                let last = store.last(chat_id).await?.map_or(0, |(seq, _)| seq);
                Ok((chat, last))
            }
            _ => Err(SessionError::NotFound),
        }
    }

    /// `user`'s chat, without its last seq.
    async fn owned(&self, chat_id: Uuid, user: &str) -> Result<ChatRecord, SessionError> {
        match self.inner.ctx.store.chat(chat_id).await? {
            Some(chat) if chat.owner == user => Ok(chat),
            _ => Err(SessionError::NotFound),
        }
    }

    /// Where `user`'s chat's last run begins (the seq after its last
    /// `chat.run_complete`), and whether that run is still going.
    ///
    /// # Errors
    /// `NotFound` unless the chat is the user's; the store's errors.
    pub async fn last_run(&self, chat_id: Uuid, user: &str) -> Result<(u64, bool), SessionError> {
        // The start first: a run that ends between the two reads shows as
        // over, never as the next one running (and one that begins between
        // them begins at that start). Nothing is told before the owner is.
        let start = self.inner.ctx.store.run_start(chat_id, u64::MAX).await?;
        let chat = self.owned(chat_id, user).await?;
        Ok((start, chat.state == crate::store::ChatState::Running))
    }

    /// Where the run holding seq `at` of `user`'s chat begins.
    ///
    /// # Errors
    /// `NotFound` unless the chat is the user's; the store's errors.
    pub async fn run_start(&self, chat_id: Uuid, user: &str, at: u64) -> Result<u64, SessionError> {
        self.owned(chat_id, user).await?;
        Ok(self.inner.ctx.store.run_start(chat_id, at).await?)
    }

    /// The texts, tool calls and tool results of `user`'s chat before seq
    /// `before` on its active path, as stored.
    ///
    /// # Errors
    /// `NotFound` unless the chat is the user's; the store's errors.
    pub async fn history(
        &self,
        chat_id: Uuid,
        user: &str,
        before: u64,
    ) -> Result<Vec<crate::protocol::Envelope>, SessionError> {
        let (_, last) = self.chat(chat_id, user).await?;
        let transcript = self.inner.ctx.store.transcript(chat_id).await?;
        // Along the active path: a version the user left is not shown.
        let tree = crate::session::tree::Tree::of_log(&transcript, last);
        let path = tree.active();
        Ok(transcript
            .iter()
            .filter(|e| e.seq < before && crate::session::tree::Tree::within(&path, e.seq))
            .filter_map(|e| serde_json::from_str(&e.json).ok())
            .collect())
    }

    /// A page of `user`'s chats (archived ones, or the others), pinned
    /// first, then by latest activity, after the cursor.
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn list(
        &self,
        user: &str,
        archived: bool,
        after: Option<crate::store::ListCursor>,
        limit: u32,
    ) -> Result<Vec<ChatRecord>, SessionError> {
        let store = &self.inner.ctx.store;
        Ok(store.list_chats(user, archived, after, limit).await?)
    }

    /// `user`'s chats whose current title or texts hold every term, best
    /// first, at most `limit`; what the store found in about
    /// [`SEARCH_BUDGET`].
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn search(
        &self,
        user: &str,
        terms: &crate::store::search::Terms,
        archived: bool,
        limit: u32,
    ) -> Result<Vec<crate::store::SearchHit>, SessionError> {
        // Up to the budget of store time each: counted as a turn, so one
        // user's searches cannot keep the store busy for the others.
        self.inner.ctx.quotas.message(user)?;
        let store = &self.inner.ctx.store;
        let hits = store
            .search_chats(user, terms, archived, limit, SEARCH_BUDGET)
            .await?;
        Ok(hits)
    }

    /// Up to `limit` envelopes of `user`'s chat after `after`, as stored, about
    /// 4 MiB at most, and whether more may follow.
    ///
    /// # Errors
    /// `NotFound` for a chat that is not the user's.
    pub async fn page(
        &self,
        chat_id: Uuid,
        user: &str,
        after: u64,
        limit: u32,
    ) -> Result<(Vec<String>, bool), SessionError> {
        self.chat(chat_id, user).await?;
        // At most about 4 MiB a page, however large the envelopes.
        let store = &self.inner.ctx.store;
        let (page, more) = store.load_bounded(chat_id, after, limit, 4 << 20).await?;
        Ok((page.into_iter().map(|e| e.json).collect(), more))
    }

    /// The chat's last seq (0 for an empty or unknown chat).
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn last_seq(&self, chat_id: Uuid) -> Result<u64, SessionError> {
        Ok(self
            .inner
            .ctx
            .store
            .last(chat_id)
            .await?
            .map_or(0, |(seq, _)| seq))
    }

    /// Where chats run, for the operator's page: the cluster's live nodes
    /// and the node holding each of `chats` (PostgreSQL); `None` on one
    /// node.
    ///
    /// # Errors
    /// The store fails.
    pub async fn placement(
        &self,
        chats: &[Uuid],
    ) -> Result<Option<(Vec<i64>, std::collections::HashMap<Uuid, i64>)>, SessionError> {
        let Some(node) = &self.inner.ctx.node else {
            return Ok(None);
        };
        let cluster = node.cluster();
        let mut live: Vec<i64> = cluster.live_nodes().await?.into_iter().collect();
        live.sort_unstable();
        let mut holders = std::collections::HashMap::new();
        for &chat in chats {
            if let Some(holder) = cluster.holder(chat).await? {
                holders.insert(chat, holder);
            }
        }
        Ok(Some((live, holders)))
    }
}
