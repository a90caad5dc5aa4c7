//! The scheduler: each tick, the schedules due, each fired (or skipped, if
//! every node was down when it was due and its policy says so) and moved
//! on to its next time.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Missed, Spec, chat_for};
use crate::session::{Caller, Registry, SessionError};
use crate::store::{ScheduleRecord, Schedules};

/// Schedules fired per tick at most (the rest on the next).
const BATCH: u32 = 100;

/// Fires the schedules of one store.
pub struct Scheduler {
    pub registry: Registry,
    pub schedules: Schedules,
    /// How often due schedules are looked for.
    pub tick: Duration,
    /// A due time older than this when found was missed (every node was
    /// down): its schedule's [`Missed`] policy applies.
    pub grace: Duration,
}

impl Scheduler {
    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = chrono::Utc::now().timestamp_millis();
            let due = match self.schedules.due(now, BATCH).await {
                Ok(due) => due,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the due schedules");
                    continue;
                }
            };
            for schedule in due {
                if shutdown.is_cancelled() {
                    return;
                }
                self.fire(schedule, now).await;
            }
        }
    }

    /// Fires one due schedule (or skips a missed time) and moves it on.
    async fn fire(&self, s: ScheduleRecord, now: i64) {
        let spec = match Spec::parse(&s.cron, &s.time_zone) {
            Ok(spec) => spec,
            Err(e) => {
                // Checked when made: only a store edited by hand gets here.
                tracing::error!(schedule = %s.id, error = %e, "an unreadable schedule is paused");
                let _ = self
                    .schedules
                    .set_paused(s.id, &s.owner, true, s.next_at)
                    .await;
                return;
            }
        };
        let next = spec.next_after(now).unwrap_or(i64::MAX);
        let late = now - s.next_at > self.grace.as_millis() as i64;
        let fires = !late || Missed::parse(&s.missed) == Missed::RunOnce;
        let mut fired = None;
        if fires {
            let chat = chat_for(s.id, s.next_at);
            match self.start(&s, chat).await {
                Ok(()) => fired = Some((s.next_at, chat)),
                // Worth another try at the next tick: the due time stays.
                Err(e) if transient(&e) => {
                    tracing::warn!(schedule = %s.id, error = %e, "a schedule could not fire yet");
                    return;
                }
                Err(e) => {
                    tracing::warn!(schedule = %s.id, error = %e, "a schedule's run could not start");
                }
            }
        } else {
            tracing::info!(schedule = %s.id, due_at = s.next_at, "skipped a time missed while no node ran");
        }
        match self.schedules.advance(s.id, s.next_at, next, fired).await {
            Ok(true) => {
                let outcome = if fired.is_some() {
                    "fired"
                } else if fires {
                    "failed"
                } else {
                    "skipped"
                };
                metrics::counter!(crate::metrics::SCHEDULE_FIRINGS, "outcome" => outcome)
                    .increment(1);
            }
            // Another node moved it on first (its start found this chat).
            Ok(false) => {}
            Err(e) => tracing::warn!(schedule = %s.id, error = %e, "cannot move a schedule on"),
        }
    }

    /// Starts the due time's chat for the schedule's user, its context
    /// saying which schedule and time made it.
    async fn start(&self, s: &ScheduleRecord, chat: uuid::Uuid) -> Result<(), SessionError> {
        let mut context: Map<String, Value> = s
            .context
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        let due_at = chrono::DateTime::from_timestamp_millis(s.next_at)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        context.insert("schedule".into(), json!({"id": s.id, "due_at": due_at}));
        let caller = Caller {
            context: Some(&context),
            ..Caller::user(&s.owner)
        };
        self.registry
            .start_conversation(chat, caller, &s.agent, s.message.clone(), None)
            .await
    }
}

/// Whether a failed start may work at the next tick: an outage of the
/// store or of a node. A user's rate or quota is not (the due time counts
/// as failed and the schedule goes on: one user's schedules never hold the
/// others' back).
fn transient(e: &SessionError) -> bool {
    matches!(
        e,
        SessionError::Persistence(_)
            | SessionError::ShuttingDown
            | SessionError::Moved
            | SessionError::NodeLost
            | SessionError::NoAnswer
    )
}
