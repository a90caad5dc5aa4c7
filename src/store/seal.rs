//! Sealed boxes for commands one node forwards to another through PostgreSQL.
//!
//! A forwarded command can carry a password answer or a caller's bearer
//! token, which must never rest in a table or the WAL in the clear. Each node
//! keeps an X25519 secret in memory only and publishes its public key in
//! `nodes`; a sender seals each command with a fresh ephemeral key:
//! `ephemeral public key (32) ‖ ChaCha20-Poly1305(ciphertext ‖ tag)`, the key
//! derived with HKDF-SHA256 from the shared secret and both public keys.
//! A fresh key per message makes the all-zero nonce safe.
//!
//! Over NATS, where any client the server lets publish could send to a
//! node's subject, a box is also *from* a node ([`NodeKey::seal_to`]): the
//! key mixes in the static secrets of both ends, so only the claimed sender
//! could have made it, and a clear header (the sender, the command's id,
//! time and inbox) is bound to it as associated data. Sealing keeps a
//! forged command from running; replays, answers and load are the
//! receiver's to check (`session::node::forward`).

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use x25519_dalek::{PublicKey, SharedSecret, StaticSecret};

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
        let (eph, ciphertext) = split_box(sealed)?;
        let shared = agree(&self.secret, &eph)?;
        let key = derive(shared.as_bytes(), &[&eph, &self.public()])?;
        unclose(&key, b"", ciphertext)
    }

    /// Seals `plain` from this node to `recipient`, binding `header`: only
    /// `recipient` opens it, and only with this node's public key
    /// ([`open_from`](Self::open_from)).
    ///
    /// # Errors
    /// `recipient` is not a usable public key.
    pub fn seal_to(
        &self,
        recipient: &[u8; 32],
        header: &[u8],
        plain: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let eph = StaticSecret::from(rand::random::<[u8; 32]>());
        let eph_public = PublicKey::from(&eph).to_bytes();
        let (a, b) = (agree(&eph, recipient)?, agree(&self.secret, recipient)?);
        let shared = [a.as_bytes().as_slice(), b.as_bytes()].concat();
        let info: [&[u8]; 4] = [b"from", &eph_public, recipient, &self.public()];
        close(&derive(&shared, &info)?, &eph_public, header, plain)
    }

    /// Opens a box [`seal_to`](Self::seal_to) made from `sender` to this
    /// node with this `header`.
    ///
    /// # Errors
    /// The box is malformed, not from `sender`, not to this node, or its
    /// header or body was changed.
    pub fn open_from(
        &self,
        sender: &[u8; 32],
        header: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let (eph, ciphertext) = split_box(sealed)?;
        let (a, b) = (agree(&self.secret, &eph)?, agree(&self.secret, sender)?);
        let shared = [a.as_bytes().as_slice(), b.as_bytes()].concat();
        let info: [&[u8]; 4] = [b"from", &eph, &self.public(), sender];
        unclose(&derive(&shared, &info)?, header, ciphertext)
    }
}

/// Seals `plain` so that only the holder of `recipient`'s secret opens it.
///
/// # Errors
/// `recipient` is not a usable public key.
pub fn seal(recipient: &[u8; 32], plain: &[u8]) -> Result<Vec<u8>, SealError> {
    let eph = StaticSecret::from(rand::random::<[u8; 32]>());
    let eph_public = PublicKey::from(&eph).to_bytes();
    let shared = agree(&eph, recipient)?;
    let key = derive(shared.as_bytes(), &[&eph_public, recipient])?;
    close(&key, &eph_public, b"", plain)
}

/// The secret `secret` shares with `public`, refused when `public` is a
/// key that makes it predictable.
fn agree(secret: &StaticSecret, public: &[u8; 32]) -> Result<SharedSecret, SealError> {
    let shared = secret.diffie_hellman(&PublicKey::from(*public));
    shared.was_contributory().then_some(shared).ok_or(SealError)
}

/// A box's key: HKDF-SHA256 of the shared secret(s), `info` naming the keys.
fn derive(shared: &[u8], info: &[&[u8]]) -> Result<LessSafeKey, SealError> {
    let prk = Salt::new(HKDF_SHA256, SALT).extract(shared);
    let okm = prk
        .expand(info, &CHACHA20_POLY1305)
        .map_err(|_| SealError)?;
    Ok(LessSafeKey::new(UnboundKey::from(okm)))
}

/// `eph ‖ ChaCha20-Poly1305(plain)` with `aad` bound (a key per box: the
/// all-zero nonce is safe).
fn close(
    key: &LessSafeKey,
    eph: &[u8; 32],
    aad: &[u8],
    plain: &[u8],
) -> Result<Vec<u8>, SealError> {
    let mut buf = plain.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key([0; 12]),
        Aad::from(aad),
        &mut buf,
    )
    .map_err(|_| SealError)?;
    Ok([eph.as_slice(), &buf].concat())
}

/// A box's ephemeral public key and the rest.
fn split_box(sealed: &[u8]) -> Result<([u8; 32], &[u8]), SealError> {
    let (eph, rest) = sealed.split_at_checked(32).ok_or(SealError)?;
    Ok((eph.try_into().map_err(|_| SealError)?, rest))
}

/// What [`close`] sealed, opened.
fn unclose(key: &LessSafeKey, aad: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>, SealError> {
    let mut buf = ciphertext.to_vec();
    let len = key
        .open_in_place(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::from(aad),
            &mut buf,
        )
        .map_err(|_| SealError)?
        .len();
    buf.truncate(len);
    Ok(buf)
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

    #[test]
    fn a_box_from_a_node_opens_only_as_from_it_with_its_header() {
        let (alice, bob, mallory) = (
            NodeKey::generate(),
            NodeKey::generate(),
            NodeKey::generate(),
        );
        let sealed = alice.seal_to(&bob.public(), b"1 c 99", b"hunter2").unwrap();
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(
            bob.open_from(&alice.public(), b"1 c 99", &sealed).unwrap(),
            b"hunter2"
        );
        // Claimed as from another node, with another header, to another
        // node, or made by a node that only knows bob's public key.
        assert_eq!(
            bob.open_from(&mallory.public(), b"1 c 99", &sealed),
            Err(SealError)
        );
        assert_eq!(
            bob.open_from(&alice.public(), b"1 c 98", &sealed),
            Err(SealError)
        );
        assert_eq!(
            mallory.open_from(&alice.public(), b"1 c 99", &sealed),
            Err(SealError)
        );
        let forged = mallory
            .seal_to(&bob.public(), b"1 c 99", b"rm -rf")
            .unwrap();
        assert_eq!(
            bob.open_from(&alice.public(), b"1 c 99", &forged),
            Err(SealError)
        );
        // An anonymous box is not a box from a node.
        let anonymous = seal(&bob.public(), b"hunter2").unwrap();
        assert_eq!(
            bob.open_from(&alice.public(), b"", &anonymous),
            Err(SealError)
        );
    }
}
