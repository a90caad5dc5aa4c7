//! Streamable HTTP as rmcp speaks it over our reqwest client, with one
//! change: a session the server no longer knows is an expired session
//! whatever status says so (rmcp takes only 404; the reference TypeScript
//! server answers 400), so rmcp starts a new session and sends the request
//! once more — the server refused the session, so it ran nothing.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

type Answer = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// rmcp's reqwest client, changed as the module says.
#[derive(Clone)]
pub(super) struct Client {
    http: reqwest::Client,
}

impl Client {
    pub fn new(http: reqwest::Client) -> Self {
        Self { http }
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
        let in_session = session_id.is_some();
        let answer = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
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
