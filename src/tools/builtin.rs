//! Tools implemented inside the server, named by `builtin:` in agent files.

use std::time::Duration;

use serde_json::Value;

use super::record::{backend_call, finish};
use crate::link::{Gone, RunLink, ToolOutcome};
use crate::llm::ToolCall;
use crate::protocol::EventKind;

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// Counts `steps` steps, reporting progress at each (25 ms a step).
    Progress,
}

impl Builtin {
    /// The built-in called `name`.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "progress" => Some(Self::Progress),
            _ => None,
        }
    }

    /// Runs the tool. `report(percent, message)` publishes progress.
    ///
    /// # Errors
    /// A message for the model when the tool fails.
    pub async fn call<F, Fut>(self, input: &Value, mut report: F) -> Result<String, String>
    where
        F: FnMut(f64, String) -> Fut,
        Fut: Future<Output = bool>,
    {
        match self {
            Self::Progress => {
                let steps = input["steps"]
                    .as_u64()
                    .filter(|n| *n >= 1)
                    .ok_or("`steps` must be a positive integer")?;
                for i in 0..=steps {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(25)).await;
                    }
                    let percent = (i as f64) * 100.0 / (steps as f64);
                    if !report(percent, format!("step {i} of {steps}")).await {
                        return Err("the run ended".into());
                    }
                }
                Ok(format!("completed {steps} steps"))
            }
        }
    }
}

/// Runs a built-in, its progress logged as `chat.tool_progress`.
pub(super) async fn run(
    builtin: Builtin,
    call: &ToolCall,
    link: &RunLink,
) -> Result<ToolOutcome, Gone> {
    link.log(backend_call(call)).await?;
    let result = builtin
        .call(&call.input, |percent, status_message| {
            let link = link.clone();
            let progress = EventKind::ToolProgress {
                tool_name: call.name.clone(),
                progress_percent: percent,
                status_message,
                corr: call.id.clone(),
            };
            async move { link.emit(progress).await.is_ok() }
        })
        .await;
    finish(link, call, result).await
}
