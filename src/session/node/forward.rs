//! Requests for chats another node owns: sent as NATS requests when the
//! node is on NATS, through PostgreSQL's `node_commands` otherwise.
//!
//! On NATS a command is `"<from> <id> <sent ms> <inbox>\n"` followed by
//! its body sealed from this node to the owner with that line bound to it
//! (`store::seal`); the owner answers on that inbox (not on the message's
//! reply subject, which anyone could set), sealed back. The owner runs a
//! command only if its sender is a node it knows (keys are read on the
//! liveness tick, and at most once per 100 ms for a sender not known yet:
//! forged messages cost few queries), it was sent within
//! [`FORWARD_TIMEOUT`] of the owner's clock, it opens as from that node,
//! and its id was not run before. A request the owner cannot take (its
//! sender unknown yet, the clocks apart, too many at once), or that
//! reached nobody ("no responders": the owner is not on NATS now), goes
//! through PostgreSQL **with the same id**, and the owner runs an id once
//! whichever way it came, the copy that comes second getting the first
//! one's answer: a forged "no responders" or refusal makes a request
//! slower, never run twice nor answered wrongly. An answer that does not
//! open is skipped; none in [`FORWARD_TIMEOUT`] is
//! [`SessionError::NodeLost`].

use std::collections::{HashMap, VecDeque};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::{FORWARD_TIMEOUT, Forwarded, InFlight, Node};
use crate::session::SessionError;
use crate::session::handle::{Op, Origin};
use crate::session::registry::Registry;
use crate::store::StoreError;

/// Error texts crossing nodes are cut to this (a notification holds 8000 bytes).
const MAX_REPLY_TEXT: usize = 2000;
/// The ids of commands run in the last two windows, so a replay is dropped,
/// with the answer of each that came on NATS (for its copy that comes
/// through PostgreSQL).
#[derive(Debug, Default)]
pub(super) struct Seen {
    answers: HashMap<Uuid, Option<String>>,
    order: VecDeque<(i64, Uuid)>,
}

impl Seen {
    /// Records `id` at `now`; `false` if it was seen already.
    fn first(&mut self, id: Uuid, now: i64) -> bool {
        let window = window_ms();
        while let Some(&(at, old)) = self.order.front() {
            if now - at <= 2 * window {
                break;
            }
            self.order.pop_front();
            self.answers.remove(&old);
        }
        if self.answers.contains_key(&id) {
            return false;
        }
        self.answers.insert(id, None);
        self.order.push_back((now, id));
        true
    }

    /// Keeps the answer command `id` got.
    fn answered(&mut self, id: Uuid, text: &str) {
        if let Some(answer) = self.answers.get_mut(&id) {
            *answer = Some(text.to_owned());
        }
    }

    /// The answer of command `id`, if it ran and has one.
    fn answer(&self, id: Uuid) -> Option<String> {
        self.answers.get(&id).cloned().flatten()
    }
}

fn window_ms() -> i64 {
    i64::try_from(FORWARD_TIMEOUT.as_millis()).unwrap_or(i64::MAX)
}

pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// What an answer is bound to: the command it answers.
pub(super) fn answer_header(id: Uuid) -> String {
    format!("answer {id}")
}

/// A result as it crosses nodes: an error's long detail cut, its code kept.
pub(super) fn answer_text(result: &Result<(), SessionError>) -> String {
    let text = serde_json::to_string(result).expect("results serialize");
    if text.len() <= MAX_REPLY_TEXT {
        return text;
    }
    let short: Result<(), SessionError> = match result {
        Err(e) => Err(SessionError::Persistence(StoreError::Remote(
            e.to_string()
                .chars()
                .take(MAX_REPLY_TEXT / 2)
                .collect::<String>()
                .into(),
        ))),
        Ok(()) => Ok(()),
    };
    serde_json::to_string(&short).expect("results serialize")
}

pub(super) fn read_answer(body: &[u8]) -> Result<(), SessionError> {
    serde_json::from_slice::<Result<(), SessionError>>(body).unwrap_or_else(|e| {
        tracing::error!(error = %e, "unreadable answer from another node");
        Err(SessionError::NodeLost)
    })
}

impl Node {
    /// Runs `op` on node `to`, which holds the chat's lease, and returns its answer.
    pub(in crate::session) async fn forward(
        &self,
        to: i64,
        chat_id: Uuid,
        op: Op,
    ) -> Result<(), SessionError> {
        let body = serde_json::to_vec(&Forwarded { chat_id, op }).expect("ops serialize");
        // One id whichever way it goes: the owner runs an id once.
        let id = Uuid::new_v4();
        if let Some(bus) = self.bus.as_ref().filter(|b| !b.is_down())
            && let Some(result) = self.forward_on_nats(bus, id, to, &body).await
        {
            return result;
        }
        self.forward_on_pg(id, to, chat_id, &body).await
    }

    /// Registers a request in flight to `to`: the liveness check ends it
    /// if `to` dies.
    pub(super) fn in_flight(
        &self,
        id: Uuid,
        to: i64,
    ) -> oneshot::Receiver<Result<(), SessionError>> {
        let (done, answer) = oneshot::channel();
        self.in_flight
            .lock()
            .expect("in-flight lock")
            .insert(id, InFlight { to, done });
        answer
    }

    pub(super) fn landed(&self, id: Uuid) {
        self.in_flight.lock().expect("in-flight lock").remove(&id);
    }

    async fn forward_on_pg(
        &self,
        id: Uuid,
        to: i64,
        chat_id: Uuid,
        body: &[u8],
    ) -> Result<(), SessionError> {
        let answer = self.in_flight(id, to);
        if let Err(e) = self.cluster.send_command(id, to, body).await {
            self.landed(id);
            return Err(e.into());
        }
        metrics::counter!(crate::metrics::CLUSTER_COMMANDS, "via" => "notify").increment(1);
        match tokio::time::timeout(FORWARD_TIMEOUT, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(SessionError::ShuttingDown),
            Err(_) => {
                self.landed(id);
                let _ = self.cluster.withdraw_command(id).await;
                tracing::warn!(%chat_id, node = to, "a forwarded request got no answer in time");
                Err(SessionError::NodeLost)
            }
        }
    }

    /// An answer on this node's channel, to a command sent through PostgreSQL.
    pub(super) fn on_reply(&self, id: Uuid, body: &str) {
        let Some(flight) = self.in_flight.lock().expect("in-flight lock").remove(&id) else {
            return; // Timed out already.
        };
        let _ = flight.done.send(read_answer(body.as_bytes()));
    }

    /// Runs a command another node sent here through PostgreSQL and answers it.
    pub(super) async fn run_command(&self, registry: &Registry, id: Uuid) {
        let (sender, body) = match self.cluster.take_command(id).await {
            Ok(Some(taken)) => taken,
            Ok(None) => return, // Withdrawn by its sender.
            Err(e) => {
                tracing::error!(error = %e, "cannot take a forwarded command");
                return;
            }
        };
        let text = match self.first_time(id) {
            // Nothing waits for this answer but this reply: a copy on NATS
            // coming after it is dropped, its sender gone.
            true => answer_text(&run(registry, &body).await),
            // It came on NATS too (its sender was told to come this way
            // after it arrived there): the answer it got there.
            false => self.answer_of(id).await,
        };
        if let Err(e) = self.cluster.reply(sender, id, &text).await {
            tracing::warn!(error = %e, "cannot answer a forwarded command");
        }
    }

    /// Whether command `id` runs now: `false` if it ran already (it came
    /// both ways, or is a replay).
    pub(super) fn first_time(&self, id: Uuid) -> bool {
        self.seen.lock().expect("seen lock").first(id, now_ms())
    }

    /// Runs command `id`, come on NATS and seen for the first time, and
    /// keeps its answer for a copy that comes through PostgreSQL.
    pub(super) async fn run_once(&self, registry: &Registry, id: Uuid, body: &[u8]) -> String {
        let text = answer_text(&run(registry, body).await);
        self.seen.lock().expect("seen lock").answered(id, &text);
        text
    }

    /// The answer command `id` got the other way, once it has one (it may
    /// still be running); `NodeLost` if none comes in time.
    async fn answer_of(&self, id: Uuid) -> String {
        let deadline = tokio::time::Instant::now() + FORWARD_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            if let Some(text) = self.seen.lock().expect("seen lock").answer(id) {
                return text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        answer_text(&Err(SessionError::NodeLost))
    }
}

pub(super) async fn run(registry: &Registry, body: &[u8]) -> Result<(), SessionError> {
    match serde_json::from_slice::<Forwarded>(body) {
        Ok(Forwarded { chat_id, op }) => registry.call_op(chat_id, op, Origin::Remote).await,
        Err(e) => {
            tracing::error!(error = %e, "unreadable command from another node");
            Err(SessionError::NodeLost)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_id_is_run_once_and_forgotten_after_two_windows() {
        let mut seen = Seen::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(seen.first(a, 0));
        assert!(!seen.first(a, 10));
        assert!(seen.first(b, 2 * window_ms()));
        assert!(!seen.first(a, 2 * window_ms()), "still within two windows");
        assert!(
            seen.first(a, 2 * window_ms() + 1),
            "past them (refused by its age)"
        );
        assert_eq!(seen.answers.len(), 2);
        assert_eq!(seen.answer(b), None, "running");
        seen.answered(b, "{\"Ok\":null}");
        assert_eq!(seen.answer(b).as_deref(), Some("{\"Ok\":null}"));
    }

    #[test]
    fn a_long_error_is_cut_and_keeps_its_code() {
        let long = Err(SessionError::Persistence(StoreError::Remote(
            "x".repeat(10_000).into(),
        )));
        let text = answer_text(&long);
        assert!(text.len() <= MAX_REPLY_TEXT);
        assert!(matches!(
            read_answer(text.as_bytes()),
            Err(SessionError::Persistence(_))
        ));
        assert!(read_answer(answer_text(&Ok(())).as_bytes()).is_ok());
    }
}
