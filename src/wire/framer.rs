//! A stream's events from the log: a dialect's [`Encoder`] run over the
//! envelopes, each event given its [`EventId`], what a rejoining client
//! holds left out, and the places a response ends decided (pure: the SSE
//! core in `http::sse::stream` feeds it envelopes and writes its events).
//!
//! A rejoin is a replay: the run is encoded again from its start, so the
//! dialect's state (an open message, a step, a turn's number) is the one the
//! original stream had, and the events up to the client's id are dropped.
//! Everything here is a function of the log, so the rejoin of any stream,
//! cut after any of its events, sends exactly the events that stream would
//! have sent next.
//!
//! Where a response ends (the dialects whose response stops where the run
//! waits for a person: the AI SDK's, AG-UI's): at the log's end while the
//! run waits, or where the log shows the wait answered — the answer came in
//! another request, whose response goes on from there. What the run waited
//! on is answered by the next envelope ([`Encoder::crosses`]): a response
//! that was not the one answering ends there ([`Encoder::close`]); otherwise
//! the dialect closes what the previous response closed
//! ([`Encoder::boundary`]) and goes on.

use std::collections::HashSet;

use super::event_id::{At, EventId};
use super::sse::{Encoder, Out};
use crate::protocol::{Envelope, EventKind};

/// One event of a stream, and its id (none for what no log made: an
/// envelope that could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub out: Out,
    pub id: Option<EventId>,
}

/// What a stream shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shows {
    /// One response: it ends where the run waits for a person.
    Response,
    /// A whole run (a fresh rejoin of the run in flight): answered waits go
    /// by; it ends with the run, or where the run waits now.
    Run,
}

/// The events of one stream.
pub struct Framer {
    encoder: Box<dyn Encoder>,
    shows: Shows,
    /// What the client holds: events up to this id are not sent.
    held: Option<EventId>,
    /// A join by seq (`after=`): the dialect names the turn it lands in
    /// once the log is read past this seq.
    join: Option<u64>,
    /// Answers this stream's own request routed, not yet in the log: the
    /// response neither ends nor counts them as another request's.
    expect: HashSet<String>,
    /// The last envelope read, and how many events were made after it.
    last: u64,
    made: u32,
    /// The stream went by the wait the run is at (the answers of one
    /// request may be logged apart, another call between them): it goes on
    /// until the run no longer waits.
    passing: bool,
    /// The route said which answers its request routed (a response that
    /// goes on): it ends at the log's end once they are in, whatever it
    /// went by.
    answering: bool,
    /// The last envelope read ended the run.
    after_complete: bool,
    done: bool,
}

impl Framer {
    /// A stream from the envelope after `from` (`from` is the place before
    /// its first envelope: the opening's ids are after it).
    pub fn new(encoder: Box<dyn Encoder>, shows: Shows, from: u64) -> Self {
        Self {
            encoder,
            shows,
            held: None,
            join: None,
            expect: HashSet::new(),
            last: from,
            made: 0,
            passing: false,
            answering: false,
            after_complete: false,
            done: false,
        }
    }

    /// A rejoin: the client holds every event up to `id`.
    #[must_use]
    pub fn holding(mut self, id: EventId) -> Self {
        self.held = Some(id);
        self
    }

    /// A join after seq `seq` (every event it made is held): once the log
    /// is read past it, the dialect names the turn the join lands in.
    #[must_use]
    pub fn joining(mut self, seq: u64) -> Self {
        self.held = Some(EventId::after(seq));
        self.join = Some(seq);
        self
    }

    /// A response to a request that routed these answers (by request id or
    /// corr).
    #[must_use]
    pub fn expecting(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        self.expect.extend(ids);
        self.answering = true;
        self
    }

    /// The stream is over: nothing more is sent.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Ends the stream here (an unreadable envelope).
    pub fn stop(&mut self) {
        self.done = true;
    }

    /// The encoder, for an event no envelope made.
    pub fn encoder(&mut self) -> &mut dyn Encoder {
        self.encoder.as_mut()
    }

    /// The response's opening, sent after envelope `after` (each event's id
    /// says how many opening events follow it).
    pub fn opening(&self, outs: Vec<Out>, after: u64, out: &mut Vec<Event>) {
        let n = outs.len();
        for (i, o) in outs.into_iter().enumerate() {
            let rest = u32::try_from(n - 1 - i).unwrap_or(0);
            self.push_as(o, self.id(EventId::opening(after, rest)), out);
        }
    }

    /// The events of one envelope (none once the stream is over).
    pub fn envelope(&mut self, env: &Envelope, raw: &str, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        if let Some(seq) = self.join
            && env.seq > seq
        {
            self.joined(out);
        }
        let own = self
            .answer_of(env)
            .is_some_and(|id| self.expect.remove(&id));
        if self.encoder.waiting() && !self.encoder.ended() && !self.goes_by(env, own, out) {
            // The response ended where the run waited.
            self.close(out);
            return;
        }
        if env.seq != self.last {
            self.last = env.seq;
            self.made = 0;
        }
        self.after_complete = matches!(env.kind, EventKind::RunComplete { .. });
        let mut outs = Vec::new();
        self.encoder.encode(env, raw, &mut outs);
        self.made_here(outs, out);
        self.passing &= self.encoder.waiting();
        self.done |= self.run_over();
    }

    /// Everything in the log is read (the replay's end, or nothing more
    /// queued live): a response that waits for a person ends here.
    pub fn caught_up(&mut self, out: &mut Vec<Event>) {
        if self.done {
            return;
        }
        if let Some(seq) = self.join
            && self.last >= seq
        {
            self.joined(out);
        }
        self.done |= self.run_over();
        // A rejoin that went by this wait does not know which answers its
        // response's request routed: it waits for them in the log.
        let passing = self.passing && !self.answering;
        if !self.done
            && self.encoder.waiting()
            && self.expect.is_empty()
            && !passing
            && (self.held.is_none_or(|held| held < self.next_made()) || self.in_close())
        {
            self.close(out);
        }
    }

    /// The response's end where the run waits (its events after the last
    /// envelope's).
    fn close(&mut self, out: &mut Vec<Event>) {
        let mut outs = Vec::new();
        self.encoder.close(&mut outs);
        self.made_here(outs, out);
        self.done = true;
    }

    /// The dialect names the turn a join landed in.
    fn joined(&mut self, out: &mut Vec<Event>) {
        if let Some(seq) = self.join.take() {
            let mut outs = Vec::new();
            self.encoder.rejoined(&mut outs);
            self.opening(outs, seq, out);
        }
    }

    /// Whether the stream goes on past the wait the run is at when `env`
    /// comes (else the response ended there). It goes on for a further
    /// call of the step that waits; and, having closed what the previous
    /// response closed, for a client past this wait (its response began
    /// after it), for the answer its own request routed, and in a whole
    /// run's stream. A response whose own answers are still to come is not
    /// over; any other ended at the wait (it was answered in another
    /// request, it timed out, the run was cancelled).
    fn goes_by(&mut self, env: &Envelope, own: bool, out: &mut Vec<Event>) -> bool {
        let crosses = self.encoder.crosses(env);
        if self.in_close() {
            return false;
        }
        if self.passing || (!crosses && matches!(env.kind, EventKind::ToolCall { .. })) {
            return true;
        }
        let past = self.held.is_some_and(|held| held > self.next_made());
        if past || (crosses && own) || self.shows == Shows::Run {
            let mut outs = Vec::new();
            self.encoder
                .boundary(self.shows == Shows::Response, &mut outs);
            self.made_here(outs, out);
            self.passing = true;
            return true;
        }
        !crosses && !self.expect.is_empty()
    }

    /// The client holds some of the events that ended its response where
    /// the run waits now (not merely everything up to here: a response
    /// that goes on after an answer holds that).
    fn in_close(&self) -> bool {
        self.held.is_some_and(|held| {
            held.seq == self.last
                && matches!(held.at, At::Made(k) if k != u32::MAX)
                && held >= self.next_made()
        })
    }

    /// The request id or corr an envelope answers.
    fn answer_of(&self, env: &Envelope) -> Option<String> {
        if self.expect.is_empty() {
            return None;
        }
        match &env.kind {
            EventKind::InputAck { request_id, .. } => Some(request_id.clone()),
            EventKind::ToolResponse { corr, .. } => Some(corr.clone()),
            _ => None,
        }
    }

    fn run_over(&self) -> bool {
        self.encoder.ended() || (self.encoder.ends_with_run() && self.after_complete)
    }

    /// The id the next event made after the last envelope would get.
    fn next_made(&self) -> EventId {
        self.id(EventId::made(self.last, self.made))
    }

    fn id(&self, id: EventId) -> EventId {
        id.in_whole(self.shows == Shows::Run)
    }

    /// Events made after the last envelope (its own, or a response's end).
    fn made_here(&mut self, outs: Vec<Out>, out: &mut Vec<Event>) {
        for o in outs {
            let id = self.next_made();
            self.made = self.made.saturating_add(1);
            self.push_as(o, id, out);
        }
    }

    /// An event, unless the client holds it.
    fn push_as(&self, o: Out, id: EventId, out: &mut Vec<Event>) {
        if self.held.is_none_or(|held| id > held) {
            out.push(Event {
                out: o,
                id: Some(id),
            });
        }
    }
}

#[cfg(test)]
#[path = "framer_tests.rs"]
mod tests;
