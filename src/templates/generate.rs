//! Generated contents (seed 004 §5): the agent's model writes a question from
//! a skill, checked and sent back with the mistake a few times; and its
//! feedback on an answer.

use super::*;

/// Attempts at a valid generated content before the item fails.
pub(super) const GENERATION_ATTEMPTS: usize = 3;

/// What the model writes for a generated content.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(super) struct Generated {
    pub(super) stem: String,
    #[serde(default)]
    pub(super) options: Vec<String>,
    #[serde(default)]
    pub(super) correct_answer: Option<String>,
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
pub(super) fn generation_prompt(skill: &SkillSpec, widget: WidgetType) -> String {
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
pub(super) fn parse_generated(text: &str, widget: WidgetType) -> Result<Generated, String> {
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

/// One model call without tools, as the speaker.
async fn complete(
    agent: &Speaker<'_>,
    messages: Vec<crate::llm::Message>,
    max_tokens: u32,
    usage: &mut crate::llm::Usage,
) -> Result<String, String> {
    crate::llm::complete(
        agent.provider,
        agent.system_prompt,
        messages,
        max_tokens,
        usage,
    )
    .await
}

/// Asks the agent's model for a content, sending its mistakes back up to
/// [`GENERATION_ATTEMPTS`] times.
pub(super) async fn generate(
    agent: &Speaker<'_>,
    skill: &SkillSpec,
    widget: WidgetType,
    usage: &mut crate::llm::Usage,
) -> Result<Generated, String> {
    use crate::llm::Message;

    let mut messages = vec![Message::user(generation_prompt(skill, widget))];
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
                messages.push(Message::user(format!(
                    "That reply was not valid: {e}. Reply with the JSON object only."
                )));
                last = e;
            }
        }
    }
    Err(last)
}

/// The model's comment on an answer (`provide_feedback`).
pub(super) async fn feedback(
    agent: &Speaker<'_>,
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
    let messages = vec![crate::llm::Message::user(prompt)];
    Ok(complete(agent, messages, 512, usage)
        .await?
        .trim()
        .to_owned())
}
