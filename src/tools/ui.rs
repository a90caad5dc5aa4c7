//! UI tools: the client renders a component (`chat.tool_call` awaiting a
//! response) and the call waits for its `inline_component.result`.

use super::record::{refuse, respond, show};
use super::spec::UiSpec;
use crate::link::{ComponentOutcome, Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::{Display, RunEndReason};

/// Where a UI tool's component type comes from.
#[derive(Debug, Clone)]
pub enum ComponentType {
    Fixed(String),
    FromInput(String),
}

/// The component type and display of a `ui:` entry.
pub(super) fn from_spec(ui: UiSpec) -> Result<(ComponentType, Display), String> {
    let component_type = match (ui.component_type, ui.component_type_from) {
        (Some(c), None) => ComponentType::Fixed(c),
        (None, Some(field)) => ComponentType::FromInput(field),
        _ => return Err("set exactly one of component_type, component_type_from".into()),
    };
    Ok((component_type, ui.display))
}

/// Shows the component and hands the client's result to the model.
pub(super) async fn run(
    component_type: &ComponentType,
    display: Display,
    call: &ToolCall,
    link: &RunLink,
) -> Result<ToolOutcome, Gone> {
    let component_type = match component_type {
        ComponentType::Fixed(c) => c.clone(),
        ComponentType::FromInput(field) => match call.input[field].as_str() {
            // The kinds the server's own calls are known by are not a
            // model's to name.
            Some(c @ (super::FRONTEND | super::APPROVAL)) => {
                return refuse(link, call, format!("`{c}` is not a component type to show")).await;
            }
            Some(c) if !c.is_empty() => c.to_owned(),
            _ => {
                return refuse(
                    link,
                    call,
                    format!("input field `{field}` must name the component"),
                )
                .await;
            }
        },
    };
    match show(
        link,
        &call.name,
        component_type.clone(),
        call.input.clone(),
        &call.id,
        display,
    )
    .await?
    {
        ComponentOutcome::Returned(data) => {
            respond(link, call, data.clone(), true).await?;
            // A frontend tool's result is often text: the model sees it as is.
            let content = match data {
                serde_json::Value::String(text) if component_type == super::FRONTEND => text,
                data => data.to_string(),
            };
            Ok(ToolOutcome::Result {
                content,
                is_error: false,
            })
        }
        ComponentOutcome::TimedOut => Ok(ToolOutcome::End(RunEndReason::Timeout)),
    }
}
