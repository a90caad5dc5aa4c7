//! MCP tools: the tools of the MCP servers an agent file names
//! (`mcp_servers:`), offered as they are listed now, each with the gates
//! any tool has. A call is a backend call: `chat.tool_call`, the server's
//! progress as `chat.tool_progress`, then `chat.tool_response` with the
//! server's whole result (images and resources included); the model reads
//! its text, and an `isError` result as a tool error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::record::{backend_call, respond};
use super::spec::{McpServerSpec, McpToolSpec, inject_paths};
use super::summary::Summary;
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::mcp::{McpServer, Progress, Source};
use crate::protocol::EventKind;

/// Callers' own connections kept at most per forwarding server (the least
/// recently used is closed).
const MAX_CALLERS: usize = 32;
/// How long a new caller's connection has to come up.
const CALLER_START: Duration = Duration::from_secs(30);

/// One `mcp_servers:` entry, checked, with its server supervised.
#[derive(Debug)]
pub struct McpSource {
    pub server: Arc<McpServer>,
    /// `forward_bearer`: the URL and headers a caller's connection uses,
    /// and those connections by token.
    forward: Option<Forward>,
    prefix: String,
    allow: Vec<String>,
    deny: Vec<String>,
    requires_approval: bool,
    timeout: Duration,
    max_result_bytes: usize,
    tools: BTreeMap<String, Gates>,
}

/// Connections made for callers' tokens (never logged).
struct Forward {
    url: String,
    headers: BTreeMap<String, String>,
    /// By the SHA-256 of the token (the token itself only in the
    /// connection's header).
    callers: std::sync::Mutex<Vec<Caller>>,
}

/// A caller's connection: the digest of their token, it, its last use.
type Caller = ([u8; 32], Arc<McpServer>, std::time::Instant);

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forward")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Forward {
    /// The connection of the caller with `token`, made on first use.
    fn server(&self, name: &str, token: &str) -> Arc<McpServer> {
        let mut key = [0u8; 32];
        key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
        let mut callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = callers.iter_mut().find(|(k, ..)| *k == key) {
            entry.2 = std::time::Instant::now();
            return entry.1.clone();
        }
        if callers.len() >= MAX_CALLERS
            && let Some(oldest) = callers
                .iter()
                .enumerate()
                .min_by_key(|(_, (.., used))| *used)
                .map(|(i, _)| i)
        {
            callers.swap_remove(oldest);
        }
        let mut headers = self.headers.clone();
        headers.retain(|k, _| !k.eq_ignore_ascii_case("authorization"));
        headers.insert("Authorization".into(), format!("Bearer {token}"));
        let source = Source::Http {
            url: self.url.clone(),
            headers,
        };
        let server = McpServer::start(name.to_owned(), source);
        callers.push((key, server.clone(), std::time::Instant::now()));
        server
    }
}

/// One tool's gates, checked.
#[derive(Debug, Clone, Default)]
pub(super) struct Gates {
    pub requires_approval: bool,
    pub idempotent: bool,
    pub context_types: Vec<String>,
    pub inject: Vec<(String, Vec<String>)>,
    pub summary: Option<Summary>,
    pub category: Option<String>,
}

impl McpSource {
    /// Checks `mcp_servers[index]` and starts its supervisor (inside a
    /// tokio runtime).
    ///
    /// # Errors
    /// A message naming the field.
    pub fn from_spec(spec: McpServerSpec, index: usize) -> Result<Self, String> {
        let at = |field: &str| format!("mcp_servers[{index}].{field}");
        let spec = spec
            .nested()
            .map_err(|e| format!("mcp_servers[{index}]: {e}"))?;
        let mut forward = None;
        if spec.name.is_empty()
            || spec.name.len() > 64
            || !spec
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "{}: 1 to 64 letters, digits, `_` or `-`",
                at("name")
            ));
        }
        if spec.auto_approve.is_some() {
            tracing::warn!(server = %spec.name, "MCP autoApprove is ignored: a call asks first only where requires_approval says so");
        }
        // `${env:NAME}` read now; the message names the field, the server and
        // the variable, never a value.
        let expand = |field: &str, value: &str| {
            crate::mcp::expand(value)
                .map_err(|e| format!("{} (server `{}`): {e}", at(field), spec.name))
        };
        let source = match (spec.stdio, spec.http) {
            (Some(s), None) => {
                if s.command.is_empty() {
                    return Err(format!("{}: must not be empty", at("stdio.command")));
                }
                let mut env = BTreeMap::new();
                if let Some(file) = &s.env_file {
                    let path = expand("stdio.env_file", file)?;
                    env = crate::mcp::read_env_file(std::path::Path::new(&path))
                        .map_err(|e| format!("{}: {e}", at("stdio.env_file")))?;
                }
                for (k, v) in &s.env {
                    env.insert(k.clone(), expand(&format!("stdio.env.{k}"), v)?);
                }
                Source::Stdio {
                    command: s.command,
                    args: s.args,
                    env,
                    cwd: s.cwd.map(Into::into),
                }
            }
            (None, Some(mut h)) => {
                if !(h.url.starts_with("http://") || h.url.starts_with("https://")) {
                    return Err(format!("{}: an http:// or https:// URL", at("http.url")));
                }
                for (k, v) in h.headers.iter_mut() {
                    *v = expand(&format!("http.headers.{k}"), v)?;
                }
                for (k, v) in &h.headers {
                    let reserved = ["accept", "mcp-session-id", "last-event-id"];
                    if reserved.iter().any(|r| k.eq_ignore_ascii_case(r))
                        || reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || reqwest::header::HeaderValue::from_str(v).is_err()
                    {
                        return Err(format!(
                            "{}: not a header agentwire can send (reserved: accept, \
                             mcp-session-id, last-event-id)",
                            at(&format!("http.headers.{k}"))
                        ));
                    }
                }
                forward = h.forward_bearer.then(|| Forward {
                    url: h.url.clone(),
                    headers: h.headers.clone(),
                    callers: std::sync::Mutex::new(Vec::new()),
                });
                Source::Http {
                    url: h.url,
                    headers: h.headers,
                }
            }
            _ => {
                return Err(format!(
                    "mcp_servers[{index}]: set exactly one of stdio, http"
                ));
            }
        };
        if spec.timeout_seconds == 0 {
            return Err(format!("{}: must be at least 1", at("timeout_seconds")));
        }
        if spec.max_result_bytes < 1024 {
            return Err(format!("{}: must be at least 1024", at("max_result_bytes")));
        }
        let mut tools = BTreeMap::new();
        for (name, t) in spec.tools {
            let gates = gates(t, &at(&format!("tools.{name}")))?;
            tools.insert(name, gates);
        }
        let prefix = spec.prefix.unwrap_or_else(|| format!("{}_", spec.name));
        Ok(Self {
            server: McpServer::start(spec.name, source),
            forward,
            prefix,
            allow: spec.allow,
            deny: spec.deny,
            requires_approval: spec.requires_approval,
            timeout: Duration::from_secs(spec.timeout_seconds),
            max_result_bytes: spec.max_result_bytes,
            tools,
        })
    }

    /// Whether the server's tool `name` is offered (`allow`, `deny`).
    pub(super) fn offers(&self, name: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|a| a == name))
            && !self.deny.iter().any(|d| d == name)
    }

    /// The name a model calls the server's tool `name` by.
    pub fn prefixed(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The gates of the server's tool `name`.
    pub(super) fn gates(&self, name: &str) -> Gates {
        let mut gates = self.tools.get(name).cloned().unwrap_or_default();
        gates.requires_approval |= self.requires_approval;
        gates
    }
}

fn gates(t: McpToolSpec, at: &str) -> Result<Gates, String> {
    Ok(Gates {
        requires_approval: t.requires_approval,
        idempotent: t.idempotent,
        context_types: t.context_types,
        inject: inject_paths(t.inject, &format!("{at}.inject"))?,
        summary: t
            .summary
            .map(Summary::from_spec)
            .transpose()
            .map_err(|e| format!("{at}.summary.{e}"))?,
        category: t.category,
    })
}

/// Runs a call of `tool` on the source's server (over the caller's own
/// connection when the server forwards bearers and the run has one).
pub(super) async fn run(
    source: &McpSource,
    tool: &str,
    call: &ToolCall,
    link: &RunLink,
    bearer: Option<&str>,
) -> Result<ToolOutcome, Gone> {
    // In the log before it runs: a restart never finds an effect unlogged.
    link.log(backend_call(call)).await?;
    let server = match (&source.forward, bearer) {
        (Some(forward), Some(token)) => {
            let server = forward.server(source.server.name(), token);
            server.settled(CALLER_START).await;
            server
        }
        // Never the service's own credentials for a caller's call.
        (Some(_), None) => {
            let why = format!(
                "the MCP server `{}` takes calls with the caller's token, and this run has none \
                 (a run continued after a restart keeps no token)",
                source.server.name()
            );
            respond(link, call, Value::String(why.clone()), false).await?;
            return Ok(ToolOutcome::Result {
                content: why,
                is_error: true,
            });
        }
        (None, _) => source.server.clone(),
    };
    let arguments = match &call.input {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    let (tx, mut rx) = mpsc::channel::<Progress>(16);
    let calling = async { Ok(server.call(tool, arguments, source.timeout, tx).await) };
    let reporting = async {
        // A report is logged when it moves the bar a percent, says something
        // new, or finishes: a server reporting on and on cannot flood the log.
        let mut shown: Option<(f64, Option<String>)> = None;
        while let Some(p) = rx.recv().await {
            let percent = match p.total {
                Some(total) if total > 0.0 => (p.progress / total * 100.0).clamp(0.0, 100.0),
                _ => p.progress.clamp(0.0, 100.0),
            };
            let news = shown.as_ref().is_none_or(|(at, said)| {
                percent - at >= 1.0 || *said != p.message || (percent >= 100.0 && *at < 100.0)
            });
            if !news {
                continue;
            }
            shown = Some((percent, p.message.clone()));
            let progress = EventKind::ToolProgress {
                tool_name: call.name.clone(),
                progress_percent: percent,
                status_message: p.message.unwrap_or_default(),
                corr: call.id.clone(),
            };
            link.emit(progress).await?;
        }
        Ok::<(), Gone>(())
    };
    // A run gone while its call runs drops the call (cancelled on the server).
    let (outcome, ()) = tokio::try_join!(calling, reporting)?;
    match outcome {
        Ok(called) => {
            let kept = super::files_out::keep_files(link, &call.name, called.result).await;
            let logged = capped(kept, source.max_result_bytes);
            respond(link, call, logged, !called.is_error).await?;
            Ok(ToolOutcome::Result {
                content: called.text,
                is_error: called.is_error,
            })
        }
        Err(e) => {
            let why = e.to_string();
            respond(link, call, Value::String(why.clone()), false).await?;
            Ok(ToolOutcome::Result {
                content: why,
                is_error: true,
            })
        }
    }
}

/// The result the log keeps: whole up to `max` bytes of JSON, else a note
/// with its size and the start of its text (the model still reads the text,
/// cut to the agent's cap).
fn capped(result: Value, max: usize) -> Value {
    if crate::protocol::limits::json_fits(&result, max) {
        return result;
    }
    let bytes = serde_json::to_vec(&result).map_or(0, |v| v.len());
    let text: String = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut cut = max / 2;
    while !text.is_char_boundary(cut.min(text.len())) {
        cut -= 1;
    }
    let text = &text[..cut.min(text.len())];
    // The files it holds stay named (small blocks: their bytes are kept).
    let mut content = vec![serde_json::json!({"type": "text", "text": text})];
    content.extend(
        result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b.get("file_id").is_some() || b["resource"].get("file_id").is_some())
            .take(32)
            .cloned(),
    );
    serde_json::json!({
        "truncated": true,
        "bytes": bytes,
        "content": content,
        "isError": result["isError"],
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::capped;

    #[test]
    fn a_result_over_the_cap_is_logged_as_a_note_with_its_text_cut() {
        let small = json!({"content": [{"type": "text", "text": "ok"}]});
        assert_eq!(capped(small.clone(), 1024), small);
        let big = json!({"content": [{"type": "text", "text": "é".repeat(2000)},
                                     {"type": "image", "data": "x".repeat(5000), "mimeType": "image/png"}],
                         "isError": false});
        let logged = capped(big, 1024);
        assert_eq!(logged["truncated"], true);
        let kept = json!({"content": [{"type": "text", "text": "x".repeat(4000)},
                                      {"type": "image", "file_id": "f1", "mimeType": "image/png"}]});
        assert_eq!(
            capped(kept, 1024)["content"][1]["file_id"],
            "f1",
            "a kept file stays named"
        );
        assert!(logged["bytes"].as_u64().unwrap() > 9000);
        let text = logged["content"][0]["text"].as_str().unwrap();
        assert!(text.len() <= 512 && text.starts_with('é'), "{}", text.len());
        assert!(serde_json::to_string(&logged).unwrap().len() < 1024);
    }
}
