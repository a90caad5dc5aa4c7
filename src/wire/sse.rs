//! What every SSE dialect is: an [`Encoder`] from log envelopes to [`Out`]
//! events. [`super::Framer`] gives each event its id and decides where a
//! response ends; the SSE handlers (`http::sse`) stream what it makes.

use serde_json::Value;

use crate::protocol::Envelope;

/// One SSE event before its `id` is attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Out {
    /// `None`: a data-only event (the `message` type).
    pub event: Option<&'static str>,
    pub data: String,
}

pub(super) fn out(event: &'static str, data: Value) -> Out {
    Out {
        event: Some(event),
        data: data.to_string(),
    }
}

/// A dialect: envelopes in, SSE events out.
pub trait Encoder: Send + 'static {
    /// Events for one envelope (`raw` is its JSON as stored or replayed).
    fn encode(&mut self, env: &Envelope, raw: &str, out: &mut Vec<Out>);
    /// Whether the stream ends with a run (`chat` never does).
    fn ends_with_run(&self) -> bool {
        true
    }
    /// Whether the run waits for a person: a dialect whose response ends
    /// there (the AI SDK's: the answer comes in the next request) says so,
    /// and is [`closed`](Self::close) once nothing else is queued.
    fn waiting(&self) -> bool {
        false
    }
    /// The events that end a response while the run waits.
    fn close(&mut self, _out: &mut Vec<Out>) {}
    /// Whether the dialect ended the response itself.
    fn ended(&self) -> bool {
        false
    }
    /// Whether `env` answers what the run waits on (read while
    /// [`waiting`](Self::waiting)): the answer came in another request.
    fn crosses(&self, _env: &Envelope) -> bool {
        false
    }
    /// A wait the log shows answered goes by: what the response that ended
    /// there closed is closed (`response`: the stream shows the response
    /// that goes on from it, whose client answered; else the whole run).
    fn boundary(&mut self, _response: bool, _out: &mut Vec<Out>) {}
    /// A join lands inside the run after the envelopes read: what names
    /// the turn it lands in (`agent-chat`'s `message_start`).
    fn rejoined(&mut self, _out: &mut Vec<Out>) {}
}

/// A JSON value as text: a string as it is, anything else as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A client message's text: a string, or its `text` parts joined (the AI
/// SDK's `parts`, AG-UI's content parts).
pub fn text_parts(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// An event's own fields (its JSON without `type`).
pub(super) fn fields(kind: &crate::protocol::EventKind) -> Value {
    let mut value = serde_json::to_value(kind).unwrap_or_default();
    if let Some(v) = value.as_object_mut() {
        v.remove("type");
    }
    value
}

/// A person's answer as text: a string, a `{text}`, or any JSON as JSON.
pub fn answer_text(value: &Value) -> String {
    value["text"]
        .as_str()
        .map_or_else(|| as_text(value), str::to_owned)
}
