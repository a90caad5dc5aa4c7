//! Chats named by a client's own conversation id (seed 000's and seed 004's
//! `conversation_id` when it is not a UUID).
//!
//! Such a chat's id is derived from the owner and the conversation id, and
//! marked, so that no other user can occupy it first: a client may pick any
//! UUID for a new chat, except a marked one, which only the derivation
//! creates — and the derivation of another user gives another id.

use uuid::Uuid;

/// The first two bytes of every derived id ("aw"), in a version 8 UUID.
const MARK: [u8; 2] = *b"aw";

/// The chat of `user` named by the non-UUID `conversation`.
pub fn conversation_chat(user: &str, conversation: &str) -> Uuid {
    let mut input = Vec::with_capacity(user.len() + conversation.len() + 16);
    input.extend_from_slice(b"agentwire-conv\0");
    // The user's length first: ("a\0b", "c") and ("a", "b\0c") stay apart.
    input.extend_from_slice(&(user.len() as u64).to_be_bytes());
    input.extend_from_slice(user.as_bytes());
    input.extend_from_slice(conversation.as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &input);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest.as_ref()[..16]);
    bytes[..2].copy_from_slice(&MARK);
    Uuid::new_v8(bytes)
}

/// A derived chat id from 16 bytes of a digest: marked, so only a
/// derivation makes it (a schedule's due times, `schedules::chat_for`).
pub fn marked_chat(mut bytes: [u8; 16]) -> Uuid {
    bytes[..2].copy_from_slice(&MARK);
    Uuid::new_v8(bytes)
}

/// Whether `id` is of the derived kind (only [`conversation_chat`] makes one).
pub fn is_conversation_chat(id: Uuid) -> bool {
    id.get_version_num() == 8 && id.as_bytes()[..2] == MARK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_per_owner_stable_and_marked() {
        let a = conversation_chat("alice", "support-42");
        assert_eq!(a, conversation_chat("alice", "support-42"));
        assert_ne!(a, conversation_chat("bob", "support-42"));
        assert_ne!(
            conversation_chat("a\0b", "c"),
            conversation_chat("a", "b\0c")
        );
        assert!(is_conversation_chat(a));
        assert!(!is_conversation_chat(Uuid::new_v4()));
        let mut other_v8 = *Uuid::new_v4().as_bytes();
        other_v8[0] = b'x';
        assert!(!is_conversation_chat(Uuid::new_v8(other_v8)));
    }
}
