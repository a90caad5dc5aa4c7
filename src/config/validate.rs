//! Checks of list-valued keys (`cors_origins`, `allowed_hosts`,
//! `[[models]]`).

use super::settings::ModelConfig;

/// A refusal: the key at fault and why (`mod.rs` makes it an error).
type Refused = (&'static str, String);

fn refuse(key: &'static str, message: impl Into<String>) -> Refused {
    (key, message.into())
}

pub(super) fn origins(origins: Vec<String>) -> Result<Vec<String>, Refused> {
    for o in &origins {
        let ok = o == "*"
            || ((o.starts_with("http://") || o.starts_with("https://")) && !o.ends_with('/'));
        if !ok {
            return Err(refuse(
                "cors_origins",
                format!("`{o}` must be `*` or an origin like https://app.example.com (no path)"),
            ));
        }
    }
    Ok(origins)
}

pub(super) fn hosts(hosts: Vec<String>) -> Result<Vec<String>, Refused> {
    hosts
        .into_iter()
        .map(|h| {
            let h = h.trim().to_ascii_lowercase();
            // A name or IPv4 address, or an IPv6 address in brackets; no port.
            let v6 = h.starts_with('[') && h.ends_with(']');
            let ok = !h.is_empty()
                && h.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-') || (v6 && "[]:".contains(c))
                });
            if ok {
                Ok(h)
            } else {
                Err(refuse(
                    "allowed_hosts",
                    format!("`{h}` must be a host name like chat.example.com (no scheme, no port)"),
                ))
            }
        })
        .collect()
}

pub(super) fn models(models: Vec<ModelConfig>) -> Result<Vec<ModelConfig>, Refused> {
    let mut names = std::collections::HashSet::new();
    for m in &models {
        if !matches!(
            m.provider.as_str(),
            "openai" | "anthropic" | "gemini" | "ollama"
        ) {
            return Err(refuse(
                "models",
                format!(
                    "model `{}`: provider `{}` is not openai, anthropic, gemini or ollama",
                    m.name, m.provider
                ),
            ));
        }
        for name in std::iter::once(&m.name).chain(&m.aliases) {
            if name.is_empty() || !names.insert(name.clone()) {
                return Err(refuse(
                    "models",
                    format!("the name `{name}` is empty or used twice"),
                ));
            }
        }
    }
    Ok(models)
}
