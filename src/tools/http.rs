//! HTTP tools: an agent-file tool backed by an HTTP endpoint (seed 000's
//! executor). The input is the JSON body (the query string for GET/DELETE);
//! the caller's bearer token is forwarded verbatim; the call has a timeout and
//! reads at most `max_response_bytes` of the answer.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::Value;

use super::record::backend;
use super::spec::HttpSpec;
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;

/// A configured HTTP tool.
#[derive(Debug, Clone)]
pub struct HttpTool {
    pub method: Method,
    pub url: String,
    pub timeout: Duration,
    pub max_response_bytes: usize,
    pub headers: Vec<(String, String)>,
}

impl HttpTool {
    /// # Errors
    /// A message naming the bad field.
    pub fn from_spec(spec: HttpSpec) -> Result<Self, String> {
        let method = Method::from_bytes(spec.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("method: `{}` is not an HTTP method", spec.method))?;
        let url = reqwest::Url::parse(&spec.url).map_err(|e| format!("url: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("url: must be http:// or https://".into());
        }
        if spec.timeout_seconds == 0 {
            return Err("timeout_seconds: must be at least 1".into());
        }
        Ok(Self {
            method,
            url: spec.url,
            timeout: Duration::from_secs(spec.timeout_seconds),
            max_response_bytes: spec.max_response_bytes.max(1),
            headers: spec.headers.into_iter().collect(),
        })
    }

    /// Calls the endpoint.
    ///
    /// # Returns
    /// The response body (cut at `max_response_bytes`, with a marker).
    ///
    /// # Errors
    /// A message for the model: unreachable, timed out, or a non-2xx status
    /// with the start of its body.
    pub async fn call(
        &self,
        client: &reqwest::Client,
        input: &Value,
        bearer: Option<&str>,
    ) -> Result<String, String> {
        let mut req = client
            .request(self.method.clone(), &self.url)
            .timeout(self.timeout);
        if matches!(self.method, Method::GET | Method::DELETE) {
            let pairs: Vec<(String, String)> = input
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect();
            req = req.query(&pairs);
        } else {
            req = req.json(input);
        }
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        if let Some(token) = bearer {
            req = req.header(reqwest::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        // The calling span's context (traces on).
        let req = crate::telemetry::propagate::inject(req);
        let response = req.send().await.map_err(|e| {
            if e.is_timeout() {
                format!(
                    "the tool did not answer within {} s",
                    self.timeout.as_secs()
                )
            } else {
                "the tool's server could not be reached".to_owned()
            }
        })?;
        let status = response.status();
        let mut body = Vec::new();
        let mut truncated = false;
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|_| "the tool's response broke off".to_owned())?;
            let room = self.max_response_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let mut text = String::from_utf8_lossy(&body).into_owned();
        if truncated {
            text.push_str(&format!(
                "\n[response cut at {} bytes]",
                self.max_response_bytes
            ));
        }
        if status.is_success() {
            Ok(text)
        } else {
            Err(format!(
                "HTTP {status}: {}",
                text.chars().take(2000).collect::<String>()
            ))
        }
    }
}

/// Calls the endpoint with the call's input and the caller's bearer.
pub(super) async fn run(
    tool: &HttpTool,
    call: &ToolCall,
    link: &RunLink,
    client: &reqwest::Client,
    bearer: Option<&str>,
) -> Result<ToolOutcome, Gone> {
    backend(link, call, tool.call(client, &call.input, bearer)).await
}
