//! Result summarization (seed 000 "Tool Result Summarization"): the model
//! sees only some fields of each item of a JSON result; the log's
//! `chat.tool_response` keeps the whole result for the UI.

use serde_json::{Map, Value};

use super::spec::SummarySpec;

/// A checked `summary:`.
#[derive(Debug, Clone)]
pub struct Summary {
    /// JSON Pointer to the list or object summarized (`""`: the whole result).
    items: String,
    keep: Vec<String>,
    first_sentence: Vec<String>,
}

impl Summary {
    /// # Errors
    /// A message naming the bad field (relative to `summary`).
    pub(super) fn from_spec(spec: SummarySpec) -> Result<Self, String> {
        if !(spec.items.is_empty() || spec.items.starts_with('/')) {
            return Err(format!(
                "items: `{}` is not a JSON Pointer (`/rules`, or empty for the whole result)",
                spec.items
            ));
        }
        if spec.keep.is_empty() {
            return Err("keep: name at least one field".into());
        }
        Ok(Self {
            items: spec.items,
            keep: spec.keep,
            first_sentence: spec.first_sentence,
        })
    }

    /// The result as the model sees it. A result that is not JSON, or has
    /// nothing at `items`, is unchanged.
    pub(super) fn apply(&self, content: &str) -> String {
        let Ok(mut doc) = serde_json::from_str::<Value>(content) else {
            return content.to_owned();
        };
        let Some(target) = doc.pointer_mut(&self.items) else {
            return content.to_owned();
        };
        match target {
            Value::Array(items) => items.iter_mut().for_each(|item| self.item(item)),
            other => self.item(other),
        }
        doc.to_string()
    }

    fn item(&self, item: &mut Value) {
        let Value::Object(fields) = item else {
            return;
        };
        let mut kept = Map::new();
        for name in &self.keep {
            if let Some(mut v) = fields.remove(name) {
                if self.first_sentence.contains(name)
                    && let Value::String(text) = &v
                {
                    v = Value::String(first_sentence(text).to_owned());
                }
                kept.insert(name.clone(), v);
            }
        }
        *fields = kept;
    }
}

/// Up to and including the first `.`, `!` or `?` followed by a space or the end.
fn first_sentence(text: &str) -> &str {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, n)| n.is_whitespace()) {
            return &text[..i + c.len_utf8()];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn summary(items: &str, keep: &[&str], first: &[&str]) -> Summary {
        Summary::from_spec(SummarySpec {
            items: items.into(),
            keep: keep.iter().map(|s| (*s).to_owned()).collect(),
            first_sentence: first.iter().map(|s| (*s).to_owned()).collect(),
        })
        .unwrap()
    }

    #[test]
    fn each_item_keeps_only_the_named_fields() {
        let s = summary("/rules", &["id", "name", "is_active"], &[]);
        let result = json!({"total": 2, "rules": [
            {"id": "1", "name": "Low stock", "is_active": true, "actions": [1, 2, 3]},
            {"id": "2", "name": "Late order", "edges": []},
        ]});
        let out: Value = serde_json::from_str(&s.apply(&result.to_string())).unwrap();
        assert_eq!(
            out,
            json!({"total": 2, "rules": [
                {"id": "1", "name": "Low stock", "is_active": true},
                {"id": "2", "name": "Late order"},
            ]})
        );
    }

    #[test]
    fn descriptions_keep_their_first_sentence() {
        let s = summary("", &["name", "description"], &["description"]);
        let result = json!([{"name": "email", "description": "Sends an e-mail. Supports v1.2 templates! More."}]);
        let out: Value = serde_json::from_str(&s.apply(&result.to_string())).unwrap();
        assert_eq!(out[0]["description"], "Sends an e-mail.");
        assert_eq!(first_sentence("v1.2 is out"), "v1.2 is out");
    }

    #[test]
    fn text_and_missing_items_are_unchanged() {
        let s = summary("/rules", &["id"], &[]);
        assert_eq!(s.apply("not json"), "not json");
        assert_eq!(s.apply(r#"{"other":1}"#), r#"{"other":1}"#);
        assert!(
            Summary::from_spec(SummarySpec {
                items: "rules".into(),
                keep: vec!["id".into()],
                first_sentence: vec![]
            })
            .is_err()
        );
        assert!(
            Summary::from_spec(SummarySpec {
                items: String::new(),
                keep: vec![],
                first_sentence: vec![]
            })
            .is_err()
        );
    }
}
