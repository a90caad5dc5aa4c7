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
            sub.try_send(Outbound::Frame(frame.clone()));
        }
        self.chat = None;
        self.titling = false;
        self.purged = true;
    }

    /// On several nodes: another node announced the chat deleted. If the
    /// store agrees (the id may have been taken again since), the chat's
    /// followers here are let go.
    pub(super) async fn check_gone(&mut self) {
        if !self.signal.gone.swap(false, Ordering::AcqRel) {
            return;
        }
        if let Ok(None) = self.ctx.store.chat(self.chat_id).await {
            self.run = None;
            self.gone();
        }
    }
}
