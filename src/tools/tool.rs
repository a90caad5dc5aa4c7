//! [`Tool`]: one entry of an agent's tools, checked; [`ToolKind`]: the kinds,
//! each run by its own file.

use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

use super::builtin::{self, Builtin};
use super::env::CallEnv;
use super::http::{self, HttpTool};
use super::preview::Preview;
use super::spec::{ToolSpec, inject_paths};
use super::summary::Summary;
use super::ui::{self, ComponentType};
use super::{analyst, ask_user, database, handoff};
use crate::link::{Gone, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::Display;

/// What a tool does when called: its source.
#[derive(Debug, Clone)]
pub enum ToolKind {
    Ui {
        component_type: ComponentType,
        display: Display,
    },
    InputRequest {
        prompt_field: String,
        password: bool,
    },
    Builtin(Builtin),
    Http(HttpTool),
    /// `builtin: ask_database` (seed 003).
    AskDatabase,
    /// `builtin: ask_analyst` (seed 003).
    AskAnalyst,
    /// A group's handoff (built by the group, never from a `tools:` entry):
    /// `handoff_to` (`to: None`, the model names whom), or an `OnCondition`'s
    /// `transfer_to_…` (`to`: its target).
    Handoff {
        to: Option<String>,
    },
    /// A group's `update_context` (`group`: its id; `context`: the run's).
    Context {
        group: String,
        context: super::context::Context,
    },
    /// A tool of an MCP server (`tool`: its name on the server).
    Mcp {
        source: Arc<super::mcp::McpSource>,
        tool: String,
    },
}

impl ToolKind {
    /// The kind's label on the `agentwire_tool_seconds` metric.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Self::Ui { .. } => "ui",
            Self::InputRequest { .. } => "input",
            Self::Builtin(_) => "builtin",
            Self::Http(_) => "http",
            Self::AskDatabase => "database",
            Self::AskAnalyst => "analyst",
            Self::Handoff { .. } => "handoff",
            Self::Context { .. } => "context",
            Self::Mcp { .. } => "mcp",
        }
    }

    /// Runs a call that is offered, valid and approved; logs what the kind
    /// logs (a backend tool: its `chat.tool_call` and `chat.tool_response`).
    pub(super) async fn run(
        &self,
        call: &ToolCall,
        env: &CallEnv<'_>,
    ) -> Result<ToolOutcome, Gone> {
        match self {
            Self::Ui {
                component_type,
                display,
            } => ui::run(component_type, *display, call, env.link).await,
            Self::InputRequest {
                prompt_field,
                password,
            } => ask_user::run(prompt_field, *password, call, env.link).await,
            Self::Builtin(builtin) => builtin::run(*builtin, call, env.link).await,
            Self::Http(http) => http::run(http, call, env.link, env.http, env.bearer).await,
            Self::AskDatabase => database::run(call, env).await,
            Self::AskAnalyst => analyst::run(call, env).await,
            Self::Handoff { to } => handoff::run(call, to.as_deref(), env.link).await,
            Self::Context { group, context } => {
                super::context::run(group, context, call, env.link).await
            }
            Self::Mcp { source, tool } => {
                super::mcp::run(source, tool, call, env.link, env.bearer).await
            }
        }
    }
}

/// A tool, ready to validate and run.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// Its group in seed 002's enhanced system prompt.
    pub category: Option<String>,
    pub input_schema: Value,
    pub validator: Arc<Validator>,
    pub kind: ToolKind,
    /// Ask the user before running.
    pub requires_approval: bool,
    /// Safe to run again when a restart cut a call off before its result.
    pub idempotent: bool,
    /// `(argument, path in the chat context)` pairs filled before validation.
    pub inject: Vec<(String, Vec<String>)>,
    /// The `context_type`s it is offered for; empty: all.
    pub context_types: Vec<String>,
    /// A successful result is shown to the user, not given to the model.
    pub preview: Option<Preview>,
    /// The fields of a result the model sees.
    pub summary: Option<Summary>,
}

impl Tool {
    /// A tool made in code, not from a `tools:` entry: none of the gates.
    pub(super) fn built(
        name: String,
        description: String,
        (input_schema, validator): (Value, Validator),
        kind: ToolKind,
    ) -> Self {
        Tool {
            name,
            description,
            category: None,
            input_schema,
            validator: Arc::new(validator),
            kind,
            requires_approval: false,
            idempotent: false,
            inject: Vec::new(),
            context_types: Vec::new(),
            preview: None,
            summary: None,
        }
    }

    /// A group's `handoff_to`, naming `members` (or `user`).
    pub fn handoff(members: &[String]) -> Self {
        let schema = handoff::schema(members);
        let validator = jsonschema::options()
            .build(&schema)
            .expect("the handoff schema is valid");
        Self::built(
            handoff::HANDOFF_TOOL.into(),
            handoff::description(members),
            (schema, validator),
            ToolKind::Handoff { to: None },
        )
    }

    /// An `OnCondition`'s tool: `name` hands to `to` when the model judges
    /// that `condition` holds.
    pub fn transfer(name: String, condition: &str, to: &str) -> Self {
        let schema = serde_json::json!({"type": "object", "properties": {}});
        let validator = jsonschema::options()
            .build(&schema)
            .expect("the transfer schema is valid");
        Self::built(
            name,
            condition.to_owned(),
            (schema, validator),
            ToolKind::Handoff {
                to: Some(to.to_owned()),
            },
        )
    }

    /// A group's `update_context`, writing `context` (logged under `group`,
    /// the group's id); `names`: the variables the file declares.
    pub fn update_context(group: &str, context: super::context::Context, names: &[String]) -> Self {
        let schema = super::context::schema();
        let validator = jsonschema::options()
            .build(&schema)
            .expect("the context schema is valid");
        Self::built(
            super::context::CONTEXT_TOOL.into(),
            super::context::description(names),
            (schema, validator),
            ToolKind::Context {
                group: group.to_owned(),
                context,
            },
        )
    }

    /// The target of `call` if it is a call of one of the group's handoff
    /// tools among `tools` (of the handoff kind, not merely of that name):
    /// whom `handoff_to` names, or an `OnCondition`'s target.
    pub fn handoff_target<'a>(call: &'a ToolCall, tools: &'a [Tool]) -> Option<&'a str> {
        tools.iter().find_map(|t| match &t.kind {
            ToolKind::Handoff { to } if t.name == call.name => match to {
                Some(to) => Some(to.as_str()),
                None => call.input["agent"].as_str(),
            },
            _ => None,
        })
    }

    /// Whether a run with this `context_type` may use the tool.
    pub fn offered_for(&self, context_type: Option<&str>) -> bool {
        self.context_types.is_empty()
            || context_type.is_some_and(|ct| self.context_types.iter().any(|t| t == ct))
    }

    /// Checks the agent file's `tools[index]`.
    ///
    /// # Errors
    /// A message naming the field (`tools[2].http.url: …`).
    pub fn from_spec(spec: ToolSpec, index: usize) -> Result<Self, String> {
        let at = |field: &str| format!("tools[{index}].{field}");
        if spec.name.is_empty() {
            return Err(format!("{}: must not be empty", at("name")));
        }
        if handoff::reserved(&spec.name) {
            return Err(format!(
                "{}: `{}` is reserved for a group's own tools (`{}`, `{}…`, `{}`, `{}`)",
                at("name"),
                spec.name,
                handoff::HANDOFF_TOOL,
                handoff::TRANSFER_PREFIX,
                super::CONTEXT_TOOL,
                handoff::SPEAKER_TOOL,
            ));
        }
        let default_schema = if spec.builtin.as_deref() == Some("ask_user") {
            ask_user::default_schema()
        } else if spec.builtin.as_deref() == Some("ask_database") {
            database::default_schema()
        } else if spec.builtin.as_deref() == Some("ask_analyst") {
            analyst::default_schema()
        } else {
            serde_json::json!({"type": "object"})
        };
        let schema = spec.input_schema.clone().unwrap_or(default_schema);
        let validator = jsonschema::options()
            .build(&schema)
            .map_err(|e| format!("{}: not a valid JSON Schema: {e}", at("input_schema")))?;
        let kinds = [
            spec.ui.is_some(),
            spec.input_request.is_some(),
            spec.builtin.is_some(),
            spec.http.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(format!(
                "tools[{index}] ({}): set exactly one of ui, input_request, builtin, http",
                spec.name
            ));
        }
        let kind = if let Some(ui) = spec.ui {
            let (component_type, display) =
                ui::from_spec(ui).map_err(|e| format!("{}: {e}", at("ui")))?;
            ToolKind::Ui {
                component_type,
                display,
            }
        } else if let Some(input) = spec.input_request {
            ToolKind::InputRequest {
                prompt_field: input.prompt_field,
                password: input.password,
            }
        } else if spec.builtin.as_deref() == Some("ask_user") {
            ToolKind::InputRequest {
                prompt_field: "prompt".into(),
                password: false,
            }
        } else if spec.builtin.as_deref() == Some("ask_database") {
            ToolKind::AskDatabase
        } else if spec.builtin.as_deref() == Some("ask_analyst") {
            ToolKind::AskAnalyst
        } else if let Some(name) = spec.builtin {
            ToolKind::Builtin(
                Builtin::by_name(&name)
                    .ok_or_else(|| format!("{}: no built-in tool `{name}`", at("builtin")))?,
            )
        } else if let Some(http) = spec.http {
            ToolKind::Http(HttpTool::from_spec(http).map_err(|e| format!("{}.{e}", at("http")))?)
        } else {
            return Err(format!("tools[{index}]: no kind"));
        };
        let inject = inject_paths(spec.inject, &at("inject"))?;
        let preview = match spec.preview {
            Some(_)
                if !matches!(
                    kind,
                    ToolKind::Http(_)
                        | ToolKind::Builtin(_)
                        | ToolKind::AskDatabase
                        | ToolKind::AskAnalyst
                ) =>
            {
                return Err(format!(
                    "{}: only a tool the server runs (http, builtin) can preview its result",
                    at("preview")
                ));
            }
            Some(p) => Some(Preview::from_spec(p).map_err(|e| format!("{}.{e}", at("preview")))?),
            None => None,
        };
        let summary = spec
            .summary
            .map(Summary::from_spec)
            .transpose()
            .map_err(|e| format!("{}.{e}", at("summary")))?;
        if spec
            .category
            .as_deref()
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err(format!("{}: must not be empty", at("category")));
        }
        Ok(Tool {
            name: spec.name,
            description: spec.description.unwrap_or_default(),
            category: spec.category,
            input_schema: schema,
            validator: Arc::new(validator),
            kind,
            requires_approval: spec.requires_approval,
            idempotent: spec.idempotent,
            inject,
            context_types: spec.context_types,
            preview,
            summary,
        })
    }
}

impl Tool {
    /// The tools of an MCP source as its server lists them now, after
    /// `allow`/`deny` (none while the server is down). A tool whose name or
    /// schema no model could take is left out, with a warning.
    pub fn of_mcp(source: &Arc<super::mcp::McpSource>) -> Vec<Tool> {
        source
            .server
            .tools()
            .iter()
            .filter(|t| source.offers(&t.name))
            .filter_map(|t| match Self::mcp(source, t) {
                Ok(tool) => Some(tool),
                Err(why) => {
                    tracing::warn!(server = %source.server.name(), tool = %t.name, "MCP tool left out: {why}");
                    None
                }
            })
            .collect()
    }

    fn mcp(source: &Arc<super::mcp::McpSource>, t: &crate::mcp::McpTool) -> Result<Tool, String> {
        let name = source.prefixed(&t.name);
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!("`{name}` is not a name a model can call"));
        }
        if handoff::reserved(&name) {
            return Err(format!("`{name}` is reserved for a group's own tools"));
        }
        if t.input_schema["type"] != "object" {
            return Err("its inputSchema is not an object's".into());
        }
        if !crate::protocol::limits::json_fits(&t.input_schema, 64 << 10) {
            return Err("its inputSchema is over 64 KiB".into());
        }
        let validator = jsonschema::options()
            .build(&t.input_schema)
            .map_err(|e| format!("its inputSchema is not a valid JSON Schema: {e}"))?;
        let gates = source.gates(&t.name);
        // A description is for a model: the first 8 KiB of it.
        let mut description = t.description.clone();
        if description.len() > 8 << 10 {
            let mut cut = 8 << 10;
            while !description.is_char_boundary(cut) {
                cut -= 1;
            }
            description.truncate(cut);
        }
        let mut tool = Self::built(
            name,
            description,
            (t.input_schema.clone(), validator),
            ToolKind::Mcp {
                source: source.clone(),
                tool: t.name.clone(),
            },
        );
        tool.requires_approval = gates.requires_approval;
        tool.idempotent = gates.idempotent;
        tool.context_types = gates.context_types;
        tool.inject = gates.inject;
        tool.summary = gates.summary;
        tool.category = gates.category;
        Ok(tool)
    }
}
