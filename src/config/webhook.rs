//! Webhooks out: where they go and how (`webhook_*`).

use std::time::Duration;

/// A refusal: the key at fault and why (`super::bad` makes it an error).
type Refused = (&'static str, String);

fn bad(key: &'static str, message: &str) -> Refused {
    (key, message.to_owned())
}

/// Webhooks out: where they go and how.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub url: reqwest::Url,
    /// The signing secret (text, read by `webhooks`).
    pub secret: String,
    /// How long one request may take.
    pub timeout: Duration,
    /// Waits for a person are told again this often while open.
    pub remind: Option<Duration>,
}

/// The webhook settings, checked: `None` when no endpoint is set.
pub(super) fn resolve(
    url: Option<String>,
    secret: Option<String>,
    timeout: Option<u64>,
    remind: Option<u64>,
) -> Result<Option<Webhook>, Refused> {
    let (url, secret) = match (url, secret) {
        (None, None) => return Ok(None),
        (Some(url), Some(secret)) => (url, secret),
        (Some(_), None) => {
            return Err(bad(
                "webhook_secret",
                "webhook_url needs a secret to sign with",
            ));
        }
        (None, Some(_)) => return Err(bad("webhook_url", "webhook_secret without webhook_url")),
    };
    let url = reqwest::Url::parse(url.trim())
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| bad("webhook_url", "must be an http:// or https:// URL"))?;
    let timeout = match timeout {
        None => 15,
        Some(t @ 1..=300) => t,
        Some(_) => return Err(bad("webhook_timeout_seconds", "between 1 and 300")),
    };
    let remind = match remind {
        Some(0) => return Err(bad("webhook_remind_seconds", "must be greater than 0")),
        r => r.map(Duration::from_secs),
    };
    Ok(Some(Webhook {
        url,
        secret,
        timeout: Duration::from_secs(timeout),
        remind,
    }))
}
