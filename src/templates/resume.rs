//! Where a template walk that a restart cut off stood (issue 19), read from
//! its run's envelopes: [`Trail`] takes them in order, [`Trail::place`] finds
//! the item and content the walk goes on from, the widget still waiting, an
//! answer whose feedback is not logged yet, and the score so far. Pure: the
//! answer keys (kept in the store, never in the log) are handed in.
//!
//! The walk is deterministic given the template, so the log only has to say
//! how far it got: the last `chat.progress` names the item; after it, a
//! message content is its `chat.text`, a widget its `chat.tool_call` (the
//! payload names the content) and its answer the `chat.tool_response`, a
//! content that could not be generated its `template_render_error`; with
//! `provide_feedback`, the first `chat.text` (or `feedback_error`) after an
//! answer is the feedback on it.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use super::{Answer, Content, Template, WIDGET_TOOL, WidgetType};
use crate::protocol::EventKind;

/// What a template walk logged, in order.
#[derive(Debug, Default)]
pub struct Trail {
    /// The last `chat.progress`: its item's index and id.
    item: Option<(usize, String)>,
    /// What came after it.
    since: Vec<Step>,
    /// Every widget the run showed: its `corr` → its content id and payload.
    shown: HashMap<String, (String, Value)>,
    /// Every answer the run accepted, in order: its `corr` and data.
    answers: Vec<(String, Value)>,
}

#[derive(Debug)]
enum Step {
    Text,
    RenderError(String),
    FeedbackError,
    Shown { corr: String, ts: String },
    Answered(String),
}

/// Where the walk goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    /// The item it is in (the number of items: only the score is left).
    pub item: usize,
    /// Whether that item's `chat.progress` is logged.
    pub progress_logged: bool,
    /// Its first content not done yet.
    pub content: usize,
    /// That content, shown and waiting for its answer.
    pub waiting: Option<Waiting>,
    /// An answer whose feedback the model has not given yet.
    pub feedback: Option<Answered>,
    /// Answers graded so far, and how many of them were right.
    pub graded: u32,
    pub correct: u32,
}

/// A widget shown before the restart: shown again as it was (its
/// generated stem and options, its shuffled order), answered by its `corr`.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub corr: String,
    /// Its content as shown (a generated one with its stem, options and key).
    pub content: Content,
    pub payload: Value,
    /// How long it has waited (its timeout counts from when it was shown).
    pub waited: Duration,
}

/// An accepted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub content: Content,
    pub data: Value,
    pub verdict: Option<bool>,
}

impl Trail {
    /// Takes the run's next envelope, logged at `ts`.
    pub fn push(&mut self, kind: &EventKind, ts: &str) {
        match kind {
            EventKind::Progress {
                current_item,
                item_id,
                ..
            } => {
                self.item = Some((*current_item as usize, item_id.clone()));
                self.since.clear();
            }
            EventKind::Text { agent, .. } if agent != "user" => self.since.push(Step::Text),
            EventKind::Error {
                details: Some(d), ..
            } => match d["kind"].as_str() {
                Some("template_render_error") => {
                    let id = d["content_id"].as_str().unwrap_or_default();
                    self.since.push(Step::RenderError(id.to_owned()));
                }
                Some("feedback_error") => self.since.push(Step::FeedbackError),
                _ => {}
            },
            EventKind::ToolCall {
                tool_name,
                payload,
                corr,
                ..
            } if tool_name == WIDGET_TOOL => {
                let id = payload["content_id"].as_str().unwrap_or_default();
                self.shown
                    .insert(corr.clone(), (id.to_owned(), payload.clone()));
                self.since.push(Step::Shown {
                    corr: corr.clone(),
                    ts: ts.to_owned(),
                });
            }
            EventKind::ToolResponse {
                tool_name,
                content,
                success: true,
                corr,
                ..
            } if tool_name == WIDGET_TOOL => {
                self.answers.push((corr.clone(), content.clone()));
                self.since.push(Step::Answered(corr.clone()));
            }
            _ => {}
        }
    }

    /// The widgets whose answer key the place needs (those answered and the
    /// one waiting).
    pub fn corrs(&self) -> impl Iterator<Item = &str> {
        self.shown.keys().map(String::as_str)
    }

    /// Whether a content that could not be generated ended the walk
    /// (`on_render_error: stop`).
    pub fn stopped(&self, template: &Template) -> bool {
        template.on_render_error == super::OnRenderError::Stop
            && self.since.iter().any(|s| matches!(s, Step::RenderError(_)))
    }

    /// Whether the score is logged: the walk was over.
    pub fn scored(&self, template: &Template) -> bool {
        matches!(&self.item, Some((i, _)) if *i == template.items.len())
            && self.since.iter().any(|s| matches!(s, Step::Text))
    }

    /// Where the walk goes on, given the answer keys the store kept (by
    /// `corr`) and how long ago a time of the log was.
    ///
    /// # Errors
    /// The template changed since the walk began (an item or content the log
    /// names is not where it was): the walk cannot go on.
    pub fn place(
        &self,
        template: &Template,
        keys: &HashMap<String, Answer>,
        since: impl Fn(&str) -> Duration,
    ) -> Result<Place, String> {
        let changed = |what: String| format!("the template changed since the walk began: {what}");
        // The content a widget was, rebuilt as shown.
        let content_of = |corr: &str| -> Result<(usize, usize, Content), String> {
            let (id, payload) = self
                .shown
                .get(corr)
                .ok_or_else(|| changed(format!("no widget `{corr}`")))?;
            let (i, k, content) = template
                .items
                .iter()
                .enumerate()
                .find_map(|(i, item)| {
                    let k = item.contents.iter().position(|c| &c.id == id)?;
                    Some((i, k, &item.contents[k]))
                })
                .ok_or_else(|| changed(format!("no content `{id}`")))?;
            Ok((i, k, as_shown(content, payload, keys.get(corr))))
        };
        let (mut graded, mut correct) = (0, 0);
        for (corr, data) in &self.answers {
            let (_, _, content) = content_of(corr)?;
            if let Some(ok) = content
                .spec
                .correct_answer
                .as_ref()
                .and_then(|k| k.grades(data))
            {
                graded += 1;
                correct += u32::from(ok);
            }
        }
        let Some((item, item_id)) = &self.item else {
            // Nothing shown yet.
            return Ok(Place {
                item: 0,
                progress_logged: false,
                content: 0,
                waiting: None,
                feedback: None,
                graded,
                correct,
            });
        };
        let item = *item;
        let mut place = Place {
            item,
            progress_logged: true,
            content: 0,
            waiting: None,
            feedback: None,
            graded,
            correct,
        };
        if item == template.items.len() {
            return Ok(place);
        }
        let contents = match template.items.get(item) {
            Some(it) if &it.id == item_id => &it.contents,
            _ => return Err(changed(format!("item {item} is not `{item_id}`"))),
        };
        let index = |id: &str| {
            contents
                .iter()
                .position(|c| c.id == id)
                .ok_or_else(|| changed(format!("item `{item_id}` has no content `{id}`")))
        };
        for step in &self.since {
            match step {
                Step::Text => {
                    let is_message = contents
                        .get(place.content)
                        .is_some_and(|c| c.spec.widget_type == WidgetType::Message);
                    if place.feedback.take().is_none() && is_message {
                        place.content += 1;
                    }
                }
                Step::RenderError(id) => {
                    place.content = index(id)? + 1;
                    place.feedback = None;
                }
                Step::FeedbackError => place.feedback = None,
                Step::Shown { corr, ts } => {
                    let (i, k, content) = content_of(corr)?;
                    if i != item {
                        return Err(changed(format!("`{corr}` is not in item `{item_id}`")));
                    }
                    place.content = k;
                    place.feedback = None;
                    place.waiting = Some(Waiting {
                        corr: corr.clone(),
                        content,
                        payload: self.shown[corr].1.clone(),
                        waited: since(ts),
                    });
                }
                Step::Answered(corr) => {
                    let (_, k, content) = content_of(corr)?;
                    place.content = k + 1;
                    place.waiting = None;
                    let data = self
                        .answers
                        .iter()
                        .find(|(c, _)| c == corr)
                        .map(|(_, d)| d.clone())
                        .unwrap_or_default();
                    let skipped = data.get("skip").is_some();
                    place.feedback = (template.provide_feedback && !skipped).then(|| Answered {
                        verdict: content
                            .spec
                            .correct_answer
                            .as_ref()
                            .and_then(|k| k.grades(&data)),
                        content,
                        data,
                    });
                }
            }
        }
        Ok(place)
    }
}

/// A content as its widget showed it: a generated one takes its stem and
/// options from the payload and its key from the store.
fn as_shown(content: &Content, payload: &Value, key: Option<&Answer>) -> Content {
    let mut spec = content.spec.clone();
    if spec.is_templated {
        spec.stem = payload["stem"].as_str().map(str::to_owned);
        spec.options = payload["options"]
            .as_array()
            .map(|o| {
                o.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        spec.correct_answer = key.cloned();
        spec.is_templated = false;
    } else if let Some(key) = key {
        spec.correct_answer = Some(key.clone());
    }
    Content {
        id: content.id.clone(),
        spec,
    }
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
