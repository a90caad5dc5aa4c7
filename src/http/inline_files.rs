//! Files that arrive inside a message (issue 36): the AI SDK's `file`
//! parts and AG-UI's binary input content. Each is kept as a file of the
//! chat, through the upload's own limits ([`super::files::keep`]), and
//! attached to the message; one naming this server's own file
//! (`/v1/files/{id}`, as replayed messages do) is attached as it is. The
//! server fetches no other URL.

use base64::Engine as _;
use serde_json::Value;
use uuid::Uuid;

use super::error::ApiError;
use super::files::{Incoming, keep};
use super::state::AppState;
use crate::protocol::FileRef;
use crate::session::SessionError;
use crate::store::files::{CHUNK_BYTES, sniff};

/// Whether a request's body may carry files inline (the AI SDK's and
/// AG-UI's message routes): its limit is `max_message_bytes` and
/// `max_inline_file_bytes` together.
pub(super) fn carries_files(method: &str, path: &str) -> bool {
    method == "POST" && (path == "/v1/ai-sdk/chat" || path == "/v1/ag-ui")
}

/// Refuses a body of one of those routes whose part besides its inline
/// files is over `max_message_bytes` (413): the inline allowance is for
/// files only. An inline file is a string starting `data:`, or the `data`
/// or `value` of an object whose `type` is `binary` or `data` (AG-UI).
///
/// # Errors
/// 413 `SCHEMA_VALIDATION_FAILED`, naming the limit.
pub(super) fn within_limits(state: &AppState, body: &[u8]) -> Result<(), ApiError> {
    fn inline(v: &Value) -> usize {
        match v {
            Value::String(s) if s.starts_with("data:") => s.len(),
            Value::Array(items) => items.iter().map(inline).sum(),
            Value::Object(map) => {
                let binary = matches!(
                    map.get("type").and_then(Value::as_str),
                    Some("binary" | "data")
                );
                map.iter()
                    .map(|(k, v)| match v {
                        Value::String(s) if binary && (k == "data" || k == "value") => s.len(),
                        v => inline(v),
                    })
                    .sum()
            }
            _ => 0,
        }
    }
    let max = state.config.max_message_bytes;
    if body.len() <= max {
        return Ok(());
    }
    let files = serde_json::from_slice::<Value>(body).map_or(0, |v| inline(&v));
    let rest = body.len().saturating_sub(files);
    if rest > max {
        return Err(SessionError::TooLarge(format!(
            "the request body is over {max} bytes besides its files (max_message_bytes)"
        ))
        .into());
    }
    Ok(())
}

/// A file inside a message, as a client sent it.
#[derive(Debug, Default)]
pub(super) struct Inline<'a> {
    /// The declared media type.
    pub(super) media_type: Option<&'a str>,
    pub(super) name: Option<&'a str>,
    /// A `data:` URL, or this server's `/v1/files/{id}`.
    pub(super) url: Option<&'a str>,
    /// The bytes as base64 (AG-UI's `data`).
    pub(super) data: Option<&'a str>,
    /// A file of this server's, by its id (AG-UI's `id`).
    pub(super) id: Option<&'a str>,
}

/// The `file` parts of an AI SDK user message (`mediaType`, `filename`,
/// `url`: a data URL, or `/v1/files/{id}` for one the chat has).
pub(super) fn ai_sdk(parts: &Value) -> Vec<Inline<'_>> {
    parts
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "file")
        .map(|p| Inline {
            media_type: p["mediaType"].as_str(),
            name: p["filename"].as_str(),
            url: Some(p["url"].as_str().unwrap_or_default()),
            ..Inline::default()
        })
        .collect()
}

/// The files of an AG-UI user message's content: `binary` parts
/// (`mimeType` with `data`, `url` or `id`, `filename`), and the
/// modality parts (`image`, `audio`, `video`, `document`) with a `data`
/// or `url` source.
pub(super) fn ag_ui(content: &Value) -> Vec<Inline<'_>> {
    let mut out = Vec::new();
    for p in content.as_array().into_iter().flatten() {
        match p["type"].as_str() {
            Some("binary") => out.push(Inline {
                media_type: p["mimeType"].as_str(),
                name: p["filename"].as_str(),
                url: p["url"].as_str(),
                data: p["data"].as_str(),
                id: p["id"].as_str(),
            }),
            Some("image" | "audio" | "video" | "document") => {
                let source = &p["source"];
                let value = source["value"].as_str();
                let by_url = source["type"] == "url";
                out.push(Inline {
                    media_type: source["mimeType"].as_str(),
                    name: p["metadata"]["filename"].as_str(),
                    url: value.filter(|_| by_url),
                    data: value.filter(|_| !by_url),
                    id: None,
                });
            }
            _ => {}
        }
    }
    out
}

/// Keeps each file of a message in `chat_id` and names them for the
/// message, in order.
///
/// # Errors
/// More files than a message may attach (413), a URL the server does not
/// fetch or bytes that are not base64 (400), and what an upload meets.
pub(super) async fn attach(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
    files: &[Inline<'_>],
) -> Result<Vec<FileRef>, ApiError> {
    let max = state.config.files.max_per_message;
    if files.len() > max {
        return Err(SessionError::TooLarge(format!(
            "the message holds {} files; a message may attach at most {max} (max_files_per_message)",
            files.len()
        ))
        .into());
    }
    // Every file read first: a message one of whose files is refused
    // keeps none of them.
    enum Named<'u> {
        Stored(Uuid),
        Bytes(Vec<u8>, Option<String>),
        /// A URL of an origin the configuration lets the server fetch.
        Fetch(&'u str),
    }
    let mut read = Vec::with_capacity(files.len());
    for f in files {
        let own = f.url.and_then(own_file);
        let by_id = f.id.and_then(|id| Uuid::parse_str(id).ok());
        if let Some(id) = own.or(by_id.filter(|_| f.url.is_none() && f.data.is_none())) {
            // The caller's file of this chat, else nothing is kept.
            match state.store.file(id).await.map_err(SessionError::from)? {
                Some(f) if f.owner == user && f.chat_id == chat_id => {}
                _ => return Err(SessionError::FileNotFound(id).into()),
            }
            read.push(Named::Stored(id));
            continue;
        }
        if let Some(url) = f
            .url
            .filter(|u| fetched(u, &state.config.files.fetch_origins))
        {
            read.push(Named::Fetch(url));
            continue;
        }
        let (declared, data) = match (f.url, f.data) {
            (Some(url), _) => data_url(url)?,
            (None, Some(data)) => (f.media_type.map(str::to_owned), data),
            (None, None) => {
                return Err(ApiError::BadRequest(
                    "a file of the message has neither a URL nor data".into(),
                ));
            }
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| ApiError::BadRequest("a file's data is not base64".into()))?;
        let declared = f.media_type.map(str::to_owned).or(declared);
        // Its size and type checked now: a message one of whose files is
        // refused keeps none (the quota is checked as each is kept).
        let limits = &state.config.files;
        if bytes.len() as u64 > limits.max_file_bytes {
            return Err(SessionError::TooLarge(format!(
                "a file of the message is over {} bytes (max_file_bytes)",
                limits.max_file_bytes
            ))
            .into());
        }
        let head = &bytes[..bytes.len().min(CHUNK_BYTES)];
        let sniffed = sniff(head, declared.as_deref().map(str::trim));
        if !limits.allows(&sniffed) {
            return Err(ApiError::BadRequest(format!(
                "files of type {sniffed} are not accepted (file_media_types)"
            )));
        }
        read.push(Named::Bytes(bytes, declared));
    }
    let mut refs = Vec::with_capacity(files.len());
    for (f, named) in files.iter().zip(read) {
        let file_id = match named {
            Named::Stored(id) => id,
            Named::Bytes(bytes, declared) => {
                let incoming = Incoming {
                    chat_id,
                    name: f.name,
                    declared: declared.as_deref().map(str::trim),
                    length: Some(bytes.len() as u64),
                };
                let once = futures_util::stream::once(async move {
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from(bytes))
                });
                keep(state, user, incoming, once).await?.id
            }
            Named::Fetch(url) => fetch(state, user, chat_id, f, url).await?,
        };
        refs.push(FileRef { file_id });
    }
    Ok(refs)
}

/// A user's message with files as AG-UI content: each file a media part
/// (`image`, `audio`, `video` or `document`, as AG-UI 1.0 sends them) whose
/// source is its URL here, its name and id in `metadata`; then the text.
pub(super) fn ag_ui_content(env: &crate::protocol::Envelope, text: &str) -> Value {
    let mut parts: Vec<Value> = env
        .attachments
        .iter()
        .map(|a| {
            let top = a.media_type.split('/').next().unwrap_or_default();
            let kind = ["image", "audio", "video"]
                .into_iter()
                .find(|k| *k == top)
                .unwrap_or("document");
            serde_json::json!({"type": kind,
                "source": {"type": "url", "value": format!("/v1/files/{}", a.file_id), "mimeType": a.media_type},
                "metadata": {"filename": a.name, "file_id": a.file_id}})
        })
        .collect();
    if !text.is_empty() {
        parts.push(serde_json::json!({"type": "text", "text": text}));
    }
    Value::Array(parts)
}

/// Whether the server fetches `url`: its origin is one of `origins`
/// exactly (scheme, host and port), and it names no user.
fn fetched(url: &str, origins: &[String]) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    if !u.username().is_empty() || u.password().is_some() {
        return false;
    }
    let origin = u.origin().ascii_serialization();
    origins.contains(&origin)
}

/// A file at `url` (of an allowed origin), streamed into the chat as an
/// upload is: no redirect followed, within the body timeout per piece.
async fn fetch(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
    f: &Inline<'_>,
    url: &str,
) -> Result<Uuid, ApiError> {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        // (The shared client installs the TLS provider first.)
        let _ = crate::llm::http_client();
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("the fetch client builds")
    });
    let failed =
        |why: String| ApiError::BadRequest(format!("a file's URL could not be fetched: {why}"));
    let wait = state.config.http_body_timeout;
    let response = tokio::time::timeout(wait, client.get(url).send())
        .await
        .map_err(|_| failed("no answer in time".into()))?
        .map_err(|_| failed("its server cannot be reached".into()))?;
    if !response.status().is_success() {
        return Err(failed(format!(
            "its server answered {}",
            response.status().as_u16()
        )));
    }
    let declared = super::files::declared_type(response.headers());
    let name = f.name.map(str::to_owned).or_else(|| {
        url.rsplit('/')
            .next()
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
    });
    let incoming = Incoming {
        chat_id,
        name: name.as_deref(),
        declared: f.media_type.or(declared.as_deref()),
        length: response.content_length(),
    };
    Ok(keep(state, user, incoming, response.bytes_stream())
        .await?
        .id)
}

/// The id of this server's own file URL (`/v1/files/{id}`, on its own or
/// at the end of an absolute URL).
fn own_file(url: &str) -> Option<Uuid> {
    let path = match url.find("://") {
        Some(at) => &url[at + 3..][url[at + 3..].find('/')?..],
        None => url,
    };
    path.strip_prefix("/v1/files/")
        .and_then(|id| Uuid::parse_str(id).ok())
}

/// A `data:` URL's media type and base64 text.
fn data_url(url: &str) -> Result<(Option<String>, &str), ApiError> {
    let refused = || {
        ApiError::BadRequest(
            "a file's URL must be a base64 data: URL, this server's /v1/files/{id}, or of an \
             origin in file_fetch_origins (the server fetches no URL of another: upload the \
             file with POST /v1/chats/{id}/files)"
                .into(),
        )
    };
    let rest = url.strip_prefix("data:").ok_or_else(refused)?;
    let (head, data) = rest.split_once(',').ok_or_else(refused)?;
    let head = head.strip_suffix(";base64").ok_or_else(refused)?;
    let media_type = head
        .split(';')
        .next()
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase);
    Ok((media_type, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_as_data_or_this_servers_files_and_nothing_else() {
        let id = Uuid::new_v4();
        assert_eq!(own_file(&format!("/v1/files/{id}")), Some(id));
        assert_eq!(
            own_file(&format!("https://chat.example/v1/files/{id}")),
            Some(id)
        );
        assert_eq!(own_file("https://evil.example/cat.png"), None);
        assert_eq!(own_file("/v1/files/../etc"), None);
        let (t, data) = data_url("data:image/png;name=a.png;base64,iVBO").unwrap();
        assert_eq!((t.as_deref(), data), (Some("image/png"), "iVBO"));
        let (t, _) = data_url("data:;base64,AAAA").unwrap();
        assert_eq!(t, None);
        assert!(data_url("data:text/plain,hello").is_err(), "not base64");
        assert!(data_url("https://example.com/a.png").is_err());
        assert!(data_url("file:///etc/passwd").is_err());
    }
}
