//! Conversation templates (seed 004): the `template:` section of an agent
//! file, parsed and checked into a [`Template`] the runtime can walk.
//!
//! A template is ordered items; an item holds contents; a content is a widget
//! (`message`, `multiple_choice`, `free_text`, `code_editor`) with static
//! fields, or `is_templated: true` with a skill whose prompt templates the
//! agent's model fills. Every mistake is reported with its path
//! (`template.items[1].contents[0].options: …`), so a bad file stops start-up
//! saying where.

use std::collections::{BTreeMap, HashSet};

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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentSpec {
    #[serde(default)]
    pub id: Option<String>,
    pub widget_type: WidgetType,
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
}

/// A checked item: ids filled in.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub title: String,
    pub enable_chat_input: bool,
    pub contents: Vec<Content>,
}

/// A checked content: ids filled in.
#[derive(Debug, Clone)]
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
        })
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

// ----- running a template --------------------------------------------------

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
fn answer_check(c: &ContentSpec) -> super::link::AnswerCheck {
    let c = c.clone();
    super::link::AnswerCheck::new(move |data| {
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
    let correct = c.correct_answer.as_ref()?;
    let answer = data.get("answer")?;
    let given: HashSet<&str> = match answer {
        serde_json::Value::String(s) => [s.as_str()].into(),
        serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
        _ => return Some(false),
    };
    let expected: HashSet<&str> = match correct {
        Answer::One(a) => [a.as_str()].into(),
        Answer::Several(list) => list.iter().map(String::as_str).collect(),
    };
    Some(given == expected)
}

// ----- generated contents (seed 004 §5) --------------------------------------

/// Attempts at a valid generated content before the item fails.
const GENERATION_ATTEMPTS: usize = 3;

/// What the model writes for a generated content.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Generated {
    stem: String,
    #[serde(default)]
    options: Vec<String>,
    #[serde(default)]
    correct_answer: Option<String>,
}

/// `${name}` → the skill's variable `name`.
fn fill(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}

/// Seed 004 §5's generation prompt, asking for the answer too.
fn generation_prompt(skill: &SkillSpec, widget: WidgetType) -> String {
    let mut p = String::from(
        "Generate content for a conversation item based on the following template.\n\
         Return ONLY the requested content as valid JSON, no explanations.\n\n",
    );
    p.push_str(&format!(
        "Stem template: {}\n",
        fill(&skill.stem, &skill.variables)
    ));
    if let Some(o) = &skill.options {
        p.push_str(&format!(
            "Options template: {}\n",
            fill(o, &skill.variables)
        ));
    }
    if let Some(d) = skill.difficulty {
        p.push_str(&format!("Difficulty: from {} to {}\n", d.min, d.max));
    }
    p.push_str("\nREQUIRED FORMAT: Return a JSON object with exactly these keys:\n");
    p.push_str("  - \"stem\": A string with the question or prompt text\n");
    if widget == WidgetType::MultipleChoice {
        p.push_str("  - \"options\": An array of 3-5 option strings\n");
        p.push_str("  - \"correct_answer\": The correct option, exactly as in \"options\"\n");
        p.push_str(
            "\nExample: {\"stem\": \"What is 15 + 27?\", \"options\": [\"32\", \"42\", \"52\", \"62\"], \"correct_answer\": \"42\"}\n",
        );
    }
    for e in &skill.examples {
        p.push_str(&format!("\nAnother example: {e}\n"));
    }
    p
}

/// Reads the model's reply: the JSON object in it (code fences allowed),
/// checked for the widget.
fn parse_generated(text: &str, widget: WidgetType) -> Result<Generated, String> {
    let start = text.find('{').ok_or("no JSON object in the reply")?;
    let end = text.rfind('}').ok_or("no JSON object in the reply")?;
    if end < start {
        return Err("no JSON object in the reply".into());
    }
    let g: Generated = serde_json::from_str(&text[start..=end])
        .map_err(|e| format!("not the JSON asked for: {e}"))?;
    if g.stem.trim().is_empty() {
        return Err("\"stem\" is empty".into());
    }
    if widget == WidgetType::MultipleChoice {
        if !(3..=5).contains(&g.options.len()) {
            return Err(format!(
                "\"options\" has {} entries, not 3 to 5",
                g.options.len()
            ));
        }
        let mut seen = HashSet::new();
        if g.options
            .iter()
            .any(|o| o.trim().is_empty() || !seen.insert(o))
        {
            return Err("\"options\" must be non-empty and distinct".into());
        }
        match &g.correct_answer {
            Some(a) if g.options.contains(a) => {}
            Some(a) => {
                return Err(format!(
                    "\"correct_answer\" `{a}` is not one of \"options\""
                ));
            }
            None => return Err("\"correct_answer\" is missing".into()),
        }
    }
    Ok(g)
}

/// One model call without tools: its text, or why it failed. Usage is added up.
async fn complete(
    agent: &super::Agent,
    messages: Vec<crate::llm::Message>,
    max_tokens: u32,
    usage: &mut crate::llm::Usage,
) -> Result<String, String> {
    use futures_util::StreamExt;

    use crate::llm::{ChatRequest, StreamEvent};

    let request = ChatRequest {
        system_prompt: agent.system_prompt.clone(),
        messages,
        tools: Vec::new(),
        max_tokens,
    };
    let mut stream = agent
        .provider
        .stream_chat(request)
        .await
        .map_err(|e| e.message)?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::ContentDelta(t) => text.push_str(&t),
            StreamEvent::MessageComplete { usage: u, .. } => {
                usage.prompt_tokens += u.prompt_tokens;
                usage.completion_tokens += u.completion_tokens;
            }
            StreamEvent::Error(e) => return Err(e.message),
            _ => {}
        }
    }
    Ok(text)
}

/// Asks the agent's model for a content, sending its mistakes back up to
/// [`GENERATION_ATTEMPTS`] times.
async fn generate(
    agent: &super::Agent,
    skill: &SkillSpec,
    widget: WidgetType,
    usage: &mut crate::llm::Usage,
) -> Result<Generated, String> {
    use crate::llm::Message;

    let mut messages = vec![Message::User {
        text: generation_prompt(skill, widget),
    }];
    let mut last = String::new();
    for _ in 0..GENERATION_ATTEMPTS {
        // A call that breaks is asked again as it was.
        let text = match complete(agent, messages.clone(), 1024, usage).await {
            Ok(text) => text,
            Err(e) => {
                last = e;
                continue;
            }
        };
        match parse_generated(&text, widget) {
            Ok(g) => return Ok(g),
            Err(e) => {
                messages.push(Message::Assistant {
                    text,
                    tool_calls: Vec::new(),
                });
                messages.push(Message::User {
                    text: format!(
                        "That reply was not valid: {e}. Reply with the JSON object only."
                    ),
                });
                last = e;
            }
        }
    }
    Err(last)
}

/// The model's comment on an answer (`provide_feedback`).
async fn feedback(
    agent: &super::Agent,
    c: &ContentSpec,
    data: &serde_json::Value,
    correct: Option<bool>,
    usage: &mut crate::llm::Usage,
) -> Result<String, String> {
    let verdict = match correct {
        Some(true) => "The answer is correct.",
        Some(false) => "The answer is not correct.",
        None => "This question has no single correct answer.",
    };
    let mut prompt = format!(
        "The user was asked: {}\n",
        c.stem.as_deref().unwrap_or_default()
    );
    if !c.options.is_empty() {
        prompt.push_str(&format!("Options: {}\n", c.options.join(" | ")));
    }
    prompt.push_str(&format!(
        "The user answered: {}\n{verdict}\nComment on the answer in two or three sentences, addressing the user.",
        data.get("answer").map_or_else(String::new, |a| match a {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    ));
    let messages = vec![crate::llm::Message::User { text: prompt }];
    Ok(complete(agent, messages, 512, usage)
        .await?
        .trim()
        .to_owned())
}

/// Walks the template: for each item a `chat.progress`, then its contents in
/// order (a message as `chat.text`, a widget as a `chat.tool_call` awaiting
/// the user, its accepted answer logged as the `chat.tool_response`), then a
/// final `chat.progress` and a `chat.text` with the score.
pub(super) async fn run(
    agent: &super::Agent,
    template: &Template,
    link: &super::link::RunLink,
    usage: &mut crate::llm::Usage,
) -> Result<crate::protocol::RunEndReason, super::link::Gone> {
    use super::link::{ComponentOutcome, Gone, RunMsg};
    use crate::protocol::{Display, EventKind, RunEndReason};

    let total = template.items.len() as u32;
    let (mut graded, mut correct) = (0u32, 0u32);
    for (i, item) in template.items.iter().enumerate() {
        link.emit(EventKind::Progress {
            current_item: i as u32,
            total_items: total,
            item_id: item.id.clone(),
            item_title: item.title.clone(),
            enable_chat_input: item.enable_chat_input,
        })
        .await?;
        for content in &item.contents {
            let shown: std::borrow::Cow<'_, Content> = if content.spec.is_templated {
                let skill = content
                    .spec
                    .skill
                    .as_deref()
                    .and_then(|id| template.skills.iter().find(|s| s.id == id))
                    .expect("checked at load: the skill exists");
                match generate(agent, skill, content.spec.widget_type, usage).await {
                    Ok(g) => {
                        let mut spec = content.spec.clone();
                        spec.stem = Some(g.stem);
                        spec.options = g.options;
                        spec.correct_answer = g.correct_answer.map(Answer::One);
                        spec.is_templated = false;
                        std::borrow::Cow::Owned(Content {
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
                        match template.on_render_error {
                            OnRenderError::Continue => continue,
                            OnRenderError::Stop => return Ok(RunEndReason::Error),
                        }
                    }
                }
            } else {
                std::borrow::Cow::Borrowed(content)
            };
            let content = &*shown;
            let c = &content.spec;
            if c.widget_type == WidgetType::Message {
                let text = c.stem.clone().unwrap_or_default();
                link.emit(EventKind::Text {
                    agent: agent.id.clone(),
                    content: text,
                })
                .await?;
                continue;
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
                    return Ok(RunEndReason::Error);
                }
            }
            let (respond, outcome) = tokio::sync::oneshot::channel();
            link.send(RunMsg::ShowComponent {
                tool_name: WIDGET_TOOL.into(),
                component_type: serde_json::to_value(c.widget_type)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                payload: widget_payload(item, content),
                corr: corr.clone(),
                display: Display::Inline,
                check: Some(answer_check(c)),
                respond,
            })
            .await?;
            match outcome.await.map_err(|_| Gone)? {
                ComponentOutcome::Returned(data) => {
                    let verdict = grade(c, &data);
                    if let Some(ok) = verdict {
                        graded += 1;
                        correct += u32::from(ok);
                    }
                    let skipped = data.get("skip").is_some();
                    link.emit(EventKind::ToolResponse {
                        tool_name: WIDGET_TOOL.into(),
                        content: data.clone(),
                        success: true,
                        corr,
                    })
                    .await?;
                    if template.provide_feedback && !skipped {
                        let event = match feedback(agent, c, &data, verdict, usage).await {
                            Ok(text) => EventKind::Text {
                                agent: agent.id.clone(),
                                content: text,
                            },
                            Err(why) => EventKind::Error {
                                message: format!("no feedback on this answer: {why}"),
                                error_code: crate::protocol::ErrorCode::ToolExecutionError,
                                details: Some(
                                    serde_json::json!({"kind": "feedback_error", "content_id": content.id}),
                                ),
                                recoverable: true,
                            },
                        };
                        link.emit(event).await?;
                    }
                }
                ComponentOutcome::TimedOut => return Ok(RunEndReason::Timeout),
            }
        }
    }
    let last = template.items.last().expect("a template has items");
    link.emit(EventKind::Progress {
        current_item: total,
        total_items: total,
        item_id: last.id.clone(),
        item_title: last.title.clone(),
        enable_chat_input: true,
    })
    .await?;
    let summary = if graded > 0 {
        format!("You scored {correct} of {graded}.")
    } else {
        "All done.".to_owned()
    };
    link.emit(EventKind::Text {
        agent: agent.id.clone(),
        content: summary,
    })
    .await?;
    Ok(RunEndReason::Completed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Template, String> {
        let spec: TemplateSpec = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        Template::from_spec(spec)
    }

    const QUIZ: &str = r#"
title: Capitals
skills:
  - id: capital
    stem: "Ask for the capital of ${country}"
    options: "4 plausible capitals"
    variables: {country: France}
    difficulty: {min: 1, max: 3}
items:
  - title: Welcome
    contents:
      - widget_type: message
        stem: "Three questions."
  - id: q
    contents:
      - widget_type: multiple_choice
        stem: "Capital of France?"
        options: [London, Paris, Berlin]
        correct_answer: Paris
        widget_config: {shuffle_options: true}
      - widget_type: free_text
        stem: "Why?"
        required: false
        skippable: true
        widget_config: {min_length: 3, max_length: 100, placeholder: "…"}
      - widget_type: code_editor
        stem: "Print it"
        widget_config: {language: python}
      - widget_type: multiple_choice
        is_templated: true
        skill: capital
"#;

    #[test]
    fn a_quiz_parses_with_ids_filled_in() {
        let t = parse(QUIZ).unwrap();
        assert_eq!(t.items.len(), 2);
        assert_eq!(t.items[0].id, "item-1");
        assert_eq!(t.items[0].title, "Welcome");
        assert_eq!(t.items[1].title, "Item 2");
        assert_eq!(t.items[1].contents[0].id, "q-1");
        assert_eq!(t.questions(), 4);
        assert_eq!(t.on_render_error, OnRenderError::Continue);
        let mc = &t.items[1].contents[0].spec;
        assert!(mc.required && !mc.skippable && mc.show_user_response);
        assert_eq!(mc.correct_answer, Some(Answer::One("Paris".into())));
    }

    #[test]
    fn generated_content_is_checked() {
        let mc = WidgetType::MultipleChoice;
        let good = r#"Sure! ```json
{"stem": "2 + 2?", "options": ["3", "4", "5"], "correct_answer": "4"}
```"#;
        let g = parse_generated(good, mc).unwrap();
        assert_eq!(g.stem, "2 + 2?");
        assert_eq!(g.correct_answer.as_deref(), Some("4"));
        let cases = [
            ("no json here", "no JSON object in the reply"),
            (
                r#"{"stem": "", "options": ["a","b","c"], "correct_answer": "a"}"#,
                "\"stem\" is empty",
            ),
            (
                r#"{"stem": "s", "options": ["a","b"], "correct_answer": "a"}"#,
                "\"options\" has 2 entries, not 3 to 5",
            ),
            (
                r#"{"stem": "s", "options": ["a","b","a"], "correct_answer": "a"}"#,
                "\"options\" must be non-empty and distinct",
            ),
            (
                r#"{"stem": "s", "options": ["a","b","c"], "correct_answer": "d"}"#,
                "\"correct_answer\" `d` is not one of \"options\"",
            ),
            (
                r#"{"stem": "s", "options": ["a","b","c"]}"#,
                "\"correct_answer\" is missing",
            ),
        ];
        for (reply, why) in cases {
            assert_eq!(parse_generated(reply, mc).unwrap_err(), why, "{reply}");
        }
        assert!(
            parse_generated(r#"{"stem": 3}"#, mc)
                .unwrap_err()
                .starts_with("not the JSON asked for")
        );
        // A generated message needs a stem only.
        assert!(parse_generated(r#"{"stem": "Hi"}"#, WidgetType::Message).is_ok());
    }

    #[test]
    fn the_prompt_fills_the_skill() {
        let t = parse(QUIZ).unwrap();
        let p = generation_prompt(&t.skills[0], WidgetType::MultipleChoice);
        assert!(
            p.contains("Stem template: Ask for the capital of France"),
            "{p}"
        );
        assert!(p.contains("Difficulty: from 1 to 3"), "{p}");
        assert!(p.contains("\"correct_answer\""), "{p}");
    }

    #[test]
    fn mistakes_name_their_field() {
        let cases = [
            (
                "items: []",
                "template.items: a template needs at least one item",
            ),
            (
                "items: [{contents: [{widget_type: message}]}]",
                "template.items[0].contents[0].stem: must not be empty",
            ),
            (
                "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a]}]}]",
                "template.items[0].contents[0].options: 2 to 20 options",
            ),
            (
                "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a, a]}]}]",
                "template.items[0].contents[0].options: options are non-empty and distinct",
            ),
            (
                "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a, b], correct_answer: c}]}]",
                "template.items[0].contents[0].correct_answer: `c` is not an option",
            ),
            (
                "items: [{contents: [{widget_type: multiple_choice, stem: s, options: [a, b], correct_answer: [a, b]}]}]",
                "template.items[0].contents[0].correct_answer: several answers need widget_config.allow_multiple",
            ),
            (
                "items: [{contents: [{widget_type: free_text, stem: s, widget_config: {min_length: 9, max_length: 3}}]}]",
                "template.items[0].contents[0].widget_config: min_length is above max_length",
            ),
            (
                "items: [{contents: [{widget_type: free_text, stem: s, skippable: true}]}]",
                "template.items[0].contents[0].skippable: a required content cannot be skippable",
            ),
            (
                "items: [{contents: [{widget_type: multiple_choice, is_templated: true, skill: nope}]}]",
                "template.items[0].contents[0].skill: no skill `nope` in template.skills",
            ),
            (
                "items: [{contents: [{widget_type: free_text, stem: s, widget_config: {language: rust}}]}]",
                "template.items[0].contents[0].widget_config: language is for code_editor",
            ),
            (
                "items: [{id: a, contents: [{widget_type: message, stem: s}]}, {id: a, contents: [{widget_type: message, stem: s}]}]",
                "template.items[1].id: is used twice",
            ),
            (
                "skills: [{id: s, stem: x, difficulty: {min: 3, max: 1}}]\nitems: [{contents: [{widget_type: message, stem: s}]}]",
                "template.skills[0].difficulty: min is above max",
            ),
        ];
        for (yaml, expected) in cases {
            assert_eq!(parse(yaml).unwrap_err(), expected, "{yaml}");
        }
        let unknown = parse("items: [{contents: [{widget_type: message, stem: s, colour: red}]}]")
            .unwrap_err();
        assert!(unknown.contains("colour"), "{unknown}");
        let bad_type = parse("items: [{contents: [{widget_type: slider, stem: s}]}]").unwrap_err();
        assert!(bad_type.contains("slider"), "{bad_type}");
    }
}
