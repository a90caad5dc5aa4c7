//! `GET /v1/files/{id}` (issue 36): a file served to its owner, whole or
//! by one byte range, read chunk by chunk from the store, as a download
//! that never runs in the page's origin.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::api::ErrorBody;
use super::auth::AuthUser;
use super::error::ApiError;
use super::state::AppState;
use crate::session::SessionError;
use crate::store::files::{CHUNK_BYTES, FileRecord};

/// Serves a file to its owner: the whole of it, or one byte range.
#[utoipa::path(get, path = "/v1/files/{id}", tag = "files", params(("id" = Uuid, Path)),
    responses((status = 200, description = "The file's bytes"),
        (status = 206, description = "The requested range"),
        (status = 404, body = ErrorBody), (status = 416, body = ErrorBody)))]
pub(super) async fn download(
    State(state): State<AppState>,
    AuthUser { user, .. }: AuthUser,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::FileNotFound(format!("no file `{id}` is yours"));
    let file_id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let file = match state
        .store
        .file(file_id)
        .await
        .map_err(SessionError::from)?
    {
        Some(f) if f.owner == user => f,
        _ => return Err(not_found()),
    };
    let whole = 0..file.size;
    let (status, range) = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        None => (StatusCode::OK, whole),
        Some(asked) => match byte_range(asked, file.size) {
            Some(r) => (StatusCode::PARTIAL_CONTENT, r),
            None => {
                let mut refused = ApiError::BadRequest(format!(
                    "the range `{asked}` is not one range within the file's {} bytes",
                    file.size
                ))
                .into_response();
                *refused.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                let all = format!("bytes */{}", file.size);
                if let Ok(v) = HeaderValue::from_str(&all) {
                    refused.headers_mut().insert(header::CONTENT_RANGE, v);
                }
                return Ok(refused);
            }
        },
    };
    let mut response = Response::new(Body::from_stream(read_range(&state, &file, range.clone())));
    *response.status_mut() = status;
    let h = response.headers_mut();
    let media = HeaderValue::from_str(&file.media_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    h.insert(header::CONTENT_TYPE, media);
    h.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(range.end - range.start),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if status == StatusCode::PARTIAL_CONTENT {
        let r = format!("bytes {}-{}/{}", range.start, range.end - 1, file.size);
        if let Ok(v) = HeaderValue::from_str(&r) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    // A download, never a page: even a file that is HTML or SVG inside
    // cannot run script in this origin.
    let disposition = format!(
        "attachment; filename=\"{}\"; filename*=UTF-8''{}",
        file.name.replace(|c: char| !c.is_ascii() || c == '%', "_"),
        utf8_percent(&file.name)
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    Ok(response)
}

/// One range of `bytes=` within `size` bytes; `None` for several ranges,
/// a malformed one or one outside the file.
fn byte_range(asked: &str, size: u64) -> Option<std::ops::Range<u64>> {
    let ranges = http_range_header::parse_range_header(asked).ok()?;
    let valid = ranges.validate(size).ok()?;
    match valid.as_slice() {
        [one] => Some(*one.start()..*one.end() + 1),
        _ => None,
    }
}

/// The bytes of `range` of `file`, read chunk by chunk.
fn read_range(
    state: &AppState,
    file: &FileRecord,
    range: std::ops::Range<u64>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static {
    let store = state.store.clone();
    let (owner, sha) = (file.owner.clone(), file.sha256.clone());
    let chunk = CHUNK_BYTES as u64;
    let first = u32::try_from(range.start / chunk).unwrap_or(u32::MAX);
    futures_util::stream::unfold((first, range), move |(idx, range)| {
        let (store, owner, sha) = (store.clone(), owner.clone(), sha.clone());
        async move {
            if range.start >= range.end {
                return None;
            }
            let at = u64::from(idx) * chunk;
            let data = match store.blobs().chunk(&owner, &sha, idx).await {
                Ok(Some(data)) => data,
                Ok(None) => {
                    let gone = std::io::Error::other("the file's content is missing");
                    return Some((Err(gone), (idx, range.end..range.end)));
                }
                Err(e) => {
                    return Some((Err(std::io::Error::other(e)), (idx, range.end..range.end)));
                }
            };
            // A chunk shorter than its place says (a damaged blob) ends the
            // download rather than shifting the bytes.
            let Some(offset) = range.start.checked_sub(at) else {
                let bad = std::io::Error::other("the file's content is damaged");
                return Some((Err(bad), (idx, range.end..range.end)));
            };
            let from = usize::try_from(offset).unwrap_or(0).min(data.len());
            let to = usize::try_from(range.end - at)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let piece = data[from..to].to_vec();
            let next = (at + data.len() as u64).max(range.start + 1);
            Some((Ok(piece), (idx + 1, next..range.end)))
        }
    })
}

/// `name` percent-encoded as RFC 5987's `filename*` wants it.
fn utf8_percent(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_within_the_file() {
        assert_eq!(byte_range("bytes=0-9", 100), Some(0..10));
        assert_eq!(byte_range("bytes=90-", 100), Some(90..100));
        assert_eq!(byte_range("bytes=-10", 100), Some(90..100));
        assert_eq!(byte_range("bytes=100-", 100), None);
        assert_eq!(byte_range("bytes=0-1,5-6", 100), None);
        assert_eq!(byte_range("lines=1-2", 100), None);
    }
}
