//! An agent file with `ag_ui:` built into an [`Agent`]: checked, its
//! [`Upstream`] made, and a model that says it has none.

use std::sync::Arc;

use futures_util::stream::BoxStream;

use crate::agent::build::Agent;
use crate::agent::definition::AgentFile;
use crate::llm::{ChatRequest, Provider, ProviderError, StreamEvent};
use crate::protocol::ErrorCode;
use crate::upstream::Upstream;

/// Builds an agent served over AG-UI.
///
/// # Errors
/// A field that does not go with `ag_ui:`, or one of `ag_ui:` at fault.
pub(in crate::agent) fn build(
    mut file: AgentFile,
    http: &reqwest::Client,
) -> Result<Agent, String> {
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
    let upstream = Upstream::new(&file.id, &spec, http).map_err(|e| format!("ag_ui.{e}"))?;
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
        _: ChatRequest,
    ) -> Result<BoxStream<'static, StreamEvent>, ProviderError> {
        Err(ProviderError {
            code: ErrorCode::AgentInitializationFailed,
            message: format!(
                "agent `{}` is served over AG-UI: it has no model of agentwire's to ask",
                self.0
            ),
            recoverable: false,
        })
    }
}
