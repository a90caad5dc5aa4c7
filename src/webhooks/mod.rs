//! Webhooks out: a backend's endpoint told of what happens in its users'
//! chats — `chat.created`, `run.completed`, `run.failed`,
//! `input.requested`, `approval.requested` — in the Standard Webhooks
//! format (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<HMAC>`).
//!
//! The events are written to the store's outbox in the transaction that
//! logs their envelope (`store::outbox`); every node runs a [`Dispatcher`]
//! that claims the due ones with a lease and sends them, in order per chat,
//! each with the same id on every attempt, again with backoff until the
//! endpoint answers 2xx (across restarts and nodes: at least once).
//!
//! Uses `config`, `store`, `metrics`, `llm` (the TLS provider).

mod sign;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use sign::{Secret, signature};

use crate::store::{Outbox, OutboxRow, Store};

/// How often the outbox is looked at.
const TICK: Duration = Duration::from_millis(250);
/// Events sent per tick at most.
const BATCH: u32 = 32;
/// How long a node holds an event it is sending.
const LEASE_MS: i64 = 30_000;
/// The longest wait between two attempts.
const MAX_BACKOFF_MS: i64 = 3_600_000;

/// Sends the outbox's events to one endpoint.
pub struct Dispatcher {
    pub store: Arc<dyn Store>,
    pub url: reqwest::Url,
    pub secret: Secret,
}

impl Dispatcher {
    /// Runs until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        crate::llm::install_crypto();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the HTTP client builds");
        let outbox = self.store.outbox();
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
                match outbox.claim(&row.id, now, now + LEASE_MS).await {
                    Ok(true) => self.send(&client, &outbox, row).await,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot claim a webhook event"),
                }
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
            }
            data["envelope"] = envelope;
        }
        Ok(json!({"type": row.event, "timestamp": timestamp, "data": data}))
    }
}
