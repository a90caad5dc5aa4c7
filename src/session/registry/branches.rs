//! The registry's side of a chat's tree: edits, regenerates and switches
//! (checked here, run by the chat's actor), and the tree read from any node.

use uuid::Uuid;

use super::{Caller, Registry, check_text};
use crate::protocol::{BranchReason, EventKind};
use crate::session::SessionError;
pub use crate::session::handle::MessageRef;
use crate::session::handle::{Op, Origin, RunExtras};
use crate::session::tree::{Point, Tree};

/// Most envelopes a fork copies.
pub const MAX_FORK: usize = 20_000;

/// Envelopes of other versions a read of a path goes through rather than
/// start a new read after them (`Tree::read_spans`).
const READ_GAP: u64 = 256;

/// A chat's tree as a client reads it (`GET /v1/chats/{id}/branches`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Branches {
    pub chat_id: Uuid,
    /// The log's last seq.
    pub last_seq: u64,
    /// The end of the active path: where the conversation goes on.
    pub pointer: u64,
    /// Every point where the conversation has two versions or more.
    pub points: Vec<Point>,
}

impl Registry {
    /// `chat.edit`: the conversation goes on from `text` in place of the
    /// user's message `seq`. Counted as a turn.
    pub async fn edit(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        seq: MessageRef,
        text: String,
        client_msg_id: Option<String>,
    ) -> Result<(), SessionError> {
        check_text("text", &text)?;
        let attachments = self.attachments(chat_id, caller).await?;
        self.inner.ctx.quotas.message(caller.user)?;
        let op = Op::Edit {
            user: caller.user.to_owned(),
            seq,
            text,
            client_msg_id,
            extras: RunExtras {
                attachments,
                ..caller.extras()
            },
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// `chat.regenerate`: a new answer to the user's message `seq` (the
    /// last on the active path if `None`), with `model` (a model or an
    /// alias) for that run. Counted as a turn.
    ///
    /// # Errors
    /// `UnknownModel`, and what a new turn may meet.
    pub async fn regenerate(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        seq: Option<u64>,
        model: Option<&str>,
    ) -> Result<(), SessionError> {
        self.regenerate_ref(chat_id, caller, seq.map(MessageRef::Seq), model)
            .await
    }

    /// [`Self::regenerate`] of the user's message `target` names (by seq, or
    /// by its place among those that started a run on the active path).
    ///
    /// # Errors
    /// As [`Self::regenerate`].
    pub async fn regenerate_ref(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        target: Option<MessageRef>,
        model: Option<&str>,
    ) -> Result<(), SessionError> {
        let model = match model {
            Some(name) => Some(
                self.inner
                    .ctx
                    .agents
                    .models()
                    .resolve(name)
                    .ok_or_else(|| SessionError::UnknownModel(name.to_owned()))?
                    .name
                    .clone(),
            ),
            None => None,
        };
        self.inner.ctx.quotas.message(caller.user)?;
        let (seq, nth) = match target {
            Some(MessageRef::Seq(seq)) => (Some(seq), None),
            Some(MessageRef::Nth(n)) => (None, Some(n)),
            None => (None, None),
        };
        let op = Op::Regenerate {
            user: caller.user.to_owned(),
            seq,
            nth,
            model,
            extras: caller.extras(),
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// A regenerate of the run that begins at seq `run` (as the AI SDK
    /// names an assistant message; `None`: the last answer): the user's
    /// message it answered is answered again.
    ///
    /// # Errors
    /// `MessageNotFound` for a run that answered no user's message (an
    /// agent that spoke first), and what [`Registry::regenerate`] meets.
    pub async fn regenerate_run(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
        run: Option<u64>,
    ) -> Result<(), SessionError> {
        let seq = match run {
            None | Some(0) => None,
            Some(start) => {
                self.chat(chat_id, caller.user).await?;
                // A switch may lead the run's region (the turn after it):
                // what follows it began the run.
                let rows = self
                    .inner
                    .ctx
                    .store
                    .load_after(chat_id, start - 1, 8)
                    .await?;
                let mut start = start;
                let mut first = None;
                for row in &rows {
                    if row.seq != start {
                        break;
                    }
                    let kind = serde_json::from_str::<crate::protocol::Envelope>(&row.json)
                        .ok()
                        .map(|e| e.kind);
                    if let Some(EventKind::Branch {
                        reason: BranchReason::Switch,
                        ..
                    }) = kind
                    {
                        start += 1;
                        continue;
                    }
                    first = kind;
                    break;
                }
                let asked = match first {
                    // A run a user's message began, or one a regenerate or an
                    // edit began (with its branch).
                    Some(EventKind::Text { agent, .. }) if agent == "user" => Some(start),
                    Some(EventKind::Branch {
                        at,
                        reason: BranchReason::Regenerate,
                        ..
                    }) => Some(at),
                    Some(EventKind::Branch {
                        reason: BranchReason::Edit,
                        ..
                    }) => Some(start + 1),
                    _ => None,
                };
                Some(asked.ok_or_else(|| {
                    SessionError::MessageNotFound(format!(
                        "no answer to a user's message begins at seq {start}"
                    ))
                })?)
            }
        };
        self.regenerate(chat_id, caller, seq, None).await
    }

    /// `chat.switch`: make the version holding `to` the active one. Counted
    /// as a turn (it may log a branch).
    pub async fn switch(&self, chat_id: Uuid, user: &str, to: u64) -> Result<(), SessionError> {
        self.inner.ctx.quotas.message(user)?;
        let op = Op::Switch {
            user: user.to_owned(),
            to,
        };
        self.call_op(chat_id, op, Origin::Local { attempt: 0 })
            .await
    }

    /// The user's messages that started a run on the active path of
    /// `user`'s chat (not the answers to input requests), in order: what a
    /// client that keeps its own messages holds as user messages.
    ///
    /// # Errors
    /// `NotFound` unless the chat is the user's; the store's errors.
    pub async fn run_messages(
        &self,
        chat_id: Uuid,
        user: &str,
    ) -> Result<Vec<String>, SessionError> {
        let (_, last) = self.chat(chat_id, user).await?;
        let store = &self.inner.ctx.store;
        let transcript = store.transcript(chat_id).await?;
        let tree = Tree::of_log(&transcript, last);
        let path = tree.active();
        let mut out = Vec::new();
        for e in transcript.iter().filter(|e| Tree::within(&path, e.seq)) {
            let Ok(env) = serde_json::from_str::<crate::protocol::Envelope>(&e.json) else {
                continue;
            };
            let marked = env.starts_run;
            let EventKind::Text { agent, content } = env.kind else {
                continue;
            };
            let parent = tree.parent(e.seq);
            let starts = agent == "user"
                && (marked
                    || parent == 0
                    || store
                        .load_after(chat_id, parent - 1, 1)
                        .await?
                        .first()
                        .is_some_and(|p| p.seq == parent && p.kind == "chat.run_complete"));
            if starts {
                out.push(content);
            }
        }
        Ok(out)
    }

    /// Forks `user`'s chat into a new chat `into` (same owner, agent,
    /// context and model): the path to `at` (default: the active path's end),
    /// which must end an answer (`chat.run_complete`), copied — its turns,
    /// tool calls and results, requests and ends, without the streamed words,
    /// reasoning and queued messages the texts already hold. Counted as a new
    /// chat.
    ///
    /// # Returns
    /// The new chat, its last seq, and the source's envelope it ends with.
    ///
    /// # Errors
    /// `NotFound`; `MessageNotFound` for an `at` that ends no answer;
    /// `BranchLimit` past [`MAX_FORK`] events; what creating a chat meets.
    pub async fn fork(
        &self,
        chat_id: Uuid,
        user: &str,
        at: Option<u64>,
        into: Uuid,
    ) -> Result<(crate::store::ChatRecord, u64, u64), SessionError> {
        let (source, last) = self.chat(chat_id, user).await?;
        let store = &self.inner.ctx.store;
        // What refuses it cheaply first: a taken id, a template's walk (its
        // state is the chat's, not a path's), the user's chat rate.
        if store.chat(into).await?.is_some() {
            return Err(SessionError::IllegalTransition(
                "a chat with that id exists: fork into a new id".into(),
            ));
        }
        let agent = self.inner.ctx.agents.get(&source.agent);
        if agent.is_some_and(|a| a.template.is_some()) {
            return Err(SessionError::IllegalTransition(
                "a template conversation has one path: it cannot be forked".into(),
            ));
        }
        self.inner.ctx.quotas.message(user)?;
        let tree = Tree::of_log(&store.branches(chat_id).await?, last);
        let leaf = at.unwrap_or_else(|| tree.pointer());
        let ends = leaf > 0
            && tree.is_regular(leaf)
            && store
                .load_after(chat_id, leaf - 1, 1)
                .await?
                .first()
                .is_some_and(|e| e.seq == leaf && e.kind == "chat.run_complete");
        if !ends {
            return Err(SessionError::MessageNotFound(format!(
                "seq {leaf} does not end an answer (a chat.run_complete of the chat)"
            )));
        }
        let (mut events, mut partial) = (Vec::new(), Vec::new());
        let path = tree.path(leaf);
        for span in Tree::read_spans(&path, 0, READ_GAP) {
            let mut after = span.start() - 1;
            while after < *span.end() {
                let want = (span.end() - after).min(1000) as u32;
                let page = store.load_after(chat_id, after, want).await?;
                let Some(tail) = page.last() else { break };
                after = tail.seq;
                for row in page.iter().filter(|r| Tree::within(&path, r.seq)) {
                    if matches!(
                        row.kind.as_str(),
                        "chat.print"
                            | "chat.reasoning"
                            | "chat.turn_discarded"
                            | "chat.queued"
                            | "chat.tool_progress"
                            // The source's runs spent it: a copy would count twice.
                            | "chat.usage_summary"
                    ) {
                        continue;
                    }
                    let env: crate::protocol::Envelope =
                        serde_json::from_str(&row.json).map_err(|e| {
                            let why = format!("envelope {} cannot be read: {e}", row.seq);
                            crate::store::StoreError::Remote(why.into())
                        })?;
                    if env.partial {
                        partial.push(events.len());
                    }
                    events.push(env.kind);
                    if events.len() > MAX_FORK {
                        return Err(SessionError::BranchLimit(format!(
                            "the path holds more than {MAX_FORK} envelopes to copy"
                        )));
                    }
                }
            }
        }
        let op = Op::Fork {
            user: user.to_owned(),
            agent: source.agent.clone(),
            context: source.context.clone(),
            model: source.model.clone(),
            events,
            partial,
        };
        self.call_op(into, op, Origin::Local { attempt: 0 }).await?;
        let (chat, last) = self.chat(into, user).await?;
        Ok((chat, last, leaf))
    }

    /// A page of the path to `leaf` (default: the active path's end) of
    /// `user`'s chat: its envelopes (of every kind) with a seq above `after`,
    /// up to `limit` and about 4 MiB, as stored — any branch read whole.
    ///
    /// # Returns
    /// The leaf, the envelopes, and where the next page starts (`None`: the
    /// path is read to its end).
    ///
    /// # Errors
    /// `NotFound`; `MessageNotFound` for a `leaf` that is not an envelope of
    /// the conversation (a branch, or past the log).
    pub async fn path_page(
        &self,
        chat_id: Uuid,
        user: &str,
        leaf: Option<u64>,
        after: u64,
        limit: u32,
    ) -> Result<(u64, Vec<String>, Option<u64>), SessionError> {
        const MAX_BYTES: usize = 4 << 20;
        let (_, last) = self.chat(chat_id, user).await?;
        let store = &self.inner.ctx.store;
        let tree = Tree::of_log(&store.branches(chat_id).await?, last);
        let leaf = leaf.unwrap_or_else(|| tree.pointer());
        if leaf != 0 && !tree.is_regular(leaf) {
            return Err(SessionError::MessageNotFound(format!(
                "seq {leaf} is not an envelope of the conversation"
            )));
        }
        // The page: the path's ranges past `after`, cut at `limit` envelopes
        // (every seq of a range is an envelope of the log).
        let mut want = Vec::new();
        let mut room = u64::from(limit);
        for r in tree.path(leaf).into_iter().filter(|r| *r.end() > after) {
            let start = (*r.start()).max(after + 1);
            let end = (*r.end()).min(start + room - 1);
            want.push(start..=end);
            room -= end - start + 1;
            if room == 0 {
                break;
            }
        }
        let rows = store.load_ranges(chat_id, &want, MAX_BYTES).await?;
        let at = rows.last().map_or(after, |e| e.seq);
        let out = rows.into_iter().map(|e| e.json).collect();
        Ok((leaf, out, (at < leaf).then_some(at)))
    }

    /// `user`'s chat's tree, as committed.
    ///
    /// # Errors
    /// `NotFound` unless the chat is the user's; the store's errors.
    pub async fn branches(&self, chat_id: Uuid, user: &str) -> Result<Branches, SessionError> {
        let (_, last) = self.chat(chat_id, user).await?;
        let tree = Tree::of_log(&self.inner.ctx.store.branches(chat_id).await?, last);
        Ok(Branches {
            chat_id,
            last_seq: last,
            pointer: tree.pointer(),
            points: tree.points(),
        })
    }
}
