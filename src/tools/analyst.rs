//! `ask_analyst` (seed 003): from the question and the chat's last SQL
//! result, the run's model writes a Vega-Lite spec. A spec that is not JSON,
//! or not an object with `mark` and `data` or `encoding`, goes back to the
//! model with what is wrong (seed 003's `json_fixer_prompt`), up to three
//! times; then the call is a tool error. The result is seed 003's
//! `{"type": "vega_lite_spec", "spec": "<the spec as a JSON string>"}`.

use serde_json::{Value, json};

use super::env::CallEnv;
use super::record::backend;
use crate::link::{Gone, ToolOutcome};
use crate::llm::{Message, ToolCall, Usage};

/// Fixes asked after the first spec.
pub(super) const FIXES: usize = 3;

/// `ask_analyst`'s input when the agent file gives none.
pub(super) fn default_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"question": {"type": "string", "description": "The chart to draw from the last query's result"}},
        "required": ["question"],
    })
}

/// The spec in a model's answer, or what is wrong with it.
pub(super) fn spec_of(answer: &str) -> Result<Value, String> {
    let text = super::database::sql_of(answer);
    let spec: Value =
        serde_json::from_str(&text).map_err(|e| format!("the answer is not valid JSON: {e}"))?;
    let Some(object) = spec.as_object() else {
        return Err("the spec must be a JSON object".into());
    };
    if !object.contains_key("mark") {
        return Err("the spec has no `mark`".into());
    }
    if !object.contains_key("data") && !object.contains_key("encoding") {
        return Err("the spec has neither `data` nor `encoding`".into());
    }
    Ok(spec)
}

pub(super) async fn run(call: &ToolCall, env: &CallEnv<'_>) -> Result<ToolOutcome, Gone> {
    let mut usage = Usage::default();
    let outcome = backend(env.link, call, chart(call, env, &mut usage)).await;
    env.add_usage(&usage).await;
    outcome
}

async fn chart(call: &ToolCall, env: &CallEnv<'_>, usage: &mut Usage) -> Result<String, String> {
    let db = env.database()?;
    let result = db
        .connections
        .chat_database(db.chat_id)
        .await
        .map_err(|e| e.to_string())?
        .and_then(|d| d.sql_result)
        .ok_or("there is no query result to chart yet: ask the database first")?;
    let question = call.input["question"].as_str().unwrap_or_default();
    let system = "You write Vega-Lite v5 specs. Answer with the spec only: one JSON object \
                  with `mark`, `encoding`, and the rows inline in `data.values`."
        .to_owned();
    let mut messages = vec![Message::user(format!(
        "Chart: {question}\n\nThe query result (columns and rows):\n{result}"
    ))];
    let mut why = String::new();
    for _ in 0..=FIXES {
        let answer = crate::llm::complete(env.provider, &system, messages.clone(), 2048, usage)
            .await
            .map_err(|e| format!("the model could not write the chart: {e}"))?;
        match spec_of(&answer) {
            Ok(spec) => {
                return Ok(json!({"type": "vega_lite_spec", "spec": spec.to_string()}).to_string());
            }
            Err(e) => {
                why = e;
                messages.push(Message::Assistant {
                    text: answer,
                    tool_calls: Vec::new(),
                });
                messages.push(Message::user(format!(
                        "That is not a valid Vega-Lite spec: {why}. Answer again with the corrected JSON object only."
                    )));
            }
        }
    }
    Err(format!(
        "no valid Vega-Lite spec after {} attempts: {why}",
        FIXES + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::spec_of;

    #[test]
    fn a_spec_is_an_object_with_a_mark_and_data_or_encoding() {
        assert!(spec_of(r#"{"mark": "bar", "encoding": {}}"#).is_ok());
        assert!(spec_of("```json\n{\"mark\": \"bar\", \"data\": {\"values\": []}}\n```").is_ok());
        assert!(spec_of("not json").unwrap_err().contains("not valid JSON"));
        assert!(spec_of("[1]").unwrap_err().contains("object"));
        assert!(spec_of(r#"{"encoding": {}}"#).unwrap_err().contains("mark"));
        assert!(
            spec_of(r#"{"mark": "bar"}"#)
                .unwrap_err()
                .contains("neither")
        );
    }
}
