//! User-invoked workflows (seed 002): what a user runs by name with
//! parameters from a form, as opposed to the tools a model decides to call.
//! A workflow is a YAML file in the agents folder's `workflows/` subfolder:
//! an id, a title, a category (the UI's grouping), a JSON Schema for its
//! parameters, who may run it, and what it does: one HTTP call, a prompt the
//! chat's agent answers, or a fixed sequence of tool calls.
//!
//! This module owns the files ([`WorkflowFile`]), their checks into a
//! [`Workflow`], the [`WorkflowRegistry`], parameter validation and the
//! templates that fill parameters in. Running one inside a chat is a run
//! shape of `agent` (`agent/workflow.rs`). Uses `tools` (tool and HTTP
//! specs).

mod spec;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::tools::{HttpTool, Tool};
pub use spec::{AllowSpec, StepSpec, WorkflowFile};

/// A workflow, checked.
#[derive(Debug)]
pub struct Workflow {
    pub id: String,
    pub title: String,
    pub description: String,
    pub category: String,
    /// The parameters' JSON Schema, as written (what a UI renders).
    pub parameters: Value,
    validator: jsonschema::Validator,
    pub requires_approval: bool,
    pub allow: Option<AllowSpec>,
    pub action: Action,
}

/// What a workflow does.
#[derive(Debug)]
pub enum Action {
    /// One HTTP call: the parameters as its body (query for GET/DELETE), the
    /// caller's bearer forwarded.
    Http(HttpTool),
    /// A user message for the chat's agent, parameters filled in.
    Prompt(String),
    /// Tool calls one after another, inputs filled from the parameters.
    Steps {
        steps: Vec<StepSpec>,
        tools: Vec<Tool>,
    },
}

impl Action {
    /// Its name in listings.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http(_) => "http",
            Self::Prompt(_) => "prompt",
            Self::Steps { .. } => "steps",
        }
    }
}

/// A workflow invoked in a chat: what its run is given.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub workflow: Arc<Workflow>,
    /// Already checked against the workflow's schema.
    pub parameters: Value,
    /// The invocation's id: the `corr` of its `chat.tool_call` (`workflow_…`).
    pub corr: String,
}

/// The `component_type` of a workflow's invocation in the log.
pub const WORKFLOW: &str = "workflow";

/// What every invocation's `corr` starts with; its steps' calls are that
/// `corr` plus `.1`, `.2`, ….
pub const CORR_PREFIX: &str = "workflow_";

/// The category of a workflow that names none.
pub const DEFAULT_CATEGORY: &str = "General";

impl Workflow {
    /// Checks a parsed workflow file.
    ///
    /// # Errors
    /// A message naming the field at fault.
    pub fn from_file(file: WorkflowFile) -> Result<Self, String> {
        let valid_id = (1..=128).contains(&file.id.len())
            && file
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_id {
            return Err("id: must be 1 to 128 ASCII letters, digits, `_`, `-` or `.`".into());
        }
        if file.id == "categories" {
            return Err("id: `categories` is reserved (GET /v1/workflows/categories)".into());
        }
        if file
            .allow
            .as_ref()
            .is_some_and(|a| a.users.is_empty() && a.claims.is_empty())
        {
            return Err("allow: name at least one user or claim (or leave `allow` out)".into());
        }
        let parameters = file
            .parameters
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err("parameters: must be a JSON Schema with `type: object`".into());
        }
        let validator = jsonschema::options()
            .build(&parameters)
            .map_err(|e| format!("parameters: not a valid JSON Schema: {e}"))?;
        let declared: Vec<&String> = parameters["properties"]
            .as_object()
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        if let Some(prompt) = &file.prompt {
            check_placeholders(prompt, &declared, "prompt")?;
        }
        for (i, step) in file.steps.iter().enumerate() {
            for text in strings(&step.input) {
                check_placeholders(text, &declared, &format!("steps[{i}].input"))?;
            }
        }
        let kinds = [
            file.http.is_some(),
            file.prompt.is_some(),
            !file.steps.is_empty(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err("set exactly one of http, prompt, steps".into());
        }
        if !file.tools.is_empty() && file.steps.is_empty() {
            return Err("tools: only `steps` use tools".into());
        }
        let action = if let Some(http) = file.http {
            Action::Http(HttpTool::from_spec(http).map_err(|e| format!("http.{e}"))?)
        } else if let Some(prompt) = file.prompt {
            if prompt.trim().is_empty() {
                return Err("prompt: must not be empty".into());
            }
            Action::Prompt(prompt)
        } else {
            let mut tools: Vec<Tool> = Vec::with_capacity(file.tools.len());
            for (i, spec) in file.tools.into_iter().enumerate() {
                if !spec.context_types.is_empty() {
                    return Err(format!(
                        "tools[{i}].context_types: a workflow's steps run with no context_type"
                    ));
                }
                let tool = Tool::from_spec(spec, i)?;
                if tools.iter().any(|t| t.name == tool.name) {
                    return Err(format!("tools[{i}].name: `{}` is defined twice", tool.name));
                }
                tools.push(tool);
            }
            for (i, step) in file.steps.iter().enumerate() {
                if !tools.iter().any(|t| t.name == step.tool) {
                    return Err(format!(
                        "steps[{i}].tool: `{}` is not one of this workflow's tools",
                        step.tool
                    ));
                }
            }
            Action::Steps {
                steps: file.steps,
                tools,
            }
        };
        let category = file.category.unwrap_or_else(|| DEFAULT_CATEGORY.into());
        if category.trim().is_empty() {
            return Err("category: must not be empty".into());
        }
        Ok(Self {
            title: file.title.unwrap_or_else(|| file.id.clone()),
            id: file.id,
            description: file.description.unwrap_or_default(),
            category,
            parameters,
            validator,
            requires_approval: file.requires_approval,
            allow: file.allow,
            action,
        })
    }

    /// Whether `user` (with the claims of their token) may see and run it.
    pub fn allows(&self, user: &str, claims: &Map<String, Value>) -> bool {
        let Some(allow) = &self.allow else {
            return true;
        };
        if allow.users.iter().any(|u| u == user) {
            return true;
        }
        allow.claims.iter().any(|(name, wanted)| {
            let held = match claims.get(name) {
                Some(Value::Array(values)) => values.clone(),
                Some(v) => vec![v.clone()],
                None => return false,
            };
            held.iter().any(|h| {
                let h = h.as_str().map_or_else(|| h.to_string(), str::to_owned);
                wanted.contains(&h)
            })
        })
    }

    /// `parameters` with the schema's top-level `default`s filled in where a
    /// property is missing (as a form would).
    pub fn with_defaults(&self, mut parameters: Value) -> Value {
        let defaults = self.parameters["properties"].as_object();
        if let (Some(given), Some(props)) = (parameters.as_object_mut(), defaults) {
            for (name, prop) in props {
                if let Some(default) = prop.get("default")
                    && !given.contains_key(name)
                {
                    given.insert(name.clone(), default.clone());
                }
            }
        }
        parameters
    }

    /// The prompt a prompt workflow sends with these parameters.
    pub fn prompt(&self, parameters: &Value) -> Option<String> {
        match &self.action {
            Action::Prompt(template) => Some(fill_text(template, parameters)),
            _ => None,
        }
    }

    /// The parameters' faults, each `(JSON Pointer, message)`; empty: valid.
    pub fn check(&self, parameters: &Value) -> Vec<(String, String)> {
        self.validator
            .iter_errors(parameters)
            .map(|e| (e.instance_path().to_string(), e.to_string()))
            .collect()
    }
}

/// Every workflow, by id.
#[derive(Debug, Default, Clone)]
pub struct WorkflowRegistry {
    workflows: BTreeMap<String, Arc<Workflow>>,
}

/// A bad workflow file, naming the file and the field.
#[derive(Debug, thiserror::Error)]
#[error("workflow file {file}: {message}")]
pub struct WorkflowFileError {
    pub file: PathBuf,
    pub message: String,
}

impl WorkflowRegistry {
    /// Every `*.yaml`/`*.yml` file in `dir` (none when it does not exist).
    ///
    /// # Errors
    /// A bad file (named, with the field), a duplicate id, an unreadable folder.
    pub fn load(dir: &Path) -> Result<Self, WorkflowFileError> {
        let paths = match crate::config::yaml_files(dir) {
            Ok(paths) => paths,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(WorkflowFileError {
                    file: dir.to_owned(),
                    message: format!("cannot read the workflows folder: {e}"),
                });
            }
        };
        let mut workflows = BTreeMap::new();
        for path in paths {
            let fail = |message: String| WorkflowFileError {
                file: path.clone(),
                message: message.replace("<input>", &path.display().to_string()),
            };
            let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
            let file: WorkflowFile =
                serde_saphyr::from_str(&text).map_err(|e| fail(e.to_string()))?;
            let workflow = Workflow::from_file(file).map_err(fail)?;
            if workflows.contains_key(&workflow.id) {
                return Err(fail(format!("id: `{}` is already defined", workflow.id)));
            }
            workflows.insert(workflow.id.clone(), Arc::new(workflow));
        }
        Ok(Self { workflows })
    }

    /// The workflow `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Workflow>> {
        self.workflows.get(id).cloned()
    }

    /// Every workflow, by id.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Workflow>> {
        self.workflows.values()
    }
}

/// The first `{name}` placeholder of `text`: its byte offset and name. A
/// name is ASCII letters, digits, `_`, `-` and `.`; other braces are text
/// (JSON in a prompt stays as written).
fn next_placeholder(text: &str) -> Option<(usize, &str)> {
    let mut from = 0;
    while let Some(open) = text[from..].find('{').map(|i| from + i) {
        let after = &text[open + 1..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            .count();
        if len > 0 && after.as_bytes().get(len) == Some(&b'}') {
            return Some((open, &after[..len]));
        }
        from = open + 1;
    }
    None
}

/// Every placeholder name of `text`, in order.
fn placeholders(mut text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    while let Some((open, name)) = next_placeholder(text) {
        names.push(name);
        text = &text[open + name.len() + 2..];
    }
    names
}

/// Checks that every placeholder of `text` names a parameter.
fn check_placeholders(text: &str, declared: &[&String], at: &str) -> Result<(), String> {
    match placeholders(text)
        .into_iter()
        .find(|name| !declared.iter().any(|d| d == name))
    {
        None => Ok(()),
        Some(name) if declared.is_empty() => Err(format!(
            "{at}: `{{{name}}}` is not a parameter (this workflow declares none under parameters.properties)"
        )),
        Some(name) => Err(format!(
            "{at}: `{{{name}}}` is not a parameter (parameters.properties has {})",
            declared
                .iter()
                .map(|d| format!("`{d}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Every string of a JSON template.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// What is left of `rest` once an empty value took a placeholder's place
/// (its end in `out`): the gap it leaves is closed — the line it had to
/// itself goes (and a blank line it doubled), a space beside it goes.
fn close_gap<'a>(out: &mut String, rest: &'a str) -> &'a str {
    if out.is_empty() || out.ends_with('\n') {
        let after = rest.trim_start_matches([' ', '\t']);
        return match after.strip_prefix('\n') {
            Some(next) if out.is_empty() => next.trim_start_matches('\n'),
            Some(next) if out.ends_with("\n\n") => next.strip_prefix('\n').unwrap_or(next),
            Some(next) => next,
            None => after,
        };
    }
    let closes = rest
        .chars()
        .next()
        .is_none_or(|c| c.is_whitespace() || ".,;:!?)]".contains(c));
    if closes {
        out.truncate(out.trim_end_matches([' ', '\t']).len());
    }
    rest
}

/// Fills `{name}` placeholders of a text with the parameters (strings as
/// they are, anything else as JSON); a parameter not given (or null, or an
/// empty string) leaves nothing, and no double space or blank line either.
/// One scan of the template: a value is never read for placeholders itself
/// (else a value naming another could multiply the text).
pub fn fill_text(template: &str, parameters: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some((open, name)) = next_placeholder(rest) {
        out.push_str(&rest[..open]);
        rest = &rest[open + name.len() + 2..];
        match parameters.get(name) {
            None | Some(Value::Null) => rest = close_gap(&mut out, rest),
            Some(Value::String(s)) if s.is_empty() => rest = close_gap(&mut out, rest),
            Some(Value::String(s)) => out.push_str(s),
            Some(value) => out.push_str(&value.to_string()),
        }
    }
    out.push_str(rest);
    out
}

/// Fills every string of a JSON template: a string that is exactly
/// `{name}` becomes that parameter's value (of its own type), others get
/// [`fill_text`]; a parameter that was not given becomes `null`.
pub fn fill_json(template: &Value, parameters: &Value) -> Value {
    match template {
        Value::String(s) => match next_placeholder(s) {
            Some((0, name)) if name.len() + 2 == s.len() && parameters.as_object().is_some() => {
                parameters.get(name).cloned().unwrap_or(Value::Null)
            }
            _ => Value::String(fill_text(s, parameters)),
        },
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| fill_json(v, parameters)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill_json(v, parameters)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests;
