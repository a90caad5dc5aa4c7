//! WAL checkpoints off the commit path.
//!
//! SQLite's default runs a checkpoint inside the commit that takes the WAL
//! past 1,000 pages: that commit then copies ~4 MiB into the database file and
//! fsyncs it, and every word waiting behind it waits too. Here a thread of its
//! own, on a connection of its own, runs a `PASSIVE` checkpoint every
//! [`EVERY`]: it copies what readers no longer need without taking any lock a
//! writer waits on. Often, so that each copy (and its fsync, which the
//! writer's next fsync queues behind on the same disk) stays small
//! (measured in `bench/notes.md`). The writer's own auto-checkpoint stays, far
//! out ([`BACKSTOP_PAGES`]), for when this thread falls behind (a long read
//! holding old frames).

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use super::super::StoreError;

/// How often the checkpointer runs.
const EVERY: Duration = Duration::from_millis(50);
/// WAL pages at which a committing connection checkpoints by itself (32 MiB).
pub(super) const BACKSTOP_PAGES: i64 = 8192;

/// Stops its thread when dropped (after the checkpoint under way, if any).
#[derive(Debug)]
pub(super) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the WAL of the database at `path`.
    pub fn spawn(path: &Path) -> Result<Self, StoreError> {
        let conn = rusqlite::Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(1))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let name = path.display().to_string();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
                    let started = std::time::Instant::now();
                    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
                    });
                    match done {
                        Ok((wal, copied)) => {
                            let ms = started.elapsed().as_millis();
                            tracing::trace!(wal, copied, ms, "checkpoint");
                            if ms >= 10 {
                                tracing::debug!(wal, copied, ms, "slow checkpoint");
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, file = %name, "checkpoint failed"),
                    }
                }
            })
            .map_err(|e| StoreError::Io(Arc::new(e)))?;
        Ok(Self { _stop: stop })
    }
}
