//! Frontend tools: tools a client brings with one run (AG-UI's
//! `RunAgentInput.tools`). The model is offered them next to the agent's
//! own; a call is a UI tool call of component type [`FRONTEND`] — logged as
//! `chat.tool_call` awaiting a response, its input the model's arguments —
//! and the client that runs it answers with its result (on AG-UI, a `tool`
//! message in the next run input; on any wire, `inline_component.result`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tool::{Tool, ToolKind};
use super::ui::ComponentType;
use crate::protocol::Display;

/// The `component_type` of a frontend tool's call.
pub const FRONTEND: &str = "frontend_tool";

/// Most frontend tools one run may bring.
pub const MAX_CLIENT_TOOLS: usize = 64;

/// A frontend tool as the client declared it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of its arguments (absent: any object).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub parameters: Option<Value>,
}

impl ClientTool {
    /// A tool that waits for its client: a name the model may call
    /// (`[A-Za-z0-9_-]`, 1 to 64 characters, as every vendor accepts), a
    /// description of at most 4 KiB, a valid JSON Schema of an object (what
    /// vendors take as a function's parameters) of at most 64 KiB.
    ///
    /// # Errors
    /// What is wrong, naming the tool.
    pub fn checked(&self) -> Result<Tool, String> {
        let name = &self.name;
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "tool `{name}`: a name is 1 to 64 letters, digits, `_` or `-`"
            ));
        }
        if super::reserved(name) {
            return Err(format!("tool `{name}`: the name is reserved"));
        }
        if self.description.len() > 4096 {
            return Err(format!("tool `{name}`: the description is over 4 KiB"));
        }
        let schema = match &self.parameters {
            Some(Value::Null) | None => serde_json::json!({"type": "object"}),
            Some(schema) => schema.clone(),
        };
        if schema["type"] != "object" {
            return Err(format!(
                "tool `{name}`: `parameters` must be the schema of an object (`\"type\": \"object\"`)"
            ));
        }
        if !crate::protocol::limits::json_fits(&schema, 64 << 10) {
            return Err(format!("tool `{name}`: `parameters` is over 64 KiB"));
        }
        let validator = jsonschema::options()
            .build(&schema)
            .map_err(|e| format!("tool `{name}`: `parameters` is not a valid JSON Schema: {e}"))?;
        Ok(Tool::built(
            name.clone(),
            self.description.clone(),
            (schema, validator),
            ToolKind::Ui {
                component_type: ComponentType::Fixed(FRONTEND.into()),
                display: Display::Inline,
            },
        ))
    }
}

/// The tools of a run: the agent's, then the client's whose names the agent
/// does not use (the agent's own tool wins).
pub fn with_client_tools(tools: &[Tool], client: &[ClientTool]) -> Vec<Tool> {
    let mut all = tools.to_vec();
    for tool in client.iter().filter_map(|c| c.checked().ok()) {
        if !all.iter().any(|t| t.name == tool.name) {
            all.push(tool);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Option<Value>) -> ClientTool {
        ClientTool {
            name: name.into(),
            description: "d".into(),
            parameters,
        }
    }

    #[test]
    fn a_checked_tool_waits_for_its_client_and_validates_its_arguments() {
        let t = tool(
            "get_weather",
            Some(serde_json::json!({"type": "object", "required": ["city"]})),
        )
        .checked()
        .unwrap();
        assert!(matches!(
            &t.kind,
            ToolKind::Ui { component_type: ComponentType::Fixed(c), .. } if c == FRONTEND
        ));
        assert!(t.validator.is_valid(&serde_json::json!({"city": "Oslo"})));
        assert!(!t.validator.is_valid(&serde_json::json!({})));
        // No schema: any object.
        let t = tool("x", None).checked().unwrap();
        assert_eq!(t.input_schema, serde_json::json!({"type": "object"}));
    }

    #[test]
    fn bad_names_and_schemas_are_refused() {
        for name in [
            "",
            "has space",
            "ü",
            &"a".repeat(65),
            super::super::HANDOFF_TOOL,
            "transfer_to_billing_1",
            super::super::CONTEXT_TOOL,
        ] {
            assert!(tool(name, None).checked().is_err(), "{name:?}");
        }
        let err = tool(
            "t",
            Some(serde_json::json!({"type": "object", "required": 5})),
        )
        .checked()
        .unwrap_err();
        assert!(err.contains("not a valid JSON Schema"), "{err}");
        for schema in [
            serde_json::json!(true),
            serde_json::json!({"type": "string"}),
        ] {
            let err = tool("t", Some(schema)).checked().unwrap_err();
            assert!(err.contains("schema of an object"), "{err}");
        }
        let huge = serde_json::json!({"type": "object", "description": "x".repeat(70_000)});
        assert!(
            tool("t", Some(huge))
                .checked()
                .unwrap_err()
                .contains("64 KiB")
        );
    }

    #[test]
    fn the_agents_own_tool_wins_a_name() {
        let own = tool("shared", None).checked().unwrap();
        let own = Tool {
            description: "the agent's".into(),
            ..own
        };
        let all = with_client_tools(
            &[own],
            &[
                tool("shared", None),
                tool("extra", None),
                tool("bad name", None),
            ],
        );
        let names: Vec<_> = all
            .iter()
            .map(|t| (t.name.as_str(), t.description.as_str()))
            .collect();
        assert_eq!(names, [("shared", "the agent's"), ("extra", "d")]);
    }
}
