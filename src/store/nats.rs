//! Commit notices over NATS, for a cluster whose nodes should each hear
//! only the chats their own clients follow.
//!
//! With PostgreSQL's `NOTIFY` every node receives every chat's commit
//! notices. With a `NatsBus` a commit of chat `c` is published on subject
//! `agentwire.log.<c>` (payload `"<highest seq> <node>"`), and a node
//! subscribes to the subjects of the chats it has an actor for, so its work
//! follows its own clients. PostgreSQL stays the log of record: a notice is
//! only a wake-up, and a follower reads the store whenever it wakes.
//!
//! What may go wrong, and why nothing is lost or reordered:
//! - **This node cannot reach NATS** (never connected, or disconnected): its
//!   commits are announced with `NOTIFY` as without NATS (every node still
//!   listens on the log channel), and its followers read the store every
//!   tick until NATS is back ([`NatsBus::is_down`]).
//! - **NATS lost messages** (a restart, a reconnect of any node): on every
//!   reconnect the node wakes all its followers to read the store, and
//!   tells every node by `NOTIFY` to do the same ([`NatsBus::reconnects`],
//!   `notice::RESYNC`): what it published before its connection was seen
//!   to drop may never have left. Pings every few seconds see a dead link
//!   soon.
//! - **A publish fails or is slow** after the commit: the notice goes by
//!   `NOTIFY` instead ([`PgStore`](super::PgStore)'s append), and so do the
//!   next second's (a stalled NATS never holds the log writer long).
//!
//! A notice is a wake-up, never trusted: an owner that hears of a commit
//! past its own checks its lease before it gives the chat up, so a message
//! forged on NATS costs reads, not a run. Still, let only agentwire's nodes
//! publish on `agentwire.>` (NATS authorization).
//!
//! **Forwarded commands** travel as NATS requests on `agentwire.node.<id>`
//! ([`NatsBus::ask`], [`NatsBus::commands`]), sealed from node to node
//! (`session::node::forward` says how, and why one never runs twice).
//!
//! Every node of a cluster must use the same setting: a node without
//! `nats_url` hears nothing of a node with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use async_nats::connection::State;
use bytes::Bytes;
use futures_util::StreamExt;
use uuid::Uuid;

use super::StoreError;
use super::postgres::notice::LogNotice;

/// The subjects' prefix: `agentwire.log.<chat id>`.
const LOG_SUBJECT: &str = "agentwire.log";
/// Commands for node `n` are requests on `agentwire.node.<n>`.
const NODE_SUBJECT: &str = "agentwire.node";
/// How long a commit's publish may wait for the connection's queue; past
/// it the notice goes by `NOTIFY` (a NATS server that stalls never holds
/// the log writer).
const PUBLISH_WAIT: Duration = Duration::from_millis(200);

/// How often the client pings the server: a link that died without a word
/// is seen within about two of these.
const PING: Duration = Duration::from_secs(5);
/// After a publish that failed or was slow, commits go by `NOTIFY` this long.
const BACK_OFF_MS: i64 = 1000;

/// This node's connection to NATS.
pub struct NatsBus {
    client: async_nats::Client,
    /// Set while the connection is down (between `Disconnected` and
    /// `Connected`).
    down: Arc<AtomicBool>,
    /// Counts connections made: each one after the first may have lost
    /// messages (a `watch` channel, so no reconnect goes unseen).
    connects: tokio::sync::watch::Sender<u64>,
    /// Until when (Unix ms) commits skip NATS, after a failed publish.
    skip_until: AtomicI64,
}

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBus")
            .field("down", &self.down.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl NatsBus {
    /// Connects to the NATS server(s) at `url` (comma-separated for several)
    /// as `name`, and keeps reconnecting for as long as the node runs. A
    /// server that is not up yet is retried in the background: the node
    /// starts on `NOTIFY` and moves to NATS once connected.
    ///
    /// # Errors
    /// `url` is not a NATS address.
    pub async fn connect(url: &str, name: &str) -> Result<Arc<Self>, StoreError> {
        let down = Arc::new(AtomicBool::new(true));
        let (connects, _) = tokio::sync::watch::channel(0_u64);
        let (on_down, on_connect) = (down.clone(), connects.clone());
        let servers: Vec<&str> = url.split(',').map(str::trim).collect();
        let client = async_nats::ConnectOptions::new()
            .name(name)
            .no_echo()
            .ping_interval(PING)
            .retry_on_initial_connect()
            .max_reconnects(None)
            .event_callback(move |event| {
                let (down, connects) = (on_down.clone(), on_connect.clone());
                async move {
                    match event {
                        async_nats::Event::Connected => {
                            down.store(false, Ordering::Release);
                            connects.send_modify(|n| *n += 1);
                            tracing::info!("connected to NATS");
                        }
                        async_nats::Event::Disconnected => {
                            down.store(true, Ordering::Release);
                            tracing::warn!(
                                "lost NATS; commit notices go by NOTIFY until it is back"
                            );
                        }
                        other => tracing::debug!(event = %other, "NATS"),
                    }
                }
            })
            .connect(servers)
            .await
            .map_err(|e| StoreError::Nats(format!("nats_url: {e}").into()))?;
        // A moment for the first connection, so a node whose NATS is up
        // starts on it; one whose NATS is not starts on NOTIFY.
        for _ in 0..40 {
            if client.connection_state() == State::Connected {
                down.store(false, Ordering::Release);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Arc::new(Self {
            client,
            down,
            connects,
            skip_until: AtomicI64::new(0),
        }))
    }

    /// Whether the connection is down: commits go by `NOTIFY`, and followers
    /// read the store every tick.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire) || self.client.connection_state() != State::Connected
    }

    /// Whether commits go by `NOTIFY` now: the connection is down, or a
    /// publish failed or was slow a moment ago.
    pub(crate) fn skipped(&self) -> bool {
        self.is_down() || super::now_ms() < self.skip_until.load(Ordering::Relaxed)
    }

    /// Connections made so far; `changed()` on it resolves at the next one.
    pub fn connects(&self) -> tokio::sync::watch::Receiver<u64> {
        self.connects.subscribe()
    }

    /// Waits until the server has every subscription asked for so far.
    pub async fn flush(&self) {
        if let Err(e) = self.client.flush().await {
            tracing::debug!(error = %e, "cannot flush NATS");
        }
    }

    /// Publishes a commit's notices, one per chat. `false` if any could
    /// not be handed to the connection in time: the caller announces them
    /// by `NOTIFY` instead.
    pub(crate) async fn publish(&self, notices: &[LogNotice]) -> bool {
        if self.skipped() {
            return false;
        }
        let all = async {
            for n in notices {
                let subject = format!("{LOG_SUBJECT}.{}", n.chat_id);
                let payload = Bytes::from(format!("{} {}", n.seq, n.node));
                self.client.publish(subject, payload).await?;
            }
            Ok::<(), async_nats::PublishError>(())
        };
        let failed = match tokio::time::timeout(PUBLISH_WAIT, all).await {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "slow to take them".to_owned(),
        };
        tracing::warn!(error = %failed, "cannot publish commit notices; NOTIFY for a second");
        self.skip_until
            .store(super::now_ms() + BACK_OFF_MS, Ordering::Relaxed);
        false
    }

    /// Calls `on` with each notice published for `chat_id` by another
    /// node, until the returned guard is dropped. `ready` is called once
    /// the server has the subscription, so the caller reads the store for
    /// what came before it.
    pub fn watch(
        self: &Arc<Self>,
        chat_id: Uuid,
        on: impl Fn(LogNotice) + Send + 'static,
        ready: impl Fn() + Send + 'static,
    ) -> Watch {
        let bus = self.clone();
        let task = tokio::spawn(async move {
            let subject = format!("{LOG_SUBJECT}.{chat_id}");
            let mut sub = loop {
                match bus.client.subscribe(subject.clone()).await {
                    Ok(sub) => break sub,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot subscribe to a chat's notices yet");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            };
            bus.flush().await;
            ready();
            let counted = metrics::counter!(crate::metrics::CLUSTER_NOTICES, "via" => "nats");
            while let Some(message) = sub.next().await {
                counted.increment(1);
                match parse(chat_id, &message.payload) {
                    Some(notice) => on(notice),
                    None => tracing::warn!("unreadable NATS commit notice"),
                }
            }
        });
        Watch(task)
    }

    /// A fresh subject to be answered on.
    pub fn new_inbox(&self) -> String {
        self.client.new_inbox()
    }

    /// Sends `payload` to node `to`, to be answered on `inbox`: the
    /// answers (and NATS's own "no responders"), until dropped.
    ///
    /// # Errors
    /// It was not sent (the client is closed, or the payload is over the
    /// server's `max_payload`).
    pub async fn ask(
        &self,
        to: i64,
        inbox: String,
        payload: Bytes,
    ) -> Result<async_nats::Subscriber, StoreError> {
        let answers = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(nats_error)?;
        self.client
            .publish_with_reply(format!("{NODE_SUBJECT}.{to}"), inbox, payload)
            .await
            .map_err(nats_error)?;
        Ok(answers)
    }

    /// The requests sent to node `node`.
    ///
    /// # Errors
    /// The subscription cannot be made (the client is closed).
    pub async fn commands(&self, node: i64) -> Result<async_nats::Subscriber, StoreError> {
        let subscriber = self
            .client
            .subscribe(format!("{NODE_SUBJECT}.{node}"))
            .await
            .map_err(nats_error)?;
        self.flush().await;
        Ok(subscriber)
    }

    /// Answers a request on the subject it named.
    pub async fn answer(&self, inbox: String, payload: Bytes) {
        if let Err(e) = self.client.publish(inbox, payload).await {
            tracing::debug!(error = %e, "cannot answer a request on NATS");
        }
    }
}

fn nats_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Nats(e.to_string().into())
}

/// A chat's subscription; dropping it unsubscribes.
#[derive(Debug)]
pub struct Watch(tokio::task::JoinHandle<()>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `"<seq> <node>"` of chat `chat_id`.
fn parse(chat_id: Uuid, payload: &[u8]) -> Option<LogNotice> {
    let text = std::str::from_utf8(payload).ok()?;
    let (seq, node) = text.split_once(' ')?;
    Some(LogNotice {
        chat_id,
        seq: seq.parse().ok()?,
        node: node.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_reads_back_and_nonsense_does_not() {
        let chat = Uuid::new_v4();
        assert_eq!(
            parse(chat, b"42 7"),
            Some(LogNotice {
                chat_id: chat,
                seq: 42,
                node: 7
            })
        );
        for bad in [&b""[..], b"42", b"x 7", b"42 y", b"\xff 1"] {
            assert_eq!(parse(chat, bad), None);
        }
    }
}
