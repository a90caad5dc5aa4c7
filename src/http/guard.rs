//! What keeps a web page from driving the server through a visitor's browser.
//!
//! - **JSON bodies are `application/json`.** A page may send `text/plain`
//!   cross-origin without a CORS preflight; it cannot send
//!   `application/json`. So a request with a body of any other type is
//!   refused (415) before a handler reads it. Every auth mode.
//! - **A body arrives in time and in size**: read whole here, within
//!   `http_body_timeout_seconds` (408) and `max_message_bytes` (413).
//! - **In auth mode `none`** (every request is user `dev`, no credentials to
//!   steal or forge), the server only answers:
//!   - `Host`s that are loopback (`localhost`, `127.0.0.0/8`, `[::1]`) or
//!     listed in `allowed_hosts`: a page on `evil.example` whose DNS name
//!     rebinds to 127.0.0.1 reaches the server with `Host: evil.example`;
//!   - WebSocket upgrades and state-changing requests (`POST`, `DELETE`…)
//!     whose `Origin`, when there is one, is the server's own or listed in
//!     `cors_origins`. Programs that send no `Origin` (curl, SDKs) pass.
//!
//!   `/healthz` and `/metrics` answer any `Host` (load balancers probe them
//!   by address). In `jwt` mode none of this applies: a page cannot attach
//!   the bearer token, and the server sets no cookies.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};

use super::error::error_body;
use super::state::AppState;
use crate::config::AuthConfig;
use crate::protocol::ErrorCode;

/// The middleware: refuses with 415 (a body that is not JSON), 403, 408 (a
/// body not sent within `http_body_timeout_seconds`) or 413.
pub(super) async fn check(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // An upload is streamed by its handler (its own size and time limits).
    let file = super::files::streams_body(request.method(), request.uri().path());
    let has_body = match json_body(request.headers(), request.method())
        .or_else(|e| if file { Ok(false) } else { Err(e) })
    {
        Ok(has_body) => has_body,
        Err(e) => return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, &e),
    };
    if matches!(state.config.auth, AuthConfig::None) {
        let path = request.uri().path();
        let ops = path == "/healthz" || path == "/metrics";
        let headers = request.headers();
        if !ops && let Err(e) = host_allowed(headers, &state.config.allowed_hosts) {
            return refuse(StatusCode::FORBIDDEN, &e);
        }
        let changes = !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        );
        let upgrade = headers.contains_key(header::UPGRADE);
        if (changes || upgrade)
            && let Err(e) = origin_allowed(headers, &state.config.cors_origins)
        {
            return refuse(StatusCode::FORBIDDEN, &e);
        }
    }
    // In jwt mode a request that will be refused (401) is not read at all.
    let (mut parts, body) = request.into_parts();
    let mut unauthenticated = false;
    if !state.auth.is_open() {
        // Kept for the handler's extractor: a credential is checked once.
        match state
            .auth
            .principal(super::auth::bearer(&parts).as_deref())
            .await
        {
            Ok(principal) => {
                parts.extensions.insert(principal);
            }
            Err(_) => unauthenticated = true,
        }
    }
    if !has_body || unauthenticated || file {
        return next.run(Request::from_parts(parts, body)).await;
    }
    // The body, read whole within the timeout: a client that trickles it in
    // (slowloris) holds a connection no longer than that.
    let limit = match super::inline_files::carries_files(parts.method.as_str(), parts.uri.path()) {
        true => state.config.max_message_bytes + state.config.files.max_inline_bytes,
        false => state.config.max_message_bytes,
    };
    let read = axum::body::to_bytes(body, limit);
    let bytes = match tokio::time::timeout(state.config.http_body_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if is_too_long(&e) => {
            let message = format!(
                "the request body is over {limit} bytes (max_message_bytes, with max_inline_file_bytes for a message that may carry files)"
            );
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, &message);
        }
        Ok(Err(_)) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            );
        }
        Err(_) => {
            let message = "the request body was not sent in time (http_body_timeout_seconds)";
            return refuse(StatusCode::REQUEST_TIMEOUT, message);
        }
    };
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// Whether reading a body failed on its length limit (not the connection).
fn is_too_long(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

fn refuse(status: StatusCode, message: &str) -> Response {
    tracing::info!(%status, message, "request refused by the origin guard");
    let code = if status == StatusCode::FORBIDDEN {
        ErrorCode::Unauthorized
    } else {
        ErrorCode::SchemaValidationFailed
    };
    crate::metrics::error_sent(code.as_str());
    (status, Json(error_body(code, message))).into_response()
}

/// A request with a body must say it is JSON.
///
/// # Returns
/// Whether the request has a body.
fn json_body(headers: &HeaderMap, method: &Method) -> Result<bool, String> {
    let has_body = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
        || headers.contains_key(header::TRANSFER_ENCODING);
    if !has_body || matches!(*method, Method::GET | Method::HEAD) {
        return Ok(false);
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .is_some_and(|t| {
            t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
        });
    if json {
        Ok(true)
    } else {
        Err("request bodies must be JSON, sent as Content-Type: application/json".into())
    }
}

/// The host name of a `Host` value or an origin's authority, without port,
/// lower case (`[::1]` keeps its brackets).
fn host_name(authority: &str) -> String {
    let authority = authority.trim().to_ascii_lowercase();
    if authority.starts_with('[') {
        return authority
            .split_inclusive(']')
            .next()
            .unwrap_or_default()
            .to_owned();
    }
    authority.split(':').next().unwrap_or_default().to_owned()
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> Result<(), String> {
    // HTTP/1.0 clients may send no Host; no browser does.
    let Some(host) = headers.get(header::HOST) else {
        return Ok(());
    };
    let name = host_name(host.to_str().unwrap_or_default());
    if is_loopback(&name) || allowed.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "host `{name}` is not served in auth mode none: add it to allowed_hosts (AGENTWIRE_ALLOWED_HOSTS), or use auth mode jwt"
    ))
}

fn origin_allowed(headers: &HeaderMap, cors_origins: &[String]) -> Result<(), String> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if cors_origins
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(&origin))
    {
        return Ok(());
    }
    // Same origin: the page was served by this very host and port.
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| h.trim().to_ascii_lowercase());
    if let (Some(authority), Some(host)) = (authority, host)
        && authority == host
    {
        return Ok(());
    }
    Err(format!(
        "requests from the page at `{origin}` are not accepted in auth mode none: add it to cors_origins (AGENTWIRE_CORS_ORIGINS), or use auth mode jwt"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn hosts() {
        for ok in [
            "localhost:8080",
            "127.0.0.1:8080",
            "127.9.9.9",
            "[::1]:80",
            "app.localhost",
        ] {
            assert!(host_allowed(&headers(&[("host", ok)]), &[]).is_ok(), "{ok}");
        }
        let rebound = headers(&[("host", "evil.example:8080")]);
        assert!(host_allowed(&rebound, &[]).is_err());
        assert!(host_allowed(&rebound, &["evil.example".into()]).is_ok());
        assert!(host_allowed(&headers(&[("host", "127.0.0.1.evil.example")]), &[]).is_err());
    }

    #[test]
    fn origins() {
        let h = |o: &str| headers(&[("host", "127.0.0.1:8080"), ("origin", o)]);
        assert!(origin_allowed(&h("http://127.0.0.1:8080"), &[]).is_ok());
        assert!(origin_allowed(&h("http://evil.example"), &[]).is_err());
        assert!(origin_allowed(&h("null"), &[]).is_err());
        assert!(origin_allowed(&h("http://127.0.0.1:9999"), &[]).is_err());
        let listed = ["https://app.example.com".to_owned()];
        assert!(origin_allowed(&h("https://app.example.com"), &listed).is_ok());
        assert!(origin_allowed(&headers(&[("host", "localhost:8080")]), &[]).is_ok());
    }

    #[test]
    fn bodies() {
        let post = Method::POST;
        let with = |ct: &str| headers(&[("content-length", "2"), ("content-type", ct)]);
        assert!(json_body(&with("application/json"), &post).is_ok());
        assert!(json_body(&with("application/json; charset=utf-8"), &post).is_ok());
        assert!(json_body(&with("application/merge-patch+json"), &post).is_ok());
        assert!(json_body(&with("text/plain"), &post).is_err());
        assert!(json_body(&with("application/x-www-form-urlencoded"), &post).is_err());
        assert!(json_body(&headers(&[("content-length", "2")]), &post).is_err());
        assert_eq!(
            json_body(&headers(&[("content-length", "0")]), &post),
            Ok(false)
        );
        assert_eq!(json_body(&HeaderMap::new(), &post), Ok(false));
        assert_eq!(json_body(&with("application/json"), &post), Ok(true));
    }
}
