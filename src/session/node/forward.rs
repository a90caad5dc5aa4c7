//! Requests for chats another node owns: sent as NATS requests when the
//! node is on NATS, through PostgreSQL's `node_commands` otherwise.
//!
//! On NATS a command is `"<from> <id> <sent ms>\n"` followed by its body
//! sealed from this node to the owner with that line bound to it
//! (`store::seal`), and the answer is sealed back the same way. The owner
//! runs a command only if it opens as from the node it names, was sent
//! within [`FORWARD_TIMEOUT`] of the owner's clock, and its id was not run
//! before: what another NATS client forges or replays is dropped. A
//! request that reached nobody ("no responders": the owner is not on NATS
//! now) goes through PostgreSQL; one that may have arrived is never sent
//! again, and gets [`SessionError::NodeLost`] when no answer comes.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{FORWARD_TIMEOUT, Forwarded, InFlight, Node, TICK};
use crate::session::SessionError;
use crate::session::handle::{Op, Origin};
use crate::session::registry::Registry;
use crate::store::{Asked, NatsBus, StoreError};

/// Error texts crossing nodes are cut to this (a notification holds 8000 bytes).
const MAX_REPLY_TEXT: usize = 2000;
/// Commands from NATS being run at once at most; past it they are dropped
/// (their senders get `NodeLost`).
const MAX_RUNNING: usize = 1024;

/// The ids of commands run in the last two windows, so a replay is dropped.
#[derive(Debug, Default)]
pub(super) struct Seen {
    ids: HashSet<Uuid>,
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
            self.ids.remove(&old);
        }
        if !self.ids.insert(id) {
            return false;
        }
        self.order.push_back((now, id));
        true
    }
}

fn window_ms() -> i64 {
    i64::try_from(FORWARD_TIMEOUT.as_millis()).unwrap_or(i64::MAX)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The clear line of a command: who sends it, its id, when.
fn header(from: i64, id: Uuid, sent: i64) -> String {
    format!("{from} {id} {sent}")
}

fn parse_header(line: &[u8]) -> Option<(i64, Uuid, i64)> {
    let mut parts = std::str::from_utf8(line).ok()?.split(' ');
    let from = parts.next()?.parse().ok()?;
    let id = parts.next()?.parse().ok()?;
    let sent = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((from, id, sent))
}

/// What an answer is bound to: the command it answers.
fn answer_header(id: Uuid) -> String {
    format!("answer {id}")
}

/// A result as it crosses nodes: an error's long detail cut, its code kept.
fn answer_text(result: &Result<(), SessionError>) -> String {
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

fn read_answer(body: &[u8]) -> Result<(), SessionError> {
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
        if let Some(bus) = self.bus.as_ref().filter(|b| !b.is_down())
            && let Some(result) = self.forward_on_nats(bus, to, &body).await
        {
            return result;
        }
        self.forward_on_pg(to, chat_id, &body).await
    }

    /// Registers a request in flight to `to`: the liveness check ends it
    /// if `to` dies.
    fn in_flight(&self, id: Uuid, to: i64) -> oneshot::Receiver<Result<(), SessionError>> {
        let (done, answer) = oneshot::channel();
        self.in_flight
            .lock()
            .expect("in-flight lock")
            .insert(id, InFlight { to, done });
        answer
    }

    fn landed(&self, id: Uuid) {
        self.in_flight.lock().expect("in-flight lock").remove(&id);
    }

    /// `None` when the request reached nobody (it can go through PostgreSQL).
    async fn forward_on_nats(
        &self,
        bus: &NatsBus,
        to: i64,
        body: &[u8],
    ) -> Option<Result<(), SessionError>> {
        let id = Uuid::new_v4();
        let line = header(self.id(), id, now_ms());
        let sealed = match self.cluster.seal_to(to, line.as_bytes(), body).await {
            Ok(sealed) => sealed,
            Err(e) => return Some(Err(e.into())),
        };
        let payload = Bytes::from([line.as_bytes(), b"\n", &sealed].concat());
        let ended = self.in_flight(id, to);
        let asked = tokio::select! {
            asked = bus.request(to, payload, FORWARD_TIMEOUT) => asked,
            // The owner died (the liveness check), or this node stops.
            ended = ended => return Some(ended.unwrap_or(Err(SessionError::ShuttingDown))),
        };
        self.landed(id);
        let result = match asked {
            Asked::Answer(sealed) => {
                match self
                    .cluster
                    .open_from(to, answer_header(id).as_bytes(), &sealed)
                    .await
                {
                    Ok(body) => read_answer(&body),
                    Err(e) => {
                        tracing::warn!(error = %e, node = to, "an answer on NATS did not open");
                        Err(SessionError::NodeLost)
                    }
                }
            }
            Asked::NotThere => return None,
            Asked::Lost => {
                tracing::warn!(
                    node = to,
                    "a request forwarded on NATS got no answer in time"
                );
                Err(SessionError::NodeLost)
            }
        };
        metrics::counter!(crate::metrics::CLUSTER_COMMANDS, "via" => "nats").increment(1);
        Some(result)
    }

    async fn forward_on_pg(&self, to: i64, chat_id: Uuid, body: &[u8]) -> Result<(), SessionError> {
        let id = Uuid::new_v4();
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
        let text = answer_text(&run(registry, &body).await);
        if let Err(e) = self.cluster.reply(sender, id, &text).await {
            tracing::warn!(error = %e, "cannot answer a forwarded command");
        }
    }

    /// Runs a command that came on NATS, if it is what it claims, and
    /// answers it on `reply`.
    async fn run_nats_command(
        &self,
        registry: &Registry,
        bus: &NatsBus,
        reply: async_nats::Subject,
        payload: &[u8],
    ) {
        let Some(at) = payload.iter().position(|&b| b == b'\n') else {
            tracing::warn!("a command on NATS without its header; dropped");
            return;
        };
        let (line, sealed) = (&payload[..at], &payload[at + 1..]);
        let Some((from, id, sent)) = parse_header(line) else {
            tracing::warn!("a command on NATS with an unreadable header; dropped");
            return;
        };
        let now = now_ms();
        if (now - sent).abs() > window_ms() {
            tracing::warn!(
                node = from,
                "a command on NATS sent too long ago (or clocks differ); dropped"
            );
            return;
        }
        let body = match self.cluster.open_from(from, line, sealed).await {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!(error = %e, node = from, "a command on NATS did not open; dropped");
                return;
            }
        };
        if !self.seen.lock().expect("seen lock").first(id, now) {
            tracing::warn!(node = from, "a command on NATS run already; dropped");
            return;
        }
        let text = answer_text(&run(registry, &body).await);
        match self
            .cluster
            .seal_to(from, answer_header(id).as_bytes(), text.as_bytes())
            .await
        {
            Ok(sealed) => bus.answer(reply, sealed.into()).await,
            Err(e) => tracing::warn!(error = %e, "cannot seal an answer"),
        }
    }
}

async fn run(registry: &Registry, body: &[u8]) -> Result<(), SessionError> {
    match serde_json::from_slice::<Forwarded>(body) {
        Ok(Forwarded { chat_id, op }) => registry.call_op(chat_id, op, Origin::Remote).await,
        Err(e) => {
            tracing::error!(error = %e, "unreadable command from another node");
            Err(SessionError::NodeLost)
        }
    }
}

/// Takes the commands sent to this node on NATS, each on a task of its own
/// (at most [`MAX_RUNNING`] at once), until the node stops.
pub(super) async fn serve(node: Arc<Node>, bus: Arc<NatsBus>, registry: Registry) {
    let shutdown = registry.context().shutdown.clone();
    let mut commands = loop {
        match bus.commands(node.id()).await {
            Ok(commands) => break commands,
            Err(e) => {
                tracing::warn!(error = %e, "cannot take commands on NATS yet");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(TICK) => {}
                }
            }
        }
    };
    let running = Arc::new(tokio::sync::Semaphore::new(MAX_RUNNING));
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return,
            message = commands.next() => message,
        };
        let Some(message) = message else { return };
        let Some(reply) = message.reply else {
            continue; // Not a request: nobody to answer.
        };
        let Ok(permit) = running.clone().try_acquire_owned() else {
            tracing::warn!("too many commands on NATS at once; one dropped");
            continue;
        };
        let (node, bus, on) = (node.clone(), bus.clone(), registry.clone());
        registry.context().tracker.spawn(async move {
            node.run_nats_command(&on, &bus, reply, &message.payload)
                .await;
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_nonsense_does_not() {
        let id = Uuid::new_v4();
        let line = header(3, id, 1_700_000_000_000);
        assert_eq!(
            parse_header(line.as_bytes()),
            Some((3, id, 1_700_000_000_000))
        );
        for bad in ["", "3", "3 x 1", &format!("3 {id}"), &format!("3 {id} 1 9")] {
            assert_eq!(parse_header(bad.as_bytes()), None, "{bad:?}");
        }
    }

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
        assert_eq!(seen.ids.len(), 2);
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
