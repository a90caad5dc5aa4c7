//! The chat's announcements to its owner's feed (`session::feed`).

use std::sync::Arc;

use serde_json::json;

use super::Actor;
use crate::store::NewEnvelope;

/// The furthest before the log's end a mark of read counts (in envelopes).
const MAX_BACK: u64 = 2000;

impl Actor {
    /// Why a batch is announced, if it is: the chat's first envelopes, or a
    /// run's end (a post's too).
    pub(super) fn milestone(envelopes: &[NewEnvelope]) -> Option<&'static str> {
        if envelopes.first().is_some_and(|e| e.seq == 1) {
            Some("created")
        } else if envelopes.iter().any(|e| e.kind == "chat.run_complete") {
            Some("updated")
        } else {
            None
        }
    }

    /// Tells the owner's feed where the chat stands, as the list shows it:
    /// off the actor (a read of the chat's row and, on several nodes, a
    /// NOTIFY), so the run's end is not held up by it.
    pub(super) async fn announce(&self, reason: &'static str) {
        // On one node, nobody to tell unless the owner follows their feed
        // here: no read, no task.
        let followed = |owner: &str| self.ctx.feed.follows(owner);
        if self.ctx.node.is_none() && self.chat.as_ref().is_some_and(|c| !followed(&c.owner)) {
            return;
        }
        let (ctx, chat_id, last_seq) = (self.ctx.clone(), self.chat_id, self.next_seq - 1);
        self.ctx.tracker.spawn(async move {
            let chat = match ctx.store.chat(chat_id).await {
                Ok(Some(chat)) => chat,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, chat = %chat_id, "cannot announce the chat");
                    return;
                }
            };
            let active_at = chrono::DateTime::from_timestamp_millis(chat.listing.active_at)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
            let event = json!({
                "type": "feed.chat",
                "reason": reason,
                "chat_id": chat.id,
                "agent": chat.agent,
                "title": chat.listing.title,
                "preview": chat.listing.preview,
                "unread": chat.listing.unread,
                "read_seq": chat.listing.read_seq,
                "last_seq": last_seq,
                "active_at": active_at,
                "archived": chat.archived,
            });
            let event: Arc<str> = event.to_string().into();
            ctx.feed.deliver(&chat.owner, &event);
            if let Some(node) = &ctx.node {
                node.announce(&chat.owner, &event).await;
            }
        });
    }

    /// Marks the chat read up to `seq` (its last envelope if `None` or
    /// past it): the agents' texts after it — and after the user's own
    /// last text — stay unread. A mark only moves forward (another device's
    /// older one changes nothing), and one more than [`MAX_BACK`]
    /// envelopes before the end counts as that far back: what it reads of
    /// the log is bounded.
    pub(super) async fn mark_read(
        &mut self,
        user: &str,
        seq: Option<u64>,
    ) -> Result<(), crate::session::SessionError> {
        self.owned(user)?;
        let Some(chat) = self.ctx.store.chat(self.chat_id).await? else {
            return Ok(());
        };
        let last = self.next_seq - 1;
        let seq = seq
            .unwrap_or(last)
            .min(last)
            .max(last.saturating_sub(MAX_BACK));
        if seq <= chat.listing.read_seq {
            return Ok(());
        }
        let mut unread = 0;
        if seq < last {
            let after = self
                .ctx
                .store
                .load_after(self.chat_id, seq, MAX_BACK as u32)
                .await?;
            for e in after.iter().filter(|e| e.kind == "chat.text") {
                let by_user = serde_json::from_str::<serde_json::Value>(&e.json)
                    .is_ok_and(|v| v["agent"] == "user");
                unread = if by_user { 0 } else { unread + 1 };
            }
        }
        let flags = crate::store::ChatFlags {
            read: Some((seq, unread)),
            ..Default::default()
        };
        self.ctx.store.set_chat_flags(self.chat_id, flags).await?;
        self.announce("read").await;
        Ok(())
    }
}
