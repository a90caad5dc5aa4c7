//! AG-UI's tool events: a logged tool call as `TOOL_CALL_*`, an interrupt,
//! a pending frontend tool, shared state (an artifact) or `CUSTOM`; a tool
//! response as `TOOL_CALL_RESULT`.

use serde_json::json;

use super::{AgUi, Out};
use crate::protocol::{Envelope, EventKind};

impl AgUi {
    /// A `chat.tool_call`.
    pub(super) fn tool_called(&mut self, kind: &EventKind, o: &mut Vec<Out>) {
        let EventKind::ToolCall {
            tool_name,
            component_type,
            awaiting_response,
            payload,
            corr,
            display,
            ..
        } = kind
        else {
            return;
        };
        match component_type.as_deref() {
            Some(crate::tools::APPROVAL) => {
                let call = payload["tool_call_id"].as_str().unwrap_or(corr);
                let name = payload["tool_name"].as_str().unwrap_or(tool_name);
                self.ask(o, corr, "approval", (call, name, &payload["input"]), None);
            }
            Some(crate::tools::FRONTEND) => {
                self.tool_call(o, corr, tool_name, payload);
                self.frontend.insert(corr.clone());
                if *awaiting_response && !self.pending.contains(corr) {
                    self.pending.push(corr.clone());
                }
            }
            Some(kind) if *awaiting_response => {
                let input = json!({"component_type": kind, "payload": payload, "display": display});
                self.ask(o, corr, "component", (corr, tool_name, &input), None);
            }
            Some(crate::workflows::WORKFLOW) | None => {
                self.tool_call(o, corr, tool_name, payload);
                self.running.insert(corr.clone());
            }
            // An artifact (a preview, logged again as it is patched) is
            // shared state: one top-level key per artifact.
            Some(kind) if *display == crate::protocol::Display::Artifact => {
                let key = format!("artifact:{corr}")
                    .replace('~', "~0")
                    .replace('/', "~1");
                let value =
                    json!({"tool_name": tool_name, "component_type": kind, "payload": payload});
                Self::event(
                    o,
                    json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": format!("/{key}"), "value": value}]}),
                );
            }
            Some(kind) => Self::custom(
                o,
                "component",
                json!({"corr": corr, "tool_name": tool_name, "component_type": kind, "payload": payload}),
            ),
        }
    }

    /// A `chat.tool_response`.
    pub(super) fn tool_responded(&mut self, env: &Envelope, o: &mut Vec<Out>) {
        let EventKind::ToolResponse {
            content,
            corr,
            success,
            ..
        } = &env.kind
        else {
            return;
        };
        self.closed(corr);
        if let Some(call) = corr.strip_suffix(crate::tools::APPROVAL_SUFFIX) {
            // Announced with its approval: the call logged next
            // (run, or refused) is not announced again.
            self.calls.insert(call.to_owned());
            Self::custom(o, "approval", json!({"corr": corr, "answer": content}));
            return;
        }
        // The client whose `tool` message this is has it already.
        if self.known.contains(corr) {
            return;
        }
        let text = crate::wire::as_text(content);
        let mut result = json!({"type": "TOOL_CALL_RESULT", "messageId": format!("result-{}", env.seq),
                                "toolCallId": corr, "content": text, "role": "tool"});
        if !success {
            result["content"] = json!(format!("error: {text}"));
        }
        Self::event(o, result);
    }
}
