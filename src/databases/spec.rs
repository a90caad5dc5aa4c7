//! A connection as the user describes it, and the checks of where it may
//! lead (a PostgreSQL host whose every address is public, a file inside the
//! allowed folder).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// PostgreSQL: bind even a role that can do more than read (a
    /// superuser, a member of `pg_write_server_files`…), with a warning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_privileged_role: bool,
}

/// How long a host name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `ip` is this server's own network (or no one's): loopback,
/// private, shared (CGNAT), link-local, unspecified (`0.0.0.0/8` reaches the
/// host itself on Linux), broadcast or multicast; for IPv6 also unique local
/// and an IPv4 address carried inside (mapped, compatible or NAT64).
pub(super) fn own_network(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            let [first, second, ..] = a.octets();
            a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_broadcast()
                || a.is_multicast()
                || first == 0
                || (first == 100 && (64..128).contains(&second))
        }
        IpAddr::V6(a) => {
            // Mapped and compatible (`::ffff:a.b.c.d`, `::a.b.c.d`), or
            // NAT64's well-known prefix (`64:ff9b::a.b.c.d`).
            let s = a.segments();
            let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            let carried = a.to_ipv4().or_else(|| {
                nat64.then(|| Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])))
            });
            a.is_loopback()
                || a.is_unspecified()
                || a.is_unique_local()
                || a.is_unicast_link_local()
                || a.is_multicast()
                || carried.is_some_and(|v4| own_network(IpAddr::V4(v4)))
        }
    }
}

/// Whether `host` reads as a number the way an IPv4 parser would take it
/// (its last label all digits, or `0x` and hex digits): `127.1`,
/// `2130706433`, `0x7f000001`, `0177.0.0.1`, `0`.
fn numeric(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    let last = host.rsplit('.').next().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    hex || (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
}

/// The addresses a PostgreSQL `host` leads to, every one checked: a
/// canonical address as it is, a name as it resolves now. Refused: a socket
/// path, a number in any other form (`127.1`, `0x7f000001`…), a name that
/// does not resolve, and any address of this server's own network.
///
/// # Errors
/// Why the host is refused, naming it.
pub(super) async fn reach(host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
    let inside = |ip: IpAddr| {
        format!(
            "`host`: `{host}` is this server's own network ({ip}: loopback, private, link-local or the like); list it in connection_hosts to allow it"
        )
    };
    if host.starts_with('/') || host.starts_with('@') {
        return Err(format!(
            "`host`: `{host}` is a socket of this server; list it in connection_hosts to allow it"
        ));
    }
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if literal.is_some() || host.contains(':') {
        let ip = literal
            .unwrap_or(host)
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("`host`: `{host}` is not an IPv6 address"))?;
        return if own_network(IpAddr::V6(ip)) {
            Err(inside(IpAddr::V6(ip)))
        } else {
            Ok(vec![IpAddr::V6(ip)])
        };
    }
    if numeric(host) {
        // Only the canonical dotted quad: other forms are read differently
        // by different resolvers, and are how a check gets walked around.
        return match host.parse::<Ipv4Addr>() {
            Ok(ip) if ip.to_string() == host => {
                if own_network(IpAddr::V4(ip)) {
                    Err(inside(IpAddr::V4(ip)))
                } else {
                    Ok(vec![IpAddr::V4(ip)])
                }
            }
            _ => Err(format!(
                "`host`: `{host}` is not an address in the usual form: write an IPv4 address as four decimal numbers (like 192.0.2.7)"
            )),
        };
    }
    let name_like = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if host.is_empty() || !name_like {
        return Err(format!("`host`: `{host}` is not a host name or address"));
    }
    let found = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| {
            format!(
                "`host`: `{host}` did not resolve within {} s",
                RESOLVE_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("`host`: `{host}` cannot be resolved: {e}"))?;
    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in found.map(|a| a.ip()) {
        if own_network(ip) {
            return Err(format!(
                "`host`: `{host}` resolves to {ip}, this server's own network (loopback, private, link-local or the like); list it in connection_hosts to allow it"
            ));
        }
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if ips.is_empty() {
        return Err(format!("`host`: `{host}` resolves to no address"));
    }
    Ok(ips)
}

/// `path` resolved inside `dir` (symlinks followed), if it is an existing file there.
pub(super) fn inside(dir: &Path, path: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    let file = dir.join(path).canonicalize().ok()?;
    (file.starts_with(&dir) && file.is_file()).then_some(file)
}
