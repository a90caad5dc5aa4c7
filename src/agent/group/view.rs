//! Each member's view of the shared transcript: its own turns as the
//! assistant's (tool calls and results as they were), everyone else's as
//! [`Message::Peer`] turns under their names, their tool calls and results
//! told in words (a model cannot be shown another model's tool calls as its
//! own).

use crate::link::Said;
use crate::llm::Message;
use crate::tools::cap;

/// The transcript as member `me` sees it (`None`: as an observer, the
/// speaker selector); other members' tool calls and results cut to
/// `max_chars`.
pub(super) fn view(transcript: &[Said], me: Option<&str>, max_chars: usize) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(transcript.len());
    for said in transcript {
        let name = match &said.by {
            Some(by) if Some(by.as_str()) != me => by,
            _ => {
                out.push(said.message.clone());
                continue;
            }
        };
        let told = match &said.message {
            // A `json` member's tool results come back to it as user turns.
            Message::User { text, .. } | Message::Peer { text, .. } => cap(text, max_chars),
            Message::Assistant { text, tool_calls } => {
                let mut told = text.clone();
                for call in tool_calls {
                    if !told.is_empty() {
                        told.push('\n');
                    }
                    let input = cap(&call.input.to_string(), max_chars);
                    told.push_str(&format!("[calls {} with {input}]", call.name));
                }
                told
            }
            Message::ToolResult {
                name: tool,
                content,
                is_error,
                ..
            } => {
                let verb = if *is_error { "failed" } else { "returned" };
                format!("[{tool} {verb}: {}]", cap(content, max_chars))
            }
        };
        // One turn each, so the last thing said stays the last message.
        if !told.is_empty() {
            out.push(Message::Peer {
                name: name.clone(),
                text: told,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::llm::ToolCall;

    fn said(by: Option<&str>, message: Message) -> Said {
        Said {
            by: by.map(str::to_owned),
            message,
        }
    }

    #[test]
    fn a_member_sees_its_own_turns_and_the_others_by_name() {
        let call = ToolCall {
            id: "c1".into(),
            name: "search".into(),
            input: json!({"q": "tides"}),
        };
        let transcript = vec![
            said(None, Message::user("Plan a trip")),
            said(
                Some("planner"),
                Message::Assistant {
                    text: "Step 1: tides.".into(),
                    tool_calls: vec![],
                },
            ),
            said(
                Some("researcher"),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![call.clone()],
                },
            ),
            said(
                Some("researcher"),
                Message::ToolResult {
                    id: "c1".into(),
                    name: "search".into(),
                    content: "high at noon".into(),
                    is_error: false,
                },
            ),
        ];
        let researcher = view(&transcript, Some("researcher"), 100);
        assert_eq!(researcher.len(), 4);
        assert_eq!(
            researcher[1],
            Message::Peer {
                name: "planner".into(),
                text: "Step 1: tides.".into()
            }
        );
        assert!(
            matches!(&researcher[2], Message::Assistant { tool_calls, .. } if tool_calls == &vec![call])
        );
        let writer = view(&transcript, Some("writer"), 4);
        let peer = |text: &str| Message::Peer {
            name: "researcher".into(),
            text: text.into(),
        };
        // Others' calls and results are cut to the viewer's limit (4 here).
        assert_eq!(
            writer[2],
            peer("[calls search with {\"q\"\n[truncated: 9 of 13 characters omitted]]")
        );
        assert_eq!(
            writer[3],
            peer("[search returned: high\n[truncated: 8 of 12 characters omitted]]")
        );
        assert_eq!(writer.len(), 4);
    }

    #[test]
    fn the_selector_sees_every_member_by_name() {
        let transcript = vec![
            said(None, Message::user("Go")),
            said(
                Some("planner"),
                Message::Assistant {
                    text: "Plan.".into(),
                    tool_calls: vec![],
                },
            ),
            // A `json` member's tool result comes back to it as a user turn.
            said(
                Some("planner"),
                Message::user("Result of search:\nsunny all week"),
            ),
        ];
        let observer = view(&transcript, None, 5);
        assert_eq!(observer[0], Message::user("Go"));
        assert_eq!(
            observer[1],
            Message::Peer {
                name: "planner".into(),
                text: "Plan.".into()
            }
        );
        assert!(
            matches!(&observer[2], Message::Peer { name, text } if name == "planner" && text.starts_with("Resul\n[truncated")),
            "{:?}",
            observer[2]
        );
        // The planner itself sees its own result turn as it was.
        assert_eq!(
            view(&transcript, Some("planner"), 5)[2],
            transcript[2].message
        );
    }
}
