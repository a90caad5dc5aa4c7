//! What a model is sent besides the conversation: the system prompt (the
//! agent's, the chat's context, the tool list in `json` mode), the tool
//! definitions a run offers, and the history cut to the prompt budget.

use std::collections::BTreeMap;

use serde_json::Value;

use super::build::Agent;
use crate::llm::{Message, ToolDefinition};
use crate::tools::Tool;

/// The system prompt: the agent's (or its `context_prompts` entry for the
/// run's `context_type`), the chat context, and in `json` mode the
/// tool list with seed 002's format instruction.
pub(super) fn system_prompt(
    agent: &Agent,
    context: Option<&Value>,
    context_type: Option<&str>,
    json_mode: bool,
    tools: &[ToolDefinition],
) -> String {
    let mut prompt = context_type
        .and_then(|ct| agent.context_prompts.get(ct))
        .unwrap_or(&agent.system_prompt)
        .clone();
    if let Some(ctx) = context {
        prompt.push_str(&context_block(ctx, context_type));
    }
    prompt.push_str(&mcp_instructions(agent));
    if json_mode && !tools.is_empty() {
        prompt.push_str("\n\nYou can use these tools:\n");
        let line = |t: &ToolDefinition| {
            format!(
                "- {}: {} Parameters (JSON Schema): {}\n",
                t.name, t.description, t.input_schema
            )
        };
        // Seed 002: grouped by category when the agent's tools name any.
        let category = |t: &ToolDefinition| {
            agent
                .tool(&t.name)
                .and_then(|tool| tool.category.as_deref())
        };
        if tools.iter().any(|t| category(t).is_some()) {
            let mut groups: BTreeMap<&str, Vec<&ToolDefinition>> = BTreeMap::new();
            for t in tools {
                groups
                    .entry(category(t).unwrap_or(crate::workflows::DEFAULT_CATEGORY))
                    .or_default()
                    .push(t);
            }
            for (name, group) in groups {
                prompt.push_str(&format!("\n## {name}\n"));
                group.into_iter().for_each(|t| prompt.push_str(&line(t)));
            }
        } else {
            tools.iter().for_each(|t| prompt.push_str(&line(t)));
        }
        prompt.push_str(concat!(
            "\nWhen you need to use a tool, output ONLY a JSON object in this exact format:\n",
            "{\n  \"tool\": \"tool_name\",\n  \"parameters\": { \"param1\": \"value1\" },\n  \"terminate\": false\n}\n",
            "Set \"terminate\" to false if you need to continue working after the tool result.\n",
            "Set \"terminate\" to true if this is your final action or you want to return a response to the user.\n",
            "Otherwise answer in plain text.",
        ));
    }
    prompt
}

/// What each connected MCP server said at `initialize` of how to use it
/// (each cut to `mcp::MAX_INSTRUCTIONS` bytes), naming the server and its
/// tools' prefix.
fn mcp_instructions(agent: &Agent) -> String {
    let mut out = String::new();
    for source in &agent.mcp {
        if let Some(text) = source.server.instructions() {
            out.push_str(&format!(
                "\n\nThe MCP server `{}` (its tools are named `{}…`) says how to use it:\n{}",
                source.server.name(),
                source.prefixed(""),
                text.trim()
            ));
        }
    }
    out
}

/// The tools a run with this `context_type` offers the model.
pub(super) fn definitions(tools: &[Tool], context_type: Option<&str>) -> Vec<ToolDefinition> {
    tools
        .iter()
        .filter(|t| t.offered_for(context_type))
        .map(|t| ToolDefinition {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect()
}

/// Seed 000 §6's context block: a preamble, every `*_id` field pulled out for
/// easy reference, then the compact context JSON.
pub(super) fn context_block(context: &Value, context_type: Option<&str>) -> String {
    let mut block = match context_type {
        Some(ct) => format!("\n\nCurrent context (`{ct}`) of the user's screen:\n"),
        None => "\n\nCurrent context of the user's screen:\n".to_owned(),
    };
    for (key, value) in context.as_object().into_iter().flatten() {
        if let (Some(name), Some(id)) = (key.strip_suffix("_id"), value.as_str()) {
            block.push_str(&format!(
                "**Current {} ID: `{id}`**\n",
                name.replace('_', " ")
            ));
        }
    }
    block.push_str(&format!("```json\n{context}\n```"));
    block
}

/// A rough token estimate: four characters a token, plus a little per message.
fn estimate(text: &str) -> u64 {
    text.chars().count() as u64 / 4 + 4
}

/// A file's share: its text as text; an image or a PDF page costs vendors
/// about 1,600 tokens, a PDF's bytes (base64) about one page per 40 KB.
fn file_cost(f: &crate::llm::File) -> u64 {
    use crate::llm::FileContent;
    match &f.content {
        FileContent::Text(t) => estimate(t),
        FileContent::Base64(data) if f.media_type == "application/pdf" => {
            (data.len() as u64 / 54_000 + 1) * 1_600
        }
        FileContent::Base64(_) => 1_600,
        FileContent::Missing(_) | FileContent::Stored(_) => 40,
    }
}

fn message_cost(m: &Message) -> u64 {
    match m {
        Message::User { text, files } => estimate(text) + files.iter().map(file_cost).sum::<u64>(),
        Message::Peer { text, .. } => estimate(text),
        Message::Assistant { text, tool_calls } => {
            estimate(text)
                + tool_calls
                    .iter()
                    .map(|c| estimate(&c.input.to_string()))
                    .sum::<u64>()
        }
        Message::ToolResult { content, .. } => estimate(content),
    }
}

/// The history cut to the prompt budget: oldest messages go first, the last
/// one always stays, and the kept part starts at a user message or another
/// member's turn (so no tool result is sent without its call).
pub(super) fn fit_budget(messages: &[Message], budget: u64, system_prompt: &str) -> Vec<Message> {
    let mut total = estimate(system_prompt) + messages.iter().map(message_cost).sum::<u64>();
    let mut start = 0;
    while total > budget && start + 1 < messages.len() {
        total -= message_cost(&messages[start]);
        start += 1;
    }
    while start + 1 < messages.len()
        && !matches!(messages[start], Message::User { .. } | Message::Peer { .. })
    {
        start += 1;
    }
    messages[start..].to_vec()
}

#[cfg(test)]
#[path = "prompt_tests.rs"]
mod tests;
