//! Agents: their definitions, the model seam, and the run loop.
//!
//! Owns agent files ([`definition`]), the [`Provider`] trait and its
//! implementations, built-in tools, and [`runtime`], which drives one run and
//! talks to its chat only through a [`link::RunLink`]. Uses `protocol`;
//! knows nothing of sessions, stores or transports.

pub mod builtin;
pub mod definition;
mod http_tool;
pub mod link;
mod models;
pub mod runtime;
mod scripted;
pub mod template;
mod tools;
mod turn;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

pub use crate::llm::Provider;
pub use http_tool::HttpTool;
pub use models::{ModelEntry, ModelRegistry};
pub use scripted::ScriptedProvider;
pub use tools::APPROVAL;

use crate::config::ModelConfig;
use crate::llm::{Anthropic, Endpoint, Gemini, Ollama, OpenAi};
use crate::protocol::Display;
use builtin::Builtin;
use definition::{AgentFile, Price, ProviderKind, ToolCallFormat, ToolSpec};

/// The `demo` agent, built into the binary.
const DEMO: &str = include_str!("demo.yaml");

/// Where a UI tool's component type comes from.
#[derive(Debug, Clone)]
pub enum ComponentType {
    Fixed(String),
    FromInput(String),
}

/// What a tool does when called.
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
}

/// A tool, ready to validate and run.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub validator: Arc<Validator>,
    pub kind: ToolKind,
    /// Ask the user before running.
    pub requires_approval: bool,
    /// `(argument, path in the chat context)` pairs filled before validation.
    pub inject: Vec<(String, Vec<String>)>,
    /// The `context_type`s it is offered for; empty: all.
    pub context_types: Vec<String>,
}

impl Tool {
    /// Whether a run with this `context_type` may use the tool.
    pub fn offered_for(&self, context_type: Option<&str>) -> bool {
        self.context_types.is_empty()
            || context_type.is_some_and(|ct| self.context_types.iter().any(|t| t == ct))
    }
}

/// An agent, ready to run.
pub struct Agent {
    pub id: String,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    pub max_turns: u32,
    pub starts_first: bool,
    pub run_timeout: std::time::Duration,
    pub prompt_budget_tokens: u64,
    pub max_tool_result_chars: usize,
    pub tool_call_format: ToolCallFormat,
    pub price: Option<Price>,
    pub tools: Vec<Tool>,
    pub provider: Arc<dyn Provider>,
    /// The client of the agent's HTTP tools.
    pub http: reqwest::Client,
    /// A conversation template: the run walks it instead of calling the model.
    pub template: Option<Arc<template::Template>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A bad agent file, naming the file and the field.
#[derive(Debug, thiserror::Error)]
#[error("agent file {file}: {message}")]
pub struct AgentFileError {
    pub file: PathBuf,
    pub message: String,
}

fn tool_from_spec(spec: ToolSpec, index: usize) -> Result<Tool, String> {
    let at = |field: &str| format!("tools[{index}].{field}");
    if spec.name.is_empty() {
        return Err(format!("{}: must not be empty", at("name")));
    }
    let default_schema = if spec.builtin.as_deref() == Some("ask_user") {
        serde_json::json!({
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The question for the user"}},
            "required": ["prompt"],
        })
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
        let component_type = match (ui.component_type, ui.component_type_from) {
            (Some(c), None) => ComponentType::Fixed(c),
            (None, Some(field)) => ComponentType::FromInput(field),
            _ => {
                return Err(format!(
                    "{}: set exactly one of component_type, component_type_from",
                    at("ui")
                ));
            }
        };
        ToolKind::Ui {
            component_type,
            display: ui.display,
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
    let mut inject = Vec::new();
    for (arg, path) in spec.inject {
        let Some(rest) = path.strip_prefix("context.") else {
            return Err(format!(
                "{}: `{path}` must start with `context.`",
                at(&format!("inject.{arg}"))
            ));
        };
        inject.push((arg, rest.split('.').map(str::to_owned).collect()));
    }
    Ok(Tool {
        name: spec.name,
        description: spec.description.unwrap_or_default(),
        input_schema: schema,
        validator: Arc::new(validator),
        kind,
        requires_approval: spec.requires_approval,
        inject,
        context_types: spec.context_types,
    })
}

impl Agent {
    /// Builds an agent from the text of an agent file.
    ///
    /// # Errors
    /// A message naming the field at fault.
    pub fn from_yaml(text: &str, http: &reqwest::Client) -> Result<Self, String> {
        let file: AgentFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if file.id.is_empty() || file.id.len() > 128 {
            return Err("id: must be 1 to 128 characters".into());
        }
        if file.max_turns == 0 {
            return Err("max_turns: must be at least 1".into());
        }
        if file.run_timeout_seconds == 0 {
            return Err("run_timeout_seconds: must be at least 1".into());
        }
        let model = file.model;
        let provider: Arc<dyn Provider> = match model.provider {
            ProviderKind::Scripted => Arc::new(ScriptedProvider::new(
                model
                    .script
                    .clone()
                    .ok_or("model.script: the scripted provider needs rules")?,
            )),
            kind => build_provider(
                kind,
                model
                    .name
                    .clone()
                    .ok_or("model.name: this provider needs a model name")?,
                model.base_url.clone(),
                model.api_key_env.clone(),
                http,
            )
            .map_err(|e| format!("model.{e}"))?,
        };
        let template = file
            .template
            .map(template::Template::from_spec)
            .transpose()?;

        let mut tools = Vec::with_capacity(file.tools.len());
        for (i, spec) in file.tools.into_iter().enumerate() {
            let tool = tool_from_spec(spec, i)?;
            if tools.iter().any(|t: &Tool| t.name == tool.name) {
                return Err(format!("tools[{i}].name: `{}` is defined twice", tool.name));
            }
            tools.push(tool);
        }
        Ok(Agent {
            name: file.name.unwrap_or_else(|| file.id.clone()),
            description: file.description.unwrap_or_default(),
            id: file.id,
            system_prompt: file.system_prompt.unwrap_or_default(),
            max_turns: file.max_turns,
            starts_first: file.agent_starts_first,
            run_timeout: std::time::Duration::from_secs(file.run_timeout_seconds),
            prompt_budget_tokens: file.prompt_budget_tokens,
            max_tool_result_chars: file.max_tool_result_chars,
            tool_call_format: file.tool_call_format,
            price: model.price,
            tools,
            provider,
            http: http.clone(),
            template: template.map(Arc::new),
        })
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// The default endpoint of each HTTP provider.
fn default_base_url(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "https://api.openai.com/v1",
        ProviderKind::Anthropic => "https://api.anthropic.com",
        ProviderKind::Gemini => "https://generativelanguage.googleapis.com",
        ProviderKind::Ollama | ProviderKind::Scripted => "http://127.0.0.1:11434",
    }
}

/// An HTTP provider of `kind` for model `name`.
///
/// # Errors
/// A message naming the field (`base_url: …`).
pub fn build_provider(
    kind: ProviderKind,
    name: String,
    base_url: Option<String>,
    api_key_env: Option<String>,
    http: &reqwest::Client,
) -> Result<Arc<dyn Provider>, String> {
    let base = base_url.unwrap_or_else(|| default_base_url(kind).to_owned());
    reqwest::Url::parse(&base).map_err(|e| format!("base_url: {e}"))?;
    let endpoint = Endpoint {
        client: http.clone(),
        base_url: base.trim_end_matches('/').to_owned(),
        model: name,
        api_key_env,
    };
    Ok(match kind {
        ProviderKind::Openai => Arc::new(OpenAi::new(endpoint)),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(endpoint)),
        ProviderKind::Gemini => Arc::new(Gemini::new(endpoint)),
        ProviderKind::Ollama => Arc::new(Ollama::new(endpoint)),
        ProviderKind::Scripted => {
            return Err("provider: scripted needs an agent file's script".into());
        }
    })
}

/// Every agent the server knows, by id.
#[derive(Debug, Clone, Default)]
pub struct AgentRegistry {
    agents: HashMap<String, Arc<Agent>>,
    models: ModelRegistry,
}

impl AgentRegistry {
    /// The built-in `demo` plus every `*.yaml`/`*.yml` file in `dir`.
    ///
    /// # Errors
    /// A bad file (named, with the field), a duplicate id, or an unreadable
    /// folder. A missing folder is an error only when `required`.
    pub fn load(
        dir: &Path,
        required: bool,
        models: &[ModelConfig],
    ) -> Result<Self, AgentFileError> {
        let mut agents = HashMap::new();
        let http = crate::llm::http_client();
        let models =
            ModelRegistry::from_config(models, &http).map_err(|message| AgentFileError {
                file: "agentwire.toml".into(),
                message: format!("models: {message}"),
            })?;
        let demo = Agent::from_yaml(DEMO, &http).map_err(|message| AgentFileError {
            file: "<built-in demo>".into(),
            message,
        })?;
        agents.insert(demo.id.clone(), Arc::new(demo));
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                return Ok(Self { agents, models });
            }
            Err(e) => {
                return Err(AgentFileError {
                    file: dir.to_owned(),
                    message: format!("cannot read the agents folder: {e}"),
                });
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        paths.sort();
        for path in paths {
            let fail = |message: String| AgentFileError {
                file: path.clone(),
                message,
            };
            let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
            // The YAML reader names its source `<input>` in its snippets.
            let agent = Agent::from_yaml(&text, &http)
                .map_err(|m| fail(m.replace("<input>", &path.display().to_string())))?;
            if agents.contains_key(&agent.id) {
                return Err(fail(format!("id: `{}` is already defined", agent.id)));
            }
            agents.insert(agent.id.clone(), Arc::new(agent));
        }
        Ok(Self { agents, models })
    }

    /// The agent with that id.
    pub fn get(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents.get(id).cloned()
    }

    /// The models chats may switch to.
    pub fn models(&self) -> &ModelRegistry {
        &self.models
    }

    /// Every agent, sorted by id.
    pub fn all(&self) -> Vec<Arc<Agent>> {
        let mut all: Vec<_> = self.agents.values().cloned().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all
    }

    /// Every agent id, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<_> = self.agents.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
