//! A chat's conversation as the AI SDK's `UIMessage`s (for `useChat({
//! messages })`): each run's envelopes are encoded by [`AiSdk`] into the
//! chunks its stream sends, and folded as `ai`'s `processUIMessageStream`
//! folds them, so a message loaded has the ids, parts and metadata the
//! stream gave.
//!
//! A run is the log from the end of the previous run to its own
//! `chat.run_complete` (its `start` the seq its stream's `messageId` names,
//! `<chat>:<start>`). Its user's words are a user message `<chat>:u<seq>`
//! before the answer; words sent while it ran (`steer`) come after it; an
//! answer to an input request is its tool part's output only. A run still
//! in flight has its user's words only: its answer is what the transport's
//! resume (`GET …/stream`) replays, from the run's start, so it is never
//! shown twice.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::ai_sdk::AiSdk;
use super::sse::{Encoder, Out};
use crate::protocol::{Envelope, EventKind};

/// One run of the conversation, as read from its path.
pub struct RunOnPath {
    /// The seq its stream's message is named after.
    pub start: u64,
    pub envelopes: Vec<Envelope>,
}

/// The path's envelopes cut into runs: each ends with its
/// `chat.run_complete` (the last may still be in flight), and where the
/// path jumps (a branch point) or a `chat.branch` is, one begins: a
/// regenerate's run, an edit's, the next run after a switch — each stream
/// names its message from there.
pub fn runs(path: Vec<Envelope>) -> Vec<Vec<Envelope>> {
    let mut out = Vec::new();
    let mut run: Vec<Envelope> = Vec::new();
    for env in path {
        let jumps = run.last().is_some_and(|last| last.seq + 1 != env.seq);
        if jumps || (matches!(env.kind, EventKind::Branch { .. }) && !run.is_empty()) {
            out.push(std::mem::take(&mut run));
        }
        let ends = matches!(env.kind, EventKind::RunComplete { .. });
        run.push(env);
        if ends {
            out.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        out.push(run);
    }
    out
}

/// The messages of `runs`, in order. `declared`: the tools the agent file
/// names (typed parts), as the stream's encoder has them.
pub fn ui_messages(chat_id: &str, runs: &[RunOnPath], declared: &HashSet<String>) -> Vec<Value> {
    let mut out = Vec::new();
    for run in runs {
        let user =
            |e: &Envelope| matches!(&e.kind, EventKind::Text { agent, .. } if agent == "user");
        let answered = run.envelopes.iter().position(|e| {
            !user(e)
                && !matches!(
                    e.kind,
                    EventKind::Branch { .. } | EventKind::Title { .. } | EventKind::Queued { .. }
                )
        });
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for (i, e) in run.envelopes.iter().enumerate() {
            // What answers an input request is its tool part's output.
            let answers = run
                .envelopes
                .get(i + 1)
                .is_some_and(|n| matches!(n.kind, EventKind::InputAck { .. }));
            if let EventKind::Text { agent, content } = &e.kind
                && agent == "user"
                && !answers
            {
                // Its files first, as the AI SDK's `file` parts at their
                // download URL (the bytes are never in the log).
                let mut parts: Vec<Value> = e
                    .attachments
                    .iter()
                    .map(|a| {
                        json!({"type": "file", "mediaType": a.media_type, "filename": a.name,
                               "url": format!("/v1/files/{}", a.file_id)})
                    })
                    .collect();
                parts.push(json!({"type": "text", "text": content}));
                let m =
                    json!({"id": format!("{chat_id}:u{}", e.seq), "role": "user", "parts": parts});
                if answered.is_some_and(|a| i > a) {
                    after.push(m);
                } else {
                    before.push(m);
                }
            }
        }
        out.extend(before);
        // A run in flight: the transport's resume brings its answer whole.
        if run
            .envelopes
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunComplete { .. }))
        {
            out.extend(answer(chat_id, run, declared));
        }
        out.extend(after);
    }
    out
}

/// The run's answer, if it has any part.
fn answer(chat_id: &str, run: &RunOnPath, declared: &HashSet<String>) -> Option<Value> {
    let mut encoder = AiSdk::new(0).declaring(declared.clone());
    let mut chunks = vec![Out {
        event: None,
        data: AiSdk::start(&format!("{chat_id}:{}", run.start)),
    }];
    for env in &run.envelopes {
        encoder.encode(env, "", &mut chunks);
    }
    let mut fold = Fold::default();
    for chunk in chunks {
        if let Ok(chunk) = serde_json::from_str::<Value>(&chunk.data) {
            fold.chunk(&chunk);
        }
    }
    fold.message()
}

/// `processUIMessageStream`'s state, for the chunks [`AiSdk`] sends.
#[derive(Default)]
struct Fold {
    id: String,
    parts: Vec<Value>,
    metadata: Option<Value>,
    /// Open text and reasoning parts by their chunk id.
    open: HashMap<String, usize>,
}

impl Fold {
    fn message(mut self) -> Option<Value> {
        if self.parts.is_empty() {
            return None;
        }
        // What the client adds when its user answers an approval.
        for part in &mut self.parts {
            let approved = match part["state"].as_str() {
                Some("output-available" | "output-error") => true,
                Some("output-denied") => false,
                _ => continue,
            };
            if let Some(approval) = part.get_mut("approval").and_then(Value::as_object_mut) {
                approval.insert("approved".into(), Value::Bool(approved));
            }
        }
        let mut m = json!({"id": self.id, "role": "assistant", "parts": self.parts});
        if let Some(metadata) = self.metadata {
            m["metadata"] = metadata;
        }
        Some(m)
    }

    fn step_start(&self) -> usize {
        self.parts
            .iter()
            .rposition(|p| p["type"] == "step-start")
            .map_or(0, |i| i + 1)
    }

    fn tool(&mut self, id: &Value) -> Option<&mut Map<String, Value>> {
        let at = self
            .parts
            .iter()
            .rposition(|p| p.get("toolCallId") == Some(id))?;
        self.parts[at].as_object_mut()
    }

    fn chunk(&mut self, c: &Value) {
        let kind = c["type"].as_str().unwrap_or_default();
        match kind {
            "start" => {
                if let Some(id) = c["messageId"].as_str() {
                    self.id = id.to_owned();
                }
            }
            "start-step" => self.parts.push(json!({"type": "step-start"})),
            "text-start" | "reasoning-start" => {
                let id = c["id"].as_str().unwrap_or_default().to_owned();
                let part = if kind == "text-start" {
                    json!({"type": "text", "text": "", "state": "streaming"})
                } else {
                    json!({"type": "reasoning", "id": id, "text": "", "state": "streaming"})
                };
                self.open.insert(id, self.parts.len());
                self.parts.push(part);
            }
            "text-delta" | "reasoning-delta" => {
                if let Some(&at) = c["id"].as_str().and_then(|id| self.open.get(id)) {
                    let text = self.parts[at]["text"].as_str().unwrap_or_default();
                    let text = format!("{text}{}", c["delta"].as_str().unwrap_or_default());
                    self.parts[at]["text"] = Value::String(text);
                }
            }
            "text-end" | "reasoning-end" => {
                if let Some(at) = c["id"].as_str().and_then(|id| self.open.remove(id)) {
                    self.parts[at]["state"] = json!("done");
                }
            }
            "tool-input-available" => self.tool_input(c),
            "tool-output-available" | "tool-output-error" => {
                let Some(part) = self.tool(&c["toolCallId"]) else {
                    return;
                };
                part.remove("output");
                part.remove("errorText");
                if kind == "tool-output-available" {
                    part.insert("state".into(), json!("output-available"));
                    part.insert("output".into(), c["output"].clone());
                } else {
                    part.insert("state".into(), json!("output-error"));
                    part.insert("errorText".into(), c["errorText"].clone());
                }
            }
            "tool-approval-request" => {
                if let Some(part) = self.tool(&c["toolCallId"]) {
                    part.insert("state".into(), json!("approval-requested"));
                    part.insert("approval".into(), json!({"id": c["approvalId"]}));
                }
            }
            "tool-output-denied" => {
                if let Some(part) = self.tool(&c["toolCallId"]) {
                    part.insert("state".into(), json!("output-denied"));
                }
            }
            "reset-step" => {
                let from = self.step_start();
                self.parts.truncate(from);
                self.open.clear();
            }
            "message-metadata" | "finish" => {
                if let Some(meta) = c.get("messageMetadata") {
                    self.metadata = Some(match self.metadata.take() {
                        Some(base) => merge(base, meta),
                        None => meta.clone(),
                    });
                }
            }
            data if data.starts_with("data-") => {
                let same = self.parts.iter_mut().find(|p| {
                    c.get("id").is_some() && p["type"] == c["type"] && p.get("id") == c.get("id")
                });
                match same {
                    Some(part) => part["data"] = c["data"].clone(),
                    None => self.parts.push(c.clone()),
                }
            }
            _ => {}
        }
    }

    fn tool_input(&mut self, c: &Value) {
        let name = c["toolName"].as_str().unwrap_or_default();
        let dynamic = c["dynamic"] == true;
        let from = self.step_start();
        let existing = self.parts[from..]
            .iter()
            .position(|p| p.get("toolCallId") == c.get("toolCallId"));
        let mut part = Map::new();
        if dynamic {
            part.insert("type".into(), json!("dynamic-tool"));
            part.insert("toolName".into(), json!(name));
        } else {
            part.insert("type".into(), json!(format!("tool-{name}")));
        }
        part.insert("toolCallId".into(), c["toolCallId"].clone());
        part.insert("state".into(), json!("input-available"));
        if let Some(meta) = c.get("toolMetadata") {
            part.insert("toolMetadata".into(), meta.clone());
        }
        part.insert("input".into(), c["input"].clone());
        match existing {
            Some(at) => {
                let old = self.parts[from + at].as_object_mut();
                if let Some(old) = old {
                    old.extend(part);
                }
            }
            None => self.parts.push(Value::Object(part)),
        }
    }
}

/// `ai`'s `mergeObjects`: objects merged key by key, anything else replaced.
fn merge(base: Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(mut base), Value::Object(over)) => {
            for (k, v) in over {
                let merged = match base.remove(k) {
                    Some(b @ Value::Object(_)) if v.is_object() => merge(b, v),
                    _ => v.clone(),
                };
                base.insert(k.clone(), merged);
            }
            Value::Object(base)
        }
        (_, over) => over.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(seq: u64, kind: EventKind) -> Envelope {
        Envelope::new(
            kind,
            uuid::Uuid::nil(),
            seq,
            "2026-11-27T00:00:00.000Z".into(),
        )
    }

    fn text(seq: u64, agent: &str, content: &str) -> Envelope {
        let kind = EventKind::Text {
            agent: agent.into(),
            content: content.into(),
        };
        env(seq, kind)
    }

    fn print(seq: u64, content: &str) -> Envelope {
        let kind = EventKind::Print {
            agent: "demo".into(),
            content: content.into(),
            corr: None,
        };
        env(seq, kind)
    }

    fn done(seq: u64) -> Envelope {
        let reason = crate::protocol::RunEndReason::Completed;
        env(seq, EventKind::RunComplete { reason })
    }

    #[test]
    fn runs_fold_to_a_message_each_after_their_user() {
        let path = vec![
            text(1, "user", "hi"),
            print(2, "Hel"),
            print(3, "lo"),
            text(4, "demo", "Hello"),
            done(5),
            text(6, "user", "again"),
            text(7, "demo", "Once more"),
            done(8),
        ];
        let cut = runs(path);
        assert_eq!(cut.len(), 2);
        let runs: Vec<RunOnPath> = cut
            .into_iter()
            .map(|envelopes| RunOnPath {
                start: envelopes[0].seq,
                envelopes,
            })
            .collect();
        let m = ui_messages("c", &runs, &HashSet::new());
        let ids: Vec<&str> = m.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["c:u1", "c:1", "c:u6", "c:6"]);
        assert_eq!(m[0]["parts"], json!([{"type": "text", "text": "hi"}]));
        assert_eq!(
            m[1]["parts"],
            json!([{"type": "step-start"}, {"type": "text", "text": "Hello", "state": "done"}])
        );
        assert_eq!(
            m[3]["parts"][1]["text"], "Once more",
            "a reply not streamed"
        );
        assert_eq!(m[1]["metadata"], json!({"agentwire": {"seq": 5}}));
    }

    #[test]
    fn a_run_begins_where_the_path_jumps() {
        // The first answer regenerated: the path leaves 2..=5 for 6..=8.
        let path = vec![text(1, "user", "one"), text(7, "demo", "again"), done(8)];
        let cut = runs(path);
        let seqs: Vec<Vec<u64>> = cut
            .iter()
            .map(|r| r.iter().map(|e| e.seq).collect())
            .collect();
        assert_eq!(seqs, [vec![1], vec![7, 8]]);
        let runs: Vec<RunOnPath> = cut
            .into_iter()
            .zip([1, 6])
            .map(|(envelopes, start)| RunOnPath { start, envelopes })
            .collect();
        let m = ui_messages("c", &runs, &HashSet::new());
        let ids: Vec<&str> = m.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["c:u1", "c:6"]);
    }

    #[test]
    fn a_run_in_flight_is_left_to_the_resume_and_an_answer_is_no_message() {
        let request = EventKind::InputAck {
            corr: "r".into(),
            request_id: "r".into(),
        };
        let path = vec![
            text(1, "user", "ask: name?"),
            text(2, "user", "Ada"),
            env(3, request),
        ];
        let runs = vec![RunOnPath {
            start: 1,
            envelopes: path,
        }];
        let m = ui_messages("c", &runs, &HashSet::new());
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0]["id"], "c:u1");
    }

    #[test]
    fn metadata_merges_as_ai_merges_it() {
        let a = json!({"usage": {"inputTokens": 1}, "agentwire": {"seq": 2}});
        let b = json!({"agentwire": {"seq": 9}, "usage": {"outputTokens": 3}});
        assert_eq!(
            merge(a, &b),
            json!({"usage": {"inputTokens": 1, "outputTokens": 3}, "agentwire": {"seq": 9}})
        );
    }
}
