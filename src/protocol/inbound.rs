//! Inbound messages (client → server) and their parsing.

use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{limits, validate};

/// One validated inbound message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub enum ClientFrame {
    /// Create a chat (or resume it if it is already the caller's).
    #[serde(rename = "chat.start")]
    ChatStart {
        chat_id: Uuid,
        agent: String,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        context: Option<Map<String, Value>>,
        /// Files `message` attaches.
        #[serde(default)]
        attachments: Vec<super::FileRef>,
    },
    /// A new user turn.
    #[serde(rename = "user.message")]
    UserMessage {
        chat_id: Uuid,
        text: String,
        #[serde(default)]
        client_msg_id: Option<String>,
        /// What it does if a run is in flight (absent: the agent's choice).
        #[serde(default)]
        multitask_strategy: Option<super::MultitaskStrategy>,
        /// Files the message attaches.
        #[serde(default)]
        attachments: Vec<super::FileRef>,
    },
    /// The answer to a `chat.input_request`.
    #[serde(rename = "user.input.submit")]
    UserInputSubmit {
        chat_id: Uuid,
        request_id: String,
        text: String,
        #[serde(default)]
        last_client_seq: Option<u64>,
    },
    /// The answer to a UI tool call that awaits a response.
    #[serde(rename = "inline_component.result")]
    InlineComponentResult {
        chat_id: Uuid,
        corr: String,
        data: Value,
    },
    /// An RFC 6902 patch to the component created by tool call `corr`.
    #[serde(rename = "artifact_patch")]
    ArtifactPatch {
        chat_id: Uuid,
        corr: String,
        patch: Value,
    },
    /// Subscribe and replay everything after `lastClientIndex`.
    #[serde(rename = "client.resume")]
    ClientResume {
        chat_id: Uuid,
        #[serde(default, rename = "lastClientIndex")]
        last_client_index: Option<u64>,
    },
    /// End the active run.
    #[serde(rename = "chat.cancel")]
    ChatCancel { chat_id: Uuid },
    /// Pause a template conversation.
    #[serde(rename = "chat.pause")]
    ChatPause { chat_id: Uuid },
    /// Resume a paused template conversation.
    #[serde(rename = "chat.resume_run")]
    ChatResumeRun { chat_id: Uuid },
    /// Stop live delivery of a chat to this connection.
    #[serde(rename = "client.unsubscribe")]
    ClientUnsubscribe { chat_id: Uuid },
    /// Run a user-invoked workflow (seed 002) in the chat.
    #[serde(rename = "workflow.invoke")]
    WorkflowInvoke {
        chat_id: Uuid,
        workflow: String,
        #[serde(default)]
        parameters: Option<Value>,
    },
    /// Go on from an edited text in place of the user's message `seq`.
    #[serde(rename = "chat.edit")]
    ChatEdit {
        chat_id: Uuid,
        seq: u64,
        text: String,
        #[serde(default)]
        client_msg_id: Option<String>,
        /// The files the new version attaches (absent: the edited one's).
        #[serde(default)]
        attachments: Option<Vec<super::FileRef>>,
    },
    /// Answer the user's message `seq` again (default: the last one).
    #[serde(rename = "chat.regenerate")]
    ChatRegenerate {
        chat_id: Uuid,
        #[serde(default)]
        seq: Option<u64>,
        #[serde(default)]
        model: Option<String>,
    },
    /// Make the version holding `to` the active one.
    #[serde(rename = "chat.switch")]
    ChatSwitch { chat_id: Uuid, to: u64 },
    /// The user read the chat up to `seq` (its end if absent).
    #[serde(rename = "chat.read")]
    ChatRead {
        chat_id: Uuid,
        #[serde(default)]
        seq: Option<u64>,
    },
    /// Get the user's `feed.chat` events on this connection.
    #[serde(rename = "feed.subscribe")]
    FeedSubscribe,
    /// Connection-level liveness check.
    #[serde(rename = "ping")]
    Ping,
}

impl ClientFrame {
    /// The chat this message is about (`None` for `ping`).
    pub fn chat_id(&self) -> Option<Uuid> {
        match self {
            Self::ChatStart { chat_id, .. }
            | Self::UserMessage { chat_id, .. }
            | Self::UserInputSubmit { chat_id, .. }
            | Self::InlineComponentResult { chat_id, .. }
            | Self::ArtifactPatch { chat_id, .. }
            | Self::ClientResume { chat_id, .. }
            | Self::ChatCancel { chat_id }
            | Self::ChatPause { chat_id }
            | Self::ChatResumeRun { chat_id }
            | Self::ClientUnsubscribe { chat_id }
            | Self::WorkflowInvoke { chat_id, .. }
            | Self::ChatEdit { chat_id, .. }
            | Self::ChatRegenerate { chat_id, .. }
            | Self::ChatSwitch { chat_id, .. }
            | Self::ChatRead { chat_id, .. } => Some(*chat_id),
            Self::Ping | Self::FeedSubscribe => None,
        }
    }
}

/// Why an inbound message was refused. Always `SCHEMA_VALIDATION_FAILED`.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundError {
    /// The chat id, when the message had a readable one.
    pub chat_id: Option<Uuid>,
    /// What is wrong, for people.
    pub message: String,
    /// What is wrong, for programs: `{"errors": [{path, message}]}` and the like.
    pub details: Option<Value>,
}

/// Parses and validates one text frame.
///
/// # Errors
/// Not JSON, not an object, no or unknown `type`, or a schema violation.
pub fn parse_client_frame(text: &str) -> Result<ClientFrame, InboundError> {
    let value: Value = serde_json::from_str(text).map_err(|e| InboundError {
        chat_id: None,
        message: format!("message is not valid JSON: {e}"),
        details: None,
    })?;
    let Value::Object(obj) = &value else {
        return Err(InboundError {
            chat_id: None,
            message: "message must be a JSON object".into(),
            details: Some(serde_json::json!({"expected": "object"})),
        });
    };
    let chat_id = obj
        .get("chat_id")
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok());
    let fail = |message: String, details: Option<Value>| InboundError {
        chat_id,
        message,
        details,
    };
    let Some(ty) = obj.get("type").and_then(Value::as_str) else {
        return Err(fail(
            "message has no string field `type`".into(),
            Some(serde_json::json!({"field": "type", "expected": "string"})),
        ));
    };
    let ty = ty.to_owned();
    let depth = limits::json_depth(&value);
    if depth > limits::MAX_JSON_DEPTH {
        return Err(fail(
            format!(
                "`{ty}` nests {depth} levels deep; at most {} are accepted",
                limits::MAX_JSON_DEPTH
            ),
            Some(serde_json::json!({"max_depth": limits::MAX_JSON_DEPTH})),
        ));
    }
    let Some(errors) = validate::validate(&ty, &value) else {
        return Err(fail(
            format!("unknown message type `{ty}`"),
            Some(serde_json::json!({
                "field": "type",
                "expected": validate::known_types().collect::<Vec<_>>(),
            })),
        ));
    };
    if !errors.is_empty() {
        let first = errors[0]["message"].as_str().unwrap_or_default().to_owned();
        let path = errors[0]["path"].as_str().unwrap_or_default().to_owned();
        return Err(fail(
            format!("invalid `{ty}` at `{path}`: {first}"),
            Some(serde_json::json!({ "errors": errors })),
        ));
    }
    serde_json::from_value(value).map_err(|e| fail(format!("invalid `{ty}`: {e}"), None))
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;
