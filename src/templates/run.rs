//! Walking a template: its widgets as tool calls awaiting the user, each
//! answer checked and graded, the score at the end.

use std::borrow::Cow;

use super::generate::{GENERATION_ATTEMPTS, feedback, generate};
use super::*;

/// The `tool_name` of a widget's `chat.tool_call`.
pub const WIDGET_TOOL: &str = "template";

/// What a widget shows a client: its fields, never its `correct_answer`.
fn widget_payload(item: &Item, content: &Content) -> serde_json::Value {
    let c = &content.spec;
    let mut options = c.options.clone();
    if c.widget_config.shuffle_options == Some(true) {
        use rand::seq::SliceRandom;
        options.shuffle(&mut rand::rng());
    }
    let mut payload = serde_json::json!({
        "widget_type": c.widget_type,
        "content_id": content.id,
        "item_id": item.id,
        "stem": c.stem,
        "widget_config": c.widget_config,
        "required": c.required,
        "skippable": c.skippable,
        "show_user_response": c.show_user_response,
    });
    if c.widget_type == WidgetType::MultipleChoice {
        payload["options"] = serde_json::json!(options);
    }
    payload
}

/// The check of a widget's answer: `{"answer": …}`, or `{"skip": true}`
/// where the widget may be skipped.
fn answer_check(c: &ContentSpec) -> crate::link::AnswerCheck {
    let c = c.clone();
    crate::link::AnswerCheck::new(move |data| {
        if data.get("skip").and_then(serde_json::Value::as_bool) == Some(true) {
            return if c.skippable || !c.required {
                Ok(())
            } else {
                Err("this question cannot be skipped".into())
            };
        }
        let answer = data
            .get("answer")
            .ok_or("the result is {\"answer\": …} or {\"skip\": true}")?;
        match c.widget_type {
            WidgetType::Message => Err("a message takes no answer".into()),
            WidgetType::MultipleChoice => {
                let multiple = c.widget_config.allow_multiple == Some(true);
                let chosen: Vec<&str> = match answer {
                    serde_json::Value::String(one) => vec![one.as_str()],
                    serde_json::Value::Array(many) if multiple => many
                        .iter()
                        .map(|v| v.as_str().ok_or("answers are option texts"))
                        .collect::<Result<_, _>>()?,
                    _ if multiple => return Err("answer: an option, or a list of options".into()),
                    _ => return Err("answer: one of the options".into()),
                };
                if chosen.is_empty() {
                    return Err("answer: choose at least one option".into());
                }
                let mut seen = HashSet::new();
                for a in &chosen {
                    if !c.options.iter().any(|o| o == a) {
                        return Err(format!("answer: `{a}` was not offered"));
                    }
                    if !seen.insert(*a) {
                        return Err(format!("answer: `{a}` is chosen twice"));
                    }
                }
                Ok(())
            }
            WidgetType::FreeText | WidgetType::CodeEditor => {
                let text = answer.as_str().ok_or("answer: a text")?;
                let len = text.trim().chars().count();
                let cfg = &c.widget_config;
                if c.required && len == 0 {
                    return Err("answer: must not be empty".into());
                }
                if let Some(min) = cfg.min_length
                    && len < min
                {
                    return Err(format!("answer: at least {min} characters"));
                }
                if let Some(max) = cfg.max_length
                    && len > max
                {
                    return Err(format!("answer: at most {max} characters"));
                }
                Ok(())
            }
        }
    })
}

/// Whether an accepted answer is the correct one (`None`: not graded).
fn grade(c: &ContentSpec, data: &serde_json::Value) -> Option<bool> {
    c.correct_answer.as_ref()?.grades(data)
}

impl Answer {
    /// Whether `data` (a widget's accepted result) gives this answer
    /// (`None`: it gives none, a skip).
    pub(super) fn grades(&self, data: &serde_json::Value) -> Option<bool> {
        let given: HashSet<&str> = match data.get("answer")? {
            serde_json::Value::String(s) => [s.as_str()].into(),
            serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
            _ => return Some(false),
        };
        let expected: HashSet<&str> = match self {
            Answer::One(a) => [a.as_str()].into(),
            Answer::Several(list) => list.iter().map(String::as_str).collect(),
        };
        Some(given == expected)
    }
}

/// Walks the template: for each item a `chat.progress`, then its contents in
/// order (a message as `chat.text`, a widget as a `chat.tool_call` awaiting
/// the user, its accepted answer logged as the `chat.tool_response`), then a
/// final `chat.progress` and a `chat.text` with the score.
///
/// A walk a restart cut off goes on from its [`Place`]: what the log holds is
/// not shown again, the widget that was waiting waits again as it was shown
/// (its request logged already), and the score counts the answers before.
pub async fn run(
    agent: &Speaker<'_>,
    template: &Template,
    link: &crate::link::RunLink,
    usage: &mut crate::llm::Usage,
    place: Option<&Place>,
) -> Result<crate::protocol::RunEndReason, crate::link::Gone> {
    use crate::protocol::{EventKind, RunEndReason};

    let total = template.items.len() as u32;
    let mut score = place.map_or((0, 0), |p| (p.graded, p.correct));
    let from = place.map_or(0, |p| p.item);
    for (i, item) in template.items.iter().enumerate().skip(from) {
        // The item the walk was cut off in: what it did is in the log.
        let here = place.filter(|p| p.item == i);
        if !here.is_some_and(|p| p.progress_logged) {
            link.emit(EventKind::Progress {
                current_item: i as u32,
                total_items: total,
                item_id: item.id.clone(),
                item_title: item.title.clone(),
                enable_chat_input: item.enable_chat_input,
            })
            .await?;
        }
        if let Some(a) = here.and_then(|p| p.feedback.as_ref()) {
            comment(agent, &a.content, &a.data, a.verdict, link, usage).await?;
        }
        let skip = here.map_or(0, |p| p.content);
        for (k, content) in item.contents.iter().enumerate().skip(skip) {
            let waiting = here.and_then(|p| p.waiting.as_ref()).filter(|_| k == skip);
            let shown = match waiting {
                Some(w) => Shown {
                    content: Cow::Borrowed(&w.content),
                    corr: w.corr.clone(),
                    payload: w.payload.clone(),
                    waited: Some(w.waited),
                },
                None => match prepare(agent, template, item, content, link, usage).await? {
                    Prepared::Show(shown) => *shown,
                    Prepared::Said | Prepared::Skipped => continue,
                    Prepared::Stop(reason) => return Ok(reason),
                },
            };
            if let Some(reason) = ask(agent, template, shown, link, usage, &mut score).await? {
                return Ok(reason);
            }
        }
    }
    let last = template.items.last().expect("a template has items");
    if place.is_none_or(|p| (p.item as u32) < total || !p.progress_logged) {
        link.emit(EventKind::Progress {
            current_item: total,
            total_items: total,
            item_id: last.id.clone(),
            item_title: last.title.clone(),
            enable_chat_input: true,
        })
        .await?;
    }
    let (graded, correct) = score;
    let summary = if graded > 0 {
        format!("You scored {correct} of {graded}.")
    } else {
        "All done.".to_owned()
    };
    link.emit(EventKind::Text {
        agent: agent.id.to_owned(),
        content: summary,
    })
    .await?;
    Ok(RunEndReason::Completed)
}

/// A widget about to wait for the user.
struct Shown<'a> {
    content: Cow<'a, Content>,
    corr: String,
    payload: serde_json::Value,
    /// Shown before a restart: how long it has waited.
    waited: Option<std::time::Duration>,
}

/// What preparing a content came to.
enum Prepared<'a> {
    /// A widget to show (boxed: a content is large, and the other outcomes
    /// are nothing).
    Show(Box<Shown<'a>>),
    /// A message, said.
    Said,
    /// A content that could not be generated, skipped.
    Skipped,
    /// The walk ends (a content that could not be generated, with
    /// `on_render_error: stop`).
    Stop(crate::protocol::RunEndReason),
}

/// Writes a generated content, says a message, or keeps a widget's answer key
/// (in the store, never in the log) and gives it a fresh `corr`.
async fn prepare<'a>(
    agent: &Speaker<'_>,
    template: &Template,
    item: &Item,
    content: &'a Content,
    link: &crate::link::RunLink,
    usage: &mut crate::llm::Usage,
) -> Result<Prepared<'a>, crate::link::Gone> {
    use crate::link::{Gone, RunMsg};
    use crate::protocol::{EventKind, RunEndReason};

    let shown: Cow<'a, Content> = if content.spec.is_templated {
        let skill = content
            .spec
            .skill
            .as_deref()
            .and_then(|id| template.skills.iter().find(|s| s.id == id))
            .expect("checked at load: the skill exists");
        let before = *usage;
        let generated = generate(agent, skill, content.spec.widget_type, usage).await;
        link.used(None, before, *usage).await?;
        match generated {
            Ok(g) => {
                let mut spec = content.spec.clone();
                spec.stem = Some(g.stem);
                spec.options = g.options;
                spec.correct_answer = g.correct_answer.map(Answer::One);
                spec.is_templated = false;
                Cow::Owned(Content {
                    id: content.id.clone(),
                    spec,
                })
            }
            Err(why) => {
                // Seed 004's template_render_error, shown to the user.
                link.emit(EventKind::Error {
                    message: format!("this question could not be prepared: {why}"),
                    error_code: crate::protocol::ErrorCode::ToolExecutionError,
                    details: Some(serde_json::json!({
                        "kind": "template_render_error",
                        "item_id": item.id,
                        "content_id": content.id,
                        "attempts": GENERATION_ATTEMPTS,
                    })),
                    recoverable: false,
                })
                .await?;
                return Ok(match template.on_render_error {
                    OnRenderError::Continue => Prepared::Skipped,
                    OnRenderError::Stop => Prepared::Stop(RunEndReason::Error),
                });
            }
        }
    } else {
        Cow::Borrowed(content)
    };
    let c = &shown.spec;
    if c.widget_type == WidgetType::Message {
        link.emit(EventKind::Text {
            agent: agent.id.to_owned(),
            content: c.stem.clone().unwrap_or_default(),
        })
        .await?;
        return Ok(Prepared::Said);
    }
    let corr = format!(
        "{}-{}",
        content.id,
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    // The answer key goes to the store (never to the log) first.
    if let Some(key) = &c.correct_answer {
        let (respond, kept) = tokio::sync::oneshot::channel();
        link.send(RunMsg::KeepAnswer {
            corr: corr.clone(),
            answer: serde_json::to_string(key).expect("answers serialize"),
            respond,
        })
        .await?;
        if !kept.await.map_err(|_| Gone)? {
            return Ok(Prepared::Stop(RunEndReason::Error));
        }
    }
    let mut payload = widget_payload(item, &shown);
    // The file it shows, kept in the chat and named (never inlined).
    if let (Some(file), Some(files)) = (template.files.get(&content.id), link.files()) {
        match files.keep(&file.name, None, &file.bytes).await {
            Ok(kept) => payload["file"] = serde_json::to_value(kept).unwrap_or_default(),
            Err(why) => tracing::warn!(content = %content.id, %why, "a widget's file was not kept"),
        }
    }
    Ok(Prepared::Show(Box::new(Shown {
        content: shown,
        corr,
        payload,
        waited: None,
    })))
}

/// Shows a widget and waits for its answer: grades it, logs it, and has the
/// model comment on it if the template asks. `Some` ends the walk.
async fn ask(
    agent: &Speaker<'_>,
    template: &Template,
    shown: Shown<'_>,
    link: &crate::link::RunLink,
    usage: &mut crate::llm::Usage,
    (graded, correct): &mut (u32, u32),
) -> Result<Option<crate::protocol::RunEndReason>, crate::link::Gone> {
    use crate::link::{ComponentOutcome, Gone, RunMsg};
    use crate::protocol::{Display, EventKind, RunEndReason};

    let c = &shown.content.spec;
    let (respond, outcome) = tokio::sync::oneshot::channel();
    link.send(RunMsg::ShowComponent {
        tool_name: WIDGET_TOOL.into(),
        component_type: serde_json::to_value(c.widget_type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        payload: shown.payload,
        corr: shown.corr.clone(),
        display: Display::Inline,
        check: Some(answer_check(c)),
        agent: None,
        waited: shown.waited,
        respond,
    })
    .await?;
    let data = match outcome.await.map_err(|_| Gone)? {
        ComponentOutcome::Returned(data) => data,
        ComponentOutcome::TimedOut => return Ok(Some(RunEndReason::Timeout)),
    };
    let verdict = grade(c, &data);
    if let Some(ok) = verdict {
        *graded += 1;
        *correct += u32::from(ok);
    }
    link.emit(EventKind::ToolResponse {
        tool_name: WIDGET_TOOL.into(),
        content: data.clone(),
        success: true,
        corr: shown.corr,
        agent: None,
    })
    .await?;
    if template.provide_feedback && data.get("skip").is_none() {
        comment(agent, &shown.content, &data, verdict, link, usage).await?;
    }
    Ok(None)
}

/// The model's feedback on an answer, or a `feedback_error` saying why there
/// is none.
async fn comment(
    agent: &Speaker<'_>,
    content: &Content,
    data: &serde_json::Value,
    verdict: Option<bool>,
    link: &crate::link::RunLink,
    usage: &mut crate::llm::Usage,
) -> Result<(), crate::link::Gone> {
    use crate::protocol::EventKind;

    let before = *usage;
    let feedback = feedback(agent, &content.spec, data, verdict, usage).await;
    link.used(None, before, *usage).await?;
    let event = match feedback {
        Ok(text) => EventKind::Text {
            agent: agent.id.to_owned(),
            content: text,
        },
        Err(why) => EventKind::Error {
            message: format!("no feedback on this answer: {why}"),
            error_code: crate::protocol::ErrorCode::ToolExecutionError,
            details: Some(serde_json::json!({"kind": "feedback_error", "content_id": content.id})),
            recoverable: true,
        },
    };
    link.emit(event).await
}
