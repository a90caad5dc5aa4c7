//! A chat deleted for good (`DELETE /v1/chats/{id}?purge=true`): its run
//! stopped unlogged, its rows gone from the store, its subscribers told and
//! let go, and the actor gone with it.

use std::sync::atomic::Ordering;

use super::Actor;
use crate::protocol::{ErrorCode, RunEndReason};
use crate::session::{Outbound, SessionError};

impl Actor {
    /// Deletes the chat: whatever runs is stopped and nothing more is
    /// logged, the store forgets every row of it, and each connection that
    /// follows it gets a per-connection `chat.error` (`RESUME_FAILED`) and
    /// nothing after. The actor then stops; a later request for the id
    /// finds no chat.
    pub(super) async fn purge(&mut self, user: &str) -> Result<(), SessionError> {
        self.owned(user)?;
        // First the store (nothing of the chat is in flight: this actor
        // waits for each of its appends): a purge that fails leaves the
        // chat as it was, its run going on.
        self.ctx.store.purge_chat(self.chat_id).await?;
        tracing::info!("chat deleted");
        self.gone();
        Ok(())
    }

    /// The chat no longer exists (deleted here, or announced deleted by the
    /// node that did): its subscribers are told and let go, and the actor
    /// stops after this command.
    pub(super) fn gone(&mut self) {
        let frame = crate::protocol::connection_error(
            Some(self.chat_id),
            ErrorCode::ResumeFailed,
            "the chat was deleted",
            None,
            false,
        );
        for sub in self.subscribers.lock().drain(..) {
            // A queue too full to take it: the connection is closed (1013),
            // and its resume finds no chat.
            if !sub.try_send(Outbound::Frame(frame.clone())) {
                sub.closer.close(1013, "too slow");
            }
        }
        if let Some(run) = self.run.take() {
            // Its channel goes with it: the run's next message finds no
            // actor and the run ends, logging nothing.
            run.control.cancel(RunEndReason::Cancelled);
        }
        self.inputs.clear();
        self.components.clear();
        self.refuse_held(true, SessionError::RequestNotFound);
        self.queue.clear();
        self.paused = false;
        self.chat = None;
        self.titling = false;
        self.purged = true;
    }

    /// On several nodes: another node announced the chat deleted (or
    /// announcements were lost). If the store no longer holds the chat this
    /// actor knew — none, or another made under the same id since — its
    /// followers here are let go.
    pub(super) async fn check_gone(&mut self) {
        if !self.signal.gone.swap(false, Ordering::AcqRel) {
            return;
        }
        let Some(known) = &self.chat else {
            return;
        };
        let known = (known.owner.clone(), known.created_at);
        match self.ctx.store.chat(self.chat_id).await {
            Ok(Some(c)) if (c.owner.clone(), c.created_at) == known => {}
            Ok(_) => self.gone(),
            // Looked at again at the next wake.
            Err(_) => self.signal.gone.store(true, Ordering::Release),
        }
    }
}
