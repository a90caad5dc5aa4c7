//! Webhooks out: a backend's endpoint told of what happens in its users'
//! chats — `chat.created`, `run.completed`, `run.failed`,
//! `input.requested`, `approval.requested` — in the Standard Webhooks
//! format (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<HMAC>`).
//!
//! The events are written to the store's outbox in the transaction that
//! logs their envelope (`store::outbox`); every node runs a [`Dispatcher`]
//! that claims the due ones with a lease and sends them, in order per chat,
//! each with the same id on every attempt, again with backoff until the
//! endpoint answers 2xx (across restarts and nodes: at least once). With
//! `webhook_remind_seconds`, a wait for a person the store still holds open
//! is told again, as a reminder of its own, until it is answered.
//!
//! Uses `config`, `store`, `metrics`, `llm` (the TLS provider).

mod sign;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use sign::{Secret, signature};

use crate::store::{Outbox, OutboxRow, Store, Wait};

/// How often the outbox is looked at.
const TICK: Duration = Duration::from_millis(250);
/// Events sent per tick at most.
const BATCH: u32 = 32;
/// The longest wait between two attempts.
const MAX_BACKOFF_MS: i64 = 3_600_000;

/// Sends the outbox's events to one endpoint.
pub struct Dispatcher {
    pub store: Arc<dyn Store>,
    pub url: reqwest::Url,
    pub secret: Secret,
    /// How long one request may take; a node holds an event it sends for
    /// twice that.
    pub timeout: Duration,
    /// Open waits for a person are told again this often.
    pub remind: Option<Duration>,
}

impl Dispatcher {
    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        crate::llm::install_crypto();
        let client = reqwest::Client::builder()
            .connect_timeout(self.timeout.min(Duration::from_secs(5)))
            .timeout(self.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the HTTP client builds");
        let outbox = self.store.outbox();
        let lease = i64::try_from(self.timeout.as_millis() * 2).unwrap_or(i64::MAX);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks = 0_u64;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            ticks += 1;
            if ticks % 40 == 1
                && let Ok(n) = outbox.waiting().await
            {
                metrics::gauge!(crate::metrics::WEBHOOKS_WAITING).set(n as f64);
            }
            if ticks % 4 == 1
                && let Some(every) = self.remind
            {
                self.remind(&outbox, every).await;
            }
            let now = chrono::Utc::now().timestamp_millis();
            let due = match outbox.due(now, BATCH).await {
                Ok(due) => due,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the webhook outbox");
                    continue;
                }
            };
            for row in due {
                if shutdown.is_cancelled() {
                    return;
                }
                // Now, not the tick's: the sends before this one took time.
                let now = chrono::Utc::now().timestamp_millis();
                match outbox.claim(&row.id, now, now.saturating_add(lease)).await {
                    Ok(true) => self.send(&client, &outbox, row).await,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot claim a webhook event"),
                }
            }
        }
    }

    /// Puts a reminder in the outbox for each wait for a person open a
    /// whole `every` longer than when it was last told (times missed while
    /// no node ran are skipped: one reminder, saying how long it has been).
    async fn remind(&self, outbox: &Outbox, every: Duration) {
        let every = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
        let now = chrono::Utc::now().timestamp_millis();
        let waits = match outbox.waits_due(now, every, BATCH).await {
            Ok(waits) => waits,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the open waits for a person");
                return;
            }
        };
        for wait in waits {
            let made = match self.store.chat(wait.chat_id).await {
                // A chat deleted while it waited is told of no more; nor is
                // one whose run is over (its end was logged while the
                // outbox was off: nothing closed the wait).
                Ok(None) => outbox.forget_wait(&wait).await.map(|()| false),
                Ok(Some(chat)) if chat.state == crate::store::ChatState::Idle => {
                    outbox.forget_wait(&wait).await.map(|()| false)
                }
                Ok(Some(_)) => {
                    let n = reminder_number(&wait, now, every);
                    let at = wait
                        .opened_at
                        .saturating_add(every.saturating_mul(i64::from(n)));
                    outbox.remind(&wait, n, at).await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = made {
                tracing::warn!(error = %e, chat = %wait.chat_id, "cannot remind of a wait");
            }
        }
    }

    /// One attempt at one event.
    async fn send(&self, client: &reqwest::Client, outbox: &Outbox, row: OutboxRow) {
        let body = match self.payload(&row).await {
            Ok(body) => body.to_string(),
            Err(e) => {
                tracing::warn!(error = %e, id = %row.id, "cannot build a webhook event");
                return;
            }
        };
        let timestamp = chrono::Utc::now().timestamp();
        let signed = signature(&self.secret, &row.id, timestamp, &body);
        let sent = client
            .post(self.url.clone())
            .header("content-type", "application/json")
            .header("webhook-id", &row.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signed)
            .body(body)
            .send()
            .await;
        let now = chrono::Utc::now().timestamp_millis();
        let failure = match sent {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status().as_u16())),
            Err(e) => Some(e.without_url().to_string()),
        };
        let outcome = match failure {
            None => outbox.delivered(&row.id, now).await.map(|()| "delivered"),
            Some(error) => {
                let wait = (1000_i64 << row.attempts.min(22)).min(MAX_BACKOFF_MS);
                tracing::warn!(id = %row.id, attempts = row.attempts + 1, %error, "a webhook was not taken; trying again later");
                outbox
                    .retry(&row.id, now + wait, &error)
                    .await
                    .map(|()| "failed")
            }
        };
        match outcome {
            Ok(outcome) => {
                metrics::counter!(crate::metrics::WEBHOOK_DELIVERIES, "outcome" => outcome)
                    .increment(1);
            }
            Err(e) => tracing::warn!(error = %e, id = %row.id, "cannot record a webhook attempt"),
        }
    }

    /// The event's body: `{type, timestamp, data}` (Standard Webhooks'
    /// shape), `data` the chat, its user and agent, and the envelope that
    /// made the event as it was logged. The same on every attempt.
    async fn payload(&self, row: &OutboxRow) -> Result<Value, crate::store::StoreError> {
        let chat = self.store.chat(row.chat_id).await?;
        let envelope: Option<Value> = self
            .store
            .load_after(row.chat_id, row.seq.saturating_sub(1), 1)
            .await?
            .into_iter()
            .find(|e| e.seq == row.seq)
            .and_then(|e| serde_json::from_str(&e.json).ok());
        let timestamp = chrono::DateTime::from_timestamp_millis(row.created_at)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let mut data = json!({
            "chat_id": row.chat_id,
            "seq": row.seq,
            "user": chat.as_ref().map(|c| c.owner.clone()),
            "agent": chat.as_ref().map(|c| c.agent.clone()),
            "deleted": chat.is_none(),
        });
        if let Some(envelope) = envelope {
            // What waits for a person says since when (a backend reminds
            // them after a while).
            if matches!(row.event.as_str(), "input.requested" | "approval.requested") {
                data["requested_at"] = envelope["ts"].clone();
                let asked = envelope["ts"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map_or(row.created_at, |t| t.timestamp_millis());
                data["waited_seconds"] = json!((row.created_at - asked).max(0) / 1000);
                data["reminder"] = json!(reminder_of(&row.id));
            }
            data["envelope"] = envelope;
        }
        Ok(json!({"type": row.event, "timestamp": timestamp, "data": data}))
    }
}

/// The reminder a sweep at `now` makes of `wait`: the next one, or the one
/// `now` has reached when some were missed.
fn reminder_number(wait: &Wait, now: i64, every: i64) -> u32 {
    let reached = (now - wait.opened_at).max(0) / every.max(1);
    let reached = u32::try_from(reached).unwrap_or(u32::MAX);
    reached.max(wait.reminders.saturating_add(1))
}

/// Which reminder an event is (0: the first telling); its id ends `_r<n>`.
fn reminder_of(id: &str) -> u32 {
    id.rsplit_once("_r")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reminders_count_from_the_wait_and_skip_what_was_missed() {
        let wait = |reminders| Wait {
            chat_id: uuid::Uuid::nil(),
            seq: 4,
            event: "input.requested".into(),
            opened_at: 1_000,
            reminders,
        };
        assert_eq!(reminder_number(&wait(0), 11_000, 10_000), 1);
        assert_eq!(reminder_number(&wait(1), 21_500, 10_000), 2);
        // Down for an hour: one reminder, the hour's.
        assert_eq!(reminder_number(&wait(1), 3_601_000, 10_000), 360);
        assert_eq!(reminder_of("msg_ab12_4"), 0);
        assert_eq!(reminder_of("msg_ab12_4_r3"), 3);
    }
}
