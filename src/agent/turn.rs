//! One model turn: the provider's stream turned into `chat.print` fragments,
//! one `chat.text`, and the tool calls the model made; the reasoning it
//! streams, into `chat.reasoning` fragments (when the agent shows it).
//!
//! In `json` mode (seed 002 Decision 1) the text is scanned while it streams:
//! from the first thing that may start a tool call (a `{` at the start of a
//! line, or a ``` fence) on, text is held back; at the end of the turn the held
//! part is parsed as `{"tool", "parameters", "terminate"}`, and only text that
//! is not a tool call reaches the client.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;

use crate::link::{Gone, RunLink};
use crate::llm::{ChatRequest, Provider, ProviderError, StopReason, StreamEvent, ToolCall, Usage};
use crate::protocol::EventKind;
use crate::telemetry::{Span, SpanKind, kv};

/// A parsed JSON-format tool call: the raw text, the call, and `terminate`.
pub(super) type JsonCall = Result<(String, ToolCall, bool), (String, String)>;

/// What a turn produced.
pub(super) struct TurnOutput {
    /// The text shown to the user.
    pub text: String,
    /// Native tool calls, in the model's order.
    pub calls: Vec<ToolCall>,
    /// The provider failed mid-turn.
    pub failure: Option<ProviderError>,
    /// `json` mode: the tool call found in the text, if any.
    pub json_call: Option<JsonCall>,
    /// The vendor's name for the model that answered, if it said.
    pub model: Option<String>,
    /// Why the model stopped, if it finished.
    pub stop: Option<StopReason>,
    /// When the first fragment came.
    pub first_at: Option<std::time::Instant>,
}

/// One model call under its span (`chat {model}`, with the GenAI
/// conventions' attributes): the stream read to its end, or why it did
/// not start.
pub(super) async fn model_call(
    provider: &dyn Provider,
    request: ChatRequest,
    speaker: &str,
    link: &RunLink,
    usage: &mut Usage,
    modes: (bool, bool),
) -> Result<Result<TurnOutput, ProviderError>, Gone> {
    let (system, model) = provider.names();
    let span = Span::start(
        || format!("chat {model}").into(),
        SpanKind::Client,
        || {
            vec![
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.provider.name", system),
                kv("gen_ai.request.model", model.to_owned()),
                kv("gen_ai.request.max_tokens", i64::from(request.max_tokens)),
                kv("gen_ai.agent.name", speaker.to_owned()),
            ]
        },
    );
    let (started, before) = (std::time::Instant::now(), *usage);
    let turn = match provider.stream_chat(request).await {
        Ok(stream) => stream_turn(speaker, link, stream, usage, modes).await?,
        Err(e) => {
            span.fail(|| e.code.as_str().to_owned(), || e.message.clone());
            return Ok(Err(e));
        }
    };
    span.record(|| turn.attributes(before, *usage, started));
    if let Some(e) = &turn.failure {
        span.fail(|| e.code.as_str().to_owned(), || e.message.clone());
    }
    Ok(Ok(turn))
}

impl TurnOutput {
    /// What the turn's span records of it.
    fn attributes(
        &self,
        before: Usage,
        after: Usage,
        started: std::time::Instant,
    ) -> Vec<opentelemetry::KeyValue> {
        let mut attributes = vec![
            kv(
                "gen_ai.usage.input_tokens",
                (after.prompt_tokens - before.prompt_tokens) as i64,
            ),
            kv(
                "gen_ai.usage.output_tokens",
                (after.completion_tokens - before.completion_tokens) as i64,
            ),
        ];
        if let Some(model) = &self.model {
            attributes.push(kv("gen_ai.response.model", model.clone()));
        }
        if let Some(stop) = self.stop {
            let reason = match stop {
                StopReason::EndTurn => "stop",
                StopReason::ToolUse => "tool_call",
                StopReason::MaxTokens => "length",
            };
            attributes.push(kv(
                "gen_ai.response.finish_reasons",
                opentelemetry::Value::Array(vec![opentelemetry::StringValue::from(reason)].into()),
            ));
        }
        if let Some(first) = self.first_at {
            let seconds = first.saturating_duration_since(started).as_secs_f64();
            attributes.push(kv("gen_ai.response.time_to_first_chunk", seconds));
        }
        if crate::telemetry::capture_content() {
            let mut parts = Vec::new();
            if !self.text.is_empty() {
                parts.push(serde_json::json!({"type": "text", "content": self.text}));
            }
            for call in &self.calls {
                parts.push(serde_json::json!({"type": "tool_call", "id": call.id,
                    "name": call.name, "arguments": call.input}));
            }
            let output = serde_json::json!([{"role": "assistant", "parts": parts}]);
            attributes.push(kv("gen_ai.output.messages", output.to_string()));
        }
        attributes
    }
}

/// Reads the provider stream of one turn to its end.
pub(super) async fn stream_turn(
    speaker: &str,
    link: &RunLink,
    mut stream: BoxStream<'static, StreamEvent>,
    usage: &mut Usage,
    (json_mode, show_reasoning): (bool, bool),
) -> Result<TurnOutput, Gone> {
    let mut text = String::new();
    let mut calls: BTreeMap<usize, (String, String, String)> = BTreeMap::new();
    let mut failure = None;
    let mut filter = JsonFilter::default();
    let before = *usage;
    let (mut model, mut stop, mut first_at) = (None, None, None);
    let print = |content: String| EventKind::Print {
        agent: speaker.to_owned(),
        content,
        corr: None,
    };
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::MessageStart { model: named } => model = named,
            StreamEvent::ContentDelta(delta) if delta.is_empty() => {}
            StreamEvent::ContentDelta(delta) => {
                first_at.get_or_insert_with(std::time::Instant::now);
                let shown = if json_mode {
                    filter.push(&delta)
                } else {
                    Some(delta)
                };
                if let Some(shown) = shown.filter(|s| !s.is_empty()) {
                    text.push_str(&shown);
                    link.emit(print(shown)).await?;
                }
            }
            StreamEvent::ThinkingDelta(t) if show_reasoning && !t.is_empty() => {
                link.emit(EventKind::Reasoning {
                    agent: speaker.to_owned(),
                    content: t,
                })
                .await?;
            }
            StreamEvent::ThinkingDelta(t) => tracing::trace!(thinking = %t),
            StreamEvent::ToolUseStart { index, id, name } => {
                first_at.get_or_insert_with(std::time::Instant::now);
                calls.entry(index).or_insert((id, name, String::new()));
            }
            StreamEvent::ToolInputDelta { index, json } => {
                if let Some(call) = calls.get_mut(&index) {
                    call.2.push_str(&json);
                }
            }
            StreamEvent::MessageComplete { usage: u, stop: s } => {
                stop = Some(s);
                usage.prompt_tokens += u.prompt_tokens;
                usage.completion_tokens += u.completion_tokens;
            }
            StreamEvent::Error(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    // Before the turn's text and calls, which then carry it in the log.
    link.used(Some(speaker), before, *usage).await?;
    let mut json_call = None;
    if json_mode && failure.is_none() {
        let (rest, held) = filter.finish();
        if !rest.is_empty() {
            text.push_str(&rest);
            link.emit(print(rest)).await?;
        }
        if let Some(held) = held {
            match parse_json_call(&held) {
                Parsed::Call(call, terminate) => json_call = Some(Ok((held, call, terminate))),
                Parsed::Broken(why) => json_call = Some(Err((held, why))),
                Parsed::NotACall => {
                    // Text that merely looked like JSON: the user sees it.
                    text.push_str(&held);
                    link.emit(print(held)).await?;
                }
            }
        }
    }
    if !text.is_empty() {
        link.emit(EventKind::Text {
            agent: speaker.to_owned(),
            content: text.clone(),
        })
        .await?;
    }
    let calls = calls
        .into_values()
        .map(|(id, name, json)| ToolCall {
            id,
            name,
            // Broken JSON reaches the tool step as a string, which fails the
            // tool's schema and goes back to the model as an error.
            input: if json.trim().is_empty() {
                Value::Object(Default::default())
            } else {
                serde_json::from_str(&json).unwrap_or(Value::String(json))
            },
        })
        .collect();
    Ok(TurnOutput {
        text,
        calls,
        failure,
        json_call,
        model,
        stop,
        first_at,
    })
}

/// Holds back streamed text from where a JSON tool call may begin.
#[derive(Default)]
struct JsonFilter {
    buf: String,
    /// Bytes of `buf` already shown.
    shown: usize,
    /// Where the held part starts.
    held_from: Option<usize>,
}

impl JsonFilter {
    /// Adds a delta; returns the text that is safe to show now.
    fn push(&mut self, delta: &str) -> Option<String> {
        self.buf.push_str(delta);
        if self.held_from.is_some() {
            return None;
        }
        if let Some(start) = tool_start(&self.buf) {
            let out = self.buf[self.shown..start].to_owned();
            self.shown = start;
            self.held_from = Some(start);
            return Some(out);
        }
        // Keep back a tail that may still grow into a marker: trailing
        // backticks, or whitespace after which a `{` may come.
        let safe = self
            .buf
            .trim_end_matches(|c: char| c == '`' || c.is_whitespace())
            .len();
        (safe > self.shown).then(|| {
            let out = self.buf[self.shown..safe].to_owned();
            self.shown = safe;
            out
        })
    }

    /// The end of the turn: the rest to show, and the held part if any.
    fn finish(self) -> (String, Option<String>) {
        match self.held_from {
            Some(start) => (String::new(), Some(self.buf[start..].to_owned())),
            None => (self.buf[self.shown..].to_owned(), None),
        }
    }
}

/// Where a tool call may start: a ``` fence, or a `{` with only whitespace
/// before it on its line.
fn tool_start(buf: &str) -> Option<usize> {
    let fence = buf.find("```");
    let brace = buf.char_indices().find_map(|(i, c)| {
        let line_start = buf[..i].rfind('\n').map_or(0, |n| n + 1);
        (c == '{' && buf[line_start..i].trim().is_empty()).then_some(i)
    });
    match (fence, brace) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

enum Parsed {
    Call(ToolCall, bool),
    Broken(String),
    NotACall,
}

/// Parses held text as a JSON-format tool call (bare, or in a ```json fence).
fn parse_json_call(held: &str) -> Parsed {
    let mut body = held.trim();
    if let Some(rest) = body.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        body = rest.trim_end().strip_suffix("```").unwrap_or(rest).trim();
    }
    let looks_like_call = body.contains("\"tool\"");
    let value: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) if looks_like_call => return Parsed::Broken(format!("invalid JSON: {e}")),
        Err(_) => return Parsed::NotACall,
    };
    let Some(tool) = value.get("tool") else {
        return Parsed::NotACall;
    };
    let Some(name) = tool.as_str().filter(|n| !n.is_empty()) else {
        return Parsed::Broken("`tool` must be a tool name".into());
    };
    let input = match value.get("parameters") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Parsed::Broken("`parameters` must be an object".into()),
    };
    let terminate = match value.get("terminate") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Parsed::Broken("`terminate` must be true or false".into()),
    };
    Parsed::Call(
        ToolCall {
            id: format!("call_{}", uuid::Uuid::new_v4().simple()),
            name: name.to_owned(),
            input,
        },
        terminate,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(deltas: &[&str]) -> (String, Option<String>) {
        let mut f = JsonFilter::default();
        let mut shown = String::new();
        for d in deltas {
            if let Some(s) = f.push(d) {
                shown.push_str(&s);
            }
        }
        let (rest, held) = f.finish();
        shown.push_str(&rest);
        (shown, held)
    }

    #[test]
    fn plain_text_passes() {
        assert_eq!(
            run(&["Hello ", "world", "\n"]),
            ("Hello world\n".into(), None)
        );
    }

    #[test]
    fn a_bare_call_is_held() {
        let (shown, held) = run(&[
            "Let me check.\n",
            "{\"tool\": \"x\",",
            " \"parameters\": {}}",
        ]);
        assert_eq!(shown, "Let me check.\n");
        assert!(matches!(parse_json_call(&held.unwrap()), Parsed::Call(c, false) if c.name == "x"));
    }

    #[test]
    fn a_fenced_call_is_held() {
        let (shown, held) = run(&[
            "`",
            "``json\n{\"tool\": \"y\", \"parameters\": {\"a\": 1}, \"terminate\": true}\n``",
            "`",
        ]);
        assert_eq!(shown, "");
        let Parsed::Call(call, terminate) = parse_json_call(&held.unwrap()) else {
            panic!()
        };
        assert_eq!(
            (call.name.as_str(), call.input["a"].as_i64(), terminate),
            ("y", Some(1), true)
        );
    }

    #[test]
    fn broken_and_non_calls() {
        assert!(matches!(
            parse_json_call("{\"tool\": \"x\", \"parameters\": "),
            Parsed::Broken(_)
        ));
        assert!(matches!(parse_json_call("{\"a\": 1}"), Parsed::NotACall));
        assert!(matches!(
            parse_json_call("{not json at all"),
            Parsed::NotACall
        ));
        // A brace inside a sentence is not a call.
        assert_eq!(
            run(&["use {braces} freely"]),
            ("use {braces} freely".into(), None)
        );
    }
}
