//! Who takes a speaker's turn: the agentic loop over agentwire's model
//! (`speak`), or, for an agent served over AG-UI, its upstream runs
//! (`upstream`). Both a plain run and a group's member go through here;
//! [`alone`] is a plain agent's whole run (or nested chat).

use super::build::Agent;
use super::definition::ToolCallFormat;
use super::prompt::{definitions, system_prompt};
use super::speak::{RunSpec, Spoke, Voice, speak};
use super::tally::{Spent, Tally};
use crate::link::{Gone, RunLink};
use crate::llm::{Message, Usage};
use crate::protocol::RunEndReason;
use crate::tools::CallEnv;

/// Runs `voice`'s turn, whoever answers for it.
pub(super) async fn take_turn(
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    messages: &mut Vec<Message>,
    usage: &mut Usage,
) -> Result<Spoke, Gone> {
    match &voice.agent.upstream {
        Some(up) => super::upstream::speak(up, voice, env, messages, usage).await,
        None => speak(voice, env, messages, usage).await,
    }
}

/// One agent, speaking on `messages` (which its turns extend) until it
/// answers: a run's, or a nested chat's (`chosen`: how its turn is
/// announced; the link names it inside the chat).
pub(super) async fn alone(
    spec: &RunSpec,
    agent: &Agent,
    link: &RunLink,
    tally: &mut Tally,
    messages: &mut Vec<Message>,
    chosen: Option<(&'static str, Option<String>)>,
) -> Result<RunEndReason, Gone> {
    let provider = spec.provider.as_deref().unwrap_or(agent.provider.as_ref());
    let json_mode = agent.tool_call_format == ToolCallFormat::Json;
    agent
        .mcp_settled(tokio::time::Instant::now() + super::MCP_SETTLE)
        .await;
    let tools = crate::tools::with_client_tools(&agent.tools_now(), &spec.client_tools);
    let offered = definitions(&tools, spec.context_type.as_deref());
    let mut prompt = system_prompt(
        agent,
        spec.context.as_ref(),
        spec.context_type.as_deref(),
        json_mode,
        &offered,
    );
    if let Some(db) = &spec.database {
        prompt.push_str(db);
    }
    let name = link.named(&agent.id);
    let voice = Voice {
        name: &name,
        agent,
        tools: &tools,
        provider,
        system_prompt: prompt,
        chosen,
        resumed: spec.resumed.as_ref(),
        thread: spec.chat_id,
        state: spec.agent_state.get(&name),
    };
    let Spent { model, tools, .. } = tally.of(&name, spec.own_price());
    let env = spec.call_env(link, tools, agent, provider);
    Ok(match take_turn(&voice, &env, messages, model).await? {
        Spoke::End(reason) => reason,
        Spoke::Done { .. } => RunEndReason::Completed,
    })
}
