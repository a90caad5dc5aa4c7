//! The AG-UI events an upstream agent streams, as agentwire reads them: the
//! fields it uses, typed; a kind it does not use kept by name only
//! (`Other`), so a newer server's events pass through the verifier.

use serde_json::Value;

/// One event of an upstream run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    RunStarted,
    RunFinished(Finished),
    RunError {
        message: String,
        code: Option<String>,
    },
    TextStart {
        id: String,
    },
    TextContent {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    /// `TEXT_MESSAGE_CHUNK`: start, content and end in one (the reader
    /// expands it, as `@ag-ui/client` does).
    TextChunk {
        id: Option<String>,
        delta: String,
    },
    ReasoningStart {
        id: String,
    },
    ReasoningContent {
        id: String,
        delta: String,
    },
    ReasoningEnd {
        id: String,
    },
    /// `REASONING_MESSAGE_CHUNK`: words of reasoning.
    ReasoningChunk {
        delta: String,
    },
    ToolStart {
        id: String,
        name: String,
    },
    ToolArgs {
        id: String,
        delta: String,
    },
    ToolEnd {
        id: String,
    },
    /// `TOOL_CALL_CHUNK`, expanded like a text chunk.
    ToolChunk {
        id: Option<String>,
        name: Option<String>,
        delta: String,
    },
    ToolResult {
        id: String,
        content: Value,
    },
    StateSnapshot(Value),
    StateDelta(Value),
    StepStarted(String),
    StepFinished(String),
    Custom {
        name: String,
        value: Value,
    },
    /// An interrupt announced before the run's end (LangGraph's
    /// `on_interrupt`); `RUN_FINISHED` ends the run on it.
    Interrupted(Interrupt),
    /// A kind agentwire does not act on (`MESSAGES_SNAPSHOT`, `RAW`,
    /// `ACTIVITY_*`, a newer one), by its type.
    Other(String),
}

/// How a run ended (`RUN_FINISHED`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Finished {
    /// What it waits for; empty for a completed run.
    pub interrupts: Vec<Interrupt>,
    /// `outcome: {type: "cancelled"}`.
    pub cancelled: bool,
    /// Token counts, where the server reports them (`result.usage` or
    /// `usage`, AG-UI's `TokenUsage` or OpenAI's names).
    pub usage: Option<crate::llm::Usage>,
}

/// Something the run needs from a person before it goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupt {
    pub id: String,
    pub reason: String,
    pub message: Option<String>,
    /// The call it asks approval for.
    pub tool_call_id: Option<String>,
    pub response_schema: Option<Value>,
    /// What the server said with it (LangGraph's `interrupt()` value).
    pub value: Value,
}

impl Event {
    /// Reads one event's JSON.
    ///
    /// # Errors
    /// What is missing or of the wrong type, for the run's error.
    pub fn parse(v: &Value) -> Result<Self, String> {
        let kind = v["type"].as_str().ok_or("an event without a `type`")?;
        let s = |key: &str| -> Result<String, String> {
            v[key]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{kind} without a string `{key}`"))
        };
        let opt = |key: &str| v[key].as_str().map(str::to_owned);
        Ok(match kind {
            "RUN_STARTED" => Self::RunStarted,
            "RUN_FINISHED" => Self::RunFinished(finished(v)?),
            "RUN_ERROR" => Self::RunError {
                message: opt("message").unwrap_or_else(|| "the agent failed".into()),
                code: opt("code"),
            },
            "TEXT_MESSAGE_START" => Self::TextStart {
                id: s("messageId")?,
            },
            "TEXT_MESSAGE_CONTENT" => Self::TextContent {
                id: s("messageId")?,
                delta: s("delta")?,
            },
            "TEXT_MESSAGE_END" => Self::TextEnd {
                id: s("messageId")?,
            },
            "TEXT_MESSAGE_CHUNK" => Self::TextChunk {
                id: opt("messageId"),
                delta: opt("delta").unwrap_or_default(),
            },
            "REASONING_MESSAGE_START" | "THINKING_TEXT_MESSAGE_START" => Self::ReasoningStart {
                id: opt("messageId").unwrap_or_default(),
            },
            "REASONING_MESSAGE_CONTENT" | "THINKING_TEXT_MESSAGE_CONTENT" => {
                Self::ReasoningContent {
                    id: opt("messageId").unwrap_or_default(),
                    delta: s("delta")?,
                }
            }
            // Reasoning in chunks: its words, unchecked (it opens nothing).
            "REASONING_MESSAGE_CHUNK" => Self::ReasoningChunk {
                delta: opt("delta").unwrap_or_default(),
            },
            "REASONING_MESSAGE_END" | "THINKING_TEXT_MESSAGE_END" => Self::ReasoningEnd {
                id: opt("messageId").unwrap_or_default(),
            },
            "TOOL_CALL_START" => Self::ToolStart {
                id: s("toolCallId")?,
                name: s("toolCallName")?,
            },
            "TOOL_CALL_ARGS" => Self::ToolArgs {
                id: s("toolCallId")?,
                delta: s("delta")?,
            },
            "TOOL_CALL_END" => Self::ToolEnd {
                id: s("toolCallId")?,
            },
            "TOOL_CALL_CHUNK" => Self::ToolChunk {
                id: opt("toolCallId"),
                name: opt("toolCallName"),
                delta: opt("delta").unwrap_or_default(),
            },
            "TOOL_CALL_RESULT" => Self::ToolResult {
                id: s("toolCallId")?,
                content: v.get("content").cloned().unwrap_or(Value::Null),
            },
            "STATE_SNAPSHOT" => Self::StateSnapshot(v.get("snapshot").cloned().unwrap_or_default()),
            "STATE_DELTA" => Self::StateDelta(match v.get("delta") {
                Some(d @ Value::Array(_)) => d.clone(),
                _ => return Err("STATE_DELTA without a JSON Patch array `delta`".into()),
            }),
            "STEP_STARTED" => Self::StepStarted(s("stepName")?),
            "STEP_FINISHED" => Self::StepFinished(s("stepName")?),
            // LangGraph's interrupt as `ag-ui-langgraph` sends it by default:
            // `value` the `interrupt()` argument as JSON text, the id in
            // `rawEvent` (the outcome, when it comes too, names the same).
            "CUSTOM" if v["name"] == "on_interrupt" => {
                let value = match &v["value"] {
                    Value::String(text) => {
                        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
                    }
                    other => other.clone(),
                };
                let id = v["rawEvent"]["id"]
                    .as_str()
                    .map_or_else(|| uuid::Uuid::new_v4().simple().to_string(), str::to_owned);
                Self::Interrupted(Interrupt {
                    id,
                    reason: "langgraph:interrupt".into(),
                    message: value["message"].as_str().map(str::to_owned),
                    tool_call_id: None,
                    response_schema: None,
                    value,
                })
            }
            "CUSTOM" => Self::Custom {
                name: s("name")?,
                value: v.get("value").cloned().unwrap_or(Value::Null),
            },
            other => Self::Other(other.to_owned()),
        })
    }

    /// The event's AG-UI type, for messages.
    pub fn kind(&self) -> &str {
        match self {
            Self::RunStarted => "RUN_STARTED",
            Self::RunFinished(_) => "RUN_FINISHED",
            Self::RunError { .. } => "RUN_ERROR",
            Self::TextStart { .. } => "TEXT_MESSAGE_START",
            Self::TextContent { .. } => "TEXT_MESSAGE_CONTENT",
            Self::TextEnd { .. } => "TEXT_MESSAGE_END",
            Self::TextChunk { .. } => "TEXT_MESSAGE_CHUNK",
            Self::ReasoningStart { .. } => "REASONING_MESSAGE_START",
            Self::ReasoningContent { .. } => "REASONING_MESSAGE_CONTENT",
            Self::ReasoningEnd { .. } => "REASONING_MESSAGE_END",
            Self::ReasoningChunk { .. } => "REASONING_MESSAGE_CHUNK",
            Self::ToolStart { .. } => "TOOL_CALL_START",
            Self::ToolArgs { .. } => "TOOL_CALL_ARGS",
            Self::ToolEnd { .. } => "TOOL_CALL_END",
            Self::ToolChunk { .. } => "TOOL_CALL_CHUNK",
            Self::ToolResult { .. } => "TOOL_CALL_RESULT",
            Self::StateSnapshot(_) => "STATE_SNAPSHOT",
            Self::StateDelta(_) => "STATE_DELTA",
            Self::StepStarted(_) => "STEP_STARTED",
            Self::StepFinished(_) => "STEP_FINISHED",
            Self::Custom { .. } | Self::Interrupted(_) => "CUSTOM",
            Self::Other(kind) => kind,
        }
    }
}

fn finished(v: &Value) -> Result<Finished, String> {
    let outcome = &v["outcome"];
    let mut done = Finished {
        usage: usage(&v["result"]["usage"]).or_else(|| usage(&v["usage"])),
        ..Finished::default()
    };
    match outcome["type"].as_str() {
        None | Some("success") => {}
        Some("cancelled") => done.cancelled = true,
        Some("interrupt") => {
            let list = outcome["interrupts"]
                .as_array()
                .filter(|l| !l.is_empty())
                .ok_or("RUN_FINISHED with an interrupt outcome and no `interrupts`")?;
            for i in list {
                done.interrupts.push(interrupt(i)?);
            }
        }
        Some(other) => return Err(format!("RUN_FINISHED with an unknown outcome `{other}`")),
    }
    Ok(done)
}

/// One `Interrupt` of AG-UI's outcome.
pub(super) fn interrupt(i: &Value) -> Result<Interrupt, String> {
    let id = i["id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .ok_or("an interrupt without an `id`")?;
    Ok(Interrupt {
        id: id.to_owned(),
        reason: i["reason"].as_str().unwrap_or("input").to_owned(),
        message: i["message"].as_str().map(str::to_owned),
        tool_call_id: i["toolCallId"].as_str().map(str::to_owned),
        response_schema: i.get("responseSchema").filter(|s| s.is_object()).cloned(),
        // LangGraph's `interrupt()` argument is its metadata's `raw`.
        value: i
            .get("value")
            .or_else(|| i.pointer("/metadata/langgraph/raw"))
            .or_else(|| i.get("metadata"))
            .cloned()
            .unwrap_or(Value::Null),
    })
}

/// Token counts under AG-UI's names (`inputTokens`) or OpenAI's; a list
/// (one per model, as Pydantic AI and LangGraph send) is summed.
fn usage(u: &Value) -> Option<crate::llm::Usage> {
    if let Value::Array(list) = u {
        return list
            .iter()
            .filter_map(usage)
            .reduce(|a, b| crate::llm::Usage {
                prompt_tokens: a.prompt_tokens.saturating_add(b.prompt_tokens),
                completion_tokens: a.completion_tokens.saturating_add(b.completion_tokens),
            });
    }
    let n = |a: &str, b: &str| u[a].as_u64().or_else(|| u[b].as_u64());
    let prompt = n("inputTokens", "prompt_tokens");
    let completion = n("outputTokens", "completion_tokens");
    (prompt.is_some() || completion.is_some()).then(|| crate::llm::Usage {
        prompt_tokens: prompt.unwrap_or(0),
        completion_tokens: completion.unwrap_or(0),
    })
}
