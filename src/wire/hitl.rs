//! What every dialect says about the steps that wait for a person: the
//! envelopes that open one (an input request, an approval gate, a UI tool
//! call awaiting the client) or show a preview, as one neutral object each
//! dialect then dresses in its own words. Each names where its answer goes
//! (`answer_url`, the HTTP routes of `http::answers`), so a client of a
//! dialect that only reads can still answer.

use serde_json::{Value, json};

use crate::protocol::{Envelope, EventKind};
use crate::tools::{APPROVAL, PREVIEW_SUFFIX};

/// The suffix of an approval gate's `corr`.
const APPROVAL_SUFFIX: &str = ".approval";

/// A step waiting for a person, or a preview.
pub(super) struct Request {
    /// `input`, `approval`, `component` or `preview`.
    pub action: &'static str,
    /// Its fields: `corr`, and per action what a client renders.
    pub fields: Value,
}

/// The request `env` opens, if it opens one. A component logged again (an
/// artifact patched) is the caller's to skip: dialects remember the `corr`s
/// they have shown.
pub(super) fn request(env: &Envelope) -> Option<Request> {
    let chat = env.chat_id;
    match &env.kind {
        EventKind::InputRequest {
            request_id,
            prompt,
            password,
            timeout_seconds,
            options,
            ..
        } => {
            let mut fields = json!({
                "corr": request_id, "request_id": request_id, "prompt": prompt, "password": password,
                "answer_url": format!("/v1/chats/{chat}/inputs/{request_id}"),
            });
            if let Some(t) = timeout_seconds {
                fields["timeout_seconds"] = json!(t);
            }
            // A choice: the answers it takes.
            if let Some(options) = options {
                fields["options"] = json!(options);
            }
            Some(Request {
                action: "input",
                fields,
            })
        }
        EventKind::ToolCall {
            component_type: Some(component_type),
            awaiting_response: true,
            payload,
            corr,
            ..
        } if component_type == APPROVAL => Some(Request {
            action: "approval",
            fields: json!({
                "corr": corr, "tool_call_id": payload["tool_call_id"], "tool_name": payload["tool_name"],
                "input": payload["input"],
                "answer_url": format!("/v1/chats/{chat}/approvals/{}", payload["tool_call_id"].as_str().unwrap_or_default()),
            }),
        }),
        EventKind::ToolCall {
            tool_name,
            component_type: Some(component_type),
            awaiting_response: true,
            payload,
            corr,
            display,
            ..
        } => Some(Request {
            action: "component",
            fields: json!({
                "corr": corr, "tool_name": tool_name, "component_type": component_type,
                "payload": payload, "display": display,
                "answer_url": format!("/v1/chats/{chat}/components/{corr}"),
            }),
        }),
        EventKind::ToolCall {
            tool_name,
            component_type: Some(component_type),
            awaiting_response: false,
            payload,
            corr,
            ..
        } if corr.ends_with(PREVIEW_SUFFIX) => Some(Request {
            action: "preview",
            fields: json!({
                "corr": corr, "tool_name": tool_name, "component_type": component_type,
                "payload": payload,
            }),
        }),
        _ => None,
    }
}

/// The call an approval gate's `corr` guards (`None`: not an approval).
pub(super) fn approved_call(corr: &str) -> Option<&str> {
    corr.strip_suffix(APPROVAL_SUFFIX)
}
