//! Secrets at rest: AES-256-GCM (ring's AEAD) under the master key. Each
//! seal draws a fresh 96-bit nonce and binds the secret to its owner's id
//! (the associated data), so a sealed password copied onto another
//! connection does not open. Sealed form: nonce ‖ ciphertext ‖ tag.

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use uuid::Uuid;

/// Why a sealed secret does not open.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// Not sealed by this key for this id (another master key, another
    /// connection, or altered bytes): AES-GCM's tag does not match.
    #[error("the secret cannot be decrypted with this master key (was it changed?)")]
    WrongKey,
    #[error("the secret is not valid text")]
    NotText,
}

/// The master key, ready to seal and open.
pub struct Vault {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault(…)")
    }
}

impl Vault {
    pub fn new(key: &[u8; 32]) -> Self {
        let key = UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte AES-256 key");
        Self {
            key: LessSafeKey::new(key),
            rng: SystemRandom::new(),
        }
    }

    /// Seals `secret` for `id`.
    pub fn seal(&self, id: Uuid, secret: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .expect("the system's random source");
        let mut sealed = secret.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(id.as_bytes()),
                &mut sealed,
            )
            .expect("a secret within AES-GCM's size limit");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        out
    }

    /// Opens what [`Vault::seal`] sealed for `id`.
    ///
    /// # Errors
    /// Another key, another id, or altered bytes.
    pub fn open(&self, id: Uuid, sealed: &[u8]) -> Result<String, VaultError> {
        if sealed.len() < NONCE_LEN {
            return Err(VaultError::WrongKey);
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| VaultError::WrongKey)?;
        let mut buf = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(id.as_bytes()), &mut buf)
            .map_err(|_| VaultError::WrongKey)?;
        String::from_utf8(plain.to_vec()).map_err(|_| VaultError::NotText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_opens_only_with_its_key_and_id() {
        let vault = Vault::new(&[7; 32]);
        let id = Uuid::new_v4();
        let a = vault.seal(id, "hunter2");
        let b = vault.seal(id, "hunter2");
        assert_ne!(a, b, "a fresh nonce each time");
        assert!(!a.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(vault.open(id, &a).unwrap(), "hunter2");
        assert!(matches!(
            vault.open(Uuid::new_v4(), &a),
            Err(VaultError::WrongKey)
        ));
        assert!(matches!(
            Vault::new(&[8; 32]).open(id, &a),
            Err(VaultError::WrongKey)
        ));
        let mut altered = a.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert!(vault.open(id, &altered).is_err());
        assert!(vault.open(id, &[1, 2]).is_err());
        assert_eq!(format!("{vault:?}"), "Vault(…)");
    }
}
