//! Speaker names the protocol gives a meaning: who said an envelope's
//! `agent` when it is not an agent of the chat's.

/// The speaker of what a backend posts as the application itself (the
/// server API's `as: system`): the model reads its texts as notes from the
/// application, neither the user's words nor its own.
pub const SYSTEM_SPEAKER: &str = "system";

/// What joins a nested chat's speaker to the group member whose turn it is
/// (`reviewer/critic`; deeper chats add more): an `agent` with it speaks
/// inside a member's nested chat, not in the conversation itself.
pub const NESTED: char = '/';

/// Whether `agent` speaks inside a nested chat.
pub fn is_nested(agent: &str) -> bool {
    agent.contains(NESTED)
}
