//! What rmcp's types drop and agentwire needs: which tools a server marks
//! `execution.taskSupport: "required"` (rmcp's `Tool` has no `execution`).
//! Read from the raw JSON the server sends: a stdio server's lines as they
//! pass ([`TapRead`]), an HTTP server's answers to `tools/list`
//! (`super::http`).

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// The longest line a stdio tap reads (a longer one passes unread).
const MAX_LINE: usize = 16 << 20;

/// The names of the tools a server runs only as tasks, as last listed.
#[derive(Clone, Default)]
pub(super) struct TaskOnly(Arc<Mutex<HashSet<String>>>);

impl TaskOnly {
    /// Reads a raw JSON-RPC message: a `tools/list` answer updates the
    /// names (anything else is passed over).
    pub fn note(&self, raw: &[u8]) {
        // Most messages are no tool list: only one with a `"tools"` string
        // (never inside a JSON string, where its quotes are escaped) is parsed.
        if !raw.windows(7).any(|w| w == b"\"tools\"") {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(raw) else {
            return;
        };
        let Some(tools) = message["result"]["tools"].as_array() else {
            return;
        };
        let mut names = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for tool in tools {
            let Some(name) = tool["name"].as_str() else {
                continue;
            };
            if tool["execution"]["taskSupport"] == "required" {
                names.insert(name.to_owned());
            } else {
                names.remove(name);
            }
        }
    }

    /// Whether the tool `name` runs only as a task.
    pub fn contains(&self, name: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }
}

/// A stdio server's output, passed on unchanged, each line also shown to a
/// [`TaskOnly`].
pub(super) struct TapRead<R> {
    inner: R,
    line: Vec<u8>,
    /// The current line is over [`MAX_LINE`]: passed over to its end.
    skipping: bool,
    tap: TaskOnly,
}

impl<R> TapRead<R> {
    pub fn new(inner: R, tap: TaskOnly) -> Self {
        Self {
            inner,
            line: Vec::new(),
            skipping: false,
            tap,
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, ends) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], Some(i + 1)),
                None => (bytes, None),
            };
            if !self.skipping {
                if self.line.len() + part.len() > MAX_LINE {
                    self.skipping = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            match ends {
                Some(next) => {
                    if !self.skipping {
                        self.tap.note(&self.line);
                    }
                    self.line.clear();
                    self.skipping = false;
                    bytes = &bytes[next..];
                }
                None => bytes = &[],
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapRead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.feed(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn task_only_tools_are_read_from_the_lines_as_they_pass() {
        let listing = r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"quick","inputSchema":{"type":"object"}},{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"maybe","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}}"#;
        let other = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"{\"tools\":[]}"}]}}"#;
        let text = format!("{other}\n{listing}\n{other}\n");
        let tap = TaskOnly::default();
        // Read in small pieces: a line split across reads is one line.
        let mut reader = TapRead::new(
            tokio::io::BufReader::with_capacity(7, text.as_bytes()),
            tap.clone(),
        );
        let mut out = String::new();
        reader.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, text, "passed on unchanged");
        assert!(tap.contains("job"));
        assert!(!tap.contains("quick") && !tap.contains("maybe"));
        // Listed again without the mark: no longer task-only.
        tap.note(
            br#"{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"job","inputSchema":{}}]}}"#,
        );
        assert!(!tap.contains("job"));
    }
}
