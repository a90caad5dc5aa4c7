//! One run of an agent: a template's walk, a group's turns, or one agent's
//! agentic loop (`speak`), framed the same way: a run timeout, cancellation,
//! and `chat.usage_summary` then `chat.run_complete` at the end.
//!
//! The run never touches the chat's state: it sends `RunMsg`s over a bounded
//! channel to whoever owns the chat (the session actor), which assigns `seq`,
//! persists, and answers input requests and UI tool calls. When that owner
//! goes away the run stops at its next message.

use std::collections::BTreeMap;

use super::build::Agent;
use super::definition::Price;
use super::group;
use super::prompt::{definitions, system_prompt};
use super::tally::Tally;
use super::workflow::{self, Then};
use crate::link::{Gone, RunControl, RunLink};
use crate::llm::{Message, Usage};
use crate::protocol::{AgentUsage, EventKind, RunEndReason};
use crate::telemetry::{Span, SpanKind, kv};
use crate::templates::Speaker;
use crate::workflows::Workflow;

pub use super::speak::{GroupResumed, Resumed, RunSpec};

/// Runs the agent until it finishes, fails, runs out of turns or time, or is
/// stopped.
#[tracing::instrument(skip_all, fields(agent = %spec.agent.id))]
pub async fn run(spec: RunSpec, link: RunLink, control: RunControl) {
    // The run's span (traces on): under the request that started it.
    let span = if crate::telemetry::on() {
        let parent = crate::telemetry::propagate::context_of(spec.traceparent.as_deref());
        Span::under(
            &parent,
            format!("invoke_agent {}", spec.agent.id).into(),
            SpanKind::Internal,
            vec![
                kv("gen_ai.operation.name", "invoke_agent"),
                kv("gen_ai.agent.name", spec.agent.id.clone()),
                kv("gen_ai.conversation.id", spec.chat_id.to_string()),
                kv("user.id", spec.user.clone()),
                kv("agentwire.run.continued", spec.resumed.is_some()),
            ],
        )
    } else {
        Span::none()
    };
    span.scope(framed(spec, link, control, &span)).await;
}

/// [`run`], framed: its timeout, cancellation, and its last two envelopes.
async fn framed(spec: RunSpec, link: RunLink, control: RunControl, span: &Span) {
    // A continued run counts on from what it had used.
    let mut tally = match &spec.resumed {
        Some(resumed) => {
            link.used_before(&resumed.usage);
            Tally::before(&spec.agent, &resumed.usage, spec.own_price())
        }
        None => Tally::default(),
    };
    // A continued run has what it had not used of its time.
    let used = spec.resumed.as_ref().map(|r| r.elapsed).unwrap_or_default();
    let timeout = spec.agent.run_timeout.saturating_sub(used);
    let reason = tokio::select! {
        biased;
        _ = control.token.cancelled() => control.reason(),
        r = tokio::time::timeout(timeout, body(&spec, &link, &mut tally)) => match r {
            Ok(Ok(reason)) => reason,
            Ok(Err(Gone)) => return,
            Err(_) => RunEndReason::Timeout,
        },
    };
    let summary = summary(&spec.agent, tally, &spec.model_name());
    if let EventKind::UsageSummary {
        prompt_tokens,
        completion_tokens,
        cost,
        ..
    } = &summary
    {
        span.record(|| {
            let mut attributes = vec![
                kv("agentwire.run.end_reason", reason.as_str()),
                kv("gen_ai.usage.input_tokens", *prompt_tokens as i64),
                kv("gen_ai.usage.output_tokens", *completion_tokens as i64),
            ];
            attributes.extend(cost.map(|c| kv("agentwire.run.cost", c)));
            attributes
        });
    }
    if reason == RunEndReason::Error {
        span.fail(
            || "run_error".to_owned(),
            || "the run ended with an error".to_owned(),
        );
    }
    let _ = link.emit(summary).await;
    let _ = link.emit(EventKind::RunComplete { reason }).await;
}

/// The `chat.usage_summary` of a run of `agent` that used `used` (per
/// speaker) and ended without logging one: a run a restart cut off as it
/// was ending, on the chat's model `switched` (if it switched).
pub fn summary_of(
    agent: &Agent,
    used: &BTreeMap<String, Usage>,
    switched: Option<&super::ModelEntry>,
) -> EventKind {
    let (model, price) = agent.own_model(switched.map(|m| (m.name.as_str(), m.price)));
    summary(agent, Tally::before(agent, used, price), &model)
}

/// `chat.usage_summary`: the run's total, and per member in a group (a
/// group's id only when its selector was asked). The run has a `cost` when
/// every speaker that used tokens has a price.
fn summary(agent: &Agent, tally: Tally, model: &str) -> EventKind {
    let group = agent.group.is_some();
    let mut cost = Some(0.0);
    let mut per = BTreeMap::new();
    for (name, spent) in tally.0 {
        let u = spent.total();
        // A selector never asked (the group's, a nested group's): no entry.
        let selector = name == agent.id || crate::protocol::is_nested(&name);
        if group && selector && u == Usage::default() {
            continue;
        }
        let own = spent.price.map(|p| self::cost(&u, p));
        cost = match (cost, own) {
            (Some(sum), Some(c)) => Some(sum + c),
            (_, None) if u == Usage::default() => cost,
            _ => None,
        };
        let usage = AgentUsage {
            total_tokens: u.prompt_tokens + u.completion_tokens,
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cost: own,
        };
        per.insert(name, usage);
    }
    let priced = per.values().any(|u| u.cost.is_some());
    let total = |f: fn(&AgentUsage) -> u64| per.values().map(f).sum::<u64>();
    let (prompt_tokens, completion_tokens) =
        (total(|u| u.prompt_tokens), total(|u| u.completion_tokens));
    // (What the summary logs, this node's /metrics count.)
    let priced_cost: f64 = per.values().filter_map(|u| u.cost).sum();
    crate::metrics::run_usage(
        &agent.id,
        model,
        prompt_tokens,
        completion_tokens,
        priced.then_some(priced_cost),
    );
    EventKind::UsageSummary {
        total_tokens: prompt_tokens + completion_tokens,
        prompt_tokens,
        completion_tokens,
        cost: cost.filter(|_| priced).map(round),
        by_agent: group.then_some(per),
        model: (!model.is_empty()).then(|| model.to_owned()),
    }
}

fn cost(u: &Usage, p: Price) -> f64 {
    round(
        (u.prompt_tokens as f64 * p.prompt_per_million
            + u.completion_tokens as f64 * p.completion_per_million)
            / 1_000_000.0,
    )
}

fn round(cost: f64) -> f64 {
    (cost * 1e9).round() / 1e9
}

/// A workflow's invocation (then, for a prompt workflow, the agent's answer),
/// a template's walk, a group's turns, or the agentic loop.
async fn body(spec: &RunSpec, link: &RunLink, tally: &mut Tally) -> Result<RunEndReason, Gone> {
    let agent = &spec.agent;
    // A quota reached: the run makes no call at all (a template's, a
    // workflow's, an upstream agent's, a group's selector's too).
    if let Some(refusal) = link.over_quota().await {
        return super::speak::refuse(link, refusal).await;
    }
    // A workflow's prompt: the user's message for whoever answers next.
    let mut prompt = None;
    if let Some(invocation) = &spec.workflow {
        match workflow::run(spec, invocation, link, tally).await? {
            Then::End(reason) => return Ok(reason),
            // A template's walk takes no free text.
            Then::Answer(_) if agent.template.is_some() => return Ok(RunEndReason::Completed),
            Then::Answer(text) => prompt = Some(text),
        }
    }
    if let Some(template) = &agent.template {
        let speaker = Speaker {
            id: &agent.id,
            system_prompt: &agent.system_prompt,
            provider: agent.provider.as_ref(),
        };
        let usage = &mut tally.of(&agent.id, spec.own_price()).model;
        let place = spec.resumed.as_ref().and_then(|r| r.template.as_ref());
        return crate::templates::run(&speaker, template, link, usage, place).await;
    }
    if let Some(group) = &agent.group {
        return group::run(spec, group, link, tally, prompt).await;
    }
    let mut messages: Vec<Message> = spec.history.iter().map(|s| s.message.clone()).collect();
    messages.extend(prompt.map(Message::user));
    super::speaker::alone(spec, agent, link, tally, &mut messages, None).await
}

/// The system prompt with its tool block, as seed 002's enhanced prompt: the
/// tool definitions (by category, when the tools name any) and the JSON call
/// format, whatever the agent's own format; then the `workflows` the user
/// can run themselves, by category.
pub fn enhanced_system_prompt(agent: &Agent, workflows: &[&Workflow]) -> String {
    let mut prompt = system_prompt(
        agent,
        None,
        None,
        true,
        &definitions(&agent.tools_now(), None),
    );
    if workflows.is_empty() {
        return prompt;
    }
    prompt.push_str(
        "\n\nThe user can also run these workflows from the interface (you cannot run them; \
         suggest one when it fits what they ask):\n",
    );
    let mut groups: BTreeMap<&str, Vec<&Workflow>> = BTreeMap::new();
    for w in workflows {
        groups.entry(&w.category).or_default().push(w);
    }
    for (category, group) in groups {
        prompt.push_str(&format!("\n## {category}\n"));
        for w in group {
            prompt.push_str(&format!("- {} (`{}`): {}\n", w.title, w.id, w.description));
        }
    }
    prompt
}
