//! Files in and out (issue 36). `POST /v1/chats/{id}/files` takes one file
//! as the raw request body, with its `Content-Type` and `?name=`, streamed
//! chunk by chunk into the store (hashed on the way, its media type sniffed
//! from its first bytes); `GET /v1/files/{id}` serves it to its owner, with
//! ranges, as a download that never runs in the page's origin.

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::chats::chat_id;
use super::error::ApiError;
use super::state::AppState;
use crate::session::SessionError;
use crate::store::files::{CHUNK_BYTES, FileRecord, Kept, Put, clean_name, sniff};

/// The routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        // The body is streamed by the handler, within its own limits.
        .route(
            "/v1/chats/{id}/files",
            post(upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/v1/files/{id}", get(super::download::download))
}

/// Whether a request's body is a file the handler streams (the guard
/// neither asks it to be JSON nor reads it whole): an upload of a user's,
/// or of a backend's (`/v1/server/chats/{id}/files`).
pub(super) fn streams_body(method: &axum::http::Method, path: &str) -> bool {
    method == axum::http::Method::POST
        && path
            .strip_prefix("/v1/chats/")
            .or_else(|| path.strip_prefix("/v1/server/chats/"))
            .and_then(|rest| rest.strip_suffix("/files"))
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

#[derive(Deserialize, utoipa::IntoParams)]
pub(super) struct UploadQuery {
    /// The file's name, as the user sees it [default: `file`]. Path
    /// separators and control characters are replaced; at most 255
    /// characters.
    #[serde(default)]
    name: Option<String>,
}

/// A stored file.
#[derive(Debug, Serialize, ToSchema)]
pub struct FileView {
    pub id: Uuid,
    pub chat_id: Uuid,
    pub name: String,
    /// Sniffed from the content: the declared `Content-Type` only tells
    /// text kinds apart.
    pub media_type: String,
    pub size: u64,
    /// The content's SHA-256, lowercase hex.
    pub sha256: String,
    /// RFC 3339, UTC.
    pub created_at: String,
}

pub(super) fn file_view(f: &FileRecord) -> FileView {
    FileView {
        id: f.id,
        chat_id: f.chat_id,
        name: f.name.clone(),
        media_type: f.media_type.clone(),
        size: f.size,
        sha256: f.sha256.clone(),
        created_at: super::views::rfc3339(f.created_at),
    }
}

/// Uploads a file to one of the caller's chats: the raw body is the file.
#[utoipa::path(post, path = "/v1/chats/{id}/files", tag = "files",
    params(("id" = Uuid, Path), UploadQuery),
    request_body(description = "The file's bytes, with its Content-Type; or a multipart form \
        whose first part with a filename is the file",
        content((Vec<u8> = "application/octet-stream"), (Vec<u8> = "multipart/form-data"))),
    responses((status = 201, body = FileView), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 408, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 429, body = ErrorBody)))]
pub(super) async fn upload(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    Query(q): Query<UploadQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let file = take(&state, &user, chat_id(&id)?, q.name, &headers, body).await?;
    Ok((StatusCode::CREATED, Json(file_view(&file))).into_response())
}

/// Keeps a request's body — the raw file, or a multipart form's file — as
/// a file of `user`'s in `chat_id`, named `name` (or the form's filename).
pub(super) async fn take(
    state: &AppState,
    user: &str,
    chat_id: Uuid,
    name: Option<String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<FileRecord, ApiError> {
    let declared = declared_type(headers);
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared.as_deref() {
        Some("multipart/form-data") => {
            let boundary = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| multer::parse_boundary(v).ok())
                .ok_or_else(|| ApiError::BadRequest("the multipart body has no boundary".into()))?;
            // The whole form within the file's limit and a little more (its
            // headers and other fields, which are read and dropped).
            let max = state.config.files.max_file_bytes;
            let limits = multer::SizeLimit::new().whole_stream(max.saturating_add(64 << 10));
            let constraints = multer::Constraints::new().size_limit(limits);
            let stream = body.into_data_stream();
            let mut form = multer::Multipart::with_constraints(stream, boundary, constraints);
            // The first part with a file name (a form's file input) is the file.
            let wait = state.config.http_body_timeout;
            let field = loop {
                match tokio::time::timeout(wait, form.next_field()).await {
                    Err(_) => {
                        return Err(ApiError::Timeout(
                            "the form was not sent in time (http_body_timeout_seconds)".into(),
                        ));
                    }
                    Ok(Ok(Some(field))) if field.file_name().is_some() => break field,
                    Ok(Ok(Some(_))) => {}
                    Ok(Ok(None)) => {
                        return Err(ApiError::BadRequest(
                            "the form holds no file (a part with a filename)".into(),
                        ));
                    }
                    Ok(Err(multer::Error::StreamSizeExceeded { .. })) => {
                        return Err(SessionError::TooLarge(format!(
                            "the form is over the file limit (max_file_bytes: {max})"
                        ))
                        .into());
                    }
                    Ok(Err(e)) => {
                        return Err(ApiError::BadRequest(format!(
                            "the form cannot be read: {e}"
                        )));
                    }
                }
            };
            let name = name.or_else(|| field.file_name().map(str::to_owned));
            let declared = field
                .content_type()
                .map(|t| t.essence_str().to_ascii_lowercase());
            let file = Incoming {
                chat_id,
                name: name.as_deref(),
                declared: declared.as_deref(),
                length: None,
            };
            keep(state, user, file, field).await
        }
        _ => {
            let file = Incoming {
                chat_id,
                name: name.as_deref(),
                declared: declared.as_deref(),
                length,
            };
            keep(state, user, file, body.into_data_stream()).await
        }
    }
}

/// The media type a `Content-Type` declares, without its parameters, lower case.
pub(super) fn declared_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(
        value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
    )
}

/// A file arriving: where it goes and what its sender says of it.
pub(super) struct Incoming<'a> {
    pub(super) chat_id: Uuid,
    /// As the sender names it (cleaned before it is kept).
    pub(super) name: Option<&'a str>,
    /// The declared media type (only tells text kinds apart).
    pub(super) declared: Option<&'a str>,
    /// The declared length, refused early when over the limit.
    pub(super) length: Option<u64>,
}

/// Keeps `body` as a file of `user`'s in `file.chat_id` (one not started
/// yet too; another user's finds nothing): every upload's way in, through
/// the same limits, sniffing, quota and dedup, whether it came as the raw
/// body, a multipart field or a data URL of a message.
pub(super) async fn keep<E>(
    state: &AppState,
    user: &str,
    file: Incoming<'_>,
    body: impl futures_util::Stream<Item = Result<bytes::Bytes, E>>,
) -> Result<FileRecord, ApiError> {
    let chat_id = file.chat_id;
    match state
        .store
        .chat(chat_id)
        .await
        .map_err(SessionError::from)?
    {
        Some(chat) if chat.owner != user => return Err(SessionError::NotFound.into()),
        Some(chat) if chat.archived => return Err(SessionError::Archived.into()),
        _ => {}
    }
    state.registry.charge(user)?;
    let limits = &state.config.files;
    if let Some(length) = file.length {
        check_size(length, limits.max_file_bytes)?;
    }

    let upload = Uuid::new_v4();
    // Whatever ends this request before the file is recorded — a refusal,
    // an error, the client going away (the handler is dropped) — drops what
    // it staged.
    let mut staged = Staged {
        store: state.store.clone(),
        owner: user.to_owned(),
        upload,
        armed: true,
    };
    let (size, sha256, media_type) = receive(state, user, upload, file.declared, body).await?;
    // The quota counts each content once: the same file again is free.
    let blobs = state.store.blobs();
    let total = if blobs.has(user, &sha256).await.map_err(SessionError::from)? {
        0
    } else {
        size + blobs.owner_bytes(user).await.map_err(SessionError::from)?
    };
    check_quota(total, limits.max_user_bytes)?;
    let record = FileRecord {
        id: Uuid::new_v4(),
        owner: user.to_owned(),
        chat_id,
        name: clean_name(file.name),
        media_type,
        size,
        sha256,
        created_at: chrono::Utc::now().timestamp_millis(),
    };
    let put = Put {
        upload,
        max_owner_bytes: limits.max_user_bytes,
    };
    match state
        .store
        .put_file(&record, put)
        .await
        .map_err(SessionError::from)?
    {
        Kept::Recorded => {}
        // The chat became another user's while the file came.
        Kept::ChatTaken => return Err(SessionError::NotFound.into()),
        // Other uploads of the user's were recorded meanwhile.
        Kept::OverQuota(total) => check_quota(total, limits.max_user_bytes)?,
    }
    staged.armed = false;
    Ok(record)
}

/// Streams the body into staged chunks: its size, digest and media type.
async fn receive<E>(
    state: &AppState,
    user: &str,
    upload: Uuid,
    declared: Option<&str>,
    body: impl futures_util::Stream<Item = Result<bytes::Bytes, E>>,
) -> Result<(u64, String, String), ApiError> {
    let limits = &state.config.files;
    let wait = state.config.http_body_timeout;
    let mut stream = std::pin::pin!(body);
    let (mut hasher, mut size, mut idx) = (Sha256::new(), 0_u64, 0_u32);
    let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_BYTES);
    let mut media_type: Option<String> = None;
    loop {
        // Each piece within the body timeout: a trickling client is let go.
        let piece = match tokio::time::timeout(wait, stream.next()).await {
            Err(_) => {
                return Err(ApiError::Timeout(
                    "the file was not sent in time (http_body_timeout_seconds)".into(),
                ));
            }
            Ok(None) => None,
            Ok(Some(Err(_))) => {
                return Err(ApiError::BadRequest("the file could not be read".into()));
            }
            Ok(Some(Ok(bytes))) => Some(bytes),
        };
        let done = piece.is_none();
        if let Some(bytes) = piece {
            size += bytes.len() as u64;
            check_size(size, limits.max_file_bytes)?;
            hasher.update(&bytes);
            chunk.extend_from_slice(&bytes);
        }
        while chunk.len() >= CHUNK_BYTES || (done && !chunk.is_empty()) {
            let rest = chunk.split_off(chunk.len().min(CHUNK_BYTES));
            if media_type.is_none() {
                media_type = Some(allowed(&chunk, declared, limits)?);
            }
            state
                .store
                .blobs()
                .stage_chunk(user, upload, idx, &chunk)
                .await
                .map_err(SessionError::from)?;
            idx += 1;
            chunk = rest;
            chunk.reserve(CHUNK_BYTES.saturating_sub(chunk.capacity()));
        }
        if done {
            break;
        }
    }
    let media_type = match media_type {
        Some(t) => t,
        None => allowed(&[], declared, limits)?,
    };
    Ok((size, hex::encode(hasher.finalize()), media_type))
}

/// An upload's staged chunks, dropped with this unless disarmed (recorded).
struct Staged {
    store: std::sync::Arc<dyn crate::store::Store>,
    owner: String,
    upload: Uuid,
    armed: bool,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (store, owner, upload) = (self.store.clone(), self.owner.clone(), self.upload);
        tokio::spawn(async move {
            if let Err(e) = store.blobs().discard(&owner, upload).await {
                tracing::warn!(error = %e, "cannot drop an unfinished upload's chunks");
            }
        });
    }
}

fn check_size(size: u64, max: u64) -> Result<(), ApiError> {
    if size > max {
        return Err(SessionError::TooLarge(format!(
            "the file is over {max} bytes (max_file_bytes)"
        ))
        .into());
    }
    Ok(())
}

fn check_quota(total: u64, max: u64) -> Result<(), ApiError> {
    if total > max {
        return Err(SessionError::TooLarge(format!(
            "your files would be over {max} bytes (max_user_file_bytes)"
        ))
        .into());
    }
    Ok(())
}

/// The sniffed media type of a file starting with `head`, if allowed.
fn allowed(
    head: &[u8],
    declared: Option<&str>,
    limits: &crate::config::FileLimits,
) -> Result<String, ApiError> {
    let t = sniff(head, declared);
    if limits.allows(&t) {
        Ok(t)
    } else {
        Err(ApiError::BadRequest(format!(
            "files of type {t} are not accepted (file_media_types)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_never_a_type_a_browser_runs() {
        // HTML is known by its start (and refused unless configured).
        let html = b"<html><script>alert(1)</script></html>";
        assert_eq!(sniff(html, Some("text/plain")), "text/html");
        assert_eq!(
            sniff(b"<svg onload=alert(1)>", Some("image/svg+xml")),
            "text/plain"
        );
        assert_eq!(sniff(b"a,b\n1,2\n", Some("text/csv")), "text/csv");
        assert_eq!(
            sniff(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", Some("text/plain")),
            "image/png"
        );
        assert_eq!(sniff(b"%PDF-1.7\n", None), "application/pdf");
        assert_eq!(sniff(&[0, 1, 2, 255], None), "application/octet-stream");
        // A multi-byte character cut by the end of the head is still text.
        assert_eq!(sniff("héllo".as_bytes()[..2].as_ref(), None), "text/plain");
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean_name(Some("../../etc/passwd")), ".._.._etc_passwd");
        assert_eq!(clean_name(Some("a\"b\r\n.txt")), "a_b__.txt");
        assert_eq!(clean_name(Some("  ")), "file");
        assert_eq!(clean_name(Some("a\u{202E}gpj.exe")), "a_gpj.exe");
        assert_eq!(clean_name(None), "file");
        assert_eq!(clean_name(Some(&"x".repeat(300))).len(), 255);
    }
}
