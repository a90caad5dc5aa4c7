//! A chat's title and its place in the list. An untitled chat is titled
//! once a run of it ends, as a `chat.title`: by its workflow or template if
//! it names one, or from the run's first words when no model makes titles —
//! both logged in the commit of the run's end, just after it —; else by a
//! model (`title_model`, else the chat's own) from the first exchange, in
//! the background, with a timeout, once (a failure falls back to the first
//! words, so a chat is never asked twice).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{Actor, Role};
use crate::llm::{Message, Provider, Usage};
use crate::protocol::limits::one_line;
use crate::protocol::{EventKind, TitleSource, TitleUsage};
use crate::session::SessionError;
use crate::session::handle::{Command, Op, Origin};
use crate::store::{ChatFlags, Store};

/// How long a model may take to title a chat.
const TITLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The most characters of a title a model or the first words make.
const MADE_CHARS: usize = 80;

/// The most characters of a title a template or workflow gives.
const MAX_TITLE_CHARS: usize = 200;

/// Words of the first message a title without a model keeps.
const TITLE_WORDS: usize = 6;

/// Characters of each side of the first exchange a model is shown.
const SHOWN_CHARS: usize = 2000;

const TITLE_PROMPT: &str = "You name conversations. Reply with a short title for the \
conversation below: at most six words, in the language of the conversation, without \
quotes or a final period. Reply with the title only.";

impl Actor {
    /// Keeps the run's first words while the chat is untitled.
    pub(super) fn note_said(&mut self, events: &[(EventKind, Option<String>)]) {
        let untitled = self
            .chat
            .as_ref()
            .is_some_and(|c| c.listing.title.is_none());
        let Some(run) = self.run.as_mut().filter(|r| untitled && r.said.is_none()) else {
            return;
        };
        run.said = events.iter().find_map(|(k, _)| match k {
            EventKind::Text { content, .. } if !content.trim().is_empty() => Some(content.clone()),
            _ => None,
        });
    }

    /// Whether this untitled chat gets a title now: not while one is made,
    /// not on a follower.
    fn untitled(&self) -> bool {
        self.ctx.auto_titles
            && self
                .chat
                .as_ref()
                .is_some_and(|c| c.listing.title.is_none())
            && !self.titling
            && self.role != Role::Follower
    }

    /// At a run's end (`events` holds its `chat.run_complete`): the title an
    /// untitled chat gets without a model — its workflow's or template's,
    /// else the run's first words — put just after the run's end, in the
    /// same commit. `None` when a model makes it (after the commit) or there
    /// is nothing to make it from.
    pub(super) fn title_at_end(
        &mut self,
        events: &mut Vec<(EventKind, Option<String>)>,
    ) -> Option<String> {
        if !self.untitled() {
            return None;
        }
        let chat = self.chat.as_ref()?;
        let template = self
            .ctx
            .agents
            .get(&chat.agent)
            .and_then(|a| a.template.as_ref()?.title.clone());
        let run = self.run.as_ref();
        let named = run.and_then(|r| r.named.clone());
        let (title, source) = match (named, template) {
            (Some(t), _) => (t, TitleSource::Workflow),
            (None, Some(t)) => (t, TitleSource::Template),
            (None, None) if self.title_provider().is_none() => {
                (words(run?.said.as_deref()?), TitleSource::Words)
            }
            _ => return None,
        };
        let title = cut(&one_line(&title), MAX_TITLE_CHARS);
        if title.is_empty() {
            return None;
        }
        let end = events
            .iter()
            .position(|(k, _)| matches!(k, EventKind::RunComplete { .. }))?;
        let event = EventKind::Title {
            title: title.clone(),
            source,
            usage: None,
        };
        events.insert(end + 1, (event, None));
        Some(title)
    }

    /// After a run ends: an untitled chat that a model titles gets its
    /// title in the background.
    pub(super) fn title_after_run(&mut self) {
        if !self.untitled() {
            return;
        }
        let Some(provider) = self.title_provider() else {
            return;
        };
        let Some(chat) = &self.chat else { return };
        let (me, owner, store, chat_id) = (
            self.me.clone(),
            chat.owner.clone(),
            self.ctx.store.clone(),
            self.chat_id,
        );
        self.titling = true;
        self.ctx.tracker.spawn(async move {
            let (title, source, usage) = make(store, chat_id, provider).await;
            let op = Op::Title {
                user: owner,
                title,
                source,
                usage,
            };
            // The actor waits for it (it is not idle while titling), and
            // so does this task: the actor drops a command nobody waits on.
            if let Some(tx) = me.upgrade() {
                let (reply, answer) = oneshot::channel();
                let origin = Origin::Local { attempt: 0 };
                let cmd = Command::Op {
                    op: Box::new(op),
                    origin,
                    reply,
                };
                if tx.send(Box::new(cmd)).await.is_ok()
                    && let Ok(Err(e)) = answer.await
                {
                    tracing::warn!(error = %e, "cannot log the chat's title");
                }
            }
        });
    }

    /// The model that titles this chat, if any.
    fn title_provider(&self) -> Option<Arc<dyn Provider>> {
        let chat = self.chat.as_ref()?;
        let models = self.ctx.agents.models();
        match self.ctx.title_model.as_deref() {
            Some("none") => None,
            Some(name) => {
                let model = models.resolve(name);
                if model.is_none() {
                    tracing::warn!(model = name, "title_model names no configured model");
                }
                Some(model?.provider.clone())
            }
            None => match &chat.model {
                Some(name) => Some(models.resolve(name)?.provider.clone()),
                None => {
                    let agent = self.ctx.agents.get(&chat.agent)?;
                    agent.titles.then(|| agent.provider.clone())
                }
            },
        }
    }

    /// Logs the chat's title. A made one (not the user's) is dropped when
    /// the chat has one by now.
    pub(super) async fn set_title(
        &mut self,
        user: &str,
        title: String,
        source: TitleSource,
        usage: Option<TitleUsage>,
    ) -> Result<(), SessionError> {
        let titled = self.owned(user)?.listing.title.is_some();
        if source != TitleSource::User {
            // Made here before this node lost the chat: the owner titles it.
            if !std::mem::take(&mut self.titling) || titled {
                return Ok(());
            }
        }
        let event = EventKind::Title {
            title: title.clone(),
            source,
            usage,
        };
        self.append(vec![(event, None)], None).await?;
        if let Some(chat) = &mut self.chat {
            chat.listing.title = Some(title);
        }
        Ok(())
    }

    /// `PATCH /v1/chats/{id}`: renames, pins, archives or restores the chat.
    pub(super) async fn update(
        &mut self,
        user: &str,
        title: Option<String>,
        flags: ChatFlags,
    ) -> Result<(), SessionError> {
        let chat = self.owned(user)?;
        let archive = flags.archived == Some(true) && !chat.archived;
        if let Some(title) = title {
            self.set_title(user, title, TitleSource::User, None).await?;
        }
        if archive {
            self.archive(user).await?;
        }
        let rest = ChatFlags {
            pinned: flags.pinned,
            archived: flags.archived.filter(|a| !a),
            read: None,
        };
        if rest != ChatFlags::default() {
            self.ctx.store.set_chat_flags(self.chat_id, rest).await?;
            if let Some(chat) = &mut self.chat {
                if let Some(pinned) = rest.pinned {
                    chat.listing.pinned = pinned;
                }
                if rest.archived.is_some() {
                    chat.archived = false;
                }
            }
        }
        Ok(())
    }
}

/// A title for the chat's first exchange by `provider`, or from the first
/// words if it fails or does not answer in time.
async fn make(
    store: Arc<dyn Store>,
    chat_id: uuid::Uuid,
    provider: Arc<dyn Provider>,
) -> (String, TitleSource, Option<TitleUsage>) {
    let (asked, answered) = match store.transcript(chat_id).await {
        Ok(log) => first_exchange(&log),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the chat to title it");
            (String::new(), String::new())
        }
    };
    {
        let prompt = format!(
            "User: {}\n\nAssistant: {}",
            cut(&asked, SHOWN_CHARS),
            cut(&answered, SHOWN_CHARS)
        );
        let mut usage = Usage::default();
        let call = crate::llm::complete(
            &*provider,
            TITLE_PROMPT,
            vec![Message::user(prompt)],
            32,
            &mut usage,
        );
        let used = |u: &Usage| TitleUsage {
            total_tokens: u.prompt_tokens + u.completion_tokens,
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        };
        match tokio::time::timeout(TITLE_TIMEOUT, call).await {
            Ok(Ok(text)) => match clean(&text) {
                Some(title) => return (title, TitleSource::Model, Some(used(&usage))),
                None => tracing::warn!("the title model answered no title"),
            },
            Ok(Err(e)) => tracing::warn!(error = %e, "the title model failed"),
            Err(_) => tracing::warn!("the title model did not answer in time"),
        }
    }
    let first = if asked.trim().is_empty() {
        &answered
    } else {
        &asked
    };
    (words(first), TitleSource::Words, None)
}

/// The first user's text and the first answer of the log.
fn first_exchange(log: &[crate::store::StoredEnvelope]) -> (String, String) {
    let (mut asked, mut answered) = (None, None);
    for e in log.iter().filter(|e| e.kind == "chat.text") {
        if let Ok(env) = serde_json::from_str::<crate::protocol::Envelope>(&e.json)
            && let EventKind::Text { agent, content } = env.kind
        {
            let slot = if agent == "user" {
                &mut asked
            } else {
                &mut answered
            };
            slot.get_or_insert(content);
        }
        if asked.is_some() && answered.is_some() {
            break;
        }
    }
    (asked.unwrap_or_default(), answered.unwrap_or_default())
}

/// A title from the first words of `text` ("New chat" without any).
fn words(text: &str) -> String {
    let line = one_line(text);
    let words: Vec<&str> = line.split_whitespace().take(TITLE_WORDS).collect();
    let title = cut(&words.join(" "), MADE_CHARS);
    if title.is_empty() {
        "New chat".into()
    } else {
        title
    }
}

/// A model's answer as a title: its first line, without quotes, a
/// `Title:` prefix or a final period; `None` if nothing is left.
fn clean(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line
        .strip_prefix("Title:")
        .or_else(|| line.strip_prefix("title:"))
        .unwrap_or(line);
    let quotes: &[char] = &['"', '\'', '*', '`', '“', '”', '#', ' '];
    let line = line.trim_matches(quotes).trim_end_matches('.').trim();
    let title = cut(&one_line(line), MADE_CHARS);
    (!title.is_empty()).then_some(title)
}

/// At most `chars` characters of `text` (the last one `…` when cut).
fn cut(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(chars - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_words_make_a_title() {
        assert_eq!(
            words("  How do I\nreverse a linked list in Rust quickly?"),
            "How do I reverse a linked"
        );
        assert_eq!(words(" \n "), "New chat");
        assert_eq!(words(&"x".repeat(300)).chars().count(), MADE_CHARS);
    }

    #[test]
    fn a_model_answer_is_cleaned() {
        assert_eq!(
            clean("\n\"Reversing Lists in Rust.\"\nmore"),
            Some("Reversing Lists in Rust".into())
        );
        assert_eq!(
            clean("Title: **Trip to Lyon**"),
            Some("Trip to Lyon".into())
        );
        assert_eq!(clean(" \n\"\" "), None);
        assert_eq!(one_line("a\u{0}b\r\nc"), "a b c");
    }
}
