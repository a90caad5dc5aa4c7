//! AG-UI's event rules, checked as `@ag-ui/client`'s own verifier checks
//! them: a run opens with `RUN_STARTED` and nothing follows its end; a text
//! message, a reasoning message or a tool call is started before its
//! content and ended once; a step is finished only after it started; and
//! nothing is open when the run finishes. Chunk events are expanded first
//! into start, content and end, as that client's transform does.

use std::collections::HashSet;

use super::event::Event;

/// Messages, tool calls or steps of one kind open at once, at most.
const MAX_OPEN: usize = 256;

/// The state of one run's stream.
#[derive(Debug, Default)]
pub struct Verifier {
    started: bool,
    ended: bool,
    texts: HashSet<String>,
    reasonings: HashSet<String>,
    tools: HashSet<String>,
    steps: HashSet<String>,
    /// The text message a chunk opened, closed by the next other event.
    text_chunk: Option<String>,
    /// The tool call a chunk opened.
    tool_chunk: Option<String>,
}

impl Verifier {
    /// `event` as the events it stands for (a chunk: its start, content and
    /// the end of the one before), each checked.
    ///
    /// # Errors
    /// The rule the stream broke, in the words of AG-UI's verifier.
    pub fn take(&mut self, event: Event) -> Result<Vec<Event>, String> {
        let mut out = Vec::with_capacity(2);
        match event {
            Event::TextChunk { id, delta } => {
                self.close_tool_chunk(&mut out)?;
                let same = match (&id, &self.text_chunk) {
                    (None, Some(_)) => true,
                    (Some(id), Some(open)) => id == open,
                    (_, None) => false,
                };
                if !same {
                    self.close_text_chunk(&mut out)?;
                    let Some(id) = id else {
                        return Err(
                            "TEXT_MESSAGE_CHUNK: the first chunk of a message must name its \
                             `messageId`"
                                .into(),
                        );
                    };
                    self.check(Event::TextStart { id: id.clone() }, &mut out)?;
                    self.text_chunk = Some(id);
                }
                if !delta.is_empty() {
                    let id = self.text_chunk.clone().unwrap_or_default();
                    self.check(Event::TextContent { id, delta }, &mut out)?;
                }
            }
            Event::ToolChunk { id, name, delta } => {
                self.close_text_chunk(&mut out)?;
                let same = match (&id, &self.tool_chunk) {
                    (None, Some(_)) => true,
                    (Some(id), Some(open)) => id == open,
                    (_, None) => false,
                };
                if !same {
                    self.close_tool_chunk(&mut out)?;
                    let (Some(id), Some(name)) = (id, name) else {
                        return Err(
                            "TOOL_CALL_CHUNK: the first chunk of a tool call must name its \
                             `toolCallId` and `toolCallName`"
                                .into(),
                        );
                    };
                    self.check(
                        Event::ToolStart {
                            id: id.clone(),
                            name,
                        },
                        &mut out,
                    )?;
                    self.tool_chunk = Some(id);
                }
                if !delta.is_empty() {
                    let id = self.tool_chunk.clone().unwrap_or_default();
                    self.check(Event::ToolArgs { id, delta }, &mut out)?;
                }
            }
            // What does not end a message leaves chunks open, as
            // `@ag-ui/client`'s transform does.
            other @ (Event::Other(_)
            | Event::Custom { .. }
            | Event::Interrupted(_)
            | Event::ReasoningChunk { .. }) => self.check(other, &mut out)?,
            other => {
                self.close_text_chunk(&mut out)?;
                self.close_tool_chunk(&mut out)?;
                self.check(other, &mut out)?;
            }
        }
        Ok(out)
    }

    fn close_text_chunk(&mut self, out: &mut Vec<Event>) -> Result<(), String> {
        match self.text_chunk.take() {
            Some(id) => self.check(Event::TextEnd { id }, out),
            None => Ok(()),
        }
    }

    fn close_tool_chunk(&mut self, out: &mut Vec<Event>) -> Result<(), String> {
        match self.tool_chunk.take() {
            Some(id) => self.check(Event::ToolEnd { id }, out),
            None => Ok(()),
        }
    }

    fn check(&mut self, event: Event, out: &mut Vec<Event>) -> Result<(), String> {
        let kind = event.kind().to_owned();
        if self.ended {
            return Err(format!(
                "Cannot send event type '{kind}': the run has already ended"
            ));
        }
        if !self.started {
            return match event {
                Event::RunStarted => {
                    self.started = true;
                    out.push(event);
                    Ok(())
                }
                // A run may fail before it starts.
                Event::RunError { .. } => {
                    self.ended = true;
                    out.push(event);
                    Ok(())
                }
                _ => Err(format!("First event must be 'RUN_STARTED', not '{kind}'")),
            };
        }
        let open = |set: &mut HashSet<String>, id: &str, what: &str| {
            if set.len() >= MAX_OPEN {
                Err(format!(
                    "Cannot send '{kind}' event: {MAX_OPEN} {what}s are in progress already"
                ))
            } else if set.insert(id.to_owned()) {
                Ok(())
            } else {
                Err(format!(
                    "Cannot send '{kind}' event: a {what} with ID '{id}' is already in progress"
                ))
            }
        };
        let active = |set: &HashSet<String>, id: &str, what: &str| {
            if set.contains(id) {
                Ok(())
            } else {
                Err(format!(
                    "Cannot send '{kind}' event: no active {what} found with ID '{id}'"
                ))
            }
        };
        match &event {
            Event::RunStarted => {
                return Err("Cannot send 'RUN_STARTED' while a run is still active".into());
            }
            Event::TextStart { id } => open(&mut self.texts, id, "text message")?,
            Event::TextContent { id, .. } => active(&self.texts, id, "text message")?,
            Event::TextEnd { id } => {
                active(&self.texts, id, "text message")?;
                self.texts.remove(id);
            }
            Event::ReasoningStart { id } => open(&mut self.reasonings, id, "reasoning message")?,
            Event::ReasoningContent { id, .. } => {
                active(&self.reasonings, id, "reasoning message")?;
            }
            Event::ReasoningEnd { id } => {
                active(&self.reasonings, id, "reasoning message")?;
                self.reasonings.remove(id);
            }
            Event::ToolStart { id, .. } => open(&mut self.tools, id, "tool call")?,
            Event::ToolArgs { id, .. } => active(&self.tools, id, "tool call")?,
            Event::ToolEnd { id } => {
                active(&self.tools, id, "tool call")?;
                self.tools.remove(id);
            }
            Event::StepStarted(name) => open(&mut self.steps, name, "step")?,
            Event::StepFinished(name) => {
                active(&self.steps, name, "step")?;
                self.steps.remove(name);
            }
            Event::RunFinished(_) => {
                for (set, what) in [
                    (&self.texts, "text messages"),
                    (&self.reasonings, "reasoning messages"),
                    (&self.tools, "tool calls"),
                    (&self.steps, "steps"),
                ] {
                    if !set.is_empty() {
                        let mut ids: Vec<&str> = set.iter().map(String::as_str).collect();
                        ids.sort_unstable();
                        return Err(format!(
                            "Cannot send 'RUN_FINISHED' while {what} are still active: {}",
                            ids.join(", ")
                        ));
                    }
                }
                self.ended = true;
            }
            Event::RunError { .. } => self.ended = true,
            _ => {}
        }
        out.push(event);
        Ok(())
    }
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
