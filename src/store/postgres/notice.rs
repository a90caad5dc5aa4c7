//! What a commit announces on the log channel, and how it is read back.
//!
//! A line `"<chat id> <highest seq> <node>"` per chat of the commit (node 0:
//! an unfenced append), packed into as few notifications as fit. One
//! notification per chat per commit cost PostgreSQL, and every listening
//! node, a notification per word of every streaming chat (`bench/notes.md`).

use uuid::Uuid;

use super::super::AppendBatch;

/// The channel on which every commit announces, per chat, its highest seq.
pub(crate) const LOG_CHANNEL: &str = "agentwire_log";

/// A notification's payload must stay under 8,000 bytes.
const NOTICE_BYTES: usize = 7_900;

/// A commit of one chat, announced on the log channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogNotice {
    pub chat_id: Uuid,
    /// The highest seq committed.
    pub seq: u64,
    /// The node that appended (0 if the append was not fenced).
    pub node: i64,
}

/// The payloads announcing the commit of `batches`.
pub(crate) fn announcements(batches: &[AppendBatch]) -> Vec<String> {
    let mut payloads: Vec<String> = Vec::new();
    for b in batches {
        let Some(last) = b.envelopes.last() else {
            continue;
        };
        let node = b.fence.map_or(0, |f| f.node);
        let line = format!("{} {} {node}", b.chat_id, last.seq);
        match payloads.last_mut() {
            Some(p) if p.len() + 1 + line.len() <= NOTICE_BYTES => {
                p.push('\n');
                p.push_str(&line);
            }
            _ => payloads.push(line),
        }
    }
    payloads
}

/// The commit of `batches` as notices, one per chat (what NATS carries).
pub(crate) fn commits(batches: &[AppendBatch]) -> Vec<LogNotice> {
    batches
        .iter()
        .filter_map(|b| {
            Some(LogNotice {
                chat_id: b.chat_id,
                seq: b.envelopes.last()?.seq,
                node: b.fence.map_or(0, |f| f.node),
            })
        })
        .collect()
}

/// The line of node `node` that reconnected to NATS: what it published
/// just before may be lost, so every node's followers read the store (the
/// nil chat, which no chat is).
pub(crate) fn resync(node: i64) -> String {
    format!("{} 0 {node}", Uuid::nil())
}

/// The line announcing that `chat` was deleted: seq 0, which no commit
/// announces (a log starts at 1).
pub(crate) fn purged(chat: Uuid) -> String {
    format!("{chat} 0 0")
}

/// Reads an announcement back, line by line: a line that is not one is
/// skipped (and logged), so the others still wake their chats.
pub(crate) fn parse(payload: &str) -> Vec<LogNotice> {
    payload
        .lines()
        .filter_map(|line| {
            let notice = parse_line(line);
            if notice.is_none() {
                tracing::warn!(line, "unreadable commit notice");
            }
            notice
        })
        .collect()
}

fn parse_line(line: &str) -> Option<LogNotice> {
    let mut parts = line.split(' ');
    Some(LogNotice {
        chat_id: parts.next()?.parse().ok()?,
        seq: parts.next()?.parse().ok()?,
        node: parts.next()?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Fence, NewEnvelope};

    fn batch(chat_id: Uuid, seq: u64, fence: Option<Fence>) -> AppendBatch {
        AppendBatch {
            chat_id,
            envelopes: vec![NewEnvelope {
                seq,
                kind: "chat.print",
                ts_ms: 0,
                corr: None,
                client_msg_id: None,
                json: "{}".into(),
            }],
            state: None,
            conversation_state: None,
            fence,
        }
    }

    #[test]
    fn a_commit_is_announced_in_as_few_notifications_as_fit() {
        let fence = Some(Fence { node: 7, epoch: 1 });
        let batches: Vec<AppendBatch> =
            (1..=400).map(|i| batch(Uuid::new_v4(), i, fence)).collect();
        let payloads = announcements(&batches);
        assert_eq!(payloads.len(), 3, "400 lines of 40-odd bytes");
        assert!(payloads.iter().all(|p| p.len() <= NOTICE_BYTES));
        let notices: Vec<LogNotice> = payloads.iter().flat_map(|p| parse(p)).collect();
        let expected: Vec<LogNotice> = batches
            .iter()
            .map(|b| LogNotice {
                chat_id: b.chat_id,
                seq: b.envelopes[0].seq,
                node: 7,
            })
            .collect();
        assert_eq!(notices, expected);
    }

    #[test]
    fn a_bad_line_is_skipped_and_the_others_read() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let notice = |chat_id, seq, node| LogNotice { chat_id, seq, node };
        // One line: what nodes built before the multi-line format send.
        assert_eq!(parse(&format!("{a} 3 0")), vec![notice(a, 3, 0)]);
        let mixed = parse(&format!("{a} 3 0\nnonsense\n{b} 9 2"));
        assert_eq!(mixed, vec![notice(a, 3, 0), notice(b, 9, 2)]);
        assert!(parse("").is_empty());
    }
}
