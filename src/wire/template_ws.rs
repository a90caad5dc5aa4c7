//! Seed 004's `/api/chat/ws` (the `/api/chat/send` flow over a socket): the
//! log as `{type, data}` messages (`content`, `message_complete`, `widget`,
//! `progress`, `error`, `complete`), and a `message` answering the widget
//! waiting for one.

use std::collections::HashMap;

use serde_json::{Value, json};

/// The waiting widgets a connection has seen, by `corr`.
pub type Waiting = HashMap<String, Value>;

/// The error that ends a stream whose log cannot be read.
pub fn unreadable() -> Value {
    json!({"type": "error", "data": {"message": "an envelope of this chat cannot be read", "error_code": "PERSISTENCE_ERROR"}})
}

/// A `message`'s content as a widget's answer.
pub fn answer_of(widget: &Value, content: &str) -> Value {
    if content.is_empty() {
        return json!({"skip": true});
    }
    if widget["widget_config"]["allow_multiple"] == true
        && let Ok(Value::Array(many)) = serde_json::from_str::<Value>(content)
    {
        return json!({"answer": many});
    }
    json!({"answer": content})
}

/// One envelope of the log as this dialect's messages; an unreadable one is
/// an error and sets `broken` (the connection then closes).
pub fn encode(json: &str, waiting: &mut Waiting, broken: &mut bool) -> Vec<Value> {
    let e = match serde_json::from_str::<Value>(json) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "unreadable envelope in the log");
            *broken = true;
            return vec![unreadable()];
        }
    };
    match e["type"].as_str().unwrap_or_default() {
        "chat.print" => vec![json!({"type": "content", "data": {"content": e["content"]}})],
        // The user's own words are not echoed back as content.
        "chat.text" if e["agent"] == "user" => Vec::new(),
        "chat.text" => vec![
            json!({"type": "content", "data": {"content": e["content"]}}),
            json!({"type": "message_complete", "data": {"content": e["content"]}}),
        ],
        "chat.tool_call" if e["tool_name"] == crate::templates::WIDGET_TOOL => {
            let corr = e["corr"].as_str().unwrap_or_default().to_owned();
            if e["awaiting_response"] == true {
                waiting.insert(corr, e["payload"].clone());
            }
            vec![json!({"type": "widget", "data": e["payload"]})]
        }
        "chat.tool_response" => {
            if let Some(corr) = e["corr"].as_str() {
                waiting.remove(corr);
            }
            Vec::new()
        }
        "chat.progress" => vec![json!({"type": "progress", "data": {
            "current_item": e["current_item"], "total_items": e["total_items"],
            "item_id": e["item_id"], "item_title": e["item_title"],
            "enable_chat_input": e["enable_chat_input"],
        }})],
        "chat.error" => vec![
            json!({"type": "error", "data": {"message": e["message"], "error_code": e["error_code"]}}),
        ],
        "chat.run_complete" => {
            waiting.clear();
            vec![json!({"type": "complete", "data": {"reason": e["reason"]}})]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "template_ws_tests.rs"]
mod tests;
