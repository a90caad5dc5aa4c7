//! Streamable HTTP as rmcp speaks it over our reqwest client, with two
//! changes: a session the server no longer knows is an expired session
//! whatever status says so (rmcp takes only 404; the reference TypeScript
//! server answers 400), so rmcp starts a new session and sends the request
//! once more — the server refused the session, so it ran nothing —; and
//! the answers to `tools/list` are read raw too, for what rmcp's types drop
//! ([`TaskOnly`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::tap::TaskOnly;

type Answer = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// rmcp's reqwest client, changed as the module says.
#[derive(Clone)]
pub(super) struct Client {
    http: reqwest::Client,
    tap: TaskOnly,
}

impl Client {
    pub fn new(http: reqwest::Client, tap: TaskOnly) -> Self {
        Self { http, tap }
    }

    /// A `tools/list` request, sent as rmcp sends it, its answer shown to
    /// the tap as it passes.
    async fn list(
        &self,
        uri: &str,
        message: &ClientJsonRpcMessage,
        session_id: Option<&str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Answer {
        let mut request = self
            .http
            .post(uri)
            .header(ACCEPT, "application/json, text/event-stream")
            .json(message);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session) = session_id {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if !status.is_success() {
            if status == reqwest::StatusCode::NOT_FOUND && session_id.is_some() {
                return Err(StreamableHttpError::SessionExpired);
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}").into(),
            ));
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let session = header("mcp-session-id");
        let content_type = header(CONTENT_TYPE.as_str()).unwrap_or_default();
        let max = limits.max_json_response_size;
        if content_type.starts_with("text/event-stream") {
            let tap = self.tap.clone();
            let mut read = 0usize;
            // Bounded as a JSON answer is: a listing is no endless stream.
            let bytes = response.bytes_stream().map(move |chunk| {
                let chunk = chunk.map_err(std::io::Error::other)?;
                read += chunk.len();
                if read > max {
                    return Err(std::io::Error::other("a tools/list answer too large"));
                }
                Ok(chunk)
            });
            let events = sse_stream::SseStream::from_bytes_stream(bytes).inspect(move |event| {
                if let Ok(Sse {
                    data: Some(data), ..
                }) = event
                {
                    tap.note(data.as_bytes());
                }
            });
            return Ok(StreamableHttpPostResponse::Sse(events.boxed(), session));
        }
        if !content_type.starts_with("application/json") {
            return Err(StreamableHttpError::UnexpectedContentType(Some(
                content_type,
            )));
        }
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            body.extend_from_slice(&chunk.map_err(StreamableHttpError::Client)?);
            if body.len() > max {
                return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
            }
        }
        self.tap.note(&body);
        let message: ServerJsonRpcMessage = serde_json::from_slice(&body)?;
        Ok(StreamableHttpPostResponse::Json(message, session))
    }
}

/// Whether an error answering a request sent in a session says the server
/// does not know the session (`-32000`, "Bad Request: No valid session ID
/// provided", as the reference TypeScript server answers with its 400).
fn unknown_session(error: &ErrorData) -> bool {
    (-32099..=-32000).contains(&error.code.0) && error.message.to_lowercase().contains("session")
}

/// `answer` to a request sent in a session, a refused session made an
/// expired one: a JSON-RPC error that says so, or a 400 without JSON (an
/// older Python SDK's "Bad Request: No valid session ID provided").
fn expired(answer: Answer) -> Answer {
    match answer {
        Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(e), _))
            if unknown_session(&e.error) =>
        {
            Err(StreamableHttpError::SessionExpired)
        }
        Err(StreamableHttpError::UnexpectedServerResponse(m)) if m.starts_with("HTTP 400 ") => {
            Err(StreamableHttpError::SessionExpired)
        }
        other => other,
    }
}

impl StreamableHttpClient for Client {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Answer {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Answer {
        let mut custom_headers = custom_headers;
        // A traced call's context, in `_meta`, also as the HTTP header.
        if let Some(traceparent) = traceparent_in(&message) {
            custom_headers.insert(HeaderName::from_static("traceparent"), traceparent);
        }
        let in_session = session_id.is_some();
        let listing = matches!(&message, ClientJsonRpcMessage::Request(r)
            if matches!(r.request, ClientRequest::ListToolsRequest(_)));
        let answer = if listing {
            self.list(
                &uri,
                &message,
                session_id.as_deref(),
                auth_header,
                custom_headers,
                limits,
            )
            .await
        } else {
            self.http
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await
        };
        if in_session { expired(answer) } else { answer }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    // The trait's `get_stream_with_max_sse_event_size`, which rmcp calls,
    // comes here: with rmcp's default event size, the one this uses.
    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<reqwest::Error>>
    {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }
}

/// The `traceparent` a `tools/call` carries in its `_meta` (traces on).
fn traceparent_in(message: &ClientJsonRpcMessage) -> Option<HeaderValue> {
    let ClientJsonRpcMessage::Request(r) = message else {
        return None;
    };
    if !matches!(r.request, ClientRequest::CallToolRequest(_)) {
        return None;
    }
    // rmcp keeps a request's `_meta` in its extensions until it is sent.
    let text = rmcp::model::GetMeta::get_meta(&r.request)
        .get("traceparent")?
        .as_str()?;
    HeaderValue::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ErrorCode, ErrorData};

    use super::unknown_session;

    #[test]
    fn only_a_server_error_naming_the_session_is_an_unknown_session() {
        let error = |code, message: &str| ErrorData::new(ErrorCode(code), message.to_owned(), None);
        assert!(unknown_session(&error(
            -32000,
            "Bad Request: No valid session ID provided"
        )));
        assert!(unknown_session(&error(-32001, "Session not found")));
        assert!(!unknown_session(&error(-32602, "invalid session name")));
        assert!(!unknown_session(&error(-32000, "the database is down")));
    }
}
