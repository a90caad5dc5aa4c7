//! What nodes send each other through the home database: their keys, the
//! commands they forward (sealed), the answers, feed events, and the
//! resync line a node sends after it reconnects to NATS.

use std::collections::HashSet;

use sqlx::Row;
use uuid::Uuid;

use super::{FEED_CHANNEL, PgCluster, node_channel};
use crate::store::postgres::notice::{self, LOG_CHANNEL};
use crate::store::seal::seal;
use crate::store::{StoreError, now_ms};

impl PgCluster {
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
            .map_err(|_| StoreError::Seal(crate::store::SealError))?;
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
}
