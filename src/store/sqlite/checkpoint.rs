//! WAL checkpoints off the commit path.
//!
//! SQLite's default runs a checkpoint inside the commit that takes the WAL
//! past 1,000 pages: that commit then copies ~4 MiB into the database file and
//! fsyncs it, and every word waiting behind it waits too. Here a thread of its
//! own, on a connection of its own, runs `PASSIVE` checkpoints: they copy what
//! readers no longer need without taking any lock a writer waits on. But a
//! checkpoint's fsync still holds the writer's next fsync on the same disk:
//! every commit of over 12 ms measured after a burst ended within a
//! millisecond of a checkpoint (`bench/notes.md`). So a checkpoint runs when
//! it disturbs least and stays small: as soon as the writer has been idle for
//! [`IDLE`], or once the commits since the last one wrote [`COPY_ROWS`] rows
//! (a burst: the WAL grows fast, each copy stays a few MiB), or [`MOST`] after
//! the last one. Steady streams then see one short checkpoint a second or
//! so instead of twenty. The writer's own auto-checkpoint stays, far out
//! ([`BACKSTOP_PAGES`]), for when this thread falls behind (a long read
//! holding old frames).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::super::StoreError;

/// How often the thread looks whether a checkpoint is due.
const TICK: Duration = Duration::from_millis(10);
/// The writer idle this long: checkpoint now, no commit is disturbed.
const IDLE: Duration = Duration::from_millis(20);
/// Rows committed since the last checkpoint at which one runs anyway.
const COPY_ROWS: u64 = 4096;
/// Longest wait between checkpoints while rows were committed.
const MOST: Duration = Duration::from_secs(1);
/// WAL pages at which a committing connection checkpoints by itself (32 MiB).
pub(super) const BACKSTOP_PAGES: i64 = 8192;

/// What the writer tells the checkpointer: rows committed since the last
/// checkpoint, and when the last commit ended.
#[derive(Debug)]
struct Writes {
    rows: AtomicU64,
    /// Milliseconds after `start`.
    last: AtomicU64,
    start: Instant,
}

impl Writes {
    fn idle(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last.load(Ordering::Relaxed)))
    }
}

/// Stops its thread when dropped (after the checkpoint under way, if any).
#[derive(Debug)]
pub(super) struct Checkpointer {
    _stop: mpsc::Sender<()>,
    writes: Arc<Writes>,
}

impl Checkpointer {
    /// Starts checkpointing the WAL of the database at `path`.
    pub fn spawn(path: &Path) -> Result<Self, StoreError> {
        let conn = rusqlite::Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(1))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let name = path.display().to_string();
        let writes = Arc::new(Writes {
            rows: AtomicU64::new(0),
            last: AtomicU64::new(0),
            start: Instant::now(),
        });
        let seen = writes.clone();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                let mut last = Instant::now();
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    let rows = seen.rows.load(Ordering::Relaxed);
                    let due = rows >= COPY_ROWS || last.elapsed() >= MOST || seen.idle() >= IDLE;
                    if rows == 0 || !due {
                        continue;
                    }
                    seen.rows.fetch_sub(rows, Ordering::Relaxed);
                    last = Instant::now();
                    checkpoint(&conn, &name, rows);
                }
            })
            .map_err(|e| StoreError::Io(Arc::new(e)))?;
        Ok(Self {
            _stop: stop,
            writes,
        })
    }

    /// The writer committed `rows` rows (written, folded or deleted).
    pub fn wrote(&self, rows: usize) {
        let w = &self.writes;
        w.rows.fetch_add(rows.max(1) as u64, Ordering::Relaxed);
        let now = w.start.elapsed().as_millis() as u64;
        w.last.store(now, Ordering::Relaxed);
    }
}

fn checkpoint(conn: &rusqlite::Connection, name: &str, rows: u64) {
    let started = Instant::now();
    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
    });
    match done {
        Ok((wal, copied)) => {
            let ms = started.elapsed().as_millis();
            tracing::trace!(wal, copied, rows, ms, "checkpoint");
            if ms >= 10 {
                tracing::debug!(wal, copied, rows, ms, "slow checkpoint");
            }
        }
        Err(e) => tracing::warn!(error = %e, file = %name, "checkpoint failed"),
    }
}
