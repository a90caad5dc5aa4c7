//! `ask_database` (seed 003): the chat's model writes one SQL query from the
//! question and the chat's database schema; the server runs it read-only
//! (`databases::query`) and keeps the result as the chat's `sql_result`. A
//! query that fails goes back to the model as a tool error, with the SQL, so
//! it can ask again.

use serde_json::{Value, json};

use super::env::{CallEnv, Database};
use super::record::backend;
use crate::link::{Gone, ToolOutcome};
use crate::llm::{Message, Provider, ToolCall, Usage};

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
    let mut usage = Usage::default();
    let outcome = backend(
        env.link,
        call,
        answer(call, env.provider, env.database, &mut usage),
    )
    .await;
    let mut total = env.usage.lock().unwrap_or_else(|e| e.into_inner());
    total.prompt_tokens += usage.prompt_tokens;
    total.completion_tokens += usage.completion_tokens;
    outcome
}

async fn answer(
    call: &ToolCall,
    provider: &dyn Provider,
    db: Option<Database<'_>>,
    usage: &mut Usage,
) -> Result<String, String> {
    let Some(db) = db else {
        return Err("this server keeps no user databases".into());
    };
    let question = call.input["question"].as_str().unwrap_or_default();
    let schema = db
        .connections
        .chat_database(db.chat_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("this chat has no database connected: connect one first (POST /chat/{thread_id}/connection)")?
        .db_schema;
    let dialect = db
        .connections
        .dialect(db.user, db.chat_id)
        .await
        .map_err(|e| e.to_string())?;
    let system = format!(
        "You write one {dialect} query that answers a question about this database. \
         Answer with the SQL only: one read-only SELECT statement, no explanation.\n\n{schema}"
    );
    let written = crate::llm::complete(
        provider,
        &system,
        vec![Message::User {
            text: question.to_owned(),
        }],
        1024,
        usage,
    )
    .await
    .map_err(|e| format!("the model could not write the query: {e}"))?;
    let sql = sql_of(&written);
    match db.connections.query(db.user, db.chat_id, &sql).await {
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
