//! What files users may upload (issue 36): sizes and media types.

/// The media types allowed when none are configured: what every vendor's
/// model reads (images, PDF) and text. Never HTML or SVG by default: both
/// can carry script.
const DEFAULT_MEDIA_TYPES: [&str; 9] = [
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/plain",
    "text/csv",
    "text/markdown",
    "application/json",
];

/// Limits on uploaded files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLimits {
    /// The largest file, in bytes (`max_file_bytes`).
    pub max_file_bytes: u64,
    /// The bytes one user may keep, each content once (`max_user_file_bytes`).
    pub max_user_bytes: u64,
    /// The files one message may attach (`max_files_per_message`).
    pub max_per_message: usize,
    /// The bytes of files a message's body may carry inline, base64
    /// included (`max_inline_file_bytes`).
    pub max_inline_bytes: usize,
    /// The origins whose URLs a message's file may name, for the server to
    /// fetch (`file_fetch_origins`): `scheme://host[:port]`, lower case.
    pub fetch_origins: Vec<String>,
    /// The media types a file may have, sniffed (`file_media_types`), lower case.
    pub media_types: Vec<String>,
}

impl Default for FileLimits {
    /// The defaults of every key.
    fn default() -> Self {
        Self::resolve(None, None, None, None, None, None).expect("the defaults are in range")
    }
}

impl FileLimits {
    /// From the configured values.
    ///
    /// # Errors
    /// The key and why, for a value out of range or a malformed type.
    pub(super) fn resolve(
        max_file_bytes: Option<u64>,
        max_user_bytes: Option<u64>,
        max_per_message: Option<usize>,
        max_inline_bytes: Option<usize>,
        fetch_origins: Option<Vec<String>>,
        media_types: Option<Vec<String>>,
    ) -> Result<Self, (&'static str, String)> {
        let fetch_origins = fetch_origins
            .unwrap_or_default()
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
            .filter(|o| !o.is_empty())
            .map(|o| {
                let host = o
                    .strip_prefix("https://")
                    .or_else(|| o.strip_prefix("http://"))
                    .unwrap_or_default();
                if host.is_empty() || host.contains(['/', '?', '#', '@']) {
                    Err((
                        "file_fetch_origins",
                        format!("`{o}` is not an origin (https://host[:port])"),
                    ))
                } else {
                    Ok(o)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let max_inline_bytes = max_inline_bytes.unwrap_or(8 << 20);
        if max_inline_bytes > 256 << 20 {
            return Err(("max_inline_file_bytes", "must be at most 268435456".into()));
        }
        let max_per_message = max_per_message.unwrap_or(10);
        // 32: the schemas' bound (`protocol::MAX_ATTACHMENTS`).
        if !(1..=32).contains(&max_per_message) {
            return Err(("max_files_per_message", "must be between 1 and 32".into()));
        }
        let max_file_bytes = max_file_bytes.unwrap_or(50 << 20);
        if !(1..=(4_u64 << 30)).contains(&max_file_bytes) {
            return Err(("max_file_bytes", "must be between 1 and 4294967296".into()));
        }
        let max_user_bytes = max_user_bytes.unwrap_or(1 << 30);
        if max_user_bytes < max_file_bytes {
            return Err((
                "max_user_file_bytes",
                "must be at least max_file_bytes".into(),
            ));
        }
        let media_types = match media_types {
            None => DEFAULT_MEDIA_TYPES
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            Some(types) => types
                .iter()
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .map(|t| match t.split_once('/') {
                    Some((a, b)) if !a.is_empty() && !b.is_empty() && !b.contains('/') => Ok(t),
                    _ => Err((
                        "file_media_types",
                        format!("`{t}` is not a media type (type/subtype)"),
                    )),
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Self {
            max_file_bytes,
            max_user_bytes,
            max_per_message,
            max_inline_bytes,
            fetch_origins,
            media_types,
        })
    }

    /// Whether files of media type `t` may be kept.
    pub fn allows(&self, t: &str) -> bool {
        self.media_types.iter().any(|m| m == t)
    }
}
