//! Sealed boxes for commands one node forwards to another through PostgreSQL.
//!
//! A forwarded command can carry a password answer or a caller's bearer
//! token, which must never rest in a table or the WAL in the clear. Each node
//! keeps an X25519 secret in memory only and publishes its public key in
//! `nodes`; a sender seals each command with a fresh ephemeral key:
//! `ephemeral public key (32) ‖ ChaCha20-Poly1305(ciphertext ‖ tag)`, the key
//! derived with HKDF-SHA256 from the shared secret and both public keys.
//! A fresh key per message makes the all-zero nonce safe.

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use x25519_dalek::{PublicKey, StaticSecret};

const SALT: &[u8] = b"agentwire-forward-v1";

/// Why a sealed box could not be made or opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sealed command rejected")]
pub struct SealError;

/// A node's key pair.
pub struct NodeKey {
    secret: StaticSecret,
    public: PublicKey,
}

impl std::fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeKey").finish_non_exhaustive()
    }
}

impl NodeKey {
    /// A new random key pair.
    pub fn generate() -> Self {
        let secret = StaticSecret::from(rand::random::<[u8; 32]>());
        let public = PublicKey::from(&secret);
        Self { secret, public }
    }

    /// The public half, as published.
    pub fn public(&self) -> [u8; 32] {
        self.public.to_bytes()
    }

    /// Opens a box sealed to this key.
    ///
    /// # Errors
    /// The box is malformed, was sealed to another key, or was tampered with.
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let (eph, ciphertext) = sealed.split_at_checked(32).ok_or(SealError)?;
        let eph: [u8; 32] = eph.try_into().map_err(|_| SealError)?;
        let shared = self.secret.diffie_hellman(&PublicKey::from(eph));
        if !shared.was_contributory() {
            return Err(SealError);
        }
        let key = derive(shared.as_bytes(), &eph, &self.public())?;
        let mut buf = ciphertext.to_vec();
        let plain = key
            .open_in_place(
                Nonce::assume_unique_for_key([0; 12]),
                Aad::empty(),
                &mut buf,
            )
            .map_err(|_| SealError)?;
        let len = plain.len();
        buf.truncate(len);
        Ok(buf)
    }
}

/// Seals `plain` so that only the holder of `recipient`'s secret opens it.
///
/// # Errors
/// `recipient` is not a usable public key.
pub fn seal(recipient: &[u8; 32], plain: &[u8]) -> Result<Vec<u8>, SealError> {
    let eph = StaticSecret::from(rand::random::<[u8; 32]>());
    let eph_public = PublicKey::from(&eph).to_bytes();
    let shared = eph.diffie_hellman(&PublicKey::from(*recipient));
    if !shared.was_contributory() {
        return Err(SealError);
    }
    let key = derive(shared.as_bytes(), &eph_public, recipient)?;
    let mut buf = plain.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key([0; 12]),
        Aad::empty(),
        &mut buf,
    )
    .map_err(|_| SealError)?;
    let mut out = Vec::with_capacity(32 + buf.len());
    out.extend_from_slice(&eph_public);
    out.extend_from_slice(&buf);
    Ok(out)
}

fn derive(shared: &[u8], eph: &[u8; 32], recipient: &[u8; 32]) -> Result<LessSafeKey, SealError> {
    let info: [&[u8]; 2] = [eph, recipient];
    let prk = Salt::new(HKDF_SHA256, SALT).extract(shared);
    let okm = prk
        .expand(&info, &CHACHA20_POLY1305)
        .map_err(|_| SealError)?;
    Ok(LessSafeKey::new(UnboundKey::from(okm)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_opens_for_its_recipient_only() {
        let alice = NodeKey::generate();
        let bob = NodeKey::generate();
        let sealed = seal(&alice.public(), b"hunter2").unwrap();
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(alice.open(&sealed).unwrap(), b"hunter2");
        assert_eq!(bob.open(&sealed), Err(SealError));
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(alice.open(&tampered), Err(SealError));
        assert_eq!(alice.open(&sealed[..20]), Err(SealError));
        assert_ne!(
            seal(&alice.public(), b"hunter2").unwrap(),
            sealed,
            "fresh key per box"
        );
    }
}
