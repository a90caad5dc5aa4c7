//! Who takes a speaker's turn: the agentic loop over agentwire's model
//! (`speak`), or, for an agent served over AG-UI, its upstream runs
//! (`upstream`). Both a plain run and a group's member go through here.

use super::speak::{Spoke, Voice, speak};
use crate::link::Gone;
use crate::llm::{Message, Usage};
use crate::tools::CallEnv;

/// Runs `voice`'s turn, whoever answers for it.
pub(super) async fn take_turn(
    voice: &Voice<'_>,
    env: &CallEnv<'_>,
    messages: &mut Vec<Message>,
    usage: &mut Usage,
) -> Result<Spoke, Gone> {
    match &voice.agent.upstream {
        Some(up) => super::upstream::speak(up, voice, env, messages, usage).await,
        None => speak(voice, env, messages, usage).await,
    }
}
