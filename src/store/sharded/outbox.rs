//! Webhooks' outbox over several databases: each chat's events and waits in
//! its database. A list asks every database and takes what those that
//! answer hold (one down holds up only its own chats' events); an event or
//! a wait is sent to its chat's database alone (an event's id names its
//! chat: `msg_<chat>_<seq>…`).

use futures_util::future::join_all;
use uuid::Uuid;

use super::place;
use crate::store::{Outbox, OutboxRow, StoreError, Wait};

/// The outbox of a spread.
#[derive(Debug)]
pub struct SpreadOutbox {
    parts: Vec<Outbox>,
    names: Vec<String>,
}

/// The chat an event's id names.
fn chat_of(id: &str) -> Option<Uuid> {
    Uuid::parse_str(id.strip_prefix("msg_")?.split('_').next()?).ok()
}

/// What the databases that answered hold; an error only if none did.
fn answered<T>(results: Vec<Result<Vec<T>, StoreError>>, what: &str) -> Result<Vec<T>, StoreError> {
    let mut found = Vec::new();
    let (mut any, mut failed) = (false, None);
    for result in results {
        match result {
            Ok(rows) => {
                any = true;
                found.extend(rows);
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot read {what} in a database of the spread");
                failed = Some(e);
            }
        }
    }
    match (any, failed) {
        (false, Some(e)) => Err(e),
        _ => Ok(found),
    }
}

impl SpreadOutbox {
    pub(super) fn new(parts: Vec<Outbox>, names: Vec<String>) -> Self {
        Self { parts, names }
    }

    fn of(&self, chat: Uuid) -> &Outbox {
        &self.parts[place(&self.names, chat.as_bytes())]
    }

    /// The database of event `id`.
    fn holding(&self, id: &str) -> Result<&Outbox, StoreError> {
        chat_of(id)
            .map(|chat| self.of(chat))
            .ok_or(StoreError::Spread)
    }

    pub(crate) async fn due(&self, now: i64, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        let results = join_all(self.parts.iter().map(|p| p.due(now, limit))).await;
        let mut all = answered(results, "webhook events")?;
        all.sort_by_key(|r| (r.created_at, r.seq));
        all.truncate(limit as usize);
        Ok(all)
    }

    pub(crate) async fn claim(&self, id: &str, now: i64, until: i64) -> Result<bool, StoreError> {
        self.holding(id)?.claim(id, now, until).await
    }

    pub(crate) async fn delivered(&self, id: &str, now: i64) -> Result<(), StoreError> {
        self.holding(id)?.delivered(id, now).await
    }

    pub(crate) async fn retry(
        &self,
        id: &str,
        next_at: i64,
        error: &str,
    ) -> Result<(), StoreError> {
        self.holding(id)?.retry(id, next_at, error).await
    }

    pub(crate) async fn waits_due(
        &self,
        now: i64,
        every: i64,
        limit: u32,
    ) -> Result<Vec<Wait>, StoreError> {
        let results = join_all(self.parts.iter().map(|p| p.waits_due(now, every, limit))).await;
        let mut all = answered(results, "waits for a person")?;
        all.sort_by_key(|w| w.opened_at);
        all.truncate(limit as usize);
        Ok(all)
    }

    pub(crate) async fn remind(
        &self,
        wait: &Wait,
        n: u32,
        created_at: i64,
    ) -> Result<bool, StoreError> {
        self.of(wait.chat_id).remind(wait, n, created_at).await
    }

    pub(crate) async fn forget_wait(&self, wait: &Wait) -> Result<(), StoreError> {
        self.of(wait.chat_id).forget_wait(wait).await
    }

    /// Events not delivered yet in the databases that answer.
    pub(crate) async fn waiting(&self) -> Result<u64, StoreError> {
        let results = join_all(
            self.parts
                .iter()
                .map(|p| async { p.waiting().await.map(|n| vec![n]) }),
        )
        .await;
        Ok(answered(results, "the outbox")?.into_iter().sum())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_events_id_names_its_chat() {
        let chat = uuid::Uuid::new_v4();
        for id in [
            format!("msg_{}_12", chat.simple()),
            format!("msg_{}_12_r3", chat.simple()),
        ] {
            assert_eq!(super::chat_of(&id), Some(chat));
        }
        assert_eq!(super::chat_of("msg_nope_1"), None);
        assert_eq!(super::chat_of("evt_1"), None);
    }
}
