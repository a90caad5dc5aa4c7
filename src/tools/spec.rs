//! The `tools:` entries of an agent file, as written (serde); [`super::Tool`]
//! is what they become once checked.

use serde::Deserialize;
use serde_json::Value;

use crate::protocol::Display;

/// A tool the agent may call. Exactly one of `ui`, `input_request`, `builtin`
/// and `http` says what it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Groups the tool in seed 002's enhanced system prompt.
    #[serde(default)]
    pub category: Option<String>,
    /// JSON Schema of the input; `{type: object}` when absent.
    #[serde(default)]
    pub input_schema: Option<Value>,
    /// The client renders a component and answers with `inline_component.result`.
    #[serde(default)]
    pub ui: Option<UiSpec>,
    /// The user types an answer (`chat.input_request`).
    #[serde(default)]
    pub input_request: Option<InputRequestSpec>,
    /// A tool implemented inside the server, by name.
    #[serde(default)]
    pub builtin: Option<String>,
    /// An HTTP endpoint.
    #[serde(default)]
    pub http: Option<HttpSpec>,
    /// Ask the user before running (seed 002's approval gate).
    #[serde(default)]
    pub requires_approval: bool,
    /// Safe to run twice: a call a restart cut off before its result is run
    /// again; any other such call gets a tool error ("the outcome is unknown").
    #[serde(default)]
    pub idempotent: bool,
    /// The `context_type`s (seed 000) this tool is offered for; empty: all.
    #[serde(default)]
    pub context_types: Vec<String>,
    /// Arguments filled from the chat's context when the model leaves them
    /// out or gives them in the wrong form: `{workflow_id: context.workflow_id}`.
    #[serde(default)]
    pub inject: std::collections::BTreeMap<String, String>,
    /// Show a successful result to the user as a preview (seed 000's
    /// `workflow_preview`); the model gets a fixed answer instead of it.
    #[serde(default)]
    pub preview: Option<PreviewSpec>,
    /// Keep only some fields of the result for the model (seed 000's result
    /// summarization); the log keeps it whole.
    #[serde(default)]
    pub summary: Option<SummarySpec>,
}

/// `preview:` — what the user is shown when the call succeeds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewSpec {
    /// The preview's `component_type` [default: `preview`].
    #[serde(default = "default_preview_type")]
    pub component_type: String,
    /// The preview's fields, each a JSON Pointer into `{"input": …, "result":
    /// …}` (`description: /input/description`); absent values are left out.
    /// Empty: `{input, result}` whole.
    #[serde(default)]
    pub fields: std::collections::BTreeMap<String, String>,
    /// What the model is told instead of the result.
    #[serde(default)]
    pub message: Option<String>,
}

fn default_preview_type() -> String {
    "preview".into()
}

/// `summary:` — the parts of a JSON result the model sees.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummarySpec {
    /// A JSON Pointer to the list (or object) to summarize [default: the
    /// whole result].
    #[serde(default)]
    pub items: String,
    /// The fields each item keeps.
    pub keep: Vec<String>,
    /// Text fields cut to their first sentence.
    #[serde(default)]
    pub first_sentence: Vec<String>,
}

/// An HTTP tool: the input is the JSON body (the query string for GET and
/// DELETE), the caller's bearer token is forwarded.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    #[serde(default = "default_method")]
    pub method: String,
    pub url: String,
    #[serde(default = "default_http_timeout")]
    pub timeout_seconds: u64,
    /// Bytes of the response read at most; the rest is cut.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Extra headers sent with every call.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
}

fn default_method() -> String {
    "POST".into()
}

fn default_http_timeout() -> u64 {
    30
}

fn default_max_response_bytes() -> usize {
    1 << 20
}

/// A UI tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiSpec {
    /// A fixed component type…
    #[serde(default)]
    pub component_type: Option<String>,
    /// …or the name of the input field that carries it.
    #[serde(default)]
    pub component_type_from: Option<String>,
    #[serde(default)]
    pub display: Display,
}

/// An input-request tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRequestSpec {
    /// The input field that holds the prompt (default `prompt`).
    #[serde(default = "default_prompt_field")]
    pub prompt_field: String,
    /// Whether the answer is a secret (never stored or logged).
    #[serde(default)]
    pub password: bool,
}

fn default_prompt_field() -> String {
    "prompt".into()
}

/// An `mcp_servers:` entry: an MCP server whose tools the agent may call.
/// Exactly one of `stdio` and `http` says how to reach it; the shapes other
/// MCP hosts use are read too: `command`/`args`/`env`/`envFile` or
/// `url`/`headers` at the top (with an optional `type`: `stdio`, `http`,
/// `streamable-http`), `disabled`, `autoApprove`, and `mcp_servers` as a map
/// by name.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// Letters, digits, `_` and `-`; names it in logs and `/v1/agents`
    /// (the key, in the map form).
    #[serde(default)]
    pub name: String,
    /// Not started, its tools not offered (Claude Desktop's and VS Code's
    /// way to keep an entry switched off).
    #[serde(default)]
    pub disabled: bool,
    /// Cline's `autoApprove` (Roo Code's `alwaysAllow`): read and ignored
    /// with a warning — a call asks first only where `requires_approval`
    /// says so.
    #[serde(default, rename = "autoApprove", alias = "alwaysAllow")]
    pub auto_approve: Option<Vec<String>>,
    #[serde(default)]
    pub stdio: Option<McpStdioSpec>,
    #[serde(default)]
    pub http: Option<McpHttpSpec>,
    /// The flat form's transport, when it says one.
    #[serde(default, rename = "type")]
    pub transport: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default, rename = "envFile")]
    pub env_file: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub forward_bearer: bool,
    /// Put before each of its tools' names [default: `<name>_`; `""`: none].
    #[serde(default)]
    pub prefix: Option<String>,
    /// Only these of its tools (by the server's names); empty: all.
    #[serde(default)]
    pub allow: Vec<String>,
    /// None of these.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Every call of its tools asks the user first.
    #[serde(default)]
    pub requires_approval: bool,
    /// A call with no answer (and no progress) this long fails.
    #[serde(default = "default_mcp_timeout")]
    pub timeout_seconds: u64,
    /// Bytes of a result's JSON the log keeps at most; a larger result is
    /// logged as a note with the start of its text.
    #[serde(default = "default_max_response_bytes")]
    pub max_result_bytes: usize,
    /// Per tool (by the server's name): the gates any tool has.
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, McpToolSpec>,
}

fn default_mcp_timeout() -> u64 {
    60
}

/// A server started as a child process, spoken to over stdio.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpStdioSpec {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment, over the few variables it inherits (`HOME`,
    /// `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`); a value may name one of
    /// agentwire's variables, `${env:NAME}`.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// A dotenv file whose variables it gets too (`env` wins).
    #[serde(default)]
    pub env_file: Option<String>,
    /// Its working directory [default: the server's].
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A Streamable HTTP server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpHttpSpec {
    pub url: String,
    /// Sent with every request (an `Authorization` the server wants); a
    /// value may name one of agentwire's variables, `${env:NAME}`.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// A call made for a caller with a bearer token goes over a connection
    /// of that caller's, with `Authorization: Bearer <their token>` (the
    /// tools are listed with `headers`).
    #[serde(default)]
    pub forward_bearer: bool,
}

/// The gates of one MCP tool, as for any tool.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpToolSpec {
    #[serde(default)]
    pub requires_approval: bool,
    #[serde(default)]
    pub idempotent: bool,
    #[serde(default)]
    pub context_types: Vec<String>,
    #[serde(default)]
    pub inject: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub summary: Option<SummarySpec>,
    #[serde(default)]
    pub category: Option<String>,
}

/// `inject:` entries as `(argument, path in the context)` pairs.
///
/// # Errors
/// A path that does not start with `context.` (named under `at`).
pub(super) fn inject_paths(
    inject: std::collections::BTreeMap<String, String>,
    at: &str,
) -> Result<Vec<(String, Vec<String>)>, String> {
    inject
        .into_iter()
        .map(|(arg, path)| match path.strip_prefix("context.") {
            Some(rest) => Ok((arg, rest.split('.').map(str::to_owned).collect())),
            None => Err(format!("{at}.{arg}: `{path}` must start with `context.`")),
        })
        .collect()
}

impl McpServerSpec {
    /// The nested form of an entry written flat (`command` …, `url` …).
    ///
    /// # Errors
    /// Both forms at once, or a `type` that disagrees with the fields.
    pub fn nested(mut self) -> Result<Self, String> {
        let flat_stdio = self.command.is_some();
        let flat_http = self.url.is_some();
        if (flat_stdio || flat_http) && (self.stdio.is_some() || self.http.is_some()) {
            return Err("write `stdio:`/`http:` or `command`/`url`, not both".into());
        }
        match (self.transport.as_deref(), flat_stdio, flat_http) {
            (Some("sse"), ..) => {
                return Err(
                    "type `sse`: the legacy HTTP+SSE transport (of 2024-11-05) is not \
                            supported; give the url of the server's Streamable HTTP endpoint \
                            (often `/mcp`) with `type: http`"
                        .into(),
                );
            }
            (None | Some("stdio"), true, false) => {
                self.stdio = Some(McpStdioSpec {
                    command: self.command.take().unwrap_or_default(),
                    args: std::mem::take(&mut self.args),
                    env: std::mem::take(&mut self.env),
                    env_file: self.env_file.take(),
                    cwd: self.cwd.take(),
                });
            }
            (None | Some("http" | "streamable-http" | "streamableHttp"), false, true) => {
                self.http = Some(McpHttpSpec {
                    url: self.url.take().unwrap_or_default(),
                    headers: std::mem::take(&mut self.headers),
                    forward_bearer: self.forward_bearer,
                });
            }
            (_, false, false) if self.transport.is_none() => {}
            (Some(t), _, _) => {
                return Err(format!(
                    "type `{t}` needs `command` (stdio) or `url` (http, streamable-http), and \
                     only that one"
                ));
            }
            (None, _, _) => return Err("set `command` or `url`, not both".into()),
        }
        let leftover = !self.args.is_empty()
            || !self.env.is_empty()
            || self.cwd.is_some()
            || self.env_file.is_some()
            || !self.headers.is_empty()
            || (self.forward_bearer && self.http.as_ref().is_none_or(|h| !h.forward_bearer));
        if leftover {
            return Err(
                "args, env, envFile and cwd go with `command`; headers and forward_bearer with \
                 `url`"
                    .into(),
            );
        }
        Ok(self)
    }
}

/// `mcp_servers:` as a list of entries, or a map from name to entry.
///
/// # Errors
/// An entry's own error (its fields are checked as they are read).
pub fn mcp_servers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<McpServerSpec>, D::Error> {
    struct Servers;
    impl<'de> serde::de::Visitor<'de> for Servers {
        type Value = Vec<McpServerSpec>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of MCP servers, or a map from name to MCP server")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(spec) = seq.next_element::<McpServerSpec>()? {
                out.push(spec);
            }
            Ok(out)
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((name, entry)) = map.next_entry::<String, Entry>()? {
                match entry {
                    Entry::Server(mut spec) => {
                        spec.name = name;
                        out.push(*spec);
                    }
                    Entry::List if name == "inputs" => tracing::warn!(
                        "mcp_servers.inputs is ignored: VS Code's inputs ask its user for values, \
                         and agentwire asks no one (write `${{env:NAME}}` in env or headers)"
                    ),
                    Entry::List => {
                        return Err(serde::de::Error::custom(format!(
                            "mcp_servers.{name}: an MCP server is a map, not a list"
                        )));
                    }
                }
            }
            Ok(out)
        }
    }
    d.deserialize_any(Servers)
}

/// A value of `mcp_servers` in the map form: a server, or a list (VS Code's
/// `inputs`, pasted with its servers).
enum Entry {
    Server(Box<McpServerSpec>),
    List,
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = Entry;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an MCP server")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Entry::List)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Entry, A::Error> {
                let spec =
                    McpServerSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Entry::Server(Box::new(spec)))
            }
        }
        d.deserialize_any(Either)
    }
}
