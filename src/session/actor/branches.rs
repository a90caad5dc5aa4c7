//! Edits, regenerates and switches: the requests that make a chat's
//! conversation a tree (`session::tree`). Each logs a `chat.branch` and,
//! for an edit or a regenerate, starts a run on the path it points at.

use super::Actor;
use crate::protocol::{BranchReason, EventKind};
use crate::session::SessionError;
use crate::session::handle::{BranchStart, MessageRef, RunExtras};
use crate::session::tree::Tree;
use crate::store::StoredEnvelope;

/// Switches a chat may log per edit or regenerate it may hold
/// (`max_branches_per_chat`): a switch makes no version, but each is an
/// envelope the tree is read with.
const SWITCHES_PER_BRANCH: usize = 10;

impl Actor {
    /// The chat's tree as logged, with the transcript it was read from.
    pub(super) async fn tree(&self) -> Result<(Tree, Vec<StoredEnvelope>), SessionError> {
        let transcript = self.ctx.store.transcript(self.chat_id).await?;
        let tree = Tree::of_log(&transcript, self.next_seq - 1);
        Ok((tree, transcript))
    }

    /// Refuses a branch where nothing may branch: another user's chat, a run
    /// in flight, an archived chat or a template's conversation (its walk
    /// is the chat's).
    fn may_branch(&self, user: &str) -> Result<(), SessionError> {
        let chat = self.owned(user)?;
        if self.run.is_some() {
            return Err(SessionError::RunInProgress);
        }
        if chat.archived {
            return Err(SessionError::Archived);
        }
        if self.is_template() {
            return Err(SessionError::IllegalTransition(
                "a template conversation has one path: it cannot branch".into(),
            ));
        }
        Ok(())
    }

    /// Whether `seq` is a user's `chat.text` that started a run: it follows
    /// the chat's start or a run's end on its path (an answer to an input
    /// request follows the request).
    async fn starts_a_run(
        &self,
        tree: &Tree,
        transcript: &[StoredEnvelope],
        seq: u64,
    ) -> Result<bool, SessionError> {
        let said = transcript
            .binary_search_by_key(&seq, |e| e.seq)
            .ok()
            .map(|i| &transcript[i])
            .filter(|e| e.kind == "chat.text")
            .and_then(|e| serde_json::from_str::<serde_json::Value>(&e.json).ok());
        let Some(said) = said.filter(|v| v["agent"] == "user") else {
            return Ok(false);
        };
        if !tree.is_regular(seq) {
            return Ok(false);
        }
        // Marked when logged; a log written before the mark is read by the
        // text's place: after the chat's start or a run's end.
        if said["starts_run"] == true {
            return Ok(true);
        }
        let parent = tree.parent(seq);
        if parent == 0 {
            return Ok(true);
        }
        let before = self
            .ctx
            .store
            .load_after(self.chat_id, parent - 1, 1)
            .await?;
        Ok(before
            .first()
            .is_some_and(|e| e.seq == parent && e.kind == "chat.run_complete"))
    }

    /// The `n`-th (0: the first) user's message that started a run on the
    /// active path.
    async fn nth_message(
        &self,
        tree: &Tree,
        transcript: &[StoredEnvelope],
        n: usize,
    ) -> Result<u64, SessionError> {
        let active = tree.active();
        let mut found = 0;
        for e in transcript {
            if e.kind == "chat.text"
                && Tree::within(&active, e.seq)
                && self.starts_a_run(tree, transcript, e.seq).await?
            {
                if found == n {
                    return Ok(e.seq);
                }
                found += 1;
            }
        }
        Err(SessionError::MessageNotFound(format!(
            "the active path holds {found} user's messages; there is no message {}",
            n + 1
        )))
    }

    /// Refuses a new version at `at` past the limits.
    fn may_add_version(&self, tree: &Tree, at: u64) -> Result<(), SessionError> {
        if tree.versions_made() >= self.ctx.max_branches_per_chat {
            return Err(SessionError::BranchLimit(format!(
                "the chat holds {} edits and regenerates, the most it may (max_branches_per_chat)",
                tree.versions_made()
            )));
        }
        let versions = tree.children(at).len();
        if versions >= self.ctx.max_versions_per_point {
            return Err(SessionError::BranchLimit(format!(
                "{versions} versions follow seq {at}, the most there may be (max_versions_per_point)"
            )));
        }
        Ok(())
    }

    /// `chat.edit`: the conversation goes on from `text` in place of the
    /// user's message `seq`; the old version stays.
    pub(super) async fn edit(
        &mut self,
        user: &str,
        seq: MessageRef,
        text: String,
        client_msg_id: Option<String>,
        extras: RunExtras,
    ) -> Result<(), SessionError> {
        self.owned(user)?;
        if let Some(id) = &client_msg_id
            && self.ctx.store.has_client_msg_id(self.chat_id, id).await?
        {
            return Ok(()); // Already taken: no second effect.
        }
        self.may_branch(user)?;
        let (tree, transcript) = self.tree().await?;
        let seq = match seq {
            MessageRef::Seq(seq) => seq,
            MessageRef::Nth(n) => self.nth_message(&tree, &transcript, n).await?,
        };
        if !self.starts_a_run(&tree, &transcript, seq).await? {
            return Err(SessionError::MessageNotFound(format!(
                "seq {seq} is not a user's message that started a run"
            )));
        }
        let at = tree.parent(seq);
        self.may_add_version(&tree, at)?;
        // An edit that names no files keeps the edited message's.
        let attachments = extras.attachments.or_else(|| {
            transcript
                .iter()
                .find(|e| e.seq == seq)
                .and_then(|e| serde_json::from_str::<crate::protocol::Envelope>(&e.json).ok())
                .map(|e| e.attachments)
        });
        let extras = RunExtras {
            branch: Some(BranchStart {
                at,
                reason: BranchReason::Edit,
                model: None,
            }),
            attachments,
            ..extras
        };
        self.start_run(Some((text, client_msg_id)), extras).await
    }

    /// `chat.regenerate`: a new answer to the user's message `seq` (the last
    /// that started a run on the active path, if `None`), with `model` for
    /// this run if given; the old answer stays.
    pub(super) async fn regenerate(
        &mut self,
        user: &str,
        seq: Option<MessageRef>,
        model: Option<String>,
        extras: RunExtras,
    ) -> Result<(), SessionError> {
        self.may_branch(user)?;
        let (tree, transcript) = self.tree().await?;
        let seq = match seq {
            Some(MessageRef::Nth(n)) => Some(self.nth_message(&tree, &transcript, n).await?),
            Some(MessageRef::Seq(seq)) => Some(seq),
            None => None,
        };
        let at = match seq {
            Some(seq) => {
                if !self.starts_a_run(&tree, &transcript, seq).await? {
                    return Err(SessionError::MessageNotFound(format!(
                        "seq {seq} is not a user's message that started a run"
                    )));
                }
                seq
            }
            None => {
                let active = tree.active();
                let mut found = None;
                for e in transcript.iter().rev() {
                    if e.kind == "chat.text"
                        && active.iter().any(|r| r.contains(&e.seq))
                        && self.starts_a_run(&tree, &transcript, e.seq).await?
                    {
                        found = Some(e.seq);
                        break;
                    }
                }
                found.ok_or_else(|| {
                    SessionError::MessageNotFound(
                        "the chat has no user's message to answer again".into(),
                    )
                })?
            }
        };
        self.may_add_version(&tree, at)?;
        let extras = RunExtras {
            branch: Some(BranchStart {
                at,
                reason: BranchReason::Regenerate,
                model,
            }),
            ..extras
        };
        self.start_run(None, extras).await
    }

    /// Creates this chat as a fork of another's path: the chat record (the
    /// source's agent, context and model) and the path's events, logged in
    /// one commit.
    pub(super) async fn fork(
        &mut self,
        user: String,
        (agent, context, model): (String, Option<String>, Option<String>),
        (events, partial): (Vec<EventKind>, Vec<usize>),
    ) -> Result<(), SessionError> {
        if self.chat.is_some() {
            return Err(SessionError::IllegalTransition(
                "a chat with that id exists: fork into a new id".into(),
            ));
        }
        if crate::session::is_conversation_chat(self.chat_id) {
            return Err(SessionError::ReservedId);
        }
        if self.ctx.agents.get(&agent).is_none() {
            return Err(SessionError::AgentMissing(agent));
        }
        self.ctx.quotas.new_chat(&user)?;
        let now = chrono::Utc::now().timestamp_millis();
        let record = crate::store::ChatRecord {
            id: self.chat_id,
            owner: user,
            agent,
            state: crate::store::ChatState::Idle,
            context,
            model,
            archived: false,
            conversation_state: None,
            created_at: now,
            updated_at: now,
            // As the store writes it: active since its creation.
            listing: crate::store::Listing {
                active_at: now,
                ..Default::default()
            },
        };
        let stored = self.ctx.store.create_chat(&record).await?;
        if stored != record {
            return Err(SessionError::IllegalTransition(
                "a chat with that id exists: fork into a new id".into(),
            ));
        }
        self.chat = Some(stored);
        if !events.is_empty() {
            let events = events.into_iter().map(|k| (k, None)).collect();
            let marks = super::Marks {
                partial,
                ..super::Marks::default()
            };
            self.append_with(events, None, None, marks).await?;
        }
        Ok(())
    }

    /// `chat.switch`: the chat goes on where the user last was in the
    /// version that holds `to`. Nothing is logged if it is there already.
    pub(super) async fn switch(&mut self, user: &str, to: u64) -> Result<(), SessionError> {
        self.may_branch(user)?;
        let (tree, _) = self.tree().await?;
        if !tree.is_regular(to) {
            return Err(SessionError::MessageNotFound(format!(
                "seq {to} is not an envelope of the conversation"
            )));
        }
        let at = tree.last_visit(to);
        if at == tree.pointer() {
            return Ok(());
        }
        let most = self
            .ctx
            .max_branches_per_chat
            .saturating_mul(SWITCHES_PER_BRANCH);
        if tree.switch_count() >= most {
            return Err(SessionError::BranchLimit(format!(
                "the chat was switched {most} times, the most it may be ({SWITCHES_PER_BRANCH} times max_branches_per_chat)"
            )));
        }
        let event = EventKind::Branch {
            at,
            reason: BranchReason::Switch,
            model: None,
        };
        self.append(vec![(event, None)], None).await?;
        Ok(())
    }
}
