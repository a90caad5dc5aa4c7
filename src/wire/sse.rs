//! What every SSE dialect is: an [`Encoder`] from log envelopes to [`Out`]
//! events. The SSE handlers (`http::sse`) attach each event's `id` (the
//! envelope's seq) and stream.

use serde_json::Value;

use crate::protocol::Envelope;

/// One SSE event before its `id` (the envelope's seq) is attached.
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
    /// What it just encoded was not sent ([`Quiet`]): nothing it opened
    /// is open for the client.
    fn quieted(&mut self) {}
}

/// A dialect reading the envelopes up to `through` without sending what
/// they make: a response that goes on from there (where the previous one
/// stopped) still knows what the run had opened, announced and asked.
pub struct Quiet<E> {
    pub inner: E,
    pub through: u64,
}

impl<E: Encoder> Encoder for Quiet<E> {
    fn encode(&mut self, env: &Envelope, raw: &str, out: &mut Vec<Out>) {
        let at = out.len();
        self.inner.encode(env, raw, out);
        if env.seq <= self.through {
            out.truncate(at);
            self.inner.quieted();
        }
    }
    fn ends_with_run(&self) -> bool {
        self.inner.ends_with_run()
    }
    fn waiting(&self) -> bool {
        self.inner.waiting()
    }
    fn close(&mut self, out: &mut Vec<Out>) {
        self.inner.close(out);
    }
    fn ended(&self) -> bool {
        self.inner.ended()
    }
    fn quieted(&mut self) {
        self.inner.quieted();
    }
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
