//! What every WebSocket endpoint of the server reads with: the size
//! limits set at the upgrade, and one read classified ([`Read`]).

use axum::extract::ws::{Message, Utf8Bytes, WebSocketUpgrade};

/// The read buffer of a connection (see `limited`): 1 KiB, allocated for
/// the connection's life. Inbound messages are small; 2 KiB cost an idle
/// connection 0.7 KiB more, 512 bytes more again (each message is split off
/// the buffer, which then reallocates; `bench/notes.md`).
const READ_BUFFER: usize = 1024;

/// The largest message the WebSocket layer reads at all (beyond it, the
/// connection is dropped mid-message).
fn hard_cap(limit: usize) -> usize {
    limit.saturating_mul(4).max(16 << 20)
}

/// The limits every WebSocket endpoint of the server reads with.
///
/// The WebSocket layer reads messages up to a hard cap; [`read`] refuses
/// those over the configured limit itself. Reading an oversized message whole
/// lets the close frame (1009) reach the client: closing with unread bytes in
/// the socket would reset the connection before the client reads it.
pub(super) fn limited(ws: WebSocketUpgrade, max_message_bytes: usize) -> WebSocketUpgrade {
    let cap = hard_cap(max_message_bytes);
    ws.max_message_size(cap)
        .max_frame_size(cap)
        // tungstenite allocates its whole read buffer per connection up front
        // (128 KiB by default): most of an idle connection's memory. Inbound
        // messages are small; a large one is read in more calls.
        .read_buffer_size(READ_BUFFER)
}

/// One read of a WebSocket, after the rules every endpoint shares.
pub(super) enum Read {
    /// A text message within the size limit.
    Text(Utf8Bytes),
    /// A binary message: not part of any protocol here; answered with an error.
    Binary,
    /// A ping or pong (answered by the WebSocket layer itself).
    Control,
    /// The connection must close with this code: 1009 for a message over the
    /// limit, 1007 for a text frame that is not UTF-8, 1002 for a breach of
    /// the WebSocket protocol.
    Close(u16, &'static str),
    /// The client closed the connection or it dropped.
    Gone,
}

/// Classifies what the socket's stream yielded.
pub(super) fn read(msg: Option<Result<Message, axum::Error>>, max_message_bytes: usize) -> Read {
    match msg {
        Some(Ok(Message::Text(text))) if text.len() > max_message_bytes => {
            tracing::info!(bytes = text.len(), "message too big; closing with 1009");
            Read::Close(1009, "message too big")
        }
        Some(Ok(Message::Text(text))) => Read::Text(text),
        Some(Ok(Message::Binary(_))) => Read::Binary,
        Some(Ok(Message::Ping(_) | Message::Pong(_))) => Read::Control,
        Some(Ok(Message::Close(_))) | None => Read::Gone,
        Some(Err(e)) => match e.into_inner().downcast_ref::<tungstenite::Error>() {
            Some(tungstenite::Error::Capacity(_)) => Read::Close(1009, "message too big"),
            Some(tungstenite::Error::Utf8(_)) => Read::Close(1007, "text frames must be UTF-8"),
            // A dropped connection (a closed tab), not a breach.
            Some(tungstenite::Error::Protocol(
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
            )) => Read::Gone,
            Some(tungstenite::Error::Protocol(p)) => {
                tracing::info!(error = %p, "WebSocket protocol error; closing with 1002");
                Read::Close(1002, "protocol error")
            }
            other => {
                tracing::debug!(error = ?other, "WebSocket read failed");
                Read::Gone
            }
        },
    }
}

/// The message sent for a binary frame, on every endpoint.
pub(super) const BINARY_REFUSED: &str =
    "binary frames are not supported: send one JSON object per text frame";
