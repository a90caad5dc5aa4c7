//! Service keys: a backend's bearer credential, with scopes. A key is
//! `awk_` and 43 characters of base64url (256 random bits); the store keeps
//! its SHA-256 only, so a key is shown once, when made. A key acts with its
//! scopes on the server API (`/v1/server/…`) and schedules, never as a user.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::store::{ServiceKeyRecord, ServiceKeys, StoreError};

/// What every service key starts with (never a JWT's first characters).
pub const PREFIX: &str = "awk_";
/// How long a key found in the store is trusted before it is read again:
/// a revoked key stops working within this time on every node.
const TRUSTED_FOR: Duration = Duration::from_secs(5);
/// The most keys remembered at once.
const CACHED: usize = 1024;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Start chats for users and post into them (messages, widgets), set
    /// schedules.
    Publish,
    /// Read users' chats and their logs.
    Read,
    /// The operator's page and API (`/admin`, `/v1/admin/…`): every run,
    /// wait and error; cancel a run, end a wait.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Publish, Scope::Read, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Publish => "publish",
            Self::Read => "read",
            Self::Admin => "admin",
        }
    }

    /// Parses a comma-separated list of scopes.
    ///
    /// # Errors
    /// An unknown scope, or none.
    pub fn parse_list(text: &str) -> Result<Vec<Scope>, String> {
        let mut scopes = Vec::new();
        for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let scope = Self::ALL
                .into_iter()
                .find(|s| s.as_str() == name)
                .ok_or_else(|| format!("unknown scope `{name}` (known: publish, read, admin)"))?;
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        if scopes.is_empty() {
            return Err("name at least one scope (publish, read, admin)".into());
        }
        Ok(scopes)
    }
}

/// A service key that was presented and found live.
#[derive(Debug, Clone)]
pub struct ServiceKey {
    pub id: uuid::Uuid,
    pub name: String,
    pub scopes: Vec<Scope>,
}

impl ServiceKey {
    pub fn may(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    fn of(record: ServiceKeyRecord) -> Self {
        Self {
            id: record.id,
            name: record.name,
            // A scope a newer version wrote and this one does not know
            // grants nothing here.
            scopes: Scope::ALL
                .into_iter()
                .filter(|s| record.scopes.iter().any(|r| r == s.as_str()))
                .collect(),
        }
    }
}

/// A new key and the hash the store keeps of it.
pub fn generate() -> (String, String) {
    let bytes: [u8; 32] = rand::random();
    let key = format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = hash(&key);
    (key, hash)
}

/// The hex SHA-256 of a key (the key has 256 random bits: no slow hash is
/// needed to make its hash useless to whoever reads the store).
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Looks keys up in the store, remembering what it found for a moment.
pub(super) struct KeyCheck {
    keys: ServiceKeys,
    found: Mutex<HashMap<String, (Instant, ServiceKey)>>,
}

impl KeyCheck {
    pub(super) fn new(keys: ServiceKeys) -> Self {
        Self {
            keys,
            found: Mutex::default(),
        }
    }

    /// The live key `key` is, if any.
    pub(super) async fn find(&self, key: &str) -> Result<Option<ServiceKey>, StoreError> {
        let hash = hash(key);
        {
            let found = self.found.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, key)) = found.get(&hash)
                && at.elapsed() < TRUSTED_FOR
            {
                return Ok(Some(key.clone()));
            }
        }
        let Some(record) = self.keys.find(&hash).await? else {
            return Ok(None);
        };
        let key = ServiceKey::of(record);
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        if found.len() >= CACHED {
            found.retain(|_, (at, _)| at.elapsed() < TRUSTED_FOR);
            if found.len() >= CACHED {
                found.clear();
            }
        }
        found.insert(hash, (Instant::now(), key.clone()));
        Ok(Some(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_only_their_hash_is_kept() {
        let (a, hash_a) = generate();
        let (b, _) = generate();
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 43, "{a}");
        assert_eq!(hash(&a), hash_a);
        assert!(!hash_a.contains(&a[PREFIX.len()..]));
    }

    #[test]
    fn scopes_parse_from_a_list() {
        assert_eq!(
            Scope::parse_list(" publish, read ,publish").unwrap(),
            [Scope::Publish, Scope::Read]
        );
        assert!(
            Scope::parse_list("publish,owner")
                .unwrap_err()
                .contains("owner")
        );
        assert!(Scope::parse_list(" , ").is_err());
    }
}
