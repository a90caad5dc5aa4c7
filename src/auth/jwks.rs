//! An identity provider's published keys (a JWKS): found by OpenID Connect
//! discovery or named, fetched when first needed, cached, fetched again when
//! a token names a `kid` the cache lacks or the cache is old — at most once
//! per [`MIN_INTERVAL`], so a flood of forged `kid`s cannot hammer the
//! provider. Keys rotate without a restart.

use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;

use crate::config::KeySource;

/// The least time between two fetches of the keys.
pub(super) const MIN_INTERVAL: Duration = Duration::from_secs(5);
/// Keys older than this are fetched again before use (a key the provider
/// withdrew stops working within this time).
const MAX_AGE: Duration = Duration::from_secs(600);
/// The largest discovery document or JWKS read.
const MAX_BYTES: usize = 1 << 20;
/// The most keys kept from one JWKS.
const MAX_KEYS: usize = 64;

/// One verification key and the algorithms it may verify.
pub(super) struct Key {
    pub(super) kid: Option<String>,
    pub(super) algs: Vec<Algorithm>,
    pub(super) key: DecodingKey,
}

#[derive(Default)]
struct Cached {
    keys: Arc<Vec<Key>>,
    fetched: Option<Instant>,
}

/// Why no key could be had.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("the identity provider's keys could not be fetched: {0}")]
    Fetch(String),
}

/// The keys of one provider.
pub(super) struct Jwks {
    source: KeySource,
    /// The issuer discovery must name (when discovery is used).
    issuer: Option<String>,
    client: reqwest::Client,
    cache: RwLock<Cached>,
    /// Held while fetching: one fetch at a time; the time of the last one
    /// and the `jwks_uri` discovery found.
    fetching: tokio::sync::Mutex<(Option<Instant>, Option<Url>)>,
}

impl Jwks {
    pub(super) fn new(source: KeySource, issuer: Option<String>) -> Self {
        crate::llm::install_crypto();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("the HTTP client builds");
        Self {
            source,
            issuer,
            client,
            cache: RwLock::default(),
            fetching: tokio::sync::Mutex::new((None, None)),
        }
    }

    fn cached(&self) -> (Arc<Vec<Key>>, Option<Instant>) {
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        (cache.keys.clone(), cache.fetched)
    }

    /// The keys that may verify a token with `kid` and `alg`: from the
    /// cache, or after a fetch when the cache has none or is old.
    ///
    /// # Errors
    /// Nothing was ever fetched and a fetch fails.
    pub(super) async fn keys_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(Arc<Vec<Key>>, Vec<usize>), JwksError> {
        let (keys, fetched) = self.cached();
        let found = matching(&keys, kid, alg);
        let fresh = fetched.is_some_and(|at| at.elapsed() < MAX_AGE);
        if !found.is_empty() && fresh {
            return Ok((keys, found));
        }
        // With keys at hand, a token never waits behind another's fetch:
        // it is checked with the cache (a provider that hangs stalls no one).
        let refreshed = match fetched {
            Some(_) => match self.fetching.try_lock() {
                Ok(guard) => self.refresh_with(guard).await,
                Err(_) => Ok(()),
            },
            None => self.refresh().await,
        };
        match refreshed {
            Ok(()) => {}
            // Old keys still verify while the provider is unreachable.
            Err(e) if fetched.is_some() => {
                tracing::warn!(error = %e, "kept the cached JWKS");
            }
            Err(e) => return Err(e),
        }
        let (keys, _) = self.cached();
        let found = matching(&keys, kid, alg);
        Ok((keys, found))
    }

    /// Fetches the keys, unless a fetch ended less than [`MIN_INTERVAL`] ago
    /// (then the cache is what that fetch left).
    async fn refresh(&self) -> Result<(), JwksError> {
        self.refresh_with(self.fetching.lock().await).await
    }

    /// [`Self::refresh`], the fetch lock held.
    async fn refresh_with(
        &self,
        mut fetching: tokio::sync::MutexGuard<'_, (Option<Instant>, Option<Url>)>,
    ) -> Result<(), JwksError> {
        if fetching.0.is_some_and(|at| at.elapsed() < MIN_INTERVAL) {
            return Ok(());
        }
        let outcome = self.fetch(&mut fetching.1).await;
        // From the fetch's end: a provider slower than the interval is
        // still asked at most once per interval.
        fetching.0 = Some(Instant::now());
        if outcome.is_err() {
            // Found again next time: the provider may have moved its keys.
            if let KeySource::Discovery(_) = self.source {
                fetching.1 = None;
            }
        }
        metrics::counter!(crate::metrics::JWKS_FETCHES,
            "outcome" => if outcome.is_ok() { "ok" } else { "error" })
        .increment(1);
        let keys = outcome?;
        tracing::info!(keys = keys.len(), "fetched the identity provider's keys");
        let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
        *cache = Cached {
            keys: Arc::new(keys),
            fetched: Some(Instant::now()),
        };
        Ok(())
    }

    async fn fetch(&self, jwks_uri: &mut Option<Url>) -> Result<Vec<Key>, JwksError> {
        let url = match (&self.source, &*jwks_uri) {
            (KeySource::Url(url), _) | (KeySource::Discovery(_), Some(url)) => url.clone(),
            (KeySource::Discovery(issuer), None) => {
                let found = self.discover(issuer).await?;
                *jwks_uri = Some(found.clone());
                found
            }
        };
        let body: serde_json::Value = self.get_json(&url).await?;
        let keys = body
            .get("keys")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| JwksError::Fetch(format!("{url} is not a JWKS (no `keys`)")))?;
        Ok(keys.iter().filter_map(key_of).take(MAX_KEYS).collect())
    }

    /// The `jwks_uri` of the provider at `issuer`.
    async fn discover(&self, issuer: &Url) -> Result<Url, JwksError> {
        let base = issuer.as_str().trim_end_matches('/');
        let url = Url::parse(&format!("{base}/.well-known/openid-configuration"))
            .map_err(|e| JwksError::Fetch(e.to_string()))?;
        let doc: serde_json::Value = self.get_json(&url).await?;
        // OpenID Connect Discovery §4.3: the document's issuer must be the
        // one it was fetched for.
        let named = doc.get("issuer").and_then(serde_json::Value::as_str);
        let expected = self.issuer.as_deref().unwrap_or(issuer.as_str());
        if named != Some(expected) {
            return Err(JwksError::Fetch(format!(
                "the discovery document names issuer {named:?}, not {expected:?}"
            )));
        }
        let uri = doc
            .get("jwks_uri")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| JwksError::Fetch("the discovery document has no jwks_uri".into()))?;
        let uri = Url::parse(uri).map_err(|e| JwksError::Fetch(format!("jwks_uri: {e}")))?;
        // Keys fetched in the clear could be swapped on the way: HTTPS, or
        // HTTP only when the issuer itself is plain HTTP (to this machine).
        if uri.scheme() != "https" && uri.scheme() != issuer.scheme() {
            return Err(JwksError::Fetch(format!("jwks_uri {uri} is not HTTPS")));
        }
        Ok(uri)
    }

    async fn get_json(&self, url: &Url) -> Result<serde_json::Value, JwksError> {
        let fail = |e: String| JwksError::Fetch(format!("{url}: {e}"));
        let mut response = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(fail(format!("HTTP {}", response.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?
        {
            if body.len() + chunk.len() > MAX_BYTES {
                return Err(fail(format!("over {MAX_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| fail(e.to_string()))
    }
}

/// The indexes of the keys that may verify `alg` under `kid` (any `kid`
/// when the token names none).
fn matching(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Vec<usize> {
    keys.iter()
        .enumerate()
        .filter(|(_, k)| k.algs.contains(&alg))
        .filter(|(_, k)| kid.is_none() || k.kid.as_deref() == kid)
        .map(|(i, _)| i)
        .collect()
}

/// A signature key of a JWKS, with the algorithms its type allows (narrowed
/// to its `alg` when it names one). Symmetric keys, encryption keys and keys
/// whose `alg` does not fit their type are left out: a public key is never
/// used as an HMAC secret.
fn key_of(value: &serde_json::Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(value.clone()).ok()?;
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let family: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &[
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            &[Algorithm::EdDSA]
        }
        _ => return None,
    };
    let algs = match jwk.common.key_algorithm {
        Some(named) => {
            let named = Algorithm::from_str(&named.to_string()).ok()?;
            family.contains(&named).then(|| vec![named])?
        }
        None => family.to_vec(),
    };
    Some(Key {
        kid: jwk.common.key_id.clone(),
        algs,
        key: DecodingKey::from_jwk(&jwk).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_signature_keys_only() {
        let rsa = serde_json::json!({"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"});
        assert_eq!(key_of(&rsa).unwrap().algs.len(), 6);
        let named =
            serde_json::json!({"kty": "RSA", "kid": "r", "alg": "PS256", "n": "AQAB", "e": "AQAB"});
        assert_eq!(key_of(&named).unwrap().algs, [Algorithm::PS256]);
        // An `alg` that does not fit the key's type, a symmetric key, an
        // encryption key, a curve not supported: left out.
        for bad in [
            serde_json::json!({"kty": "RSA", "alg": "HS256", "n": "AQAB", "e": "AQAB"}),
            serde_json::json!({"kty": "RSA", "alg": "ES256", "n": "AQAB", "e": "AQAB"}),
            serde_json::json!({"kty": "oct", "k": "c2VjcmV0"}),
            serde_json::json!({"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}),
            serde_json::json!({"kty": "EC", "crv": "P-521", "x": "AQAB", "y": "AQAB"}),
            serde_json::json!({"kty": "nonsense"}),
        ] {
            assert!(key_of(&bad).is_none(), "{bad}");
        }
    }
}
