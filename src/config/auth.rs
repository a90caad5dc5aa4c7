//! The `auth` keys, resolved: which tokens are accepted and whose user id
//! they carry.

use std::path::PathBuf;

use reqwest::Url;

/// A bad key: its name, and what is wrong.
pub(super) type Bad = (&'static str, String);

fn bad(key: &'static str, message: impl Into<String>) -> Bad {
    (key, message.into())
}

/// Where the keys that verify a token come from.
#[derive(Debug, Clone)]
pub enum JwtKey {
    /// HS256 shared secret.
    Secret(String),
    /// RS256 public key, PEM bytes (read at start-up).
    RsaPem(Vec<u8>),
    /// An identity provider's published keys (a JWKS), fetched when first
    /// needed, cached, and fetched again on an unknown `kid`.
    Jwks(KeySource),
}

/// Where a JWKS is found.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// OpenID Connect discovery: `<issuer>/.well-known/openid-configuration`
    /// names the `jwks_uri`.
    Discovery(Url),
    /// The JWKS itself.
    Url(Url),
}

/// Bearer JWTs: the keys, and what the claims must say.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub key: JwtKey,
    /// `iss` must equal this, when set.
    pub issuer: Option<String>,
    /// `aud` must name one of these, when not empty.
    pub audience: Vec<String>,
    /// The claim that holds the user id (`sub` by default).
    pub user_claim: String,
}

/// Authentication, resolved.
#[derive(Debug, Clone)]
pub enum AuthConfig {
    None,
    Jwt(JwtConfig),
}

/// The raw `jwt_*` keys.
pub(super) struct JwtSettings {
    pub(super) secret: Option<String>,
    pub(super) public_key: Option<PathBuf>,
    pub(super) issuer: Option<String>,
    pub(super) jwks_url: Option<String>,
    pub(super) audience: Option<String>,
    pub(super) user_claim: Option<String>,
}

impl JwtSettings {
    pub(super) fn resolve(self) -> Result<JwtConfig, Bad> {
        let issuer = self.issuer.filter(|s| !s.trim().is_empty());
        let jwks_url = match self.jwks_url.filter(|s| !s.trim().is_empty()) {
            Some(url) => Some(provider_url("jwt_jwks_url", &url)?),
            None => None,
        };
        let key = match (self.secret, self.public_key, jwks_url) {
            (Some(_), Some(_), _) => {
                return Err(bad(
                    "jwt_secret",
                    "set either jwt_secret or jwt_public_key, not both",
                ));
            }
            (Some(_), None, Some(_)) | (None, Some(_), Some(_)) => {
                return Err(bad(
                    "jwt_jwks_url",
                    "set one source of keys: jwt_secret, jwt_public_key or jwt_jwks_url",
                ));
            }
            (Some(secret), None, None) if secret.len() < 16 => {
                return Err(bad("jwt_secret", "must be at least 16 bytes"));
            }
            (Some(secret), None, None) => JwtKey::Secret(secret),
            (None, Some(path), None) => {
                let pem = std::fs::read(&path).map_err(|e| {
                    bad(
                        "jwt_public_key",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                JwtKey::RsaPem(pem)
            }
            (None, None, Some(url)) => JwtKey::Jwks(KeySource::Url(url)),
            (None, None, None) => match &issuer {
                Some(issuer) => {
                    let base = provider_url("jwt_issuer", issuer)?;
                    JwtKey::Jwks(KeySource::Discovery(base))
                }
                None => {
                    return Err(bad(
                        "auth",
                        "jwt mode needs jwt_issuer (OpenID Connect discovery), jwt_jwks_url, jwt_secret (HS256) or jwt_public_key (RS256 PEM path)",
                    ));
                }
            },
        };
        let audience = self
            .audience
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        let user_claim = self.user_claim.unwrap_or_else(|| "sub".into());
        if user_claim.trim().is_empty() || user_claim.len() > 256 {
            return Err(bad("jwt_user_claim", "must name a claim"));
        }
        Ok(JwtConfig {
            key,
            issuer,
            audience,
            user_claim,
        })
    }
}

/// An identity provider's URL: HTTPS, or HTTP to this machine only (a
/// provider's keys fetched in the clear could be swapped on the way).
fn provider_url(key: &'static str, text: &str) -> Result<Url, Bad> {
    let url =
        Url::parse(text.trim()).map_err(|e| bad(key, format!("`{text}` is not a URL: {e}")))?;
    let host = url.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(bad(
            key,
            "must be an https:// URL (http:// only to localhost)",
        )),
    }
}
