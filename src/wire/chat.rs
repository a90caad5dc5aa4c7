//! `chat`: every `chat.*` envelope as `event: <type>`, `data: <envelope>` —
//! the native protocol over SSE. (The native WebSocket needs no encoder: it
//! sends each envelope's JSON as stored.)

use super::sse::{Encoder, Out};
use crate::protocol::Envelope;

/// `chat`: the envelopes themselves.
pub(super) struct Chat;

impl Encoder for Chat {
    fn encode(&mut self, env: &Envelope, raw: &str, out: &mut Vec<Out>) {
        out.push(Out {
            event: Some(env.kind.type_name()),
            data: raw.to_owned(),
        });
    }

    fn ends_with_run(&self) -> bool {
        false
    }
}
