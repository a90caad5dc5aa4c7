//! Nested chats (AG2's `register_nested_chats`): a member whose turn is a
//! whole inner conversation — one chat after another, each with another
//! agent file (a plain agent or a group) — whose last summary becomes the
//! member's reply. The chats are logged in the same chat, every speaker
//! named inside the member (`reviewer/critic`, see
//! [`NESTED`](crate::protocol::NESTED)), so any wire can show them or fold
//! them; they are not part of the conversation the members read.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::super::build::{Agent, Group, Member, Nested};
use super::super::definition::{MemberSpec, SummaryMethod};
use super::super::speak::RunSpec;
use super::super::tally::Tally;
use super::view::view;
use crate::link::{Gone, RunLink, Said};
use crate::llm::{Message, complete};
use crate::protocol::{EventKind, RunEndReason};

/// A group's turns on a transcript (`run::converse`, handed in: the group
/// loop and a nested turn call each other, so neither file imports the
/// other).
pub(super) type Converse = for<'a> fn(
    &'a RunSpec,
    &'a Group,
    &'a RunLink,
    &'a mut Tally,
    &'a mut Vec<Said>,
) -> BoxFuture<'a, Result<RunEndReason, Gone>>;

/// Nested chats a member may have.
const MAX_CHATS: usize = 8;

/// AG2's `reflection_with_llm` prompt (`DEFAULT_SUMMARY_PROMPT`).
const SUMMARY_PROMPT: &str =
    "Summarize the takeaway from the conversation. Do not add any introductory phrases.";

/// Characters of an inner message a summary reads at most.
const SUMMARY_READS: usize = 8_000;

/// A member's nested chats, checked: each names an agent file that can take
/// one (`resolve`), and the member says nothing itself.
pub(super) fn chats(
    at: &str,
    member: &MemberSpec,
    resolve: &impl Fn(&str, bool) -> Result<Arc<Agent>, String>,
) -> Result<Vec<Nested>, String> {
    if member.nested.is_empty() {
        return Ok(Vec::new());
    }
    let own = [
        ("system_prompt", member.system_prompt.is_some()),
        ("tools", !member.tools.is_empty()),
        ("max_turns", member.max_turns.is_some()),
        ("tool_call_format", member.tool_call_format.is_some()),
    ];
    if let Some((field, _)) = own.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{at}.{field}: a member whose turn is nested chats does not speak itself"
        ));
    }
    if member.nested.len() > MAX_CHATS {
        return Err(format!("{at}.nested: at most {MAX_CHATS} chats"));
    }
    member
        .nested
        .iter()
        .enumerate()
        .map(|(i, chat)| {
            let at = format!("{at}.nested[{i}]");
            let agent = resolve(&chat.agent, true).map_err(|e| format!("{at}.agent: {e}"))?;
            let message = chat.message.clone().unwrap_or_else(|| "{message}".into());
            if message.trim().is_empty() || message.len() > 4096 {
                return Err(format!("{at}.message: 1 to 4096 characters"));
            }
            Ok(Nested {
                agent,
                message,
                summary: chat.summary,
            })
        })
        .collect()
}

/// Member `on.0`'s turn as its nested chats, in order; `on.1`: a restart
/// had cut it off (it runs again from its first chat). `Ok(Ok(reply))`: the
/// last chat's summary, logged as the member's `chat.text`; `Ok(Err(..))`:
/// a chat ended the run (its agent failed, a cancel, a timeout). A chat
/// with a group runs through `converse`.
pub(super) async fn turn(
    spec: &RunSpec,
    on: (&Member, bool, Converse),
    link: &RunLink,
    tally: &mut Tally,
    transcript: &mut Vec<Said>,
    chosen: (&'static str, Option<String>),
) -> Result<Result<String, RunEndReason>, Gone> {
    let (member, again, converse) = on;
    let name = link.named(&member.name);
    let (method, reason) = if again { ("continue", None) } else { chosen };
    link.emit(EventKind::SelectSpeaker {
        agent: name.clone(),
        method: Some(method.to_owned()),
        reason,
    })
    .await?;
    let trigger = last_text(transcript);
    let inside = link.nested(&name);
    let mut carryover: Vec<String> = Vec::new();
    let mut summary = String::new();
    for chat in &member.nested {
        let message = opening(&chat.message, &trigger, &carryover);
        let agent = &chat.agent;
        // The chat starts afresh: only its message, on the agent's own model.
        let inner = RunSpec {
            agent: agent.clone(),
            history: vec![Said {
                by: None,
                message: Message::user(message.clone()),
            }],
            provider: None,
            model: None,
            workflow: None,
            resumed: None,
            client_tools: Vec::new(),
            ..spec.clone()
        };
        let mut said: Vec<Said> = inner.history.clone();
        let announced = ("nested", Some(message));
        let end = match &agent.group {
            Some(group) => {
                inside
                    .emit(EventKind::SelectSpeaker {
                        agent: inside.named(&agent.id),
                        method: Some(announced.0.to_owned()),
                        reason: announced.1,
                    })
                    .await?;
                converse(&inner, group, &inside, tally, &mut said).await?
            }
            None => {
                let mut messages = vec![said[0].message.clone()];
                // Its tool calls and answers carry its name, as a member's.
                let end = super::super::speaker::alone(
                    &inner,
                    agent,
                    &inside.speaking_as(&agent.id),
                    tally,
                    &mut messages,
                    Some(announced),
                )
                .await?;
                said.extend(messages.into_iter().skip(1).map(|message| Said {
                    by: Some(agent.id.clone()),
                    message,
                }));
                end
            }
        };
        if !matches!(end, RunEndReason::Completed | RunEndReason::MaxRounds) {
            return Ok(Err(end));
        }
        summary = match chat.summary {
            SummaryMethod::LastMsg => last_text(&said),
            SummaryMethod::ReflectionWithLlm => {
                match reflect(spec, member, link, tally, &said).await? {
                    Ok(text) => text,
                    Err(end) => return Ok(Err(end)),
                }
            }
        };
        carryover.push(summary.clone());
    }
    link.emit(EventKind::Text {
        agent: name,
        content: summary.clone(),
    })
    .await?;
    transcript.push(Said {
        by: Some(member.name.clone()),
        message: Message::Assistant {
            text: summary.clone(),
            tool_calls: Vec::new(),
        },
    });
    Ok(Ok(summary))
}

/// The opening message: `template` with `{message}` (the conversation's last
/// message) and `{carryover}` (the earlier chats' summaries) filled; with
/// summaries and no `{carryover}`, they follow as AG2 appends them.
fn opening(template: &str, trigger: &str, carryover: &[String]) -> String {
    static PLACES: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\{(message|carryover)\}").expect("a valid pattern")
    });
    let summaries = carryover.join("\n");
    // One pass: what the message or a summary says is never filled in.
    let mut message = PLACES
        .replace_all(template, |c: &regex::Captures<'_>| match &c[1] {
            "message" => trigger.to_owned(),
            _ => summaries.clone(),
        })
        .into_owned();
    if !carryover.is_empty() && !template.contains("{carryover}") {
        message.push_str("\nContext: \n");
        message.push_str(&summaries);
    }
    message
}

/// The last words said in `transcript`: a text, or else a tool's result.
fn last_text(transcript: &[Said]) -> String {
    transcript
        .iter()
        .rev()
        .find_map(|said| match &said.message {
            Message::User { text, .. } | Message::Peer { text, .. } if !text.is_empty() => {
                Some(text.clone())
            }
            Message::Assistant { text, .. } if !text.is_empty() => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// AG2's `reflection_with_llm`: the member's model sums the chat up (its
/// usage counted under the member's name). A model that fails ends the run
/// with the error logged.
async fn reflect(
    spec: &RunSpec,
    member: &Member,
    link: &RunLink,
    tally: &mut Tally,
    said: &[Said],
) -> Result<Result<String, RunEndReason>, Gone> {
    let provider = match (&spec.provider, member.default_model) {
        (Some(chat_model), true) => chat_model.clone(),
        _ => member.agent.provider.clone(),
    };
    let mut messages = view(said, None, SUMMARY_READS);
    messages.push(Message::user(SUMMARY_PROMPT));
    let name = link.named(&member.name);
    let usage = &mut tally.of(&name, member.agent.price).model;
    let before = *usage;
    let answer = complete(provider.as_ref(), SUMMARY_PROMPT, messages, 1024, usage).await;
    link.used(Some(&name), before, *usage).await?;
    match answer {
        Ok(text) => Ok(Ok(text)),
        Err(why) => {
            let message = format!("`{name}` could not sum up its nested chat: {why}");
            let code = crate::protocol::ErrorCode::TransportError;
            super::super::speak::fail(link, code, message, true)
                .await
                .map(Err)
        }
    }
}
