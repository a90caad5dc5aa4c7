//! A group run: choose a member, let it speak on its own view of the shared
//! transcript (its prompt filled from the context variables; an
//! `OnContextCondition` that holds hands its turn over without a model),
//! add what it said under its name, and go on until a member's text ends
//! the conversation (`termination`), a handoff goes back to the user or
//! terminates, or `max_rounds` rounds have been taken (AG2's count: the
//! run's opening message is the first).

use super::super::build::{Group, Member, Target};
use super::super::definition::ToolCallFormat;
use super::super::prompt::{definitions, system_prompt};
use super::super::speak::{Resumed, RunSpec, Spoke, Voice};
use super::super::tally::{Spent, Tally};
use super::graph::After;
use super::select::{Ask, Chooser, Pick};
use super::view::view;
use crate::link::{Gone, RunLink, Said};
use crate::llm::Provider;
use crate::protocol::{EventKind, RunEndReason};
use crate::tools::{Context, Tool};

/// Runs the group's turns; `prompt` is a user message the run adds (a
/// workflow's).
pub(in crate::agent) async fn run(
    spec: &RunSpec,
    group: &Group,
    link: &RunLink,
    tally: &mut Tally,
    prompt: Option<String>,
) -> Result<RunEndReason, Gone> {
    let mut transcript: Vec<Said> = spec.history.clone();
    transcript.extend(prompt.map(|text| Said {
        by: None,
        message: crate::llm::Message::user(text),
    }));
    converse(spec, group, link, tally, &mut transcript).await
}

/// The group's turns on `transcript` (the run's history, its message
/// last), which they add to: a run's, or a nested chat's (whose speakers
/// the link names inside it).
pub(super) async fn converse(
    spec: &RunSpec,
    group: &Group,
    link: &RunLink,
    tally: &mut Tally,
    transcript: &mut Vec<Said>,
) -> Result<RunEndReason, Gone> {
    let context = context(spec, group, link).await?;
    let mut chooser = Chooser::new(group, spec.agent.prompt_budget_tokens, seed(spec));
    let selector: &dyn Provider = match (&spec.provider, group.selector_default) {
        (Some(chat_model), true) => chat_model.as_ref(),
        _ => group.selector.as_ref(),
    };
    let mut previous: Option<usize> = None;
    let mut handoff: Option<Target> = None;
    // A run a restart cut off goes on where its members' turns stood: after
    // a member that had finished, or with the one cut off, whose turn is
    // the round it began.
    let mut first_round = 0;
    let mut going_on = None;
    if let Some(resumed) = &spec.resumed
        && let Some(place) = &resumed.group
    {
        let Some(index) = group.members.iter().position(|m| m.name == place.member) else {
            return Ok(RunEndReason::Error);
        };
        if place.done {
            first_round = place.rounds;
            previous = Some(index);
            handoff = place.handoff.as_deref().map(|to| target(group, to));
            if let Some((Target::User | Target::Terminate, _)) = chooser.forced(index, handoff) {
                return Ok(RunEndReason::Completed);
            }
        } else {
            first_round = place.rounds.saturating_sub(1);
            going_on = Some((index, resumed));
        }
    }
    // A new run goes on where the group stopped, unless `first` opens
    // every run: back with the member that handed the conversation to the
    // user; to whom the last member handed it; else after the last member
    // (its `terminate` spent; a dead end of the transitions starts afresh).
    let mut back = None;
    let fresh = spec
        .resumed
        .as_ref()
        .and_then(|r| r.group.as_ref())
        .is_none();
    if fresh
        && group.first.is_none()
        && let Some((last, handed)) = stopped_at(group, &spec.history)
    {
        match chooser.forced(last, handed) {
            Some((Target::User, _)) => back = Some(last),
            forced => {
                previous = Some(last);
                handoff = handed;
                chooser.ended = matches!(forced, Some((Target::Terminate, _)));
                if forced.is_none() && group.transitions.after(previous) == After::Nobody {
                    previous = None;
                }
            }
        }
    }
    // AG2's rounds: the opening message is the first.
    for _ in first_round..group.max_rounds - 1 {
        let (index, chosen, resumed) = match (going_on.take(), back.take()) {
            (Some((index, resumed)), _) => (index, ("continue", None), Some(resumed)),
            (None, Some(index)) => {
                let why = "the user answered it: it handed the conversation over".to_owned();
                (index, ("handoff", Some(why)), None)
            }
            (None, None) => {
                // A quota reached: not even the selector is asked.
                if let Some(refusal) = link.over_quota().await {
                    return crate::agent::speak::refuse(link, refusal).await;
                }
                // The selector's calls count under the group's id.
                let ask = Ask {
                    selector,
                    usage: &mut tally
                        .of(&link.named(&spec.agent.id), group.selector_price)
                        .model,
                    link,
                };
                match chooser
                    .next(previous, handoff.take(), transcript, ask)
                    .await?
                {
                    Pick::Member {
                        index,
                        method,
                        reason,
                    } => (index, (method, reason), None),
                    Pick::End(reason) => return Ok(reason),
                }
            }
        };
        let member = &group.members[index];
        // A turn a restart cut off goes on; it was not handed over.
        let met = resumed
            .is_none()
            .then(|| met(group, index, context.as_ref()))
            .flatten();
        let (text, to) = match met {
            Some(condition) => {
                let link = link.speaking_as(&member.name);
                link.emit(EventKind::SelectSpeaker {
                    agent: link.named(&member.name),
                    method: Some(chosen.0.to_owned()),
                    reason: chosen.1,
                })
                .await?;
                let (to, expression) = (&condition.to, condition.expression.source());
                let said = crate::tools::handed_over(&link, to, expression).await?;
                transcript.extend(said.into_iter().map(|message| Said {
                    by: Some(member.name.clone()),
                    message,
                }));
                (String::new(), Some(to.clone()))
            }
            None if !member.nested.is_empty() => {
                let on = (member, resumed.is_some(), boxed as super::nested::Converse);
                match super::nested::turn(spec, on, link, tally, transcript, chosen).await? {
                    Ok(text) => (text, None),
                    Err(end) => return Ok(end),
                }
            }
            None => {
                let on = (member, context.as_ref(), resumed);
                match turn(spec, group, on, link, tally, transcript, chosen).await? {
                    Ok(done) => done,
                    Err(end) => return Ok(end),
                }
            }
        };
        if group.ends(&text) {
            return Ok(RunEndReason::Completed);
        }
        handoff = to.map(|to| target(group, &to));
        previous = Some(index);
        if let Some((Target::User | Target::Terminate, _)) = chooser.forced(index, handoff) {
            return Ok(RunEndReason::Completed);
        }
    }
    Ok(RunEndReason::MaxRounds)
}

/// [`converse`], boxed: a nested chat with a group runs it (its future
/// holds itself).
fn boxed<'a>(
    spec: &'a RunSpec,
    group: &'a Group,
    link: &'a RunLink,
    tally: &'a mut Tally,
    transcript: &'a mut Vec<Said>,
) -> futures_util::future::BoxFuture<'a, Result<RunEndReason, Gone>> {
    Box::pin(converse(spec, group, link, tally, transcript))
}

/// The group's context variables for this run: the file's starting values
/// under what the chat's log holds (`chat.agent_state` under the group's
/// id). A chat's first run logs them as a snapshot, so every wire shows
/// them from the start. `None`: the group has no context.
async fn context(spec: &RunSpec, group: &Group, link: &RunLink) -> Result<Option<Context>, Gone> {
    let Some(start) = &group.context else {
        return Ok(None);
    };
    let mut context = start.clone();
    let id = link.named(&spec.agent.id);
    // A nested chat is a new conversation each time (as AG2's): it starts
    // from the file's values.
    let logged = spec
        .agent_state
        .get(&id)
        .filter(|_| !crate::protocol::is_nested(&id));
    match logged {
        Some(serde_json::Value::Object(logged)) => context.extend(logged.clone()),
        _ => {
            link.emit(EventKind::AgentState {
                agent: id,
                snapshot: Some(serde_json::Value::Object(context.clone())),
                delta: None,
            })
            .await?
        }
    }
    Ok(Some(std::sync::Arc::new(std::sync::Mutex::new(context))))
}

/// The first of member `index`'s `OnContextCondition`s that is available
/// and holds (AG2 checks them before the member's other replies); a group
/// without context variables reads every variable as unset.
fn met<'g>(
    group: &'g Group,
    index: usize,
    context: Option<&Context>,
) -> Option<&'g super::handoffs::ContextCondition> {
    let conditions = &group.conditions[index].context;
    if conditions.is_empty() {
        return None;
    }
    let values = context.map_or_else(Default::default, |c| {
        c.lock().expect("context lock").clone()
    });
    conditions.iter().find(|c| {
        c.available.as_ref().is_none_or(|a| a.holds(&values)) && c.expression.holds(&values)
    })
}

/// Where the group stopped in `history` (before this run's message): the
/// member that spoke last, and whom its turn handed the conversation to
/// with a `handoff_to` call that succeeded. `None`: no member has spoken
/// yet (or none of this group's).
fn stopped_at(group: &Group, history: &[Said]) -> Option<(usize, Option<Target>)> {
    let (mut last, mut handoff) = (None, None);
    // The last member's turn, read backwards to the message before it.
    for said in history.iter().rev() {
        let Some(by) = &said.by else {
            match last {
                Some(_) => break,
                None => continue,
            }
        };
        // Another agent's turn (the chat changed agents) is not ours.
        let Some(index) = group.members.iter().position(|m| &m.name == by) else {
            match last {
                Some(_) => break,
                None => return None,
            }
        };
        match last {
            None => last = Some(index),
            Some(l) if l != index => break,
            Some(_) => {}
        }
        // Its last handoff that succeeded names whom to.
        if let crate::llm::Message::ToolResult {
            name,
            content,
            is_error: false,
            ..
        } = &said.message
            && handoff.is_none()
            && crate::tools::is_handoff(name)
        {
            handoff = serde_json::from_str::<serde_json::Value>(content)
                .ok()
                .and_then(|v| v["handoff_to"].as_str().map(|to| target(group, to)));
        }
    }
    Some((last?, handoff))
}

/// Whom a handoff names: a member, `terminate`, `select`, or else the user.
fn target(group: &Group, to: &str) -> Target {
    match to {
        "terminate" => Target::Terminate,
        "select" => Target::Select,
        _ => group
            .members
            .iter()
            .position(|m| m.name == to)
            .map_or(Target::User, Target::Member),
    }
}

/// One member's turn: `Ok((text, handoff))` when it finished speaking (its
/// last text, and whom it handed to), `Err(reason)` when the run ends with it.
/// `resumed`: the member's turn a restart cut off, going on.
/// `on`: the member, the run's context, and its turn a restart cut off.
async fn turn(
    spec: &RunSpec,
    group: &Group,
    on: (&Member, Option<&Context>, Option<&Resumed>),
    link: &RunLink,
    tally: &mut Tally,
    transcript: &mut Vec<Said>,
    chosen: (&'static str, Option<String>),
) -> Result<Result<(String, Option<String>), RunEndReason>, Gone> {
    let (member, context, resumed) = on;
    let agent = &member.agent;
    let provider: &dyn Provider = match (&spec.provider, member.default_model) {
        (Some(chat_model), true) => chat_model.as_ref(),
        _ => agent.provider.as_ref(),
    };
    agent
        .mcp_settled(tokio::time::Instant::now() + crate::agent::MCP_SETTLE)
        .await;
    let mut tools = crate::tools::with_client_tools(&agent.tools_now(), &spec.client_tools);
    tools.extend(group.handoff_tool.clone());
    let values = context.map(|c| c.lock().expect("context lock").clone());
    // Its `OnCondition`s whose `available` holds now, and `update_context`.
    let now = values.clone().unwrap_or_default();
    if let Some(i) = group.members.iter().position(|m| m.name == member.name) {
        let offered = group.conditions[i].llm.iter();
        tools.extend(
            offered
                .filter(|(_, available)| available.as_ref().is_none_or(|a| a.holds(&now)))
                .map(|(tool, _)| tool.clone()),
        );
    }
    if let Some(context) = context {
        let names: Vec<String> = now.keys().cloned().collect();
        let id = link.named(&spec.agent.id);
        tools.push(Tool::update_context(&id, context.clone(), &names));
    }
    let name = link.named(&member.name);
    let voice = Voice {
        name: &name,
        agent,
        tools: &tools,
        provider,
        system_prompt: prompt(spec, group, member, &tools, values.as_ref()),
        chosen: Some(chosen),
        resumed,
        thread: spec.chat_id,
        state: spec.agent_state.get(&name),
    };
    let link = link.speaking_as(&member.name);
    let mut messages = view(transcript, Some(&member.name), agent.max_tool_result_chars);
    let before = messages.len();
    let Spent {
        model,
        tools: tool_usage,
        ..
    } = tally.of(&name, agent.price);
    let env = spec.call_env(&link, tool_usage, agent, provider);
    let spoke = super::super::speaker::take_turn(&voice, &env, &mut messages, model).await?;
    transcript.extend(messages.drain(before..).map(|message| Said {
        by: Some(member.name.clone()),
        message,
    }));
    Ok(match spoke {
        Spoke::End(reason) => Err(reason),
        Spoke::Done { text, handoff } => Ok((text, handoff)),
    })
}

/// A member's system prompt: the group's (per `context_type` if it says
/// so), the member's own (with the chat
/// context and, in `json` mode, its tools), who else is in the group, and
/// the chat's database when one is connected.
fn prompt(
    spec: &RunSpec,
    group: &Group,
    member: &Member,
    tools: &[Tool],
    context: Option<&serde_json::Map<String, serde_json::Value>>,
) -> String {
    let agent = &member.agent;
    let json_mode = agent.tool_call_format == ToolCallFormat::Json;
    let offered = definitions(tools, spec.context_type.as_deref());
    let own = system_prompt(
        agent,
        spec.context.as_ref(),
        spec.context_type.as_deref(),
        json_mode,
        &offered,
    );
    // The group's prompt (or its `context_prompts` entry for the run's
    // `context_type`), then the member's own.
    let group_prompt = spec
        .context_type
        .as_deref()
        .and_then(|ct| spec.agent.context_prompts.get(ct))
        .unwrap_or(&spec.agent.system_prompt);
    // Only the file's prompts read the context: never what follows the
    // member's own (the chat's context, MCP servers' instructions, tools).
    let base = spec
        .context_type
        .as_deref()
        .and_then(|ct| agent.context_prompts.get(ct))
        .unwrap_or(&agent.system_prompt);
    let own = match own.strip_prefix(base.as_str()) {
        Some(rest) => fill(base, context) + rest,
        None => own,
    };
    let mut prompt = String::new();
    for part in [fill(group_prompt, context), own] {
        if !part.is_empty() {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&part);
        }
    }
    let others: Vec<String> = group
        .members
        .iter()
        .filter(|m| m.name != member.name)
        .map(|m| match m.description.as_str() {
            "" => m.name.clone(),
            d => format!("{} ({d})", m.name),
        })
        .collect();
    if !others.is_empty() {
        prompt.push_str(&format!(
            "\n\nYou are `{}` in a group chat with {}. Their messages reach you under their names.",
            member.name,
            others.join(", ")
        ));
    }
    if let Some(db) = &spec.database {
        prompt.push_str(db);
    }
    prompt
}

/// `text` with each `{name}` of a context variable replaced by its value
/// (a string as it is, anything else as JSON); other braces stay.
fn fill(text: &str, context: Option<&serde_json::Map<String, serde_json::Value>>) -> String {
    static PLACEHOLDER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\{([A-Za-z0-9_]{1,64})\}").expect("a valid pattern")
    });
    let Some(context) = context else {
        return text.to_owned();
    };
    // One pass: a value that holds `{name}` stays as it is.
    PLACEHOLDER
        .replace_all(text, |c: &regex::Captures<'_>| match context.get(&c[1]) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => c[0].to_owned(),
        })
        .into_owned()
}

/// The `random` method's seed: the chat id's first eight bytes (little
/// endian) plus the number of user messages before this run, so each run of
/// a chat draws its own sequence and the log says which.
fn seed(spec: &RunSpec) -> u64 {
    let id = spec.chat_id.as_bytes();
    let base = u64::from_le_bytes(id[..8].try_into().expect("eight bytes"));
    let runs = spec.history.iter().filter(|s| s.by.is_none()).count() as u64;
    base.wrapping_add(runs)
}
