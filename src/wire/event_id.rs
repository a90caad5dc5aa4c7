//! Where an SSE event stands in its stream: the `id` every event carries,
//! which a client sends back as `Last-Event-ID` to get exactly what follows
//! it (pure; parsed and written here, ordered for the framer).
//!
//! One envelope may become several events (AG-UI's `TOOL_CALL_START`,
//! `ARGS`, `END`), so an id names an event, not an envelope:
//!
//! - `<seq>`: the first event made from envelope `seq`; `<seq>.<k>`: its
//!   `k`-th further one (k ≥ 1), the events that end a response right after
//!   that envelope included;
//! - `<seq>-<r>`: an event of a response's opening (AG-UI's `RUN_STARTED`,
//!   the AI SDK's `start`, a rejoin's naming of the turn it lands in) sent
//!   after envelope `seq`, with `r` more opening events after it;
//! - a leading `w` marks a stream that shows a whole run rather than one
//!   response of it (a rejoin then goes on past the answers the run got,
//!   as the stream it resumes did).

use std::cmp::Ordering;
use std::fmt;

/// An event's place: after which envelope, and which event of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventId {
    pub seq: u64,
    pub at: At,
    /// The stream shows a whole run (a `w` id).
    pub whole: bool,
}

/// Which event of those an envelope makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// The `k`-th event made from the envelope (from 0), or ending a
    /// response after it.
    Made(u32),
    /// An opening event after the envelope, with this many opening events
    /// after it.
    Opening(u32),
}

impl EventId {
    /// The `k`-th event made from envelope `seq`.
    pub fn made(seq: u64, k: u32) -> Self {
        Self {
            seq,
            at: At::Made(k),
            whole: false,
        }
    }

    /// An opening event after envelope `seq`, `rest` more after it.
    pub fn opening(seq: u64, rest: u32) -> Self {
        Self {
            seq,
            at: At::Opening(rest),
            whole: false,
        }
    }

    /// The place after every event envelope `seq` makes (a plain `after=`
    /// seq): before any opening sent after it.
    pub fn after(seq: u64) -> Self {
        Self::made(seq, u32::MAX)
    }

    /// This id in a stream that shows a whole run.
    #[must_use]
    pub fn in_whole(mut self, whole: bool) -> Self {
        self.whole = whole;
        self
    }

    /// Reads an id as [`fmt::Display`] writes it.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (whole, text) = match text.strip_prefix('w') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let (seq, at) = if let Some((seq, k)) = text.split_once('.') {
            if !digits(k) {
                return None;
            }
            // `u32::MAX` is the place after every event, never an event's.
            let k: u32 = k.parse().ok().filter(|k| (1..u32::MAX).contains(k))?;
            (seq, At::Made(k))
        } else if let Some((seq, r)) = text.split_once('-') {
            if !digits(r) {
                return None;
            }
            (seq, At::Opening(r.parse().ok()?))
        } else {
            (text, At::Made(0))
        };
        if !digits(seq) {
            return None;
        }
        Some(Self {
            seq: seq.parse().ok()?,
            at,
            whole,
        })
    }

    /// The order of events in a stream: by envelope, then what it made,
    /// then the opening sent after it (its first event first).
    fn key(&self) -> (u64, u8, u32) {
        match self.at {
            At::Made(k) => (self.seq, 0, k),
            At::Opening(rest) => (self.seq, 1, u32::MAX - rest),
        }
    }
}

impl PartialOrd for EventId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for EventId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.whole {
            f.write_str("w")?;
        }
        match self.at {
            At::Made(0) => write!(f, "{}", self.seq),
            At::Made(k) => write!(f, "{}.{k}", self.seq),
            At::Opening(rest) => write!(f, "{}-{rest}", self.seq),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_as_written() {
        for id in [
            EventId::made(7, 0),
            EventId::made(7, 3),
            EventId::opening(6, 0),
            EventId::opening(6, 1).in_whole(true),
            EventId::made(0, 0).in_whole(true),
        ] {
            assert_eq!(EventId::parse(&id.to_string()), Some(id), "{id}");
        }
        assert_eq!(EventId::made(7, 0).to_string(), "7");
        assert_eq!(EventId::made(7, 2).to_string(), "7.2");
        assert_eq!(EventId::opening(6, 1).to_string(), "6-1");
        assert_eq!(EventId::made(9, 1).in_whole(true).to_string(), "w9.1");
    }

    #[test]
    fn what_is_no_id_is_refused() {
        for bad in [
            "",
            "w",
            "x1",
            "1.",
            "1.0",
            "-1",
            "1-",
            "1.2.3",
            "1-2-3",
            "+1",
            "1.+2",
            "1.-2",
            "99999999999999999999",
            "1 2",
            "1.4294967295",
        ] {
            assert_eq!(EventId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn events_are_ordered_as_a_stream_sends_them() {
        let order = [
            EventId::made(5, 0),
            EventId::made(5, 1),
            EventId::made(5, 9),
            EventId::after(5),
            EventId::opening(5, 1),
            EventId::opening(5, 0),
            EventId::made(6, 0),
        ];
        for pair in order.windows(2) {
            assert!(pair[0] < pair[1], "{} < {}", pair[0], pair[1]);
        }
    }
}
