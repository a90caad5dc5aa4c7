//! Agents served over AG-UI by another framework (LangGraph, Pydantic AI,
//! CrewAI, Mastra, AG2): an agent file's `ag_ui:` names the server, and a
//! run of that agent is one or more AG-UI runs on it. Beside `llm`'s model
//! providers: where a provider streams a model's turn, an [`Upstream`]
//! streams a whole agent's run, its own tools included.
//!
//! This module is the client: the request (`input`: the `RunAgentInput`
//! from the chat's history), the SSE body read line by line within
//! `max_message_bytes` an event and an idle timeout, each event parsed
//! (`event`) and checked against AG-UI's rules (`verify`). What the events
//! become in the log is `agent::upstream`'s. Uses `llm`, `mcp` (`${env:…}`
//! in headers) and `protocol`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::io::StreamReader;

use crate::protocol::ErrorCode;

mod event;
mod health;
pub mod input;
mod verify;

pub use event::{Event, Finished, Interrupt};
pub use health::Health;
pub use input::{AgUiSpec, History, RunInput};
pub use verify::Verifier;

/// An agent file's AG-UI server, ready to call.
pub struct Upstream {
    /// The agent's id, named by every error.
    agent: String,
    url: reqwest::Url,
    headers: HeaderMap,
    /// Send the caller's bearer token (never the service's).
    pub forward_bearer: bool,
    /// Longest wait for the answer's headers, and between two events.
    pub timeout: Duration,
    /// A run cut off by a restart may be asked again.
    pub idempotent: bool,
    /// What of the history each run sends.
    pub history: History,
    client: reqwest::Client,
    /// The longest event accepted (`max_message_bytes`).
    max_event_bytes: AtomicUsize,
    /// What its calls did lately, on this node.
    health: health::Kept,
}

/// Why an upstream run failed: for the run's `chat.error`.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: ErrorCode,
    pub message: String,
    pub recoverable: bool,
    /// The upstream's HTTP status, when it answered.
    pub status: Option<u16>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("agent", &self.agent)
            .field("url", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Checks an `ag_ui:` section. Header values may name agentwire's
    /// variables (`${env:NAME}`), read here, once.
    ///
    /// # Errors
    /// The field at fault, under `ag_ui.`.
    pub fn new(agent: &str, spec: &AgUiSpec) -> Result<Self, String> {
        let url = reqwest::Url::parse(&spec.url).map_err(|e| format!("url: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err("url: must be an http:// or https:// address".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("url: put credentials in `headers`, not in the address".into());
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &spec.headers {
            let value = crate::mcp::expand(value).map_err(|e| format!("headers.{name}: {e}"))?;
            let header = HeaderName::try_from(name.as_str())
                .map_err(|_| format!("headers.{name}: not a header name"))?;
            if spec.forward_bearer && header == reqwest::header::AUTHORIZATION {
                return Err(format!(
                    "headers.{name}: `forward_bearer` sends the caller's token as Authorization"
                ));
            }
            let mut value = HeaderValue::try_from(value)
                .map_err(|_| format!("headers.{name}: not a header value"))?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        if !(1..=3600).contains(&spec.timeout_seconds) {
            return Err("timeout_seconds: must be 1 to 3600".into());
        }
        // Its own client: a redirect would take the history and the
        // `headers` (reqwest drops only `Authorization` across hosts)
        // elsewhere, so none is followed.
        crate::llm::install_crypto();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("url: {e}"))?;
        Ok(Self {
            agent: agent.to_owned(),
            url,
            headers,
            forward_bearer: spec.forward_bearer,
            timeout: Duration::from_secs(spec.timeout_seconds),
            idempotent: spec.idempotent,
            history: spec.history,
            client,
            max_event_bytes: AtomicUsize::new(1 << 20),
            health: health::Kept::default(),
        })
    }

    /// The longest event accepted, and the longest text message or tool
    /// call arguments a run may stream.
    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes.load(Ordering::Relaxed)
    }

    /// Sets the longest event accepted (the server's `max_message_bytes`).
    pub fn limit_events(&self, bytes: usize) {
        self.max_event_bytes.store(bytes, Ordering::Relaxed);
    }

    /// What its calls did lately, on this node.
    pub fn health(&self) -> Health {
        self.health.read()
    }

    /// `host:port`, for messages (a path may carry a secret).
    pub fn endpoint(&self) -> String {
        match (self.url.host_str(), self.url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (host, _) => host.unwrap_or("?").to_owned(),
        }
    }

    fn failure(
        &self,
        code: ErrorCode,
        status: Option<u16>,
        what: impl std::fmt::Display,
    ) -> Failure {
        // A stream that failed after its answer began names that answer.
        let what = what.to_string();
        let after = match status {
            Some(s) if !what.starts_with("HTTP") => format!(" (after HTTP {s})"),
            _ => String::new(),
        };
        let message = format!(
            "agent `{}` (AG-UI at {}): {what}{after}",
            self.agent,
            self.endpoint()
        );
        tracing::warn!(agent = %self.agent, error = ?message, "upstream agent failed");
        metrics::counter!(crate::metrics::UPSTREAM_ERRORS,
            "agent" => self.agent.clone(), "code" => code.as_str())
        .increment(1);
        self.health.failed(&message);
        Failure {
            code,
            message,
            recoverable: code == ErrorCode::TransportError,
            status,
        }
    }

    /// The run's own failure (`RUN_ERROR`): not retried.
    pub fn run_error(&self, what: impl std::fmt::Display) -> Failure {
        self.failure(ErrorCode::ToolExecutionError, None, what)
    }

    /// An event that cannot be acted on (arguments or a patch that do not
    /// parse): a broken stream.
    pub fn malformed(&self, what: impl std::fmt::Display) -> Failure {
        self.failure(ErrorCode::TransportError, None, what)
    }

    /// A span for one run of this agent (`invoke_agent {agent}`, a
    /// client's), nothing when traces are off.
    pub fn span(&self, speaker: &str) -> crate::telemetry::Span {
        use crate::telemetry::{Span, SpanKind, kv};
        Span::start(
            || format!("invoke_agent {}", self.agent).into(),
            SpanKind::Client,
            || {
                vec![
                    kv("gen_ai.operation.name", "invoke_agent"),
                    kv("gen_ai.agent.name", speaker.to_owned()),
                    kv("agentwire.upstream.protocol", "ag-ui"),
                    kv(
                        "server.address",
                        self.url.host_str().unwrap_or_default().to_owned(),
                    ),
                ]
            },
        )
    }

    /// Starts one AG-UI run: POSTs `input` and returns its events, read
    /// as they come. Dropping them closes the connection, which is how a
    /// cancelled run stops the upstream one.
    ///
    /// # Errors
    /// The server cannot be reached, does not answer in time, or answers
    /// with an error status or something other than an event stream.
    pub async fn run(&self, input: &Value, bearer: Option<&str>) -> Result<Events<'_>, Failure> {
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(input);
        if self.forward_bearer
            && let Some(token) = bearer
        {
            request = request.bearer_auth(token);
        }
        let request = crate::telemetry::propagate::inject(request);
        self.health.started();
        let started = std::time::Instant::now();
        let sent = tokio::time::timeout(self.timeout, request.send()).await;
        metrics::histogram!(crate::metrics::UPSTREAM_SECONDS, "agent" => self.agent.clone())
            .record(started.elapsed());
        let response = match sent {
            Err(_) => {
                return Err(self.failure(
                    ErrorCode::TransportError,
                    None,
                    format_args!("no answer in {} s", self.timeout.as_secs()),
                ));
            }
            Ok(Err(e)) => {
                let why = if e.is_connect() {
                    "cannot connect".to_owned()
                } else {
                    e.without_url().to_string()
                };
                return Err(self.failure(ErrorCode::TransportError, None, why));
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let body = tokio::time::timeout(self.timeout, error_body(response))
                .await
                .unwrap_or_default();
            let code = if status.is_server_error() {
                ErrorCode::TransportError
            } else {
                ErrorCode::AgentInitializationFailed
            };
            return Err(self.failure(
                code,
                Some(status.as_u16()),
                format_args!("HTTP {status}{body}"),
            ));
        }
        let media = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !media.starts_with("text/event-stream") {
            return Err(self.failure(
                ErrorCode::TransportError,
                Some(status.as_u16()),
                format_args!("HTTP {status} with `{media}`, not an event stream"),
            ));
        }
        self.health.answered();
        let max = self.max_event_bytes.load(Ordering::Relaxed);
        let reader = StreamReader::new(response.bytes_stream().map_err(std::io::Error::other));
        // A line longer than an event may be cannot be one.
        let lines = FramedRead::new(reader, LinesCodec::new_with_max_length(max + 16));
        Ok(Events {
            upstream: self,
            status: status.as_u16(),
            lines: lines.boxed(),
            max,
            verifier: Verifier::default(),
            pending: std::collections::VecDeque::new(),
            done: false,
        })
    }
}

/// The events of one upstream run, each checked.
pub struct Events<'a> {
    upstream: &'a Upstream,
    status: u16,
    lines: futures_util::stream::BoxStream<'static, Result<String, LinesCodecError>>,
    max: usize,
    verifier: Verifier,
    pending: std::collections::VecDeque<Event>,
    done: bool,
}

impl Events<'_> {
    /// The next event; `None` after the run's `RUN_FINISHED` or
    /// `RUN_ERROR`.
    ///
    /// # Errors
    /// A stream that breaks, stalls, ends before the run does, or carries
    /// an event that is malformed, too large or against AG-UI's rules;
    /// nothing is read after one.
    pub async fn next(&mut self) -> Option<Result<Event, Failure>> {
        if let Some(event) = self.pending.pop_front() {
            self.done |= matches!(event, Event::RunFinished(_) | Event::RunError { .. });
            return Some(Ok(event));
        }
        if self.done {
            return None;
        }
        let result = self.read().await;
        match result {
            Ok(Some(event)) => {
                self.done = matches!(event, Event::RunFinished(_) | Event::RunError { .. });
                Some(Ok(event))
            }
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                self.pending.clear();
                Some(Err(e))
            }
        }
    }

    async fn read(&mut self) -> Result<Option<Event>, Failure> {
        let up = self.upstream;
        let status = Some(self.status);
        let fail = |what: String| Err(up.failure(ErrorCode::TransportError, status, what));
        let mut data = String::new();
        loop {
            let line = match tokio::time::timeout(up.timeout, self.lines.next()).await {
                Err(_) => {
                    return fail(format!("no event for {} s", up.timeout.as_secs()));
                }
                Ok(None) => {
                    return fail("the stream ended before RUN_FINISHED".into());
                }
                Ok(Some(Err(LinesCodecError::MaxLineLengthExceeded))) => {
                    return fail(format!("an event over {} bytes", self.max));
                }
                Ok(Some(Err(e))) => return fail(format!("the stream broke: {e}")),
                Ok(Some(Ok(line))) => line,
            };
            if line.is_empty() {
                if data.is_empty() {
                    continue;
                }
                let event = std::mem::take(&mut data);
                let value: Value = match serde_json::from_str(&event) {
                    Ok(v) => v,
                    Err(e) => return fail(format!("an event that is not JSON: {e}")),
                };
                let parsed = Event::parse(&value).and_then(|e| self.verifier.take(e));
                match parsed {
                    Ok(events) => {
                        self.pending.extend(events);
                        if let Some(first) = self.pending.pop_front() {
                            return Ok(Some(first));
                        }
                    }
                    Err(rule) => return fail(format!("an event against AG-UI's rules: {rule}")),
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("data:") {
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest);
                if data.len() > self.max {
                    return fail(format!("an event over {} bytes", self.max));
                }
            }
            // `event:`, `id:`, `retry:` and comments carry nothing read here.
        }
    }
}

/// ": the server's message" from an error body, if it has one.
async fn error_body(response: reqwest::Response) -> String {
    let text = crate::llm::error_body(response).await;
    let text: String = text.trim().chars().take(300).collect();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}
