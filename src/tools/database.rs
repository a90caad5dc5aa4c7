//! `ask_database` (seed 003): the chat's model writes one SQL query from the
//! question and the chat's database schema; the server runs it read-only
//! (`databases::query`) and keeps the result as the chat's `sql_result`. A
//! query that fails goes back to the model as a tool error, with the SQL, so
//! it can ask again.

use serde_json::{Value, json};

use super::env::CallEnv;
use super::record::backend;
use crate::link::{Gone, ToolOutcome};
use crate::llm::{Message, ToolCall, Usage};

/// `ask_database`'s input when the agent file gives none.
pub(super) fn default_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"question": {"type": "string", "description": "What to find out from the database, in plain words"}},
        "required": ["question"],
    })
}

/// The SQL in a model's answer: the first fenced block, or the whole text.
pub(super) fn sql_of(answer: &str) -> String {
    let text = answer.trim();
    if let Some(start) = text.find("```") {
        let body = &text[start + 3..];
        let body = body.split_once('\n').map_or(body, |(lang, rest)| {
            if lang.trim().chars().all(|c| c.is_ascii_alphanumeric()) {
                rest
            } else {
                body
            }
        });
        if let Some(end) = body.find("```") {
            return body[..end].trim().to_owned();
        }
    }
    text.to_owned()
}

pub(super) async fn run(call: &ToolCall, env: &CallEnv<'_>) -> Result<ToolOutcome, Gone> {
    backend(env.link, call, answer(call, env)).await
}

async fn answer(call: &ToolCall, env: &CallEnv<'_>) -> Result<String, String> {
    let db = env.database()?;
    let question = call.input["question"].as_str().unwrap_or_default();
    let q = db
        .connections
        .chat_query(db.user, db.chat_id)
        .await
        .map_err(|e| e.to_string())?;
    let system = format!(
        "You write one {} query that answers a question about this database. \
         Answer with the SQL only: one read-only SELECT statement, no explanation.\n\n{}",
        q.dialect, q.db_schema
    );
    let mut usage = Usage::default();
    let written = crate::llm::complete(
        env.provider,
        &system,
        vec![Message::user(question.to_owned())],
        1024,
        &mut usage,
    )
    .await;
    env.add_usage(&usage).await;
    let sql = sql_of(&written.map_err(|e| format!("the model could not write the query: {e}"))?);
    match db.connections.query(&q, &sql).await {
        Ok(result) => {
            let mut out = json!({"sql": sql, "columns": result.columns, "rows": result.rows});
            if let Some(t) = result.truncated {
                out["truncated"] = Value::String(t);
            }
            Ok(out.to_string())
        }
        Err(e) => Err(format!("Query failed: {e}\nSQL: {sql}")),
    }
}

#[cfg(test)]
mod tests {
    use super::sql_of;

    #[test]
    fn the_sql_is_taken_from_a_fence_or_the_whole_answer() {
        assert_eq!(sql_of("SELECT 1"), "SELECT 1");
        assert_eq!(
            sql_of("Here:\n```sql\nSELECT a\nFROM t;\n```\nDone."),
            "SELECT a\nFROM t;"
        );
        assert_eq!(sql_of("```\nSELECT 2\n```"), "SELECT 2");
        assert_eq!(sql_of("  SELECT 3  "), "SELECT 3");
    }
}
