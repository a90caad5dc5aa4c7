//! What the HTTP providers share: the client, the endpoint settings, retries
//! with backoff, vendor error mapping, and turning a response body into a
//! [`StreamEvent`] stream through a vendor [`Decoder`].

use std::collections::VecDeque;
use std::sync::Once;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::stream::{self, BoxStream};
use futures_util::{StreamExt, TryStreamExt};
use rand::Rng;
use reqwest::{RequestBuilder, Response, StatusCode};
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::io::StreamReader;

use super::{ProviderError, StreamEvent};
use crate::protocol::ErrorCode;

/// Retries of a request refused with 429 or 5xx before its stream started.
const RETRIES: u32 = 3;
/// The first backoff; doubled each retry, with jitter.
const BACKOFF: Duration = Duration::from_millis(500);
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// How much of an error body is read for its message.
const ERROR_BODY_LIMIT: usize = 16 * 1024;
/// Longest NDJSON line accepted from a stream.
const MAX_LINE: usize = 4 << 20;

/// The HTTP client every provider and HTTP tool shares (connection pools,
/// rustls with the ring provider).
pub fn http_client() -> reqwest::Client {
    install_crypto();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .expect("the HTTP client builds")
}

/// Makes ring rustls's crypto provider, once: every client built here, and
/// one a caller builds with settings of its own, uses it.
pub fn install_crypto() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        // Fails only if another provider was installed first; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Where a provider sends its requests.
#[derive(Clone)]
pub struct Endpoint {
    pub client: reqwest::Client,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// The model name sent to the vendor.
    pub model: String,
    /// The environment variable holding the API key, if any.
    pub api_key_env: Option<String>,
    /// The kinds of file the model reads besides text.
    pub inputs: super::Inputs,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The API key, read from the environment at each request (so a rotated
    /// key is picked up). Never logged.
    ///
    /// # Errors
    /// The named variable is not set.
    pub fn api_key(&self, vendor: &str) -> Result<Option<String>, ProviderError> {
        match &self.api_key_env {
            None => Ok(None),
            Some(var) => std::env::var(var).map(Some).map_err(|_| ProviderError {
                code: ErrorCode::AgentInitializationFailed,
                message: format!(
                    "{vendor}: the environment variable {var} (api_key_env) is not set"
                ),
                recoverable: false,
            }),
        }
    }
}

/// What a vendor's HTTP exchange looks like, apart from its bodies.
pub(super) struct Wire {
    /// The name in errors and logs.
    pub vendor: &'static str,
    pub key: KeyHeader,
    /// Headers sent with every request (`anthropic-version`).
    pub headers: &'static [(&'static str, &'static str)],
    pub framing: Framing,
}

/// How a vendor wants its API key.
pub(super) enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// A header of its own (`x-api-key`, `x-goog-api-key`).
    Named(&'static str),
}

impl Endpoint {
    /// POSTs `body` to `url` (with the key, extra headers and retries) and
    /// decodes the streamed answer.
    ///
    /// # Errors
    /// A missing key variable, or a request that failed before its stream
    /// started (see [`send`]).
    pub(super) async fn stream<D: Decoder>(
        &self,
        wire: &Wire,
        url: &str,
        body: &serde_json::Value,
        decoder: D,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        let vendor = wire.vendor;
        let key = self.api_key(vendor)?;
        let response = send(vendor, || {
            let mut req = self.client.post(url).json(body);
            for (name, value) in wire.headers {
                req = req.header(*name, *value);
            }
            match (&key, &wire.key) {
                (Some(key), KeyHeader::Bearer) => req.bearer_auth(key),
                (Some(key), KeyHeader::Named(name)) => req.header(*name, key),
                (None, _) => req,
            }
        })
        .await?;
        Ok(decode(vendor, response, wire.framing, decoder))
    }
}

/// Sends a request, retrying 429 and 5xx answers (before any token) with
/// exponential backoff and jitter, honouring `Retry-After`.
///
/// # Errors
/// A connection failure, or a non-success status after the retries, as a
/// [`ProviderError`] naming the vendor, the status and the vendor's message.
pub async fn send(
    vendor: &str,
    build: impl Fn() -> RequestBuilder,
) -> Result<Response, ProviderError> {
    let started = std::time::Instant::now();
    let result = send_with_retries(vendor, build).await;
    metrics::histogram!(crate::metrics::PROVIDER_SECONDS, "vendor" => vendor.to_owned())
        .record(started.elapsed());
    if let Err(e) = &result {
        metrics::counter!(crate::metrics::PROVIDER_ERRORS,
            "vendor" => vendor.to_owned(), "code" => e.code.as_str())
        .increment(1);
    }
    result
}

async fn send_with_retries(
    vendor: &str,
    build: impl Fn() -> RequestBuilder,
) -> Result<Response, ProviderError> {
    let mut attempt = 0;
    loop {
        let response = build().send().await.map_err(|e| {
            let error = without_url(&e);
            tracing::warn!(vendor, endpoint = %endpoint(e.url()), error = ?error, "cannot reach the model server");
            ProviderError {
                code: ErrorCode::TransportError,
                message: format!(
                    "{vendor}: cannot reach the model server at {}: {error}",
                    endpoint(e.url())
                ),
                recoverable: true,
            }
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
        if retryable && attempt < RETRIES {
            let wait = retry_after(&response).unwrap_or_else(|| {
                let base = BACKOFF * 2u32.pow(attempt);
                let jitter = rand::rng().random_range(0..=base.as_millis() as u64 / 2);
                base + Duration::from_millis(jitter)
            });
            tracing::info!(vendor, %status, attempt, wait_ms = wait.as_millis() as u64, "model server refused; retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
            continue;
        }
        let endpoint = endpoint(Some(response.url()));
        let e = status_error(vendor, response).await;
        tracing::warn!(vendor, %endpoint, %status, error = ?e.message, "the model server refused the request");
        return Err(e);
    }
}

/// Where a request went, as `host:port` only: a path or query may carry a key.
fn endpoint(url: Option<&reqwest::Url>) -> String {
    match url.and_then(|u| Some((u.host_str()?, u.port_or_known_default()))) {
        Some((host, Some(port))) => format!("{host}:{port}"),
        Some((host, None)) => host.to_owned(),
        None => "<unknown>".to_owned(),
    }
}

/// The delay a `Retry-After` header asks for (seconds form), capped.
fn retry_after(response: &Response) -> Option<Duration> {
    let secs: f64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(MAX_RETRY_AFTER))
}

/// A reqwest error without the URL (which may carry a key in a query string).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<model server>");
    }
    text
}

/// Maps an error status and the vendor's error body onto a [`ProviderError`].
async fn status_error(vendor: &str, response: Response) -> ProviderError {
    let status = response.status();
    let text = error_body(response).await;
    let detail = vendor_message(&text).unwrap_or_else(|| text.trim().chars().take(500).collect());
    let (code, recoverable) = match status.as_u16() {
        429 => (ErrorCode::RateLimitExceeded, true),
        500..=599 => (ErrorCode::TransportError, true),
        _ => (ErrorCode::AgentInitializationFailed, false),
    };
    ProviderError {
        code,
        message: format!("{vendor}: HTTP {status}: {detail}"),
        recoverable,
    }
}

/// The first 16 KiB of an error answer's body, as text: enough for its
/// message, and no more of what a server may send.
pub async fn error_body(response: Response) -> String {
    let mut body = Vec::new();
    let mut bytes = response.bytes_stream();
    while let Some(Ok(chunk)) = bytes.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_LIMIT {
            body.truncate(ERROR_BODY_LIMIT);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The human message inside a vendor's error JSON: `{"error": {"message"}}`
/// (OpenAI, Anthropic, Gemini) or `{"error": "..."}` (Ollama).
pub(super) fn vendor_message(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let error = v.get("error")?;
    error
        .get("message")
        .and_then(|m| m.as_str())
        .or_else(|| error.as_str())
        .map(str::to_owned)
}

/// A vendor's stream format, fed one SSE event or NDJSON line at a time.
pub(super) trait Decoder: Send + 'static {
    /// Decodes one SSE event (`event` is its name, empty if none) or one
    /// NDJSON line (`event` empty).
    fn feed(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>);
    /// Whether the stream has said it is complete (read no further).
    fn is_done(&self) -> bool;
    /// The body ended. A stream cut before its end becomes an error here.
    fn finish(&mut self, out: &mut Vec<StreamEvent>);
}

/// The error for a stream that ended before saying it was complete.
pub(super) fn cut_short(vendor: &str) -> StreamEvent {
    tracing::warn!(
        vendor,
        "the model's stream ended before the response was complete"
    );
    StreamEvent::Error(ProviderError {
        code: ErrorCode::TransportError,
        message: format!("{vendor}: the stream ended before the response was complete"),
        recoverable: true,
    })
}

/// The error for a chunk that is not what the vendor documents.
pub(super) fn malformed(vendor: &str, what: impl std::fmt::Display) -> StreamEvent {
    // Debug: the vendor's text may hold newlines.
    tracing::warn!(vendor, what = ?what.to_string(), "malformed stream from the model server");
    StreamEvent::Error(ProviderError {
        code: ErrorCode::TransportError,
        message: format!("{vendor}: malformed stream: {what}"),
        recoverable: true,
    })
}

enum Body {
    Sse(BoxStream<'static, Result<(String, String), String>>),
    Lines(BoxStream<'static, Result<(String, String), String>>),
}

impl Body {
    async fn next(&mut self) -> Option<Result<(String, String), String>> {
        match self {
            Self::Sse(s) | Self::Lines(s) => s.next().await,
        }
    }
}

struct State<D> {
    body: Body,
    decoder: D,
    pending: VecDeque<StreamEvent>,
    vendor: &'static str,
    ended: bool,
}

/// How a response body is framed.
#[derive(Clone, Copy)]
pub(super) enum Framing {
    /// Server-sent events.
    Sse,
    /// One JSON object per line.
    NdJson,
}

/// Turns a response into provider events. Dropping the stream drops the
/// response, which closes the connection: cancelling a run stops the upstream
/// request.
pub(super) fn decode<D: Decoder>(
    vendor: &'static str,
    response: Response,
    framing: Framing,
    decoder: D,
) -> BoxStream<'static, StreamEvent> {
    let body = match framing {
        Framing::Sse => Body::Sse(
            response
                .bytes_stream()
                .eventsource()
                .map_ok(|e| (e.event, e.data))
                .map_err(|e| e.to_string())
                .boxed(),
        ),
        Framing::NdJson => {
            let reader = StreamReader::new(response.bytes_stream().map_err(std::io::Error::other));
            Body::Lines(
                FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE))
                    .map_ok(|line| (String::new(), line))
                    .map_err(|e| e.to_string())
                    .boxed(),
            )
        }
    };
    let state = State {
        body,
        decoder,
        pending: VecDeque::new(),
        vendor,
        ended: false,
    };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.pending.pop_front() {
                if matches!(event, StreamEvent::Error(_)) {
                    // An error ends the stream: nothing after it counts.
                    st.pending.clear();
                    st.ended = true;
                }
                return Some((event, st));
            }
            if st.ended {
                return None;
            }
            let mut out = Vec::new();
            if st.decoder.is_done() {
                st.ended = true;
                continue;
            }
            match st.body.next().await {
                Some(Ok((event, data))) => {
                    if !data.trim().is_empty() {
                        st.decoder.feed(&event, &data, &mut out);
                    }
                }
                Some(Err(e)) => {
                    tracing::warn!(vendor = st.vendor, error = ?e.to_string(), "the model's stream broke");
                    out.push(StreamEvent::Error(ProviderError {
                        code: ErrorCode::TransportError,
                        message: format!("{}: the stream broke: {e}", st.vendor),
                        recoverable: true,
                    }));
                }
                None => {
                    st.decoder.finish(&mut out);
                    st.ended = true;
                }
            }
            st.pending.extend(out);
        }
    })
    .boxed()
}
