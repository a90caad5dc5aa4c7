//! JSON-Schema validation of inbound messages against `protocol/inbound/`.
//!
//! The schemas are compiled into the binary and built once, on first use.

use std::collections::HashMap;
use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::Value;

/// `(type, schema text)` for every inbound message type.
const SCHEMAS: &[(&str, &str)] = &[
    (
        "chat.start",
        include_str!("../../protocol/inbound/chat.start.json"),
    ),
    (
        "user.message",
        include_str!("../../protocol/inbound/user.message.json"),
    ),
    (
        "user.input.submit",
        include_str!("../../protocol/inbound/user.input.submit.json"),
    ),
    (
        "inline_component.result",
        include_str!("../../protocol/inbound/inline_component.result.json"),
    ),
    (
        "artifact_patch",
        include_str!("../../protocol/inbound/artifact_patch.json"),
    ),
    (
        "client.resume",
        include_str!("../../protocol/inbound/client.resume.json"),
    ),
    (
        "chat.cancel",
        include_str!("../../protocol/inbound/chat.cancel.json"),
    ),
    (
        "client.unsubscribe",
        include_str!("../../protocol/inbound/client.unsubscribe.json"),
    ),
    (
        "chat.pause",
        include_str!("../../protocol/inbound/chat.pause.json"),
    ),
    (
        "chat.resume_run",
        include_str!("../../protocol/inbound/chat.resume_run.json"),
    ),
    (
        "workflow.invoke",
        include_str!("../../protocol/inbound/workflow.invoke.json"),
    ),
    (
        "chat.edit",
        include_str!("../../protocol/inbound/chat.edit.json"),
    ),
    (
        "chat.regenerate",
        include_str!("../../protocol/inbound/chat.regenerate.json"),
    ),
    (
        "chat.switch",
        include_str!("../../protocol/inbound/chat.switch.json"),
    ),
    (
        "chat.read",
        include_str!("../../protocol/inbound/chat.read.json"),
    ),
    (
        "feed.subscribe",
        include_str!("../../protocol/inbound/feed.subscribe.json"),
    ),
    ("ping", include_str!("../../protocol/inbound/ping.json")),
];

static VALIDATORS: LazyLock<HashMap<&'static str, Validator>> = LazyLock::new(|| {
    SCHEMAS
        .iter()
        .map(|(name, text)| {
            // The schemas ship inside the binary and a unit test compiles each
            // one, so a failure here is a build defect, not bad input.
            let schema: Value = serde_json::from_str(text).expect("inbound schema is JSON");
            let validator = jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
                .expect("inbound schema compiles");
            (*name, validator)
        })
        .collect()
});

/// The inbound message types the server understands.
pub fn known_types() -> impl Iterator<Item = &'static str> {
    SCHEMAS.iter().map(|(name, _)| *name)
}

/// Validates `value` against the schema of inbound type `ty`.
///
/// # Returns
/// `None` for an unknown type; otherwise the list of violations (empty when
/// valid), each `{"path": <JSON pointer>, "message": <text>}`.
pub fn validate(ty: &str, value: &Value) -> Option<Vec<Value>> {
    let validator = VALIDATORS.get(ty)?;
    Some(
        validator
            .iter_errors(value)
            .take(16)
            .map(|e| {
                serde_json::json!({
                    "path": e.instance_path().to_string(),
                    "message": e.to_string(),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles() {
        assert_eq!(VALIDATORS.len(), SCHEMAS.len());
    }

    #[test]
    fn uuid_format_is_enforced() {
        let bad = serde_json::json!({"type": "chat.cancel", "chat_id": "not-a-uuid"});
        assert_eq!(validate("chat.cancel", &bad).unwrap().len(), 1);
        let good = serde_json::json!({"type": "chat.cancel", "chat_id": uuid::Uuid::new_v4()});
        assert!(validate("chat.cancel", &good).unwrap().is_empty());
    }
}
