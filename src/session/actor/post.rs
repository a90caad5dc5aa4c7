//! What a backend posts into a chat through the server API (`Op::Post`): a
//! message, a widget, logged as a run of its own — the speaker's turn, what
//! it shows, the run's end — so every wire shows it as it shows an agent
//! that spoke first.

use crate::protocol::{EventKind, RunEndReason};

use super::{Actor, Marks};
use crate::session::SessionError;

impl Actor {
    /// Logs `events` as `speaker`'s turn in `user`'s chat, between runs.
    pub(super) async fn post(
        &mut self,
        user: &str,
        speaker: String,
        events: Vec<EventKind>,
    ) -> Result<(), SessionError> {
        let chat = self.owned(user)?;
        if chat.archived {
            return Err(SessionError::Archived);
        }
        // A run's own words are streaming: a post between them would split
        // its turn. The caller tries again once it ends.
        if self.run.is_some() || self.paused {
            return Err(SessionError::RunInProgress);
        }
        let mut logged = Vec::with_capacity(events.len() + 2);
        logged.push((
            EventKind::SelectSpeaker {
                agent: speaker,
                method: None,
                reason: None,
            },
            None,
        ));
        logged.extend(events.into_iter().map(|e| (e, None)));
        logged.push((
            EventKind::RunComplete {
                reason: RunEndReason::Completed,
            },
            None,
        ));
        self.append_with(logged, None, None, Marks::default())
            .await?;
        Ok(())
    }
}
