//! Conversation templates (seed 004): the `template:` section of an agent
//! file, parsed and checked into a [`Template`] the runtime can walk.
//!
//! A template is ordered items; an item holds contents; a content is a widget
//! (`message`, `multiple_choice`, `free_text`, `code_editor`) with static
//! fields, or `is_templated: true` with a skill whose prompt templates the
//! agent's model fills. Every mistake is reported with its path
//! (`template.items[1].contents[0].options: …`), so a bad file stops start-up
//! saying where.
//!
//! This file is the spec and its checks; `generate` the contents the model
//! writes and its feedback; `run` the walk a template run does instead of the
//! model loop. A widget's answer is checked by the chat actor, through the
//! `AnswerCheck` the run hands it, before anything is logged; the answer key
//! goes to the store (`RunMsg::KeepAnswer`), never to the log.
//!
//! Uses `link`, `llm` and `protocol`; knows nothing of agents: a run is given
//! the [`Speaker`] it speaks as.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;

/// The `template:` section as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateSpec {
    #[serde(default)]
    pub title: Option<String>,
    /// After each answer the agent's model comments on it.
    #[serde(default)]
    pub provide_feedback: bool,
    /// What a content that cannot be generated does to the conversation.
    #[serde(default)]
    pub on_render_error: OnRenderError,
    /// Skill templates that generated contents name.
    #[serde(default)]
    pub skills: Vec<SkillSpec>,
    pub items: Vec<ItemSpec>,
}

/// What happens after a `template_render_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRenderError {
    /// The item is skipped; the conversation goes on.
    #[default]
    Continue,
    /// The conversation ends.
    Stop,
}

/// A skill template: what the model is asked to write.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillSpec {
    pub id: String,
    /// The stem's prompt template; `${name}` takes a variable.
    pub stem: String,
    /// The options' prompt template.
    #[serde(default)]
    pub options: Option<String>,
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    #[serde(default)]
    pub difficulty: Option<Difficulty>,
    /// Example outputs shown to the model.
    #[serde(default)]
    pub examples: Vec<String>,
}

/// A difficulty range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Difficulty {
    pub min: u32,
    pub max: u32,
}

/// One item as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemSpec {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Whether the chat input is usable during the item.
    #[serde(default)]
    pub enable_chat_input: bool,
    pub contents: Vec<ContentSpec>,
}

/// One content as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub widget_type: WidgetType,
    /// A file the widget shows (a worksheet, a chart), by its path in the
    /// agents folder: kept in the chat when the widget is shown, named in
    /// its payload (widgets that ask only).
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub stem: Option<String>,
    #[serde(default)]
    pub options: Vec<String>,
    /// For grading (never sent to a client): an option, or several with
    /// `allow_multiple`.
    #[serde(default)]
    pub correct_answer: Option<Answer>,
    #[serde(default)]
    pub widget_config: WidgetConfig,
    #[serde(default = "yes")]
    pub required: bool,
    #[serde(default)]
    pub skippable: bool,
    #[serde(default = "yes")]
    pub show_user_response: bool,
    #[serde(default)]
    pub is_templated: bool,
    /// The skill a templated content is generated from.
    #[serde(default)]
    pub skill: Option<String>,
}

fn yes() -> bool {
    true
}

/// A correct answer: one option or several.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum Answer {
    One(String),
    Several(Vec<String>),
}

/// The widgets of seed 004 §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WidgetType {
    Message,
    MultipleChoice,
    FreeText,
    CodeEditor,
}

impl WidgetType {
    /// Whether the widget waits for the user.
    pub fn awaits_input(self) -> bool {
        self != Self::Message
    }
}

/// Widget settings (seed 004 §2.4, §3).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct WidgetConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_options: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_multiple: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// A checked template.
#[derive(Debug, Clone)]
pub struct Template {
    pub title: Option<String>,
    pub provide_feedback: bool,
    pub on_render_error: OnRenderError,
    pub skills: Vec<SkillSpec>,
    pub items: Vec<Item>,
    /// The files its widgets show, by content id: read from the agents
    /// folder when the agent is loaded ([`Template::read_files`]).
    pub files: std::collections::HashMap<String, Arc<WidgetFile>>,
}

/// A file a widget shows: its name and bytes.
#[derive(Clone, PartialEq)]
pub struct WidgetFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for WidgetFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WidgetFile")
            .field("name", &self.name)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// The largest file a widget may show.
const MAX_WIDGET_FILE_BYTES: u64 = 10 << 20;

/// A checked item: ids filled in.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub title: String,
    pub enable_chat_input: bool,
    pub contents: Vec<Content>,
}

/// A checked content: ids filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    pub id: String,
    pub spec: ContentSpec,
}

/// Most options a multiple-choice widget may offer.
const MAX_OPTIONS: usize = 20;

impl Template {
    /// Checks a `template:` section; errors name the field's path.
    ///
    /// # Errors
    /// The first mistake found, as `template.<path>: <what is wrong>`.
    pub fn from_spec(spec: TemplateSpec) -> Result<Self, String> {
        let fail = |path: String, what: &str| Err(format!("template.{path}: {what}"));
        if spec.items.is_empty() {
            return fail("items".into(), "a template needs at least one item");
        }
        let mut skill_ids = HashSet::new();
        for (i, s) in spec.skills.iter().enumerate() {
            if s.id.is_empty() {
                return fail(format!("skills[{i}].id"), "must not be empty");
            }
            if !skill_ids.insert(s.id.as_str()) {
                return fail(format!("skills[{i}].id"), "is defined twice");
            }
            if s.stem.trim().is_empty() {
                return fail(format!("skills[{i}].stem"), "must not be empty");
            }
            if let Some(d) = s.difficulty
                && d.min > d.max
            {
                return fail(format!("skills[{i}].difficulty"), "min is above max");
            }
        }
        let mut ids = HashSet::new();
        let mut items = Vec::with_capacity(spec.items.len());
        for (i, item) in spec.items.into_iter().enumerate() {
            let at = format!("items[{i}]");
            if item.contents.is_empty() {
                return fail(
                    format!("{at}.contents"),
                    "an item needs at least one content",
                );
            }
            let id = item.id.unwrap_or_else(|| format!("item-{}", i + 1));
            if !ids.insert(id.clone()) {
                return fail(format!("{at}.id"), "is used twice");
            }
            let mut contents = Vec::with_capacity(item.contents.len());
            for (j, c) in item.contents.into_iter().enumerate() {
                let at = format!("{at}.contents[{j}]");
                check_content(&c, &skill_ids).map_err(|(field, what)| {
                    if field.is_empty() {
                        format!("template.{at}: {what}")
                    } else {
                        format!("template.{at}.{field}: {what}")
                    }
                })?;
                let cid = c.id.clone().unwrap_or_else(|| format!("{id}-{}", j + 1));
                if !ids.insert(cid.clone()) {
                    return fail(format!("{at}.id"), "is used twice");
                }
                contents.push(Content { id: cid, spec: c });
            }
            items.push(Item {
                title: item.title.unwrap_or_else(|| format!("Item {}", i + 1)),
                id,
                enable_chat_input: item.enable_chat_input,
                contents,
            });
        }
        Ok(Self {
            title: spec.title,
            provide_feedback: spec.provide_feedback,
            on_render_error: spec.on_render_error,
            skills: spec.skills,
            items,
            files: std::collections::HashMap::new(),
        })
    }

    /// Reads the files its widgets show from `dir` (the agents folder): a
    /// relative path inside it, at most 10 MiB.
    ///
    /// # Errors
    /// The content's path and why.
    pub fn read_files(&mut self, dir: &std::path::Path) -> Result<(), String> {
        for (i, item) in self.items.iter().enumerate() {
            for (j, c) in item.contents.iter().enumerate() {
                let Some(path) = &c.spec.file else { continue };
                let at = format!("template.items[{i}].contents[{j}].file");
                let rel = std::path::Path::new(path);
                let inside = rel
                    .components()
                    .all(|p| matches!(p, std::path::Component::Normal(_)));
                if !inside || path.is_empty() {
                    return Err(format!(
                        "{at}: `{path}` must be a path inside the agents folder"
                    ));
                }
                let full = dir.join(rel);
                let size = std::fs::metadata(&full)
                    .map_err(|e| format!("{at}: cannot read `{path}`: {e}"))?
                    .len();
                if size > MAX_WIDGET_FILE_BYTES {
                    return Err(format!("{at}: `{path}` is over 10 MiB"));
                }
                let bytes =
                    std::fs::read(&full).map_err(|e| format!("{at}: cannot read `{path}`: {e}"))?;
                let name = rel
                    .file_name()
                    .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
                self.files
                    .insert(c.id.clone(), Arc::new(WidgetFile { name, bytes }));
            }
        }
        Ok(())
    }

    /// How many contents wait for an answer (what a score is out of).
    pub fn questions(&self) -> usize {
        self.items
            .iter()
            .flat_map(|i| &i.contents)
            .filter(|c| c.spec.widget_type.awaits_input())
            .count()
    }
}

/// Checks one content; the error is `(field, what)`.
fn check_content(c: &ContentSpec, skills: &HashSet<&str>) -> Result<(), (&'static str, String)> {
    let cfg = &c.widget_config;
    if c.required && c.skippable {
        return Err(("skippable", "a required content cannot be skippable".into()));
    }
    if c.file.is_some() && !c.widget_type.awaits_input() {
        return Err((
            "file",
            "only a widget that asks shows a file (put it on the question)".into(),
        ));
    }
    if c.is_templated {
        let Some(skill) = &c.skill else {
            return Err(("skill", "a templated content names its skill".into()));
        };
        if !skills.contains(skill.as_str()) {
            return Err(("skill", format!("no skill `{skill}` in template.skills")));
        }
        if c.widget_type != WidgetType::MultipleChoice && c.widget_type != WidgetType::Message {
            return Err((
                "is_templated",
                "only message and multiple_choice contents are generated".into(),
            ));
        }
        if c.correct_answer.is_some() || !c.options.is_empty() {
            return Err((
                "is_templated",
                "a generated content takes its stem, options and answer from the model".into(),
            ));
        }
        return Ok(());
    }
    if c.skill.is_some() {
        return Err(("skill", "only for `is_templated: true`".into()));
    }
    let stem = c.stem.as_deref().unwrap_or_default();
    if stem.trim().is_empty() {
        return Err(("stem", "must not be empty".into()));
    }
    let multiple = cfg.allow_multiple == Some(true);
    match c.widget_type {
        WidgetType::Message => {
            if !c.options.is_empty() || c.correct_answer.is_some() {
                return Err(("", "a message has no options or answer".into()));
            }
        }
        WidgetType::MultipleChoice => {
            if !(2..=MAX_OPTIONS).contains(&c.options.len()) {
                return Err(("options", format!("2 to {MAX_OPTIONS} options")));
            }
            let mut seen = HashSet::new();
            if c.options
                .iter()
                .any(|o| o.trim().is_empty() || !seen.insert(o))
            {
                return Err(("options", "options are non-empty and distinct".into()));
            }
            match &c.correct_answer {
                None => {}
                Some(Answer::One(a)) if !c.options.contains(a) => {
                    return Err(("correct_answer", format!("`{a}` is not an option")));
                }
                Some(Answer::Several(list)) => {
                    if !multiple {
                        return Err((
                            "correct_answer",
                            "several answers need widget_config.allow_multiple".into(),
                        ));
                    }
                    if let Some(a) = list.iter().find(|a| !c.options.contains(a)) {
                        return Err(("correct_answer", format!("`{a}` is not an option")));
                    }
                }
                Some(Answer::One(_)) => {}
            }
        }
        WidgetType::FreeText | WidgetType::CodeEditor => {
            if !c.options.is_empty() || c.correct_answer.is_some() {
                return Err(("", "a text answer has no options or answer".into()));
            }
            if let (Some(min), Some(max)) = (cfg.min_length, cfg.max_length)
                && min > max
            {
                return Err(("widget_config", "min_length is above max_length".into()));
            }
        }
    }
    if c.widget_type != WidgetType::MultipleChoice
        && (cfg.shuffle_options.is_some() || cfg.allow_multiple.is_some())
    {
        return Err((
            "widget_config",
            "shuffle_options and allow_multiple are for multiple_choice".into(),
        ));
    }
    if c.widget_type != WidgetType::CodeEditor && cfg.language.is_some() {
        return Err(("widget_config", "language is for code_editor".into()));
    }
    Ok(())
}

mod generate;
mod resume;
mod run;

pub use resume::{Place, Trail};
pub use run::{WIDGET_TOOL, run};

/// The agent a template run speaks as: its id (on the `chat.text`s it logs)
/// and the model that writes generated contents and feedback.
pub struct Speaker<'a> {
    pub id: &'a str,
    pub system_prompt: &'a str,
    pub provider: &'a dyn crate::llm::Provider,
}

#[cfg(test)]
mod tests;
