//! Who is calling: a bearer JWT verified with a shared secret, a PEM key or
//! an identity provider's published keys (`jwks`), or the fixed user `dev`.
//!
//! A token in, a user out. Uses `config`, and `llm` for the TLS provider.

mod jwks;
pub mod keys;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};

use crate::config::{AuthConfig, JwtConfig, JwtKey};
use crate::protocol::limits::has_control_chars;

pub use jwks::JwksError;
pub use keys::{Scope, ServiceKey};

/// The user of every request in `none` mode.
pub const DEV_USER: &str = "dev";
/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_SECONDS: u64 = 30;

/// The claims of a verified token.
pub type Claims = serde_json::Map<String, serde_json::Value>;

/// Why a request was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("the token has no usable `{0}` (the user id)")]
    NoSubject(String),
    /// RFC 7515 §4.1.11: a recipient must refuse a token whose `crit` header
    /// names extensions it does not understand; this server understands none.
    #[error("the token's header lists critical extensions this server does not support")]
    CriticalHeader,
    #[error("no key of the identity provider verifies this token (alg {alg:?}, kid {kid:?})")]
    UnknownKey { alg: Algorithm, kid: Option<String> },
    #[error(transparent)]
    Keys(#[from] JwksError),
    #[error("unknown or revoked service key")]
    UnknownServiceKey,
    #[error("the service keys could not be read: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// Who a credential is.
#[derive(Debug, Clone)]
pub enum Principal {
    /// A person: the user id and the token's other claims.
    User { id: String, claims: Claims },
    /// A backend, with its key's scopes.
    Service(ServiceKey),
}

enum Keys {
    /// One configured key and its one algorithm.
    Fixed(DecodingKey, Algorithm),
    /// A provider's published keys.
    Published(Box<jwks::Jwks>),
}

struct Verifier {
    keys: Keys,
    /// Expiry, issuer and audience rules; its algorithms are set per token.
    validation: Validation,
    user_claim: String,
}

/// Verifies credentials.
pub struct Authenticator {
    verifier: Option<Verifier>,
    /// Where service keys are looked up (once the store is open).
    service: Option<keys::KeyCheck>,
}

impl Authenticator {
    /// # Errors
    /// The RS256 public key is not a valid PEM.
    pub fn new(config: &AuthConfig) -> Result<Self, jsonwebtoken::errors::Error> {
        let AuthConfig::Jwt(config) = config else {
            return Ok(Self {
                verifier: None,
                service: None,
            });
        };
        let JwtConfig {
            key,
            issuer,
            audience,
            user_claim,
        } = config;
        let keys = match key {
            JwtKey::Secret(secret) => Keys::Fixed(
                DecodingKey::from_secret(secret.as_bytes()),
                Algorithm::HS256,
            ),
            JwtKey::RsaPem(pem) => Keys::Fixed(DecodingKey::from_rsa_pem(pem)?, Algorithm::RS256),
            JwtKey::Jwks(source) => {
                Keys::Published(Box::new(jwks::Jwks::new(source.clone(), issuer.clone())))
            }
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        let mut required = vec!["exp"];
        if let Some(issuer) = issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        if audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(audience);
            required.push("aud");
        }
        validation.set_required_spec_claims(&required);
        Ok(Self {
            verifier: Some(Verifier {
                keys,
                validation,
                user_claim: user_claim.clone(),
            }),
            service: None,
        })
    }

    /// Accepts the service keys kept in `keys` from now on.
    pub fn set_service_keys(&mut self, keys: crate::store::ServiceKeys) {
        self.service = Some(keys::KeyCheck::new(keys));
    }

    /// Whether requests are unauthenticated (`none` mode).
    pub fn is_open(&self) -> bool {
        self.verifier.is_none()
    }

    /// The user behind `token`.
    ///
    /// # Errors
    /// In `jwt` mode: no token, a bad signature, an expired or not-yet-valid
    /// token, or no `sub`.
    pub async fn authenticate(&self, token: Option<&str>) -> Result<String, AuthError> {
        match self.principal(token).await? {
            Principal::User { id, .. } => Ok(id),
            Principal::Service(_) => Err(AuthError::UnknownServiceKey),
        }
    }

    /// Who `token` is: a service key (in any auth mode), else a user as
    /// [`Self::authenticate`] finds them, with the token's other claims
    /// (none in auth mode `none`).
    ///
    /// # Errors
    /// As [`Self::authenticate`]; with published keys also an unknown `kid`
    /// or a provider that could never be reached; an unknown or revoked
    /// service key.
    pub async fn principal(&self, token: Option<&str>) -> Result<Principal, AuthError> {
        if let Some(key) = token.filter(|t| t.starts_with(keys::PREFIX)) {
            let check = self.service.as_ref().ok_or(AuthError::UnknownServiceKey)?;
            return match check.find(key).await? {
                Some(key) => Ok(Principal::Service(key)),
                None => Err(AuthError::UnknownServiceKey),
            };
        }
        let Some(verifier) = &self.verifier else {
            return Ok(Principal::User {
                id: DEV_USER.to_owned(),
                claims: Claims::new(),
            });
        };
        let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
        let header = decode_header(token)?;
        if header.crit.is_some() {
            return Err(AuthError::CriticalHeader);
        }
        let mut claims = match &verifier.keys {
            Keys::Fixed(key, alg) => {
                let mut validation = verifier.validation.clone();
                validation.algorithms = vec![*alg];
                decode::<Claims>(token, key, &validation)?.claims
            }
            Keys::Published(jwks) => {
                let unknown = || AuthError::UnknownKey {
                    alg: header.alg,
                    kid: header.kid.clone(),
                };
                // Only the algorithms a published key allows: never HMAC
                // (a public key used as a secret), never `none`.
                let (keys, found) = jwks.keys_for(header.kid.as_deref(), header.alg).await?;
                let mut validation = verifier.validation.clone();
                validation.algorithms = vec![header.alg];
                let mut verified = Err(unknown());
                for i in found {
                    verified = decode::<Claims>(token, &keys[i].key, &validation)
                        .map(|data| data.claims)
                        .map_err(AuthError::from);
                    if verified.is_ok() {
                        break;
                    }
                }
                verified?
            }
        };
        // The user id names chats and reaches the text log: no control
        // characters (a newline in `sub` would forge a log line).
        let claim = &verifier.user_claim;
        let user = match claims.get(claim) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            _ => None,
        }
        .filter(|s| !s.is_empty() && s.len() <= 256 && !has_control_chars(s))
        .ok_or_else(|| AuthError::NoSubject(claim.clone()))?;
        // A workflow's `allow` names the other claims.
        claims.remove("sub");
        Ok(Principal::User { id: user, claims })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};

    const SECRET: &str = "a-test-secret-of-some-length";

    fn hs256() -> AuthConfig {
        AuthConfig::Jwt(JwtConfig {
            key: JwtKey::Secret(SECRET.into()),
            issuer: None,
            audience: Vec::new(),
            user_claim: "sub".into(),
        })
    }

    fn token(claims: serde_json::Value) -> String {
        encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn verifies_hs256() {
        let auth = Authenticator::new(&hs256()).unwrap();
        let now = chrono::Utc::now().timestamp();
        let good = token(serde_json::json!({"sub": "alice", "exp": now + 60}));
        assert_eq!(auth.authenticate(Some(&good)).await.unwrap(), "alice");
        let expired = token(serde_json::json!({"sub": "alice", "exp": now - 3600}));
        assert!(auth.authenticate(Some(&expired)).await.is_err());
        let early =
            token(serde_json::json!({"sub": "alice", "exp": now + 7200, "nbf": now + 3600}));
        assert!(auth.authenticate(Some(&early)).await.is_err());
        let no_sub = token(serde_json::json!({"exp": now + 60}));
        assert!(auth.authenticate(Some(&no_sub)).await.is_err());
        assert!(matches!(
            auth.authenticate(None).await,
            Err(AuthError::Missing)
        ));
        assert!(auth.authenticate(Some("not.a.jwt")).await.is_err());
    }

    #[tokio::test]
    async fn refuses_crit_headers_and_control_characters_in_sub() {
        let auth = Authenticator::new(&hs256()).unwrap();
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
            auth.authenticate(Some(&crit)).await,
            Err(AuthError::CriticalHeader)
        ));
        for sub in ["alice\nINFO forged line", "bob\u{1b}[31m", "\0"] {
            let t = token(serde_json::json!({"sub": sub, "exp": exp}));
            assert!(
                matches!(
                    auth.authenticate(Some(&t)).await,
                    Err(AuthError::NoSubject(_))
                ),
                "{sub:?}"
            );
        }
    }

    #[tokio::test]
    async fn none_mode_is_dev() {
        let auth = Authenticator::new(&AuthConfig::None).unwrap();
        assert_eq!(auth.authenticate(None).await.unwrap(), DEV_USER);
    }
}
