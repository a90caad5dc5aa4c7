//! Several nodes on one PostgreSQL: node identity, chat leases, forwarded
//! commands and the notifications that tie them together. The SQL of the
//! coordination lives here; what the nodes do with it is `session::node`.
//!
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
//! - **Commits** announce `<chat> <seq>` on `agentwire_log`.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use sqlx::postgres::{PgConnection, PgListener, PgPool};
use sqlx::{Connection, Row};
use uuid::Uuid;

use super::postgres::notice::{self, LOG_CHANNEL, LogNotice};
use super::seal::{NodeKey, seal};
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
    pool: PgPool,
    url: String,
    node: i64,
    key: NodeKey,
    /// The session holding the node's lock.
    lock: tokio::sync::Mutex<Option<PgConnection>>,
    /// Public keys of the other nodes (they never change for a node id).
    peers: Mutex<HashMap<i64, [u8; 32]>>,
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
        let cluster = Self {
            pool,
            url: store.url().to_owned(),
            node,
            key,
            lock: tokio::sync::Mutex::new(None),
            peers: Mutex::new(HashMap::new()),
        };
        cluster.keep_alive().await?;
        Ok(cluster)
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
        let mut lock = self.lock.lock().await;
        if let Some(conn) = lock.as_mut() {
            if sqlx::query("SELECT 1").execute(&mut *conn).await.is_ok() {
                return Ok(false);
            }
            *lock = None;
        }
        let mut conn = PgConnection::connect(&self.url).await?;
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
                .fetch_optional(&self.pool)
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
            .fetch_optional(&self.pool)
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
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Running chats that none of the `live` nodes holds, at most `limit`:
    /// each with whether it has a lease at all (none: its node left the run
    /// at a graceful stop; else its holder is not alive).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn orphaned_runs(
        &self,
        live: &HashSet<i64>,
        limit: i64,
    ) -> Result<Vec<(Uuid, bool)>, StoreError> {
        let live: Vec<i64> = live.iter().copied().collect();
        let rows = sqlx::query(
            "SELECT c.id, l.chat_id IS NOT NULL AS leased
             FROM chats c LEFT JOIN chat_leases l ON l.chat_id = c.id
             WHERE c.state = 'running' AND (l.chat_id IS NULL OR NOT l.node_id = ANY($1))
             LIMIT $2",
        )
        .bind(&live)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
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
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn public_key(&self, node: i64) -> Result<[u8; 32], StoreError> {
        if let Some(key) = self.peers.lock().expect("peers lock").get(&node) {
            return Ok(*key);
        }
        let key: Vec<u8> = sqlx::query_scalar("SELECT public_key FROM nodes WHERE id = $1")
            .bind(node)
            .fetch_one(&self.pool)
            .await?;
        let key: [u8; 32] = key
            .try_into()
            .map_err(|_| StoreError::Seal(super::SealError))?;
        self.peers.lock().expect("peers lock").insert(node, key);
        Ok(key)
    }

    /// Whether `node`'s public key is known here (no query).
    pub fn knows(&self, node: i64) -> bool {
        self.peers.lock().expect("peers lock").contains_key(&node)
    }

    /// Reads the public keys of the `live` nodes not known yet, so a
    /// command on NATS is checked without a query.
    pub async fn learn(&self, live: &HashSet<i64>) {
        for &node in live {
            if node != self.node
                && !self.knows(node)
                && let Err(e) = self.public_key(node).await
            {
                tracing::warn!(error = %e, node, "cannot read a node's public key");
            }
        }
    }

    /// Seals `body` from this node to `node`, binding `header` (what
    /// travels outside PostgreSQL, on NATS).
    ///
    /// # Errors
    /// The database cannot be reached, or `node` is unknown.
    pub async fn seal_to(
        &self,
        node: i64,
        header: &[u8],
        body: &[u8],
    ) -> Result<Vec<u8>, StoreError> {
        let to = self.public_key(node).await?;
        Ok(self.key.seal_to(&to, header, body)?)
    }

    /// Opens what node `node` sealed to this one with `header`.
    ///
    /// # Errors
    /// The database cannot be reached, `node` is unknown, or the box is
    /// not from it, not to this node, or was changed.
    pub async fn open_from(
        &self,
        node: i64,
        header: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, StoreError> {
        let from = self.public_key(node).await?;
        Ok(self.key.open_from(&from, header, sealed)?)
    }

    /// Sends a command to `node`: sealed, stored, announced.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn send_command(&self, id: Uuid, node: i64, body: &[u8]) -> Result<(), StoreError> {
        let sealed = seal(&self.public_key(node).await?, body)?;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO node_commands (id, node_id, sender, body, created_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(node)
        .bind(self.node)
        .bind(&sealed)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(node_channel(node))
            .bind(format!("c {id}"))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes a command sent to this node: its sender and opened body, or
    /// `None` if it was withdrawn or already taken.
    ///
    /// # Errors
    /// The database cannot be reached, or the body does not open.
    pub async fn take_command(&self, id: Uuid) -> Result<Option<(i64, Vec<u8>)>, StoreError> {
        let row = sqlx::query(
            "DELETE FROM node_commands WHERE id = $1 AND node_id = $2 RETURNING sender, body",
        )
        .bind(id)
        .bind(self.node)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let sender: i64 = row.try_get("sender")?;
        let body: Vec<u8> = row.try_get("body")?;
        Ok(Some((sender, self.key.open(&body)?)))
    }

    /// Withdraws a command nobody took yet.
    ///
    /// # Returns
    /// `true` if it was still waiting (so it was never run).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn withdraw_command(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM node_commands WHERE id = $1 AND sender = $2")
            .bind(id)
            .bind(self.node)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Answers a command `node` sent (the body: at most a few KB of JSON).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn reply(&self, node: i64, id: Uuid, body: &str) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(node_channel(node))
            .bind(format!("r {id} {body}"))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Sends a user's feed event to every node.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn notify_feed(&self, payload: &str) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(FEED_CHANNEL)
            .bind(payload)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Tells every node that this one reconnected to NATS (`notice::resync`).
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn resync(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(LOG_CHANNEL)
            .bind(notice::resync(self.node))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A listener on the log channel, the feed channel and this node's channel.
    ///
    /// # Errors
    /// The database cannot be reached.
    pub async fn listen(&self) -> Result<PgListener, StoreError> {
        // A connection of its own, not one of the pool's: the pool stays whole.
        let mut listener = PgListener::connect(&self.url).await?;
        listener
            .listen_all([LOG_CHANNEL, FEED_CHANNEL, node_channel(self.node).as_str()])
            .await?;
        Ok(listener)
    }

    /// Reads a notification received by [`listen`](Self::listen)'s listener.
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
