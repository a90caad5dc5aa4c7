//! The workflow file format, as written.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::tools::spec::{HttpSpec, ToolSpec};

/// One workflow file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowFile {
    /// What clients invoke it by.
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// The UI's grouping (`General` when absent).
    #[serde(default)]
    pub category: Option<String>,
    /// JSON Schema of the parameters, `type: object` (`{type: object}` when absent).
    #[serde(default)]
    pub parameters: Option<Value>,
    /// Ask the user before it runs.
    #[serde(default)]
    pub requires_approval: bool,
    /// Who may see and run it; everyone when absent.
    #[serde(default)]
    pub allow: Option<AllowSpec>,
    /// One HTTP call.
    #[serde(default)]
    pub http: Option<HttpSpec>,
    /// A message for the chat's agent; `{name}` is a parameter.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Tool calls in order, of the tools below.
    #[serde(default)]
    pub steps: Vec<StepSpec>,
    /// The tools `steps` call (the format of an agent file's tools).
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
}

/// Who may run a workflow: any listed user, or anyone whose token has one
/// of the listed values in a claim (a claim holding a list matches on any
/// of its items).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowSpec {
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub claims: BTreeMap<String, Vec<String>>,
}

/// One step: a tool and its input, `"{name}"` strings filled from the
/// parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    pub tool: String,
    #[serde(default)]
    pub input: Value,
}
