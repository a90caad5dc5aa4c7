//! Group chats (seed 001, aligned with AG2's group chat): an agent file with
//! a `group:` section is a set of members that take turns in one
//! conversation. This file checks the section and builds the group's
//! [`Agent`] (its [`Group`]); `select` chooses each turn's speaker (the
//! method, handoffs, `after` rules); `run` is the loop: choose, let the member
//! speak (`speak`) on its own view of the shared transcript, stop on the
//! termination marker, a handoff to the user or `max_rounds`.

pub mod expr;
pub(super) mod graph;
pub(super) mod handoffs;
mod nested;
mod run;
mod select;
mod view;

/// How the request ids of a group's "who speaks next?" to the user begin.
pub const SPEAKER_REQUEST: &str = "speaker_";

pub use crate::tools::SPEAKER_TOOL;

use std::collections::HashMap;
use std::sync::Arc;

use super::build::{Agent, Group, Member, Target, provider};
use super::definition::{AgentFile, SelectionMethod};
use crate::llm::Provider;
use crate::tools::{TO_USER, Tool};

pub(super) use run::run;

/// The longest member name (OpenAI's `name` field allows 64 characters).
const MAX_NAME: usize = 64;

/// AG2's default selector prompt (`select_speaker_message_template`).
const SELECTOR_PROMPT: &str = "You are in a role play game. The following roles are available:\n{roles}.\n\
Read the following conversation.\nThen select the next role from {agentlist} to play. Only return the role.";

/// Builds the agent of a group file; `resolve` finds the agent file a
/// member names (`false`) or a nested chat names (`true`: a group may take
/// one); an error says why there is none.
///
/// # Errors
/// A message naming the field at fault (`group.members[1].model: …`).
pub(super) fn build(
    file: AgentFile,
    http: &reqwest::Client,
    resolve: impl Fn(&str, bool) -> Result<Arc<Agent>, String>,
) -> Result<Agent, String> {
    let Some(spec) = file.group.clone() else {
        return Agent::from_file(file, http);
    };
    if !file.tools.is_empty() {
        return Err("tools: a group's tools belong to its members (group.members[].tools)".into());
    }
    if !file.mcp_servers.is_empty() {
        return Err(
            "mcp_servers: a group's tools belong to its members (a member that is another agent \
             file keeps that file's mcp_servers)"
                .into(),
        );
    }
    if file.template.is_some() {
        return Err("template: a group cannot walk a template".into());
    }
    if spec.members.is_empty() {
        return Err("group.members: a group needs at least one member".into());
    }
    if spec.max_rounds < 2 {
        return Err(
            "group.max_rounds: must be at least 2 (the run's opening message is the first round, as in AG2)"
                .into(),
        );
    }
    let default = match &file.model {
        Some(m) => Some((
            provider(m, http).map_err(|e| format!("model.{e}"))?,
            m.price,
        )),
        None => None,
    };

    let mut members: Vec<Member> = Vec::with_capacity(spec.members.len());
    for (i, m) in spec.members.into_iter().enumerate() {
        let at = format!("group.members[{i}]");
        let member = if let Some(id) = &m.agent {
            let given = [
                ("system_prompt", m.system_prompt.is_some()),
                ("model", m.model.is_some()),
                ("tools", !m.tools.is_empty()),
                ("max_turns", m.max_turns.is_some()),
                ("tool_call_format", m.tool_call_format.is_some()),
                ("nested", !m.nested.is_empty()),
            ];
            if let Some((field, _)) = given.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "{at}.{field}: a member that names an agent file (`{id}`) runs as that file says"
                ));
            }
            let agent = resolve(id, false).map_err(|e| format!("{at}.agent: {e}"))?;
            Member {
                name: m.name.clone().unwrap_or_else(|| id.clone()),
                description: m.description.unwrap_or_else(|| agent.description.clone()),
                agent,
                default_model: false,
                nested: Vec::new(),
            }
        } else {
            let name = m.name.clone().ok_or(format!(
                "{at}.name: a member needs a name (or `agent: <id>`)"
            ))?;
            let nested = nested::chats(&at, &m, &resolve)?;
            let (provider, price, default_model) = match (&m.model, &default, nested.first()) {
                (Some(model), _, _) => (
                    provider(model, http).map_err(|e| format!("{at}.model.{e}"))?,
                    model.price,
                    false,
                ),
                (None, Some((p, price)), _) => (p.clone(), *price, true),
                // A nested member's model only sums a chat up: without one
                // of its own or the group's, its first chat's agent's does.
                (None, None, Some(first)) => {
                    (first.agent.provider.clone(), first.agent.price, false)
                }
                (None, None, None) => {
                    return Err(format!(
                        "{at}.model: missing, and the group has no `model` to lend"
                    ));
                }
            };
            let own = AgentFile {
                id: name.clone(),
                name: Some(name.clone()),
                description: m.description.clone(),
                model: None,
                system_prompt: m.system_prompt,
                context_prompts: Default::default(),
                max_turns: m.max_turns.unwrap_or(file.max_turns),
                agent_starts_first: false,
                multitask_strategy: file.multitask_strategy,
                run_timeout_seconds: file.run_timeout_seconds,
                prompt_budget_tokens: file.prompt_budget_tokens,
                max_tool_result_chars: file.max_tool_result_chars,
                tool_call_format: m.tool_call_format.unwrap_or(file.tool_call_format),
                show_reasoning: file.show_reasoning,
                // The group's quota counts its members' runs (under its id).
                quota: None,
                tools: m.tools,
                mcp_servers: Vec::new(),
                template: None,
                group: None,
                ag_ui: None,
                idempotent: false,
            };
            let agent = Agent::with_provider(own, price, provider, http)
                .map_err(|e| format!("{at}.{e}"))?;
            Member {
                name,
                description: m.description.unwrap_or_default(),
                agent: Arc::new(agent),
                default_model,
                nested,
            }
        };
        check_name(&member.name, &file.id).map_err(|e| format!("{at}.name: {e}"))?;
        // Selection reads names without regard to case.
        if members
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&member.name))
        {
            return Err(format!("{at}.name: `{}` is a member already", member.name));
        }
        members.push(member);
    }
    let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    let index = |name: &str| names.iter().position(|n| n == name);

    let first = match &spec.first {
        Some(name) => Some(index(name).ok_or(format!("group.first: `{name}` is not a member"))?),
        None => None,
    };
    // Where a member's turn leads when it hands to nobody (AG2's after
    // work): the group's `after_work`, then its own `after` (`select`:
    // the method picks).
    let rule = |at: &str, from: usize, to: &str| -> Result<Option<Target>, String> {
        Ok(match (index(to), to) {
            (Some(i), _) => Some(Target::Member(i)),
            (None, TO_USER) => Some(Target::User),
            (None, "stay") => Some(Target::Member(from)),
            (None, "terminate") => Some(Target::Terminate),
            (None, "select") => None,
            _ => {
                return Err(format!(
                    "{at}: `{to}` is neither a member nor `{TO_USER}`, `stay`, `terminate` or `select`"
                ));
            }
        })
    };
    let mut after = HashMap::new();
    if let Some(to) = &spec.handoffs.after_work {
        for from in 0..names.len() {
            if let Some(target) = rule("group.handoffs.after_work", from, to)? {
                after.insert(from, target);
            }
        }
    }
    for (from, to) in &spec.handoffs.after {
        let at = format!("group.handoffs.after.{from}");
        let from = index(from).ok_or(format!("{at}: `{from}` is not a member"))?;
        match rule(&at, from, to)? {
            Some(target) => after.insert(from, target),
            None => after.remove(&from),
        };
    }
    let conditions = handoffs::conditions(&spec.handoffs, &names)?;
    // A member whose turn is nested chats has no model turn to offer tools in.
    if let Some(m) = members
        .iter()
        .zip(&conditions)
        .find(|(m, c)| !m.nested.is_empty() && !c.llm.is_empty())
        .map(|(m, _)| m)
    {
        return Err(format!(
            "group.handoffs.conditions.{}: a member whose turn is nested chats calls no tools (a context condition can hand it over)",
            m.name
        ));
    }
    let context = match spec.context_variables {
        Some(context) => {
            crate::tools::context::check(&context)
                .map_err(|e| format!("group.context_variables: {e}"))?;
            Some(context)
        }
        None => None,
    };
    let transitions = {
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        graph::Transitions::build(
            (
                &spec.allowed_or_disallowed_speaker_transitions,
                spec.speaker_transitions_type,
                &spec.allow_repeat_speaker,
            ),
            &names,
        )?
    };
    let selector_retries = spec.max_retries_for_selecting_speaker;
    if spec.max_retries_for_selecting_speaker > 10 {
        return Err("group.max_retries_for_selecting_speaker: at most 10".into());
    }
    let pattern = match spec.termination.pattern.as_deref() {
        Some("") => {
            return Err("group.termination.pattern: an empty pattern ends every turn".into());
        }
        Some(p) => Some(
            regex::RegexBuilder::new(p)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("group.termination.pattern: {e}"))?,
        ),
        None => None,
    };
    let selector_spec = spec.selector.unwrap_or_default();
    let (selector, selector_price, selector_default): (Arc<dyn Provider>, _, _) = match (
        &selector_spec.model,
        &default,
    ) {
        (Some(model), _) => (
            provider(model, http).map_err(|e| format!("group.selector.model.{e}"))?,
            model.price,
            false,
        ),
        (None, Some((p, price))) => (p.clone(), *price, true),
        (None, None) if spec.speaker_selection == SelectionMethod::Auto => {
            return Err("group.selector.model: `auto` selection needs a model (here, or the group's `model`)".into());
        }
        // Never asked: the first member's model stands in.
        (None, None) => (members[0].agent.provider.clone(), None, false),
    };
    let roles: Vec<String> = members
        .iter()
        .map(|m| format!("{}: {}", m.name, m.description))
        .collect();
    let selector_prompt = selector_spec
        .prompt
        .as_deref()
        .unwrap_or(SELECTOR_PROMPT)
        .replace("{roles}", &roles.join("\n"))
        .replace("{agentlist}", &format!("[{}]", names.join(", ")));

    let group = Group {
        method: spec.speaker_selection,
        max_rounds: spec.max_rounds,
        first,
        marker: spec.termination.marker.filter(|m| !m.is_empty()),
        pattern,
        handoff_tool: spec.handoffs.tool.then(|| Tool::handoff(&names)),
        after,
        selector: selector.clone(),
        selector_price,
        selector_default,
        selector_prompt,
        selector_retries,
        transitions,
        context,
        conditions,
        members,
    };
    let price = file.model.as_ref().and_then(|m| m.price);
    let mut frame = file;
    frame.group = None;
    let mut agent = Agent::with_provider(frame, price, selector, http)?;
    agent.group = Some(Arc::new(group));
    Ok(agent)
}

/// A member name: a wire name every vendor's `name` field takes, and
/// neither `user` nor the group's own id (its selector's usage entry).
fn check_name(name: &str, group_id: &str) -> Result<(), String> {
    let valid = (1..=MAX_NAME).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        // A choice is also answered by number.
        && !name.chars().all(|c| c.is_ascii_digit());
    if !valid {
        return Err(format!(
            "`{name}` must be 1 to {MAX_NAME} ASCII letters, digits, `_` or `-`, not only digits"
        ));
    }
    let keyword = ["stay", "terminate", "select"]
        .iter()
        .any(|k| name.eq_ignore_ascii_case(k));
    if name.eq_ignore_ascii_case(TO_USER) || name == group_id || keyword {
        return Err(format!(
            "`{name}` is reserved (the user, the group's own id, or an `after` keyword)"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
