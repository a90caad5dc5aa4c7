//! Requests on NATS: the sender's side (`forward_on_nats`) and the
//! owner's (`serve`), as `forward` describes.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures_util::StreamExt;
use uuid::Uuid;

use super::forward::{answer_header, now_ms, read_answer};
use super::{FORWARD_TIMEOUT, Node, TICK};
use crate::session::SessionError;
use crate::session::registry::Registry;
use crate::store::NatsBus;

/// Commands from NATS being run at once at most; past it they are
/// refused (their senders go through PostgreSQL).
const MAX_RUNNING: usize = 1024;
/// What an owner answers to a command it cannot take: "go another way".
const REFUSED: &[u8] = b"?";
/// The prefix of the subjects NATS clients answer on.
const INBOX: &str = "_INBOX.";

/// Lookups of a sender's key outside the liveness tick: at most one per this long.
const LOOKUP_EVERY_MS: i64 = 100;

/// What a node makes of a command's clear line before opening it.
enum Screened<'a> {
    /// From a node it knows, in time: open it.
    Take(Header<'a>),
    /// From a node whose key is not read yet.
    Unknown(i64),
    /// Sent back: the sender goes through PostgreSQL.
    Refuse(&'static str),
    /// Not a command: dropped.
    Unreadable,
}

/// What became of a request on NATS.
enum Asked {
    /// The owner's answer, opened.
    Answer(Vec<u8>),
    /// It reached nobody, or the owner did not take it: it can go through
    /// PostgreSQL (with the same id).
    NotThere,
    /// It may have run, and no answer came in time.
    Lost,
}

/// The clear line of a command: who sends it, its id, when, where to answer.
fn header(from: i64, id: Uuid, sent: i64, inbox: &str) -> String {
    format!("{from} {id} {sent} {inbox}")
}

/// A command's clear line, read back.
struct Header<'a> {
    from: i64,
    id: Uuid,
    sent: i64,
    inbox: &'a str,
}

fn parse_header(line: &[u8]) -> Option<Header<'_>> {
    let mut parts = std::str::from_utf8(line).ok()?.split(' ');
    let header = Header {
        from: parts.next()?.parse().ok()?,
        id: parts.next()?.parse().ok()?,
        sent: parts.next()?.parse().ok()?,
        inbox: parts
            .next()
            .filter(|i| i.starts_with(INBOX) && i.len() <= 128)?,
    };
    parts.next().is_none().then_some(header)
}

/// A command on NATS split into its clear line and its sealed body.
fn split(payload: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = payload.iter().position(|&b| b == b'\n')?;
    Some((&payload[..at], &payload[at + 1..]))
}

impl Node {
    /// `None` when the request reached nobody or was not taken (it can go
    /// through PostgreSQL).
    pub(super) async fn forward_on_nats(
        &self,
        bus: &NatsBus,
        id: Uuid,
        to: i64,
        body: &[u8],
    ) -> Option<Result<(), SessionError>> {
        let inbox = bus.new_inbox();
        let line = header(self.id(), id, now_ms(), &inbox);
        let sealed = match self.cluster.seal_to(to, line.as_bytes(), body).await {
            Ok(sealed) => sealed,
            Err(e) => return Some(Err(e.into())),
        };
        let payload = Bytes::from([line.as_bytes(), b"\n", &sealed].concat());
        let ended = self.in_flight(id, to);
        let asked = tokio::select! {
            asked = tokio::time::timeout(FORWARD_TIMEOUT, self.ask(bus, id, to, inbox, payload)) => {
                asked.unwrap_or(Asked::Lost)
            }
            // The owner died (the liveness check), or this node stops.
            ended = ended => return Some(ended.unwrap_or(Err(SessionError::ShuttingDown))),
        };
        self.landed(id);
        let result = match asked {
            Asked::Answer(body) => read_answer(&body),
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

    /// Sends a request and reads what comes back on its inbox: the first
    /// answer that opens as the owner's, skipping any other.
    async fn ask(&self, bus: &NatsBus, id: Uuid, to: i64, inbox: String, payload: Bytes) -> Asked {
        let Ok(mut answers) = bus.ask(to, inbox, payload).await else {
            return Asked::NotThere; // Never sent.
        };
        let bound = answer_header(id);
        while let Some(answer) = answers.next().await {
            if answer.status == Some(async_nats::StatusCode::NO_RESPONDERS)
                || answer.payload.as_ref() == REFUSED
            {
                return Asked::NotThere;
            }
            match self
                .cluster
                .open_from(to, bound.as_bytes(), &answer.payload)
                .await
            {
                Ok(body) => return Asked::Answer(body),
                Err(e) => {
                    tracing::debug!(error = %e, "an answer on NATS that does not open; skipped")
                }
            }
        }
        Asked::Lost
    }

    /// What this node can say of a command on NATS before opening it (no
    /// query, no task).
    fn screen<'a>(&self, line: &'a [u8]) -> Screened<'a> {
        let Some(header) = parse_header(line) else {
            return Screened::Unreadable;
        };
        if now_ms().abs_diff(header.sent) > FORWARD_TIMEOUT.as_millis() as u64 {
            return Screened::Refuse("sent too long ago, or the clocks differ");
        }
        if !self.cluster.knows(header.from) {
            return Screened::Unknown(header.from);
        }
        Screened::Take(header)
    }

    /// Whether a sender not known yet may be looked up now: at most one
    /// lookup per [`LOOKUP_EVERY_MS`], so forged senders cost few queries.
    fn may_look_up(&self) -> bool {
        let (now, last) = (now_ms(), self.looked_up.load(Ordering::Relaxed));
        now - last >= LOOKUP_EVERY_MS
            && self
                .looked_up
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Runs a command that came on NATS, if it opens as from the node it
    /// names and never ran, and answers it on its inbox.
    async fn run_nats_command(&self, registry: &Registry, bus: &NatsBus, payload: &[u8]) {
        let Some((line, sealed)) = split(payload) else {
            return;
        };
        let Screened::Take(header) = self.screen(line) else {
            return;
        };
        let body = match self.cluster.open_from(header.from, line, sealed).await {
            Ok(body) => body,
            Err(e) => {
                refused("does not open");
                tracing::debug!(error = %e, node = header.from, "a command on NATS did not open");
                return;
            }
        };
        if !self.first_time(header.id) {
            refused("ran already");
            return;
        }
        let text = self.run_once(registry, header.id, &body).await;
        match self
            .cluster
            .seal_to(
                header.from,
                answer_header(header.id).as_bytes(),
                text.as_bytes(),
            )
            .await
        {
            Ok(sealed) => bus.answer(header.inbox.to_owned(), sealed.into()).await,
            Err(e) => tracing::warn!(error = %e, "cannot seal an answer"),
        }
    }

    /// Tells a command's sender to go through PostgreSQL, if its clear line
    /// names an inbox.
    async fn send_back(&self, bus: &NatsBus, payload: &[u8]) {
        if let Some(header) = split(payload).and_then(|(line, _)| parse_header(line)) {
            bus.answer(header.inbox.to_owned(), Bytes::from_static(REFUSED))
                .await;
        }
    }
}

/// Counts a command from NATS that was not run.
fn refused(why: &'static str) {
    metrics::counter!(crate::metrics::CLUSTER_COMMANDS_REFUSED, "why" => why).increment(1);
}

/// Takes the commands sent to this node on NATS, each on a task of its own
/// (at most [`MAX_RUNNING`] at once), until the node stops; then lets go of
/// the subject (new requests find no responder and go through PostgreSQL)
/// and sends back those it had not taken.
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
            () = shutdown.cancelled() => break,
            message = commands.next() => message,
        };
        let Some(message) = message else { return };
        let screened =
            split(&message.payload).map_or(Screened::Unreadable, |(line, _)| node.screen(line));
        let unknown = match screened {
            Screened::Take(_) => None,
            Screened::Unknown(from) if node.may_look_up() => Some(from),
            Screened::Unreadable => {
                refused("unreadable");
                continue; // Nobody to answer.
            }
            Screened::Unknown(_) => {
                refused("from a node not known here (yet)");
                node.send_back(&bus, &message.payload).await;
                continue;
            }
            Screened::Refuse(why) => {
                refused(why);
                node.send_back(&bus, &message.payload).await;
                continue;
            }
        };
        let Ok(permit) = running.clone().try_acquire_owned() else {
            refused("too many at once");
            node.send_back(&bus, &message.payload).await;
            continue;
        };
        let (node, bus, on) = (node.clone(), bus.clone(), registry.clone());
        registry.context().tracker.spawn(async move {
            if let Some(from) = unknown {
                // A node that joined since the last tick, or a forgery.
                node.cluster.learn(&HashSet::from([from])).await;
                if !node.cluster.knows(from) {
                    refused("from a node not known here (yet)");
                    node.send_back(&bus, &message.payload).await;
                    return;
                }
            }
            node.run_nats_command(&on, &bus, &message.payload).await;
            drop(permit);
        });
    }
    let _ = commands.unsubscribe().await;
    while let Ok(Some(message)) =
        tokio::time::timeout(std::time::Duration::from_millis(100), commands.next()).await
    {
        node.send_back(&bus, &message.payload).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_nonsense_does_not() {
        let id = Uuid::new_v4();
        let line = header(3, id, 1_700_000_000_000, "_INBOX.abc");
        let read = parse_header(line.as_bytes()).unwrap();
        assert_eq!(
            (read.from, read.id, read.sent, read.inbox),
            (3, id, 1_700_000_000_000, "_INBOX.abc")
        );
        let bad = [
            String::new(),
            "3".into(),
            "3 x 1 _INBOX.a".into(),
            format!("3 {id} 1"),
            // Answers go to an inbox, never to a subject a forger chose.
            format!("3 {id} 1 agentwire.log.x"),
            format!("3 {id} 1 _INBOX.{}", "a".repeat(200)),
            format!("3 {id} 1 _INBOX.a 9"),
        ];
        for bad in bad {
            assert!(parse_header(bad.as_bytes()).is_none(), "{bad:?}");
        }
    }
}
