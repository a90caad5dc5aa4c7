//! Checks of list-valued keys (`cors_origins`, `allowed_hosts`,
//! `[[models]]`, `[[databases]]`).

use super::settings::{DatabaseEntry, ModelConfig};

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

/// Most databases chats may be spread over.
const MAX_DATABASES: usize = 64;

/// `[[databases]]`: PostgreSQL URLs, each with a name of its own (what
/// places chats), at most [`MAX_DATABASES`]; none (the key unused) or at
/// least two.
pub(super) fn databases(list: &[DatabaseEntry]) -> Result<Vec<DatabaseEntry>, Refused> {
    if list.len() == 1 {
        return Err(refuse(
            "databases",
            "one database is `database_url`; [[databases]] spreads chats over two or more",
        ));
    }
    if list.len() > MAX_DATABASES {
        return Err(refuse(
            "databases",
            format!("at most {MAX_DATABASES} databases"),
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (i, d) in list.iter().enumerate() {
        let named = !d.name.is_empty()
            && d.name.len() <= 64
            && d.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !named {
            return Err(refuse(
                "databases",
                format!("databases[{i}].name: 1 to 64 letters, digits, `_` or `-`"),
            ));
        }
        if !names.insert(d.name.as_str()) {
            return Err(refuse(
                "databases",
                format!("databases[{i}].name: `{}` is named twice", d.name),
            ));
        }
        if !(d.url.starts_with("postgres://") || d.url.starts_with("postgresql://")) {
            return Err(refuse(
                "databases",
                format!(
                    "databases[{i}].url (`{}`): must start with postgres:// (the value is not shown: it may hold a password)",
                    d.name
                ),
            ));
        }
    }
    Ok(list.to_vec())
}
