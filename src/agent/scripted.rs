//! The `scripted` provider: a model without weights, answering by the rules of
//! its agent file. It reads the request exactly as a real model would (the last
//! message decides), so the runtime and the session cannot tell it apart from
//! one. The built-in `demo` agent is such a file.
//!
//! Token counts are whitespace-separated words: honest for a model whose
//! "tokens" are words.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use serde_json::Value;

use super::script::{ArgKind, Rule, Script};
use crate::llm::{ChatRequest, Message, Provider, ProviderError, StopReason, StreamEvent, Usage};

/// A provider driven by a [`Script`].
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    script: Script,
}

impl ScriptedProvider {
    pub fn new(script: Script) -> Self {
        Self { script }
    }
}

/// The value a rule matched, as text and (for `count`) as a number.
struct Arg {
    text: String,
    count: Option<u64>,
}

fn matches(rule: &Rule, text: &str) -> Option<Arg> {
    let rest = match (&rule.exact, &rule.prefix) {
        (Some(exact), _) => (text == exact).then(String::new)?,
        (None, Some(prefix)) => text.strip_prefix(prefix.as_str())?.trim().to_owned(),
        (None, None) => text.to_owned(),
    };
    match rule.arg {
        ArgKind::Text if rule.prefix.is_some() && rest.is_empty() => None,
        ArgKind::Text => Some(Arg {
            text: rest,
            count: None,
        }),
        ArgKind::Count => {
            let n: u64 = rest.parse().ok()?;
            (1..=rule.max).contains(&n).then_some(Arg {
                text: rest,
                count: Some(n),
            })
        }
    }
}

/// Substitutes `{text}`, `{arg}`, `{result}` and `{result_chars}` (and, in
/// a `reply`, `{history}`: the user's messages sent, joined by ` | `).
fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in vars {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// Fills every string of a JSON template. A string that is exactly `{arg}`
/// becomes the number when the argument is a count.
fn fill_json(template: &Value, arg: &Arg, text: &str) -> Value {
    match template {
        Value::String(s) if s == "{arg}" => match arg.count {
            Some(n) => Value::from(n),
            None => Value::from(arg.text.clone()),
        },
        Value::String(s) => Value::from(fill(s, &[("arg", &arg.text), ("text", text)])),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| fill_json(v, arg, text)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill_json(v, arg, text)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `{files}`: what the model got of the files a user's message attaches
/// (empty when none), so a test sees they were read.
fn attached(m: &Message) -> String {
    use crate::llm::FileContent;
    let Message::User { files, .. } = m else {
        return String::new();
    };
    if files.is_empty() {
        return String::new();
    }
    let each: Vec<String> = files
        .iter()
        .map(|f| {
            let how = match &f.content {
                FileContent::Base64(data) => {
                    let pad = data.bytes().rev().take_while(|b| *b == b'=').count();
                    format!("{} bytes", data.len() / 4 * 3 - pad)
                }
                FileContent::Text(t) => format!("{} characters", t.chars().count()),
                FileContent::Missing(why) => format!("not sent: {why}"),
                FileContent::Stored(_) => "not read".to_owned(),
            };
            format!("{} ({}, {how})", f.name, f.media_type)
        })
        .collect();
    format!("\nYou attached: {}", each.join(", "))
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// Streams `text` a word at a time (each chunk keeps its trailing space, so the
/// chunks concatenate to the text).
fn chunks(text: &str, delay: Duration, out: &mut VecDeque<(Duration, StreamEvent)>) {
    for piece in text.split_inclusive(' ') {
        out.push_back((delay, StreamEvent::ContentDelta(piece.to_owned())));
    }
}

impl ScriptedProvider {
    /// The events answering `request`, each with the pause before it.
    fn respond(&self, request: &ChatRequest) -> VecDeque<(Duration, StreamEvent)> {
        let mut out = VecDeque::new();
        out.push_back((Duration::ZERO, StreamEvent::MessageStart { model: None }));
        let prompt_tokens = words(&request.system_prompt)
            + request
                .messages
                .iter()
                .map(|m| match m {
                    Message::User { text, .. }
                    | Message::Peer { text, .. }
                    | Message::Assistant { text, .. } => words(text),
                    Message::ToolResult { content, .. } => words(content),
                })
                .sum::<u64>();
        let mut stop = StopReason::EndTurn;

        match request.messages.last() {
            // In a group, what another member said last is answered as a
            // user's message is.
            Some(Message::User { text, .. } | Message::Peer { text, .. }) => {
                let found = self
                    .script
                    .rules
                    .iter()
                    .find_map(|r| matches(r, text).map(|arg| (r, arg)));
                match found {
                    Some((rule, arg)) => {
                        if let Some(think) = &rule.think {
                            let think = fill(think, &[("text", text), ("arg", &arg.text)]);
                            for piece in think.split_inclusive(' ') {
                                out.push_back((
                                    Duration::ZERO,
                                    StreamEvent::ThinkingDelta(piece.to_owned()),
                                ));
                            }
                        }
                        if let Some(reply) = &rule.reply {
                            // The user's messages the model was sent, so a
                            // test sees which history a run had.
                            let history = request
                                .messages
                                .iter()
                                .filter_map(|m| match m {
                                    Message::User { text, .. } => Some(text.as_str()),
                                    _ => None,
                                })
                                .collect::<Vec<_>>()
                                .join(" | ");
                            let files = request.messages.last().map(attached).unwrap_or_default();
                            let vars = [
                                ("text", text.as_str()),
                                ("arg", &arg.text),
                                ("history", &history),
                                ("files", &files),
                            ];
                            let reply = fill(reply, &vars);
                            chunks(&reply, Duration::ZERO, &mut out);
                        } else if let Some(spec) = &rule.stream {
                            let n = arg.count.unwrap_or(1);
                            let delay = Duration::from_millis(spec.delay_ms);
                            for i in 1..=n {
                                let word = if i == n {
                                    format!("w{i}")
                                } else {
                                    format!("w{i} ")
                                };
                                out.push_back((
                                    if i == 1 { Duration::ZERO } else { delay },
                                    StreamEvent::ContentDelta(word),
                                ));
                            }
                        } else if let Some(call) = &rule.call {
                            let input = fill_json(&call.input, &arg, text);
                            let id = format!("call_{}", uuid::Uuid::new_v4().simple());
                            out.push_back((
                                Duration::ZERO,
                                StreamEvent::ToolUseStart {
                                    index: 0,
                                    id,
                                    name: call.tool.clone(),
                                },
                            ));
                            out.push_back((
                                Duration::ZERO,
                                StreamEvent::ToolInputDelta {
                                    index: 0,
                                    json: input.to_string(),
                                },
                            ));
                            stop = StopReason::ToolUse;
                        } else if let Some(err) = &rule.error {
                            out.push_back((
                                Duration::ZERO,
                                StreamEvent::Error(ProviderError {
                                    code: err.code,
                                    message: fill(
                                        &err.message,
                                        &[("text", text), ("arg", &arg.text)],
                                    ),
                                    recoverable: err.recoverable,
                                }),
                            ));
                            return out;
                        }
                    }
                    None => chunks("I have no rule for that.", Duration::ZERO, &mut out),
                }
            }
            Some(Message::ToolResult {
                name,
                content,
                is_error,
                ..
            }) => {
                let then = self
                    .script
                    .rules
                    .iter()
                    .find(|r| r.call.as_ref().is_some_and(|c| &c.tool == name))
                    .and_then(|r| r.then.as_deref());
                let reply = match (is_error, then) {
                    (false, Some(t)) => fill(
                        t,
                        &[
                            ("result", content),
                            ("result_chars", &content.chars().count().to_string()),
                        ],
                    ),
                    (false, None) => content.clone(),
                    (true, _) => format!("The tool {name} failed: {content}"),
                };
                chunks(&reply, Duration::ZERO, &mut out);
            }
            Some(Message::Assistant { .. }) | None => {
                let greeting = self.script.greeting.as_deref().unwrap_or("Hello.");
                chunks(greeting, Duration::ZERO, &mut out);
            }
        }

        let completion_tokens = out
            .iter()
            .map(|(_, e)| match e {
                StreamEvent::ContentDelta(t) | StreamEvent::ThinkingDelta(t) => words(t),
                StreamEvent::ToolInputDelta { .. } => 1,
                _ => 0,
            })
            .sum();
        out.push_back((
            Duration::ZERO,
            StreamEvent::MessageComplete {
                stop,
                usage: Usage {
                    prompt_tokens,
                    completion_tokens,
                },
            },
        ));
        out
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn names(&self) -> (&'static str, &str) {
        ("agentwire.scripted", "scripted")
    }

    async fn stream_chat(
        &self,
        request: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        let events = self.respond(&request);
        Ok(stream::unfold(events, |mut events| async move {
            let (delay, event) = events.pop_front()?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((event, events))
        })
        .boxed())
    }
}

#[cfg(test)]
#[path = "scripted_tests.rs"]
mod tests;
