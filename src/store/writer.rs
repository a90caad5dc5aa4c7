//! Group commit: one task drains append requests from every chat and commits
//! them together, so a token stream does not cost one fsync per token (one
//! task per database when chats are spread over several: `Store::parts`).
//!
//! A store may take several group commits at once
//! ([`Store::commits_in_flight`]; PostgreSQL does, SQLite's one write
//! connection does not): requests that arrive while a commit waits for its
//! flush start the next one instead of waiting for it. A chat's actor waits
//! for each append before the next, so no chat is in two commits and each
//! chat's rows are committed and handed on in seq order.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::sleep;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::{AppendBatch, Store, StoreError, Tidy};

/// Most append requests folded into one transaction.
const MAX_REQUESTS_PER_COMMIT: usize = 512;
/// Append requests waiting for the writer; senders wait when it is full.
const QUEUE: usize = 1024;
/// How long the writer waits for requests before it lets the store tidy
/// (and between tidies while the store's work is not due yet).
const IDLE: Duration = Duration::from_millis(100);

/// What a chat does with a batch the moment it is committed: the writer calls
/// it as each commit ends (a chat's batches in its seq order), before the batch's `append` returns, so a chat hands
/// its envelopes to its connections without waiting for its own task to be
/// scheduled again (after a commit of N chats' words, the last connection's
/// word waited behind N actors' turns, `bench/notes.md`).
pub trait OnCommit: Send + Sync {
    /// `batch` is durable. Must not block: it runs on the writer's task.
    fn committed(&self, batch: &AppendBatch);
}

struct Request {
    batch: AppendBatch,
    done: Waiter,
}

/// Who waits for a request: its `append` call, and what it does first.
struct Waiter {
    done: oneshot::Sender<Result<(), StoreError>>,
    then: Option<Arc<dyn OnCommit>>,
    /// When the append was asked for.
    asked: std::time::Instant,
}

impl Waiter {
    fn send(self, result: Result<(), StoreError>, batch: &AppendBatch) {
        if result.is_ok()
            && let Some(then) = &self.then
        {
            then.committed(batch);
            crate::metrics::delivered(self.asked.elapsed());
        }
        // The asker may have gone away (its chat stopped): nothing to do.
        let _ = self.done.send(result);
    }
}

/// Handle to the writer task. Cheap to clone. The task ends, after committing
/// everything it was given, when the last handle is dropped.
#[derive(Clone)]
pub struct LogWriter {
    /// One writer per database ([`Store::parts`]), each chat's by
    /// [`Store::part_of`].
    tx: Arc<[mpsc::Sender<Request>]>,
    store: Arc<dyn Store>,
}

impl LogWriter {
    /// Starts the writer task over `store`: one group commit at a time per
    /// database of a store spread over several.
    pub fn spawn(store: Arc<dyn Store>) -> (Self, JoinHandle<()>) {
        let mut parts = store.parts();
        if parts.is_empty() {
            parts.push(store.clone());
        }
        let (tx, tasks): (Vec<_>, Vec<_>) = parts
            .into_iter()
            .map(|part| {
                let (tx, rx) = mpsc::channel(QUEUE);
                (tx, tokio::spawn(run(part, rx)))
            })
            .unzip();
        let task = tokio::spawn(async move {
            for task in tasks {
                let _ = task.await;
            }
        });
        let tx = tx.into();
        (Self { tx, store }, task)
    }

    /// Appends one chat's envelopes and returns once they are committed.
    ///
    /// # Errors
    /// The transaction they were part of failed; none of them is stored.
    pub async fn append(&self, batch: AppendBatch) -> Result<(), StoreError> {
        self.append_then(batch, None).await
    }

    /// [`append`](Self::append), calling `then` with the batch once it is
    /// committed, before returning.
    ///
    /// # Errors
    /// The transaction they were part of failed; none of them is stored and
    /// `then` is not called.
    pub async fn append_then(
        &self,
        batch: AppendBatch,
        then: Option<Arc<dyn OnCommit>>,
    ) -> Result<(), StoreError> {
        let (done, rx) = oneshot::channel();
        let done = Waiter {
            done,
            then,
            asked: std::time::Instant::now(),
        };
        let part = match self.tx.len() {
            1 => 0,
            _ => self.store.part_of(batch.chat_id),
        };
        self.tx[part]
            .send(Request { batch, done })
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }
}

async fn run(store: Arc<dyn Store>, mut rx: mpsc::Receiver<Request>) {
    let depth = store.commits_in_flight().max(1);
    let mut commits = FuturesUnordered::new();
    let mut requests = Vec::with_capacity(MAX_REQUESTS_PER_COMMIT);
    // When to let the store tidy if no request comes: after each commit, and
    // right away while tidying finds work (a request still goes first). Only
    // while no commit is in flight.
    let mut tidy = Some(Duration::ZERO);
    let mut open = true;
    while open || !commits.is_empty() {
        let idle = commits.is_empty();
        let wait = tidy.filter(|_| idle);
        tokio::select! {
            // A finished commit frees its slot first.
            biased;
            Some(()) = commits.next(), if !idle => {}
            received = rx.recv_many(&mut requests, MAX_REQUESTS_PER_COMMIT), if open && commits.len() < depth => {
                if received == 0 {
                    open = false;
                    continue;
                }
                tidy = Some(IDLE);
                let (batches, waiters): (Vec<_>, Vec<_>) =
                    requests.drain(..).map(|r| (r.batch, r.done)).unzip();
                commits.push(commit(Arc::clone(&store), batches, waiters));
            }
            () = sleep(wait.unwrap_or_default()), if open && wait.is_some() => {
                tidy = match store.tidy().await {
                    Ok(Tidy::Done) => None,
                    Ok(Tidy::Again) => Some(Duration::ZERO),
                    Ok(Tidy::Later) => Some(IDLE),
                    Err(e) => {
                        // The next append reports a lasting failure;
                        // tidying tries again later, not ten times a second.
                        tracing::warn!(error = %e, "tidying the log failed");
                        Some(IDLE * 50)
                    }
                };
            }
        }
    }
}

/// Commits one group and answers each of its waiters, in order.
async fn commit(store: Arc<dyn Store>, batches: Vec<AppendBatch>, waiters: Vec<Waiter>) {
    let started = std::time::Instant::now();
    // One commit in `commit_sample_ratio` gets a span (traces on).
    let span = crate::telemetry::commit_span(batches.len(), || {
        batches.iter().map(|b| b.envelopes.len()).sum()
    });
    let mut result = store.append(&batches).await;
    if let Err(e) = &result {
        span.fail(|| "store_error".to_owned(), || e.to_string());
    }
    let (mut batches, mut waiters) = (batches, waiters);
    // Chats whose lease moved fail alone; the rest commit without them.
    if let Err(StoreError::Fenced(lost)) = &result {
        let lost = lost.clone();
        let (mut kept, mut kept_waiters) = (Vec::new(), Vec::new());
        for (batch, done) in batches.into_iter().zip(waiters) {
            if lost.contains(&batch.chat_id) {
                done.send(Err(StoreError::Fenced(lost.clone())), &batch);
            } else {
                kept.push(batch);
                kept_waiters.push(done);
            }
        }
        (batches, waiters) = (kept, kept_waiters);
        result = if batches.is_empty() {
            Ok(())
        } else {
            store.append(&batches).await
        };
    }
    match result {
        Ok(()) => {
            let envelopes = batches.iter().map(|b| b.envelopes.len()).sum();
            crate::metrics::committed(batches.len(), envelopes, started.elapsed());
            for (batch, done) in batches.iter().zip(waiters) {
                done.send(Ok(()), batch);
            }
        }
        Err(e) if batches.len() > 1 => {
            // One chat's bad batch must not fail the others that shared its
            // transaction: commit each on its own and report each result.
            tracing::warn!(error = %e, batches = batches.len(), "group commit failed; retrying one by one");
            for (batch, done) in batches.iter().zip(waiters) {
                let started = std::time::Instant::now();
                let result = store.append(std::slice::from_ref(batch)).await;
                match &result {
                    Ok(()) => {
                        crate::metrics::committed(1, batch.envelopes.len(), started.elapsed());
                    }
                    Err(e) => {
                        tracing::error!(error = %e, chat_id = %batch.chat_id, "append failed");
                    }
                }
                done.send(result, batch);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, chat_id = %batches[0].chat_id, "append failed");
            for (batch, done) in batches.iter().zip(waiters) {
                done.send(Err(e.clone()), batch);
            }
        }
    }
}
