//! The sizes a client may not exceed, and the pure checks that enforce them.
//!
//! Every route applies the same numbers (`protocol/README.md`, "Limits"), so
//! they live here, beside the wire types, and nowhere else.

use serde_json::Value;

/// The deepest JSON value a client may send (an object or array counts one
/// level). Well under `serde_json`'s own reader limit (128), so that anything
/// logged — a client value wrapped in an envelope — can always be read back.
pub const MAX_JSON_DEPTH: usize = 64;

/// The longest text of one user turn or answer, in bytes (256 KiB), on every
/// route: `user.message`, `chat.start`'s message, the HTTP routes' texts.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;

/// The most operations in one `artifact_patch`.
pub const MAX_PATCH_OPS: usize = 64;

/// How deep `value` nests: 0 for a scalar, 1 for `[]` or `{}`, and so on.
///
/// Iterative, so a value of any depth is measured without recursion.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => {
                deepest = deepest.max(d);
                continue;
            }
        };
        deepest = deepest.max(d + 1);
        stack.extend(children.map(|c| (c, d + 1)));
    }
    deepest
}

/// Whether `value`, serialized as compact JSON, takes at most `max` bytes.
///
/// Stops serializing as soon as the bound is passed, so checking a huge value
/// costs no more than `max` bytes of work and allocates nothing.
pub fn json_fits(value: &Value, max: usize) -> bool {
    struct Counter {
        left: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.left = self
                .left
                .checked_sub(buf.len())
                .ok_or_else(|| std::io::Error::other("over the limit"))?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Counter { left: max }, value).is_ok()
}

/// Whether `s` holds a control character (newline, escape…): user ids and
/// the like must have none, since they reach the text log.
pub fn has_control_chars(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// `text` as one line: control characters and runs of whitespace become
/// one space.
pub fn one_line(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = json!([v]);
        }
        v
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!([])), 1);
        assert_eq!(json_depth(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(json_depth(&nested(100)), 100);
    }

    #[test]
    fn fits_stops_at_the_bound() {
        let v = json!({"a": "x".repeat(100)});
        let len = serde_json::to_vec(&v).unwrap().len();
        assert!(json_fits(&v, len));
        assert!(!json_fits(&v, len - 1));
    }

    #[test]
    fn control_chars() {
        assert!(has_control_chars("a\nb"));
        assert!(has_control_chars("a\u{1b}[31m"));
        assert!(!has_control_chars("ünïcödé user@example.com"));
    }
}
