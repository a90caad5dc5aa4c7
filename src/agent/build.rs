//! An agent file built into an [`Agent`] that can run: its provider, its
//! checked tools and template. A group's built form ([`Group`], [`Member`])
//! is here too, since a group is an agent made of agents; `group` checks and
//! builds it.

use std::sync::Arc;

use super::definition::{
    AgentFile, ModelSpec, Price, ProviderKind, SelectionMethod, ToolCallFormat,
};
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
    /// What a user's message sent during a run does by default.
    pub multitask_strategy: crate::protocol::MultitaskStrategy,
    pub run_timeout: std::time::Duration,
    pub prompt_budget_tokens: u64,
    pub max_tool_result_chars: usize,
    pub tool_call_format: ToolCallFormat,
    /// Log the model's streamed reasoning as `chat.reasoning`.
    pub show_reasoning: bool,
    pub price: Option<Price>,
    /// Its model, as usage names it: the file's `model.name`, else its
    /// provider (`scripted`); empty for a group that lends none.
    pub model: String,
    /// What all its runs may use (its file's `quota:`).
    pub quota: crate::config::Quotas,
    pub tools: Vec<Tool>,
    /// MCP servers: their tools are offered as each lists them now.
    pub mcp: Vec<Arc<crate::tools::McpSource>>,
    pub provider: Arc<dyn Provider>,
    /// The client of the agent's HTTP tools.
    pub http: reqwest::Client,
    /// A conversation template: the run walks it instead of calling the model.
    pub template: Option<Arc<Template>>,
    /// A group chat: its members take turns instead of this agent speaking.
    pub group: Option<Arc<Group>>,
    /// Its model is a real one (not `scripted`): it may title its chats.
    pub titles: bool,
    /// An agent served over AG-UI: its turns are that server's runs.
    pub upstream: Option<Arc<crate::upstream::Upstream>>,
}

/// A group chat's members and rules, checked.
pub struct Group {
    pub members: Vec<Member>,
    pub method: SelectionMethod,
    pub max_rounds: u32,
    /// The member (index) that opens every run.
    pub first: Option<usize>,
    /// A member's text containing it ends the run.
    pub marker: Option<String>,
    /// A member's text matching it ends the run.
    pub pattern: Option<regex::Regex>,
    /// `handoff_to`, offered to every member when the file asks for it.
    pub handoff_tool: Option<Tool>,
    /// After member `i` speaks: who is next.
    pub after: std::collections::HashMap<usize, Target>,
    /// The model `auto` asks.
    pub selector: Arc<dyn Provider>,
    pub selector_price: Option<Price>,
    /// Whether the selector is the group's default model (a chat's model
    /// switch replaces it).
    pub selector_default: bool,
    /// The selector's system prompt, `{roles}` and `{agentlist}` filled.
    pub selector_prompt: String,
    /// How often `auto` asks again when the selector names no member.
    pub selector_retries: u32,
    /// Who may speak after whom.
    pub transitions: super::group::graph::Transitions,
    /// The context variables' starting values (`None`: the group has no
    /// context, nor `update_context`).
    pub context: Option<serde_json::Map<String, serde_json::Value>>,
    /// Each member's `OnCondition`s and `OnContextCondition`s (by index).
    pub conditions: Vec<super::group::handoffs::Conditions>,
}

impl Group {
    /// Whether a member's last text `text` ends the run (`termination`).
    pub fn ends(&self, text: &str) -> bool {
        self.marker.as_deref().is_some_and(|m| text.contains(m))
            || self.pattern.as_ref().is_some_and(|p| p.is_match(text))
    }
}

/// One member of a group.
pub struct Member {
    /// Its name on the wire.
    pub name: String,
    pub description: String,
    /// What it runs as: an inline member's own agent, or another file's.
    pub agent: Arc<Agent>,
    /// Whether it runs on the group's default model (a chat's model switch
    /// replaces it).
    pub default_model: bool,
    /// Its turn as nested chats (AG2's `register_nested_chats`); empty: it
    /// speaks itself.
    pub nested: Vec<Nested>,
}

/// One of a member's nested chats.
pub struct Nested {
    /// Who takes the chat (a plain agent or a group).
    pub agent: Arc<Agent>,
    /// The opening message's template (`{message}`, `{carryover}`).
    pub message: String,
    pub summary: super::definition::SummaryMethod,
}

/// Where a handoff goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Member(usize),
    /// Back to the user: the run ends (the user's answer goes back to the
    /// member that handed over, unless `first` opens every run).
    User,
    /// The conversation ends (the next message starts after the member).
    Terminate,
    /// The selection method picks (AG2's group manager target).
    Select,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// How long a run waits for its MCP servers' first connections (all of
/// them together) before it reads their tools: a run started, or a cut run
/// planned, just after the server started.
pub const MCP_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

impl Agent {
    /// The model the run's own speaker is on, as usage names and prices it:
    /// the chat's switched one (`switched`: its name and price) where the
    /// run speaks on it — not a template's walk, not an upstream agent; a
    /// group names it only when it lends its model (its members keep their
    /// prices) — else the agent's own.
    pub fn own_model(
        &self,
        switched: Option<(&str, Option<super::definition::Price>)>,
    ) -> (String, Option<super::definition::Price>) {
        let on_it = self.template.is_none() && self.upstream.is_none();
        match switched {
            Some((name, price)) if on_it && self.group.is_none() => (name.to_owned(), price),
            Some((name, _)) if on_it && !self.model.is_empty() => {
                (name.to_owned(), self.price_of(""))
            }
            _ => (self.model.clone(), self.price_of("")),
        }
    }

    /// The price of what `speaker` says in this agent's runs: a group
    /// member's own; the group's selector's under the group's id (or `""`,
    /// the run's own); else the agent's.
    pub fn price_of(&self, speaker: &str) -> Option<super::definition::Price> {
        match &self.group {
            Some(g) if speaker == self.id || speaker.is_empty() => g.selector_price,
            Some(g) => g
                .members
                .iter()
                .find(|m| m.name == speaker)
                .and_then(|m| m.agent.price),
            None => self.price,
        }
    }

    /// The tools its file declares by name (a group's: its members' too,
    /// and `handoff_to`): a client may know them ahead; an MCP server's,
    /// a client's own and a workflow's are known only when called.
    pub fn declared_tools(&self) -> std::collections::HashSet<String> {
        let mut names: std::collections::HashSet<String> =
            self.tools.iter().map(|t| t.name.clone()).collect();
        if let Some(group) = &self.group {
            for m in &group.members {
                names.extend(m.agent.declared_tools());
            }
            names.extend(group.handoff_tool.iter().map(|t| t.name.clone()));
        }
        names
    }

    /// Builds an agent from the text of an agent file (not a group: those
    /// need the other agents, see `group::build`).
    ///
    /// # Errors
    /// A message naming the field at fault.
    pub fn from_yaml(text: &str, http: &reqwest::Client) -> Result<Self, String> {
        Self::from_file(parse(text)?, http)
    }

    /// Builds an agent from a parsed agent file that is not a group.
    ///
    /// # Errors
    /// A message naming the field at fault.
    pub fn from_file(file: AgentFile, http: &reqwest::Client) -> Result<Self, String> {
        if file.group.is_some() {
            return Err("group: a group needs the other agents (see AgentRegistry)".into());
        }
        if file.ag_ui.is_some() {
            return upstream(file, http);
        }
        if file.idempotent {
            return Err("idempotent: only an agent served over AG-UI (`ag_ui:`) says it".into());
        }
        let model = file
            .model
            .clone()
            .ok_or("model: missing (every agent but a group needs one)")?;
        let provider = provider(&model, http).map_err(|e| format!("model.{e}"))?;
        Self::with_provider(file, model.price, provider, http)
    }

    /// Builds an agent from a parsed file and the provider of its model.
    ///
    /// # Errors
    /// A message naming the field at fault.
    pub fn with_provider(
        file: AgentFile,
        price: Option<Price>,
        provider: Arc<dyn Provider>,
        http: &reqwest::Client,
    ) -> Result<Self, String> {
        if file.id.is_empty() || file.id.len() > 128 {
            return Err("id: must be 1 to 128 characters".into());
        }
        if file.id.contains(crate::protocol::NESTED) {
            return Err(format!(
                "id: `{}` separates a nested chat's speakers (`member{}agent`)",
                crate::protocol::NESTED,
                crate::protocol::NESTED
            ));
        }
        if file.max_turns == 0 {
            return Err("max_turns: must be at least 1".into());
        }
        if file.run_timeout_seconds == 0 {
            return Err("run_timeout_seconds: must be at least 1".into());
        }
        let template = file.template.map(Template::from_spec).transpose()?;
        let quota = file.quota.unwrap_or_default().quotas()?;
        let model = file.model.as_ref().map_or_else(String::new, |m| {
            m.name
                .clone()
                .unwrap_or_else(|| format!("{:?}", m.provider).to_lowercase())
        });
        let titles = template.is_none()
            && file
                .model
                .as_ref()
                .is_some_and(|m| m.provider != ProviderKind::Scripted);

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
        // Last: every other check passed before any server is started.
        let mut mcp: Vec<Arc<crate::tools::McpSource>> = Vec::new();
        for (i, spec) in file.mcp_servers.into_iter().enumerate() {
            if spec.disabled {
                tracing::info!(server = %spec.name, agent = %file.id, "MCP server disabled: not started");
                continue;
            }
            if mcp.iter().any(|m| m.server.name() == spec.name) {
                return Err(format!(
                    "mcp_servers[{i}].name: `{}` is used twice",
                    spec.name
                ));
            }
            mcp.push(Arc::new(crate::tools::McpSource::from_spec(spec, i)?));
        }
        Ok(Agent {
            name: file.name.unwrap_or_else(|| file.id.clone()),
            description: file.description.unwrap_or_default(),
            id: file.id,
            system_prompt: file.system_prompt.unwrap_or_default(),
            context_prompts: file.context_prompts,
            max_turns: file.max_turns,
            starts_first: file.agent_starts_first,
            multitask_strategy: file.multitask_strategy,
            run_timeout: std::time::Duration::from_secs(file.run_timeout_seconds),
            prompt_budget_tokens: file.prompt_budget_tokens,
            max_tool_result_chars: file.max_tool_result_chars,
            tool_call_format: file.tool_call_format,
            show_reasoning: file.show_reasoning,
            price,
            model,
            quota,
            tools,
            mcp,
            provider,
            http: http.clone(),
            template: template.map(Arc::new),
            group: None,
            titles,
            upstream: None,
        })
    }

    /// The tools a run may call now: the file's, then its MCP servers' as
    /// they list them now (a name the file uses stays the file's).
    pub fn tools_now(&self) -> std::borrow::Cow<'_, [Tool]> {
        if self.mcp.is_empty() {
            return std::borrow::Cow::Borrowed(&self.tools);
        }
        let mut tools = self.tools.clone();
        for source in &self.mcp {
            for tool in Tool::of_mcp(source) {
                if !tools.iter().any(|t| t.name == tool.name) {
                    tools.push(tool);
                }
            }
        }
        std::borrow::Cow::Owned(tools)
    }

    /// Waits (until `until` at most) for its MCP servers still making their
    /// first connection, so a run started just after the server did sees
    /// their tools; a server up, down or failed is not waited for.
    pub async fn mcp_settled(&self, until: tokio::time::Instant) {
        for source in &self.mcp {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            source.server.settled(left).await;
        }
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Parses the text of an agent file.
///
/// # Errors
/// The YAML reader's message (it names the field).
pub fn parse(text: &str) -> Result<AgentFile, String> {
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}

/// The provider of a `model:` section.
///
/// # Errors
/// A message naming the field under `model.` at fault.
pub fn provider(model: &ModelSpec, http: &reqwest::Client) -> Result<Arc<dyn Provider>, String> {
    Ok(match model.provider {
        ProviderKind::Scripted => Arc::new(ScriptedProvider::new(
            model
                .script
                .clone()
                .ok_or("script: the scripted provider needs rules")?,
        )),
        kind => build_provider(
            kind,
            model
                .name
                .clone()
                .ok_or("name: this provider needs a model name")?,
            model.base_url.clone(),
            model.api_key_env.clone(),
            model.inputs.as_deref(),
            http,
        )?,
    })
}

/// Builds an agent served over AG-UI.
///
/// # Errors
/// A field that does not go with `ag_ui:`, or one of `ag_ui:` at fault.
fn upstream(mut file: AgentFile, http: &reqwest::Client) -> Result<Agent, String> {
    let Some(mut spec) = file.ag_ui.take() else {
        return Err("ag_ui: missing".into());
    };
    // Its model, prompt and tools are the upstream agent's own.
    let theirs = [
        ("model", file.model.is_some()),
        ("system_prompt", file.system_prompt.is_some()),
        ("context_prompts", !file.context_prompts.is_empty()),
        ("tools", !file.tools.is_empty()),
        ("mcp_servers", !file.mcp_servers.is_empty()),
        ("template", file.template.is_some()),
    ];
    if let Some((field, _)) = theirs.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{field}: an agent served over AG-UI (`ag_ui:`) has its own; remove `{field}`"
        ));
    }
    spec.idempotent |= file.idempotent;
    let upstream =
        crate::upstream::Upstream::new(&file.id, &spec).map_err(|e| format!("ag_ui.{e}"))?;
    let provider: Arc<dyn Provider> = Arc::new(NoModel(file.id.clone()));
    let mut agent = Agent::with_provider(file, None, provider, http)?;
    agent.upstream = Some(Arc::new(upstream));
    Ok(agent)
}

/// The model of an agent that has none of agentwire's: what would ask it
/// (a chat's model switch, a tool that asks the agent's model) is told so.
struct NoModel(String);

#[async_trait::async_trait]
impl Provider for NoModel {
    async fn stream_chat(
        &self,
        _: crate::llm::ChatRequest,
    ) -> Result<
        futures_util::stream::BoxStream<'static, crate::llm::StreamEvent>,
        crate::llm::ProviderError,
    > {
        Err(crate::llm::ProviderError {
            code: crate::protocol::ErrorCode::AgentInitializationFailed,
            message: format!(
                "agent `{}` is served over AG-UI: it has no model of agentwire's to ask",
                self.0
            ),
            recoverable: false,
        })
    }
}
