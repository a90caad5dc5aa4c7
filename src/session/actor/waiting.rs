//! Plain data the actor's modules share, kept in a leaf so none imports
//! another for it: a message sent during a run, as the chat keeps it until
//! a run takes it (what `queue.rs` does with it), the marks a batch's
//! envelopes carry, and the words a stopped run's open turn had printed.

/// A message sent during a run, waiting for one (`queue.rs`).
#[derive(Debug)]
pub(super) struct Queued {
    /// Its `chat.queued`.
    pub(super) seq: u64,
    pub(super) text: String,
    pub(super) mode: crate::protocol::MultitaskStrategy,
    /// What its request adds to the run that takes it (in memory only: a
    /// message restored after a restart runs without a bearer).
    pub(super) extras: crate::session::handle::RunExtras,
}

/// The waiting messages of a chat, in the order runs take them.
pub(super) type Queue = std::collections::VecDeque<Queued>;

/// What a run's envelopes carry for a restart (`Envelope::context_type` and
/// `run_usage`).
#[derive(Default)]
pub(super) struct Marks {
    /// On the first envelope: the user's message that starts the run.
    pub(super) context_type: Option<String>,
    /// On the first envelope that can carry it.
    pub(super) run_usage: Option<std::collections::BTreeMap<String, crate::protocol::AgentUsage>>,
    /// On the batch's user texts, in order: the `chat.queued` each takes.
    pub(super) queued: Vec<u64>,
    /// The batch's first user text starts a run.
    pub(super) starts_run: bool,
    /// On the batch's user texts and `chat.queued`s, in order: the files
    /// each attaches.
    pub(super) attachments: Vec<Vec<crate::protocol::Attachment>>,
    /// The batch's envelopes (by place) that are what a stopped run had
    /// said (`partial`).
    pub(super) partial: Vec<usize>,
}

/// What a run's events add to, or close of, the open model turn's printed
/// words (`printed`: speaker, text). A run that ends (its
/// `chat.usage_summary` or `chat.run_complete`) in the middle of a turn —
/// cancelled, interrupted, timed out, stopped by a failure — keeps what it
/// had said: the speaker's `chat.text` is put in `events` just before that
/// end, and its place returned (for its `partial` mark), so clients and the
/// next run's model see the same answer.
pub(super) fn close_printed(
    printed: &mut Option<(String, String)>,
    events: &mut Vec<(crate::protocol::EventKind, Option<String>)>,
) -> Option<usize> {
    use crate::protocol::EventKind;
    let mut at = None;
    for (i, (kind, _)) in events.iter().enumerate() {
        match kind {
            EventKind::Print { agent, content, .. } => match printed.as_mut() {
                Some((by, text)) if by == agent => text.push_str(content),
                _ => *printed = Some((agent.clone(), content.clone())),
            },
            EventKind::Text { .. } => *printed = None,
            EventKind::UsageSummary { .. } | EventKind::RunComplete { .. } => {
                at = printed.is_some().then_some(i);
                break;
            }
            _ => {}
        }
    }
    let at = at?;
    let (agent, content) = printed.take()?;
    events.insert(at, (EventKind::Text { agent, content }, None));
    Some(at)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::close_printed;
    use crate::protocol::EventKind;

    fn events(kinds: serde_json::Value) -> Vec<(EventKind, Option<String>)> {
        let kinds: Vec<EventKind> = serde_json::from_value(kinds).unwrap();
        kinds.into_iter().map(|k| (k, None)).collect()
    }

    #[test]
    fn a_cut_turn_is_closed_before_the_runs_end_and_only_it_is_marked() {
        // A group run: member a's turn closed, then b's cut off, in one batch.
        let mut batch = events(json!([
            {"type": "chat.print", "agent": "a", "content": "Done"},
            {"type": "chat.text", "agent": "a", "content": "Done"},
            {"type": "chat.select_speaker", "agent": "b"},
            {"type": "chat.print", "agent": "b", "content": "I think"},
            {"type": "chat.print", "agent": "b", "content": " that"},
            {"type": "chat.usage_summary", "total_tokens": 0, "prompt_tokens": 0, "completion_tokens": 0},
            {"type": "chat.run_complete", "reason": "cancelled"},
        ]));
        let mut printed = None;
        assert_eq!(close_printed(&mut printed, &mut batch), Some(5));
        let EventKind::Text { agent, content } = &batch[5].0 else {
            panic!("{:?}", batch[5]);
        };
        assert_eq!((agent.as_str(), content.as_str()), ("b", "I think that"));
        assert!(matches!(batch[6].0, EventKind::UsageSummary { .. }));
        assert_eq!(printed, None);
    }

    #[test]
    fn prints_carry_over_batches_and_a_closed_turn_adds_nothing() {
        let mut printed = None;
        let mut first = events(json!([{"type": "chat.print", "agent": "a", "content": "w1 "}]));
        assert_eq!(close_printed(&mut printed, &mut first), None);
        assert_eq!(first.len(), 1);
        let mut end = events(json!([
            {"type": "chat.print", "agent": "a", "content": "w2"},
            {"type": "chat.run_complete", "reason": "timeout"},
        ]));
        assert_eq!(close_printed(&mut printed, &mut end), Some(1));
        assert!(matches!(&end[1].0, EventKind::Text { content, .. } if content == "w1 w2"));
        // A turn that ended as turns do: nothing added.
        let mut whole = events(json!([
            {"type": "chat.print", "agent": "a", "content": "Hi"},
            {"type": "chat.text", "agent": "a", "content": "Hi"},
            {"type": "chat.usage_summary", "total_tokens": 0, "prompt_tokens": 0, "completion_tokens": 0},
            {"type": "chat.run_complete", "reason": "completed"},
        ]));
        assert_eq!(close_printed(&mut printed, &mut whole), None);
        assert_eq!(whole.len(), 4);
    }
}
