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
    /// Saves `content` (text) as a file of the chat named `name`, for the
    /// user to download: what an agent hands back as a file.
    SaveFile,
}

impl Builtin {
    /// The built-in called `name`.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "progress" => Some(Self::Progress),
            "save_file" => Some(Self::SaveFile),
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
            // Needs the run's files: see `run`.
            Self::SaveFile => Err("save_file runs only in a chat".into()),
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
    if builtin == Builtin::SaveFile {
        let result = save_file(&call.input, link).await;
        return finish(link, call, result).await;
    }
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

/// The text kinds `save_file` writes (anything else is plain text).
const SAVED_TYPES: [&str; 4] = [
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
];

/// `save_file`: `{name, content, media_type?}` kept as a file of the chat;
/// the result names it (`file_id`), never holds it.
async fn save_file(input: &Value, link: &RunLink) -> Result<String, String> {
    let name = input["name"]
        .as_str()
        .filter(|n| !n.trim().is_empty())
        .ok_or("`name` must be a non-empty string")?;
    let content = input["content"]
        .as_str()
        .ok_or("`content` must be a string")?;
    let declared = input["media_type"]
        .as_str()
        .filter(|t| SAVED_TYPES.contains(t))
        .unwrap_or("text/plain");
    let files = link.files().ok_or("this run keeps no files")?;
    let file = files.keep(name, Some(declared), content.as_bytes()).await?;
    Ok(serde_json::json!({
        "type": "file",
        "file_id": file.file_id,
        "name": file.name,
        "media_type": file.media_type,
        "size": file.size,
    })
    .to_string())
}
