//! An agent file built into an [`Agent`] that can run: its provider, its
//! checked tools and template.

use std::sync::Arc;

use super::definition::{AgentFile, Price, ProviderKind, ToolCallFormat};
use super::providers::build_provider;
use super::scripted::ScriptedProvider;
use crate::llm::Provider;
use crate::templates::Template;
use crate::tools::Tool;

/// An agent, ready to run.
pub struct Agent {
    pub id: String,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    /// `context_type` → the prompt that replaces `system_prompt` for it.
    pub context_prompts: std::collections::BTreeMap<String, String>,
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
    pub template: Option<Arc<Template>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
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
        let template = file.template.map(Template::from_spec).transpose()?;

        if let Some(empty) = file.context_prompts.keys().find(|k| k.is_empty()) {
            return Err(format!(
                "context_prompts.{empty}: a context_type must not be empty"
            ));
        }
        let mut tools = Vec::with_capacity(file.tools.len());
        for (i, spec) in file.tools.into_iter().enumerate() {
            let tool = Tool::from_spec(spec, i)?;
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
            context_prompts: file.context_prompts,
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
