//! Who is calling: bearer JWT verification, or the fixed user `dev`.
//!
//! Pure: a token in, a user out. Uses `config` only.

use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;

use crate::config::{AuthConfig, JwtKey};
use crate::protocol::limits::has_control_chars;

/// The user of every request in `none` mode.
pub const DEV_USER: &str = "dev";
/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_SECONDS: u64 = 30;

/// Why a request was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("the token has no usable `sub`")]
    NoSubject,
    /// RFC 7515 §4.1.11: a recipient must refuse a token whose `crit` header
    /// names extensions it does not understand; this server understands none.
    #[error("the token's header lists critical extensions this server does not support")]
    CriticalHeader,
}

#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    /// Every other claim (a workflow's `allow` may name them).
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}

/// Verifies credentials.
pub struct Authenticator {
    key: Option<(DecodingKey, Validation)>,
}

impl Authenticator {
    /// # Errors
    /// The RS256 public key is not a valid PEM.
    pub fn new(config: &AuthConfig) -> Result<Self, jsonwebtoken::errors::Error> {
        let key = match config {
            AuthConfig::None => None,
            AuthConfig::Jwt(key) => {
                let (key, alg) = match key {
                    JwtKey::Secret(secret) => (
                        DecodingKey::from_secret(secret.as_bytes()),
                        Algorithm::HS256,
                    ),
                    JwtKey::RsaPem(pem) => (DecodingKey::from_rsa_pem(pem)?, Algorithm::RS256),
                };
                let mut validation = Validation::new(alg);
                validation.leeway = LEEWAY_SECONDS;
                validation.validate_exp = true;
                validation.validate_nbf = true;
                validation.set_required_spec_claims(&["exp", "sub"]);
                Some((key, validation))
            }
        };
        Ok(Self { key })
    }

    /// Whether requests are unauthenticated (`none` mode).
    pub fn is_open(&self) -> bool {
        self.key.is_none()
    }

    /// The user behind `token`.
    ///
    /// # Errors
    /// In `jwt` mode: no token, a bad signature, an expired or not-yet-valid
    /// token, or no `sub`.
    pub fn authenticate(&self, token: Option<&str>) -> Result<String, AuthError> {
        self.principal(token).map(|(user, _)| user)
    }

    /// [`Self::authenticate`], with the token's other claims (none in auth
    /// mode `none`).
    ///
    /// # Errors
    /// As [`Self::authenticate`].
    pub fn principal(
        &self,
        token: Option<&str>,
    ) -> Result<(String, serde_json::Map<String, serde_json::Value>), AuthError> {
        let Some((key, validation)) = &self.key else {
            return Ok((DEV_USER.to_owned(), serde_json::Map::new()));
        };
        let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
        if decode_header(token)?.crit.is_some() {
            return Err(AuthError::CriticalHeader);
        }
        let data = decode::<Claims>(token, key, validation)?;
        // The user id names chats and reaches the text log: no control
        // characters (a newline in `sub` would forge a log line).
        let user = data
            .claims
            .sub
            .filter(|s| !s.is_empty() && s.len() <= 256 && !has_control_chars(s))
            .ok_or(AuthError::NoSubject)?;
        Ok((user, data.claims.rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};

    const SECRET: &str = "a-test-secret-of-some-length";

    fn token(claims: serde_json::Value) -> String {
        encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    }

    #[test]
    fn verifies_hs256() {
        let auth = Authenticator::new(&AuthConfig::Jwt(JwtKey::Secret(SECRET.into()))).unwrap();
        let now = chrono::Utc::now().timestamp();
        let good = token(serde_json::json!({"sub": "alice", "exp": now + 60}));
        assert_eq!(auth.authenticate(Some(&good)).unwrap(), "alice");
        let expired = token(serde_json::json!({"sub": "alice", "exp": now - 3600}));
        assert!(auth.authenticate(Some(&expired)).is_err());
        let early =
            token(serde_json::json!({"sub": "alice", "exp": now + 7200, "nbf": now + 3600}));
        assert!(auth.authenticate(Some(&early)).is_err());
        let no_sub = token(serde_json::json!({"exp": now + 60}));
        assert!(auth.authenticate(Some(&no_sub)).is_err());
        assert!(matches!(auth.authenticate(None), Err(AuthError::Missing)));
        assert!(auth.authenticate(Some("not.a.jwt")).is_err());
    }

    #[test]
    fn refuses_crit_headers_and_control_characters_in_sub() {
        let auth = Authenticator::new(&AuthConfig::Jwt(JwtKey::Secret(SECRET.into()))).unwrap();
        let exp = chrono::Utc::now().timestamp() + 60;
        let header = Header {
            crit: Some(vec!["exp".into()]),
            ..Header::default()
        };
        let crit = encode(
            &header,
            &serde_json::json!({"sub": "alice", "exp": exp}),
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap();
        assert!(matches!(
            auth.authenticate(Some(&crit)),
            Err(AuthError::CriticalHeader)
        ));
        for sub in ["alice\nINFO forged line", "bob\u{1b}[31m", "\0"] {
            let t = token(serde_json::json!({"sub": sub, "exp": exp}));
            assert!(
                matches!(auth.authenticate(Some(&t)), Err(AuthError::NoSubject)),
                "{sub:?}"
            );
        }
    }

    #[test]
    fn none_mode_is_dev() {
        let auth = Authenticator::new(&AuthConfig::None).unwrap();
        assert_eq!(auth.authenticate(None).unwrap(), DEV_USER);
    }
}
