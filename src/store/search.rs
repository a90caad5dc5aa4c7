//! What the chat list and search read, as the append writes it: each
//! batch's new title and last words ([`BatchMeta`]), the text an envelope
//! gives the search index ([`searchable`]), a query's terms as each store's
//! full-text syntax ([`Terms`]) and a hit's snippet ([`snippet`]). Pure: both
//! stores use it, so they index, match and cut alike.

use serde::{Deserialize, Serialize};

/// The most characters of one text the index takes (PostgreSQL refuses a
/// tsvector over 1 MB; the rest of a longer text is not searchable).
pub const INDEXED_CHARS: usize = 100_000;

/// The most characters of a chat's `preview` (its last message's start).
pub const PREVIEW_CHARS: usize = 160;

/// The most bytes of a search query.
pub const MAX_QUERY_BYTES: usize = 256;

/// The most words of a search query that count.
pub const MAX_TERMS: usize = 8;

/// The most characters of one query word.
const MAX_TERM_CHARS: usize = 64;

/// Words a snippet shows around its first hit.
const SNIPPET_WORDS: usize = 16;

/// The fields the index and the list read from a text or a title.
#[derive(Deserialize)]
struct Fields {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    agent: Option<String>,
}

/// What an envelope adds to the search index: `("text", words)` for a
/// `chat.text`, `("title", title)` for a `chat.title`, cut to
/// [`INDEXED_CHARS`]; `None` for any other kind.
pub fn searchable(kind: &str, json: &str) -> Option<(&'static str, String)> {
    let kind = match kind {
        "chat.text" => "text",
        "chat.title" => "title",
        _ => return None,
    };
    let fields: Fields = serde_json::from_str(json).ok()?;
    let body = fields.content.or(fields.title)?;
    Some((kind, cut(&without_nul(&body), INDEXED_CHARS)))
}

/// `text` without NUL characters (PostgreSQL refuses them in a text
/// value; the log keeps them, escaped in its JSON).
pub fn without_nul(text: &str) -> String {
    text.replace('\0', " ")
}

/// The words the index keeps of `text`, as PostgreSQL is given them: the
/// same runs of letters and digits FTS5's tokenizer keeps, lowercased, so
/// both stores split `bob@example.com` or `docs.rs/tokio` alike.
pub fn index_words(text: &str) -> String {
    let words: Vec<String> = words(text).map(|(_, w)| w.to_lowercase()).collect();
    words.join(" ")
}

/// A batch's change to its chat's row in the list.
#[derive(Debug, Default, PartialEq)]
pub struct BatchMeta {
    /// The last `chat.title`'s title, and its seq.
    pub title: Option<(String, u64)>,
    /// The last `chat.text`'s first words, and when it was logged.
    pub preview: Option<(String, i64)>,
    /// The seq of the batch's last text of the user's (they read the chat
    /// up to there).
    pub read_at: Option<u64>,
    /// The agents' texts after it (after the batch's start, with none).
    pub unread: u64,
}

impl BatchMeta {
    /// What a batch of envelopes (`(kind, json, ts_ms, seq)`) changes in
    /// the list, if anything.
    pub fn of<'a>(envelopes: impl Iterator<Item = (&'a str, &'a str, i64, u64)>) -> Option<Self> {
        let mut meta = Self::default();
        for (kind, json, ts_ms, seq) in envelopes {
            match kind {
                "chat.text" | "chat.title" => {}
                _ => continue,
            }
            let Ok(fields) = serde_json::from_str::<Fields>(json) else {
                continue;
            };
            if let Some(title) = fields.title.filter(|_| kind == "chat.title") {
                meta.title = Some((without_nul(&title), seq));
            }
            if let Some(text) = fields.content.filter(|_| kind == "chat.text") {
                meta.preview = Some((preview(&text), ts_ms));
                if fields.agent.as_deref() == Some("user") {
                    meta.read_at = Some(seq);
                    meta.unread = 0;
                } else {
                    meta.unread += 1;
                }
            }
        }
        (meta != Self::default()).then_some(meta)
    }
}

/// The first words of `text` as a list shows them: whitespace folded, at
/// most [`PREVIEW_CHARS`] characters.
pub fn preview(text: &str) -> String {
    let folded = without_nul(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if folded.chars().count() <= PREVIEW_CHARS {
        return folded;
    }
    let mut out: String = folded.chars().take(PREVIEW_CHARS - 1).collect();
    out.push('…');
    out
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// A search query's words: letters and digits only (anything else
/// separates words), lowercased, each matched as a word's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms(Vec<String>);

impl Terms {
    /// The words of `q`; `None` when it has none.
    ///
    /// # Errors
    /// A query over [`MAX_QUERY_BYTES`].
    pub fn parse(q: &str) -> Result<Option<Self>, String> {
        if q.len() > MAX_QUERY_BYTES {
            return Err(format!(
                "the query is {} bytes; at most {MAX_QUERY_BYTES} are accepted",
                q.len()
            ));
        }
        let mut terms: Vec<String> = Vec::new();
        for word in words(q) {
            let word: String = word.1.to_lowercase().chars().take(MAX_TERM_CHARS).collect();
            if !terms.contains(&word) {
                terms.push(word);
            }
            if terms.len() == MAX_TERMS {
                break;
            }
        }
        Ok((!terms.is_empty()).then_some(Self(terms)))
    }

    /// As an FTS5 query of column `column` only: every word, as a prefix.
    pub fn fts5_in(&self, column: &str) -> String {
        let quoted: Vec<String> = self
            .0
            .iter()
            .map(|t| format!("{column} : \"{t}\"*"))
            .collect();
        quoted.join(" AND ")
    }

    /// As a PostgreSQL `to_tsquery('simple', …)`: every word, as a prefix.
    pub fn tsquery(&self) -> String {
        let quoted: Vec<String> = self.0.iter().map(|t| format!("{t}:*")).collect();
        quoted.join(" & ")
    }

    fn hits(&self, word: &str) -> bool {
        let word = word.to_lowercase();
        self.0.iter().any(|t| word.starts_with(t.as_str()))
    }
}

/// The words of `text` (runs of letters and digits) with their byte offsets.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(move |w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
}

/// A piece of a snippet: words as said, `hit` where they match the query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Segment {
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hit: bool,
}

/// About [`SNIPPET_WORDS`] words of `text` around its first hit, the hits
/// marked; the start of `text` when no word hits (a match the stores found
/// in a form this does not see, as one folded by diacritics).
pub fn snippet(text: &str, terms: &Terms) -> Vec<Segment> {
    let all: Vec<(usize, &str)> = words(text).collect();
    let first = all.iter().position(|(_, w)| terms.hits(w)).unwrap_or(0);
    let from = first.saturating_sub(SNIPPET_WORDS / 4);
    let to = (from + SNIPPET_WORDS).min(all.len());
    let Some(&(start, _)) = all.get(from) else {
        return Vec::new();
    };
    let mut out: Vec<Segment> = Vec::new();
    let push = |out: &mut Vec<Segment>, text: &str, hit: bool| match out.last_mut() {
        Some(last) if last.hit == hit => last.text.push_str(text),
        _ => out.push(Segment {
            text: text.to_owned(),
            hit,
        }),
    };
    if from > 0 {
        push(&mut out, "…", false);
    }
    let mut at = start;
    for &(offset, word) in &all[from..to] {
        push(&mut out, &text[at..offset], false);
        push(&mut out, word, terms.hits(word));
        at = offset + word.len();
    }
    if to < all.len() {
        push(&mut out, "…", false);
    }
    out.retain(|s| !s.text.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(q: &str) -> Terms {
        Terms::parse(q).unwrap().unwrap()
    }

    #[test]
    fn a_query_keeps_only_words() {
        assert_eq!(
            terms("Rust* OR \"borrow\" -checker NEAR(x)").0,
            ["rust", "or", "borrow", "checker", "near", "x"]
        );
        assert_eq!(Terms::parse("  ** -- \"\" ").unwrap(), None);
        assert!(Terms::parse(&"a".repeat(MAX_QUERY_BYTES + 1)).is_err());
        assert_eq!(terms("a b c d e f g h i j").0.len(), MAX_TERMS);
        assert_eq!(
            terms("ünïcode Straße").fts5_in("b"),
            "b : \"ünïcode\"* AND b : \"straße\"*"
        );
        assert_eq!(terms("tea cup").tsquery(), "tea:* & cup:*");
        assert_eq!(
            terms("tea cup").fts5_in("body"),
            "body : \"tea\"* AND body : \"cup\"*"
        );
    }

    #[test]
    fn a_snippet_marks_the_hits_around_the_first() {
        let text = "one two three four five six seven eight nine ten eleven twelve \
                    Borrowing thirteen fourteen fifteen sixteen seventeen eighteen \
                    nineteen twenty twentyone twentytwo twentythree twentyfour";
        let s = snippet(text, &terms("borrow"));
        assert!(s[0].text.starts_with('…'), "{s:?}");
        let hits: Vec<&str> = s
            .iter()
            .filter(|x| x.hit)
            .map(|x| x.text.as_str())
            .collect();
        assert_eq!(hits, ["Borrowing"]);
        assert_eq!(s.last().unwrap().text.chars().last(), Some('…'));
        let whole: String = s.iter().map(|x| x.text.as_str()).collect();
        assert!(
            whole.contains("ten eleven twelve Borrowing thirteen"),
            "{whole}"
        );
        // No hit in the text: its start, nothing marked.
        let s = snippet("<img src=x onerror=alert(1)>", &terms("zzz"));
        assert!(s.iter().all(|x| !x.hit));
        assert_eq!(snippet("", &terms("a")), Vec::new());
    }

    #[test]
    fn what_postgresql_refuses_or_splits_otherwise_is_made_plain() {
        assert_eq!(without_nul("a\0b"), "a b");
        assert_eq!(
            index_words("Mail bob@Example.com, see https://docs.rs/tokio!"),
            "mail bob example com see https docs rs tokio"
        );
        let json = serde_json::json!({"content": "x\u{0}y"}).to_string();
        assert_eq!(searchable("chat.text", &json).unwrap().1, "x y");
        assert_eq!(preview("x\0y"), "x y");
    }

    #[test]
    fn a_preview_folds_and_cuts() {
        assert_eq!(preview("  a\n\n b\tc "), "a b c");
        let long = "é".repeat(500);
        let p = preview(&long);
        assert_eq!(p.chars().count(), PREVIEW_CHARS);
        assert!(p.ends_with('…'));
    }
}
