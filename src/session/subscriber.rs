//! What a chat sends to a connection, and how it tells a connection to go.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::protocol::{mark_replay, resume_boundary};
use crate::store::{AppendBatch, OnCommit, Store, StoreError};

/// The most envelopes read from the store per page of a replay.
const REPLAY_PAGE: u32 = 500;
/// How many bytes one page of a replay may hold (or one envelope, if
/// larger): a client that does not read pins at most about this much of it.
const REPLAY_PAGE_BYTES: usize = 1 << 20;

/// One item of a connection's outbound queue.
#[derive(Debug)]
pub enum Outbound {
    /// A live envelope, already committed.
    Event(Arc<str>),
    /// A connection-level frame: `pong`, a per-connection `chat.error`.
    Frame(String),
    /// A replay to write before anything queued after it, then its boundary
    /// (boxed: it is rare, and a queue's slots are sized by the largest
    /// variant).
    Replay(Box<Replay>),
}

/// A replay of one chat's log from `after` up to `upto`, read lazily in pages
/// so a long log never sits in a queue.
pub struct Replay {
    chat_id: Uuid,
    next_after: u64,
    upto: u64,
    recovered: bool,
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay")
            .field("chat_id", &self.chat_id)
            .field("next_after", &self.next_after)
            .field("upto", &self.upto)
            .finish()
    }
}

impl Replay {
    pub(crate) fn new(
        chat_id: Uuid,
        after: u64,
        upto: u64,
        recovered: bool,
        store: Arc<dyn Store>,
    ) -> Self {
        Self {
            chat_id,
            next_after: after,
            upto,
            recovered,
            store,
        }
    }

    /// The next page of replayed envelopes (JSON with `"replay":true`), or
    /// `None` when the replay is complete.
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn next_page(&mut self) -> Result<Option<Vec<String>>, StoreError> {
        if self.next_after >= self.upto {
            return Ok(None);
        }
        let (page, _) = self
            .store
            .load_bounded(
                self.chat_id,
                self.next_after,
                REPLAY_PAGE,
                REPLAY_PAGE_BYTES,
            )
            .await?;
        let mut out = Vec::with_capacity(page.len());
        for env in page {
            // Envelopes committed after the subscription went live, not replayed.
            if env.seq > self.upto {
                self.next_after = self.upto;
                break;
            }
            self.next_after = env.seq;
            out.push(mark_replay(&env.json));
        }
        if out.is_empty() {
            self.next_after = self.upto;
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// The `chat.resume_boundary` that follows the replay.
    pub fn boundary(&self) -> String {
        resume_boundary(self.chat_id, self.upto, self.recovered)
    }

    /// The chat being replayed.
    pub fn chat_id(&self) -> Uuid {
        self.chat_id
    }
}

/// Asks a connection to close with a WebSocket close code. The first request
/// wins; the connection's tasks watch [`Closer::closed`].
#[derive(Debug, Clone, Default)]
pub struct Closer {
    token: CancellationToken,
    why: Arc<OnceLock<(u16, &'static str)>>,
}

impl Closer {
    /// Requests the close.
    pub fn close(&self, code: u16, reason: &'static str) {
        let _ = self.why.set((code, reason));
        self.token.cancel();
    }

    /// Resolves once a close was requested.
    pub async fn closed(&self) {
        self.token.cancelled().await;
    }

    /// Whether a close was requested.
    pub fn is_closed(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The close code and reason requested (1000 if none was given).
    pub fn why(&self) -> (u16, &'static str) {
        self.why.get().copied().unwrap_or((1000, ""))
    }
}

/// A connection subscribed to a chat.
#[derive(Debug, Clone)]
pub struct Subscriber {
    /// Unique per connection, for unsubscribing.
    pub conn_id: u64,
    /// The connection's bounded outbound queue, shared by all its chats.
    /// flume's, not tokio's: it allocates its slots as items come, where
    /// tokio's took ~1.3 KB up front — a tenth of an idle connection
    /// (`bench/notes.md`).
    tx: flume::Sender<Outbound>,
    /// How the chat closes a connection too slow to drain its queue (1013).
    pub closer: Closer,
    /// The bytes of live envelopes in the queue, and their bound.
    queued: QueueBytes,
}

impl Subscriber {
    /// A new connection's queue: at most `messages` items and about
    /// `max_bytes` of live envelopes.
    pub fn channel(conn_id: u64, messages: usize, max_bytes: usize) -> (Self, OutboundRx) {
        let (tx, rx) = flume::bounded(messages);
        let queued = QueueBytes::new(max_bytes);
        let sub = Self {
            conn_id,
            tx,
            closer: Closer::default(),
            queued: queued.clone(),
        };
        (sub, OutboundRx { rx, queued })
    }

    /// Queues a live envelope without waiting.
    ///
    /// # Errors
    /// The queue is full (in messages or in bytes), or the connection is gone.
    pub(crate) fn try_send_event(
        &self,
        json: Arc<str>,
    ) -> Result<(), flume::TrySendError<Outbound>> {
        let len = json.len();
        if !self.queued.admit(len) {
            return Err(flume::TrySendError::Full(Outbound::Event(json)));
        }
        self.tx.try_send(Outbound::Event(json)).inspect_err(|_| {
            self.queued.release(len);
        })
    }

    /// Queues `item` without waiting; `false` if the queue is full or the
    /// connection gone.
    pub(crate) fn try_send(&self, item: Outbound) -> bool {
        self.tx.try_send(item).is_ok()
    }

    /// Queues `item`, waiting while the queue is full; `false` if the
    /// connection is gone.
    pub async fn send(&self, item: Outbound) -> bool {
        self.tx.send_async(item).await.is_ok()
    }

    /// Whether the connection has stopped reading its queue (it is gone).
    pub fn is_closed(&self) -> bool {
        self.tx.is_disconnected()
    }
}

/// A chat's subscribers, shared by its actor (which adds and removes them)
/// and the log writer, which hands each of the chat's commits to them the
/// moment it is durable ([`OnCommit`]).
#[derive(Debug, Default)]
pub(crate) struct Fanout {
    subs: Mutex<Vec<Subscriber>>,
}

impl Fanout {
    /// The subscribers. Never held across an await.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Subscriber>> {
        // Nothing panics while the list is held.
        self.subs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands a committed envelope to every subscriber without waiting.
    pub(crate) fn deliver(&self, json: &Arc<str>) {
        deliver(&mut self.lock(), json);
    }

    /// Whether no subscriber's connection is open.
    pub(crate) fn all_gone(&self) -> bool {
        self.lock().iter().all(Subscriber::is_closed)
    }
}

impl OnCommit for Fanout {
    fn committed(&self, batch: &AppendBatch) {
        let mut subs = self.lock();
        for e in &batch.envelopes {
            if subs.is_empty() {
                return;
            }
            deliver(&mut subs, &e.json);
        }
    }
}

/// Hands `json` to each of `subs` without waiting. One whose queue is full is
/// closed with 1013 (it will resume by `seq`) and dropped, as is one whose
/// connection is gone.
fn deliver(subs: &mut Vec<Subscriber>, json: &Arc<str>) {
    subs.retain(|sub| match sub.try_send_event(json.clone()) {
        Ok(()) => true,
        Err(flume::TrySendError::Full(_)) => {
            metrics::counter!(crate::metrics::SLOW_DISCONNECTS).increment(1);
            tracing::info!(
                conn_id = sub.conn_id,
                "subscriber too slow; closing with 1013"
            );
            sub.closer
                .close(1013, "too slow: resume from your last seq");
            false
        }
        Err(flume::TrySendError::Disconnected(_)) => false,
    });
}

/// The bytes of live envelopes waiting in one connection's queue.
#[derive(Debug, Clone)]
struct QueueBytes {
    used: Arc<AtomicUsize>,
    max: usize,
}

impl QueueBytes {
    fn new(max: usize) -> Self {
        Self {
            used: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Counts `len` more bytes if they fit. An empty queue takes an envelope
    /// of any size, so one larger than the bound still gets through.
    fn admit(&self, len: usize) -> bool {
        let before = self.used.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > self.max {
            self.release(len);
            return false;
        }
        true
    }

    fn release(&self, len: usize) {
        self.used.fetch_sub(len, Ordering::AcqRel);
    }
}

/// The receiving end of a connection's queue: counts live envelopes out of
/// the byte bound as the connection takes them.
#[derive(Debug)]
pub struct OutboundRx {
    rx: flume::Receiver<Outbound>,
    queued: QueueBytes,
}

impl Drop for OutboundRx {
    /// Frees what is queued now: flume keeps a dropped receiver's items until
    /// the last sender goes, and a gone connection stays in its chats' lists
    /// (a sender each) until their next commit — forever for a quiet chat.
    /// Nothing is queued after this: the senders see the queue disconnected.
    fn drop(&mut self) {
        self.rx.drain();
    }
}

impl OutboundRx {
    /// The next item; `None` when every sender is gone.
    pub async fn recv(&mut self) -> Option<Outbound> {
        let item = self.rx.recv_async().await.ok();
        if let Some(Outbound::Event(json)) = &item {
            self.queued.release(json.len());
        }
        item
    }

    /// Whether nothing is queued now.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_subscriber_is_closed_with_1013_and_a_gone_one_dropped() {
        let (slow, _unread) = Subscriber::channel(1, 16, 1 << 20);
        let (gone, rx) = Subscriber::channel(2, 16, 1 << 20);
        drop(rx);
        let fanout = Fanout::default();
        fanout.lock().extend([slow.clone(), gone]);
        fanout.deliver(&Arc::from("0"));
        assert_eq!(fanout.lock().len(), 1, "the gone one is dropped at once");
        for i in 1..=16 {
            fanout.deliver(&Arc::from(i.to_string()));
        }
        assert!(fanout.lock().is_empty(), "the 17th found the queue full");
        assert_eq!(
            slow.closer.why(),
            (1013, "too slow: resume from your last seq")
        );
    }

    #[test]
    fn a_dropped_queue_frees_what_it_held() {
        let (sub, rx) = Subscriber::channel(1, 16, 1 << 20);
        let json: Arc<str> = Arc::from("{}");
        sub.try_send_event(json.clone()).unwrap();
        assert_eq!(Arc::strong_count(&json), 2);
        drop(rx);
        assert_eq!(Arc::strong_count(&json), 1, "freed while a sender lives");
        assert!(sub.is_closed());
        assert!(sub.try_send_event(json.clone()).is_err());
        assert_eq!(Arc::strong_count(&json), 1);
    }
}
