//! A connection as the user describes it, and the checks of where it may
//! lead (a public PostgreSQL host, a file inside the allowed folder).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A database engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Postgres,
    Sqlite,
}

/// A connection as the user describes it (without its password).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionSpec {
    pub name: String,
    pub driver: Driver,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// SQLite: a file inside `connection_files_dir`, relative to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Whether `host` is a name or a public address: not a socket path, not
/// `localhost`, not a loopback, private, link-local or unspecified address.
/// (Names are not resolved: a name that points inside is the operator's to
/// keep out of DNS, or to leave off `connection_hosts`.)
pub(super) fn public(host: &str) -> bool {
    use std::net::IpAddr;
    if host.starts_with('/') || host.starts_with('@') || host.eq_ignore_ascii_case("localhost") {
        return false;
    }
    match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            !(a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast())
        }
        Ok(IpAddr::V6(a)) => {
            let v4 = a
                .to_ipv4_mapped()
                .map(|m| !(m.is_loopback() || m.is_private() || m.is_link_local()));
            !(a.is_loopback()
                || a.is_unspecified()
                || a.is_unique_local()
                || a.is_unicast_link_local())
                && v4.unwrap_or(true)
        }
        Err(_) => true,
    }
}

/// `path` resolved inside `dir` (symlinks followed), if it is an existing file there.
pub(super) fn inside(dir: &Path, path: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    let file = dir.join(path).canonicalize().ok()?;
    (file.starts_with(&dir) && file.is_file()).then_some(file)
}
