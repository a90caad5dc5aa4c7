//! Preview interception (seed 000's `workflow_preview`): a tool marked
//! `preview:` runs as usual; when it succeeds, what it would do is shown to
//! the user as an artifact (`chat.tool_call`, `display: "artifact"`, not
//! awaiting a response, `corr` = the call's id + `.preview`), and the model
//! is told the preview was sent instead of getting the result.

use serde_json::{Map, Value, json};

use super::spec::PreviewSpec;

/// The suffix of a preview's `corr`.
pub const PREVIEW_SUFFIX: &str = ".preview";

/// What the model is told by default.
const SENT: &str = "Preview sent to the user for approval. Do not create or update it \
                    yourself: wait for the user's answer.";

/// A checked `preview:`.
#[derive(Debug, Clone)]
pub struct Preview {
    pub component_type: String,
    /// `(field, JSON Pointer into {input, result})`.
    fields: Vec<(String, String)>,
    message: String,
}

impl Preview {
    /// # Errors
    /// A message naming the bad field (relative to `preview`).
    pub(super) fn from_spec(spec: PreviewSpec) -> Result<Self, String> {
        if spec.component_type.is_empty() {
            return Err("component_type: must not be empty".into());
        }
        for (field, pointer) in &spec.fields {
            if !(pointer == "/input"
                || pointer == "/result"
                || pointer.starts_with("/input/")
                || pointer.starts_with("/result/"))
            {
                return Err(format!(
                    "fields.{field}: `{pointer}` must be a JSON Pointer under /input or /result"
                ));
            }
        }
        Ok(Self {
            component_type: spec.component_type,
            fields: spec.fields.into_iter().collect(),
            message: spec.message.unwrap_or_else(|| SENT.to_owned()),
        })
    }

    /// The preview's payload: the mapped fields of the call's validated
    /// input and its result (JSON when the result parses, else text).
    pub(super) fn payload(&self, input: &Value, result: &str) -> Value {
        let result = serde_json::from_str(result).unwrap_or_else(|_| Value::String(result.into()));
        let whole = json!({"input": input, "result": result});
        if self.fields.is_empty() {
            return whole;
        }
        let mut out = Map::new();
        for (field, pointer) in &self.fields {
            if let Some(v) = whole.pointer(pointer) {
                out.insert(field.clone(), v.clone());
            }
        }
        Value::Object(out)
    }

    /// What the model gets instead of the result.
    pub(super) fn answer(&self) -> String {
        json!({"status": "preview_sent", "message": self.message}).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preview(fields: &[(&str, &str)]) -> Result<Preview, String> {
        Preview::from_spec(PreviewSpec {
            component_type: "workflow_preview".into(),
            fields: fields
                .iter()
                .map(|(f, p)| ((*f).to_owned(), (*p).to_owned()))
                .collect(),
            message: None,
        })
    }

    #[test]
    fn fields_are_taken_from_the_input_and_the_result() {
        let p = preview(&[
            ("description", "/input/description"),
            ("workflow", "/input/workflow"),
            ("workflow_id", "/input/workflow_id"),
            ("valid", "/result/valid"),
        ])
        .unwrap();
        let input = json!({"description": "Low stock", "workflow": {"name": "W"}});
        let payload = p.payload(&input, r#"{"valid": true}"#);
        assert_eq!(
            payload,
            json!({"description": "Low stock", "workflow": {"name": "W"}, "valid": true}),
            "an absent field is left out"
        );
        assert_eq!(
            serde_json::from_str::<Value>(&p.answer()).unwrap()["status"],
            "preview_sent"
        );
        // No fields: everything; a text result stays text.
        let all = preview(&[]).unwrap().payload(&input, "fine");
        assert_eq!(all, json!({"input": input, "result": "fine"}));
    }

    #[test]
    fn a_pointer_outside_input_and_result_is_refused() {
        let err = preview(&[("x", "/context/id")]).unwrap_err();
        assert!(err.starts_with("fields.x:"), "{err}");
        assert!(preview(&[("x", "input/a")]).is_err());
    }
}
