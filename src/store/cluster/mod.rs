//! Several nodes on PostgreSQL: node identity, chat leases, forwarded
//! commands and the notifications that tie them together. The SQL of the
//! coordination lives here; what the nodes do with it is `session::node`.
//!
//! - **Chats spread over several databases** (`[[databases]]`): the first,
//!   the home, holds the nodes, their keys and commands and the feed; a
//!   node holds its lock in every database, and a chat's lease lives with
//!   its log (the fence is checked in the append's own database); each
//!   database announces its own chats' commits.
//! - **A node is alive while it holds its advisory lock** (class
//!   [`NODE_LOCK_CLASS`], key its id) on a session of its own. A process that
//!   dies loses its socket and PostgreSQL drops the lock at once; a machine
//!   that vanishes is dropped by the server's TCP keepalives (set on that
//!   session) within about [`KEEPALIVE_SECS`] seconds.
//! - **A chat's lease** (`chat_leases`) names the node running its actor and an
//!   epoch. A node takes a lease that is free, its own, or held by a dead node;
//!   the epoch goes up each time. Appends are fenced by it (see
//!   `PgStore::append`).
//! - **Commands** for a chat owned elsewhere are sealed to the owner's public
//!   key, inserted in `node_commands`, and announced on the owner's channel
//!   `agentwire_node_<id>` as `c <uuid>`; the answer comes back on the
//!   sender's channel as `r <uuid> <json>`.
//! - **Commits** announce `<chat> <seq>` on `agentwire_log` (of the chat's
//!   database).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use sqlx::postgres::{PgConnection, PgListener, PgPool};
use sqlx::{Connection, Row};
use uuid::Uuid;

use super::postgres::notice::{self, LOG_CHANNEL, LogNotice};

mod commands;
use super::seal::NodeKey;
use super::{PgStore, StoreError, now_ms};

/// The channel on which users' feed events cross to every node.
const FEED_CHANNEL: &str = "agentwire_feed";
/// The first key of every node's advisory lock (the bytes of "agwt").
const NODE_LOCK_CLASS: i64 = 0x6167_7774;
/// About how long PostgreSQL keeps the lock of a node whose machine vanished.
pub const KEEPALIVE_SECS: u32 = 11;
/// Forwarded commands nobody took are deleted after this long (ms).
const STALE_COMMAND_MS: i64 = 3_600_000;

/// Whether a node id is alive: it holds its advisory lock in this database.
const NODE_ALIVE: &str = "EXISTS (SELECT 1 FROM pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
      AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND k.classid = 1634170740::oid AND k.objid = {node}::oid)";

/// What a lease request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// The chat is this node's, with this epoch.
    Owned { epoch: i64 },
    /// Another live node runs the chat.
    Held { node: i64 },
}

/// A notification for this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeMessage {
    /// A commit: of each chat, up to its seq.
    Log(Vec<LogNotice>),
    /// A command (in `node_commands`) for this node.
    Command(Uuid),
    /// The answer to a command this node sent.
    Reply { id: Uuid, body: String },
    /// A user's feed event (`session::feed`'s wire form).
    Feed(String),
}

/// This node's membership of the cluster.
pub struct PgCluster {
    /// The first database's pool: nodes, their keys, commands, the feed.
    pool: PgPool,
    node: i64,
    key: NodeKey,
    /// Each database chats are spread over (one for a single database),
    /// the first the home: the node holds its lock in each, and a chat's
    /// lease lives with its log.
    parts: Vec<Part>,
    /// The databases' names, for [`place`](super::place) (empty: one).
    names: Vec<String>,
    /// Public keys of the other nodes (they never change for a node id).
    peers: Mutex<HashMap<i64, [u8; 32]>>,
}

/// One database of the cluster: its pool, and the session holding this
/// node's lock there.
struct Part {
    pool: PgPool,
    url: String,
    lock: tokio::sync::Mutex<Option<PgConnection>>,
}

impl std::fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCluster")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

fn node_channel(node: i64) -> String {
    format!("agentwire_node_{node}")
}

impl PgCluster {
    /// Registers a new node (a fresh id and key pair) and takes its lock.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn join(store: &PgStore) -> Result<Self, StoreError> {
        Self::join_spread(&[("", store)]).await
    }

    /// [`join`](Self::join) the cluster of chats spread over `databases`
    /// (named as the store places chats; the first the home).
    ///
    /// # Errors
    /// A database cannot be reached.
    pub async fn join_spread(databases: &[(&str, &PgStore)]) -> Result<Self, StoreError> {
        let store = databases[0].1;
        let pool = store.pool().clone();
        let key = NodeKey::generate();
        let node: i64 = sqlx::query_scalar(
            "INSERT INTO nodes (public_key, started_at) VALUES ($1, $2) RETURNING id",
        )
        .bind(key.public().as_slice())
        .bind(now_ms())
        .fetch_one(&pool)
        .await?;
        sqlx::query("DELETE FROM node_commands WHERE created_at < $1")
            .bind(now_ms() - STALE_COMMAND_MS)
            .execute(&pool)
            .await?;
        let parts = databases
            .iter()
            .map(|(_, s)| Part {
                pool: s.pool().clone(),
                url: s.url().to_owned(),
                lock: tokio::sync::Mutex::new(None),
            })
            .collect();
        let names = match databases.len() {
            1 => Vec::new(),
            _ => databases.iter().map(|(n, _)| (*n).to_owned()).collect(),
        };
        let cluster = Self {
            pool,
            node,
            key,
            parts,
            names,
            peers: Mutex::new(HashMap::new()),
        };
        for part in &cluster.parts {
            cluster.lock_in(part).await?;
        }
        Ok(cluster)
    }

    /// The pool of chat `chat_id`'s database (its lease lives with its log).
    fn pool_of(&self, chat_id: Uuid) -> &PgPool {
        match self.names.is_empty() {
            true => &self.pool,
            false => &self.parts[super::place(&self.names, chat_id.as_bytes())].pool,
        }
    }

    /// How many databases chats are spread over (one: a single database).
    pub fn databases(&self) -> usize {
        self.parts.len()
    }

    /// This node's id.
    pub fn node(&self) -> i64 {
        self.node
    }

    /// Checks the session holding this node's lock, and opens a new one (and
    /// takes the lock again) if it was lost.
    ///
    /// # Returns
    /// `true` if the lock had been lost: other nodes may have taken this
    /// node's chats meanwhile (their appends here are then refused).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn keep_alive(&self) -> Result<bool, StoreError> {
        // Every database is tried; the home's failure is the answer's. Another
        // database's lost session is taken again at a later tick (its chats'
        // appends are refused meanwhile if another node took their leases).
        let mut lost = false;
        for part in &self.parts[1..] {
            match self.lock_in(part).await {
                Ok(again) => lost |= again,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot keep this node's lock in a database of the spread")
                }
            }
        }
        Ok(self.lock_in(&self.parts[0]).await? | lost)
    }

    /// [`keep_alive`](Self::keep_alive) in one database.
    async fn lock_in(&self, part: &Part) -> Result<bool, StoreError> {
        let mut lock = part.lock.lock().await;
        if let Some(conn) = lock.as_mut() {
            if sqlx::query("SELECT 1").execute(&mut *conn).await.is_ok() {
                return Ok(false);
            }
            *lock = None;
        }
        let mut conn = PgConnection::connect(&part.url).await?;
        // Let the server notice a vanished machine, not only a closed socket.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; \
             SET tcp_keepalives_count = {}",
            (KEEPALIVE_SECS - 5) / 2
        )))
        .execute(&mut conn)
        .await?;
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1::int4, $2::int4)")
            .bind(NODE_LOCK_CLASS as i32)
            .bind(self.node as i32)
            .fetch_one(&mut conn)
            .await?;
        if !locked {
            // Only this process ever takes this node's key.
            return Err(sqlx::Error::Protocol(format!(
                "the advisory lock of node {} is held by another session",
                self.node
            ))
            .into());
        }
        *lock = Some(conn);
        Ok(true)
    }

    /// The ids of the nodes alive now.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn live_nodes(&self) -> Result<HashSet<i64>, StoreError> {
        let rows = sqlx::query(
            "SELECT objid::int8 AS node FROM pg_locks
             WHERE locktype = 'advisory' AND granted AND objsubid = 2
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND classid = $1::int8::oid",
        )
        .bind(NODE_LOCK_CLASS)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| r.try_get::<i64, _>("node").map_err(Into::into))
            .collect()
    }

    /// Takes the chat's lease if it is free, already this node's, or held by
    /// a node that is gone; otherwise says who holds it.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn acquire(&self, chat_id: Uuid) -> Result<Lease, StoreError> {
        let sql = format!(
            "INSERT INTO chat_leases AS l (chat_id, node_id, epoch) VALUES ($1, $2, 1)
             ON CONFLICT (chat_id) DO UPDATE SET node_id = $2, epoch = l.epoch + 1
             WHERE l.node_id = $2 OR NOT {}
             RETURNING epoch",
            NODE_ALIVE.replace("{node}", "l.node_id")
        );
        for _ in 0..3 {
            let epoch: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(chat_id)
                .bind(self.node)
                .fetch_optional(self.pool_of(chat_id))
                .await?;
            if let Some(epoch) = epoch {
                return Ok(Lease::Owned { epoch });
            }
            if let Some(node) = self.holder(chat_id).await? {
                return Ok(Lease::Held { node });
            }
            // Released between the two statements: try again.
        }
        Err(sqlx::Error::Protocol("the chat's lease keeps changing hands".into()).into())
    }

    /// The chat's lease as it stands: its node and epoch.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn lease(&self, chat_id: Uuid) -> Result<Option<(i64, i64)>, StoreError> {
        let row = sqlx::query("SELECT node_id, epoch FROM chat_leases WHERE chat_id = $1")
            .bind(chat_id)
            .fetch_optional(self.pool_of(chat_id))
            .await?;
        row.map(|r| Ok((r.try_get("node_id")?, r.try_get("epoch")?)))
            .transpose()
    }

    /// The node holding the chat's lease, if any.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn holder(&self, chat_id: Uuid) -> Result<Option<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT node_id FROM chat_leases WHERE chat_id = $1")
                .bind(chat_id)
                .fetch_optional(self.pool_of(chat_id))
                .await?,
        )
    }

    /// Running chats that none of the `live` nodes holds, at most `limit`:
    /// each with whether it has a lease at all (none: its node left the run
    /// at a graceful stop; else its holder is not alive). In the other
    /// databases of a spread, a holder is alive if it holds its lock in
    /// that database (where its lease is taken over): a node cut off from
    /// one database but not the home does not keep that one's runs.
    ///
    /// # Errors
    /// The (home) database cannot be reached.
    pub async fn orphaned_runs(
        &self,
        live: &HashSet<i64>,
        limit: i64,
    ) -> Result<Vec<(Uuid, bool)>, StoreError> {
        let live: Vec<i64> = live.iter().copied().collect();
        // Each database its share of the limit: one with many runs left
        // (slow to load) does not starve the others'.
        let share = (limit / self.parts.len() as i64).max(1);
        let mut found = Self::orphaned_in(&self.parts[0].pool, Some(&live), share).await?;
        for part in &self.parts[1..] {
            // A database down leaves its runs for a later tick, not the others'.
            match Self::orphaned_in(&part.pool, None, share).await {
                Ok(runs) => found.extend(runs),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look for runs no node holds in a database of the spread");
                }
            }
        }
        Ok(found)
    }

    /// [`orphaned_runs`](Self::orphaned_runs) in one database: holders not
    /// in `live`, or (`None`) not holding their lock in it.
    async fn orphaned_in(
        pool: &PgPool,
        live: Option<&[i64]>,
        limit: i64,
    ) -> Result<Vec<(Uuid, bool)>, StoreError> {
        let dead = match live {
            Some(_) => "NOT l.node_id = ANY($2)".to_owned(),
            None => format!("NOT {}", NODE_ALIVE.replace("{node}", "l.node_id")),
        };
        let sql = format!(
            "SELECT c.id, l.chat_id IS NOT NULL AS leased
             FROM chats c LEFT JOIN chat_leases l ON l.chat_id = c.id
             WHERE c.state = 'running' AND (l.chat_id IS NULL OR {dead})
             LIMIT $1"
        );
        let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(limit);
        let rows = match live {
            Some(live) => query.bind(live).fetch_all(pool).await?,
            None => query.fetch_all(pool).await?,
        };
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("leased")?)))
            .collect()
    }

    /// Gives the lease up (if it is still the one granted with `epoch`).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn release(&self, chat_id: Uuid, epoch: i64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM chat_leases WHERE chat_id = $1 AND node_id = $2 AND epoch = $3")
            .bind(chat_id)
            .bind(self.node)
            .bind(epoch)
            .execute(self.pool_of(chat_id))
            .await?;
        Ok(())
    }

    /// A listener on database `part` (of [`databases`](Self::databases)):
    /// the home's on the log channel, the feed channel and this node's
    /// channel, another's on its log channel only (its chats' commits and
    /// purges).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn listen_on(&self, part: usize) -> Result<PgListener, StoreError> {
        // A connection of its own, not one of the pool's: the pool stays whole.
        let mut listener = PgListener::connect(&self.parts[part].url).await?;
        match part {
            0 => {
                listener
                    .listen_all([LOG_CHANNEL, FEED_CHANNEL, node_channel(self.node).as_str()])
                    .await?
            }
            _ => listener.listen(LOG_CHANNEL).await?,
        }
        Ok(listener)
    }

    /// Reads a notification received by [`listen_on`](Self::listen_on)'s listener.
    pub fn parse(channel: &str, payload: &str) -> Option<NodeMessage> {
        if channel == FEED_CHANNEL {
            return Some(NodeMessage::Feed(payload.to_owned()));
        }
        if channel == LOG_CHANNEL {
            let notices = notice::parse(payload);
            return (!notices.is_empty()).then_some(NodeMessage::Log(notices));
        }
        let (kind, rest) = payload.split_once(' ')?;
        match kind {
            "c" => Some(NodeMessage::Command(rest.parse().ok()?)),
            "r" => {
                let (id, body) = rest.split_once(' ')?;
                Some(NodeMessage::Reply {
                    id: id.parse().ok()?,
                    body: body.to_owned(),
                })
            }
            _ => None,
        }
    }
}
