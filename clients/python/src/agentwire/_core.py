"""What the sync and async clients share: URLs, the frames they send, and
each chat's place in its log (nothing delivered twice, no gap let through).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from .envelopes import Envelope, parse


# The wire protocol version this client speaks (protocol/README.md,
# *Versions*): sent as `Agentwire-Protocol` on every request; a server of
# another version refuses the connection, and this client refuses a server
# that names another.
PROTOCOL = 1
PROTOCOL_HEADER = "agentwire-protocol"


class AgentwireError(Exception):
    """An error the server sent (its contract code and message)."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def urls(base_url: str, token: str | None) -> tuple[str, str]:
    """The HTTP base and the WebSocket URL of a server at `base_url`
    (`http://host:port`, maybe with a path prefix)."""
    parts = urlsplit(base_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"base_url must be http:// or https://, not {base_url!r}")
    query = f"access_token={quote(token)}" if token else ""
    ws = urlunsplit((scheme, parts.netloc, parts.path + "/v1/ws", query, ""))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), ws


def headers(token: str | None) -> dict[str, str]:
    own = {PROTOCOL_HEADER: str(PROTOCOL)}
    if token:
        own["authorization"] = f"Bearer {token}"
    return own


def check_protocol(spoken: str | None) -> None:
    """Raises when the server names a protocol version this client does not
    speak (a server that names none predates versions: version 1)."""
    if spoken is not None and spoken.strip() != str(PROTOCOL):
        raise AgentwireError(
            "PROTOCOL_MISMATCH",
            f"the server speaks agentwire protocol {spoken.strip()[:32]}; this client speaks {PROTOCOL}",
        )


def http_error(status: int, body: Any) -> AgentwireError:
    """The error of an HTTP answer that is not a success."""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return AgentwireError(str(err.get("code", "")), str(err.get("message", "")), status)
    return AgentwireError("HTTP_ERROR", f"HTTP {status}: {body!r}"[:500], status)


def start_frame(chat_id: str, agent: str, message: str | None, context: dict[str, Any] | None,
                attachments: list[str] | None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "chat.start", "chat_id": chat_id, "agent": agent}
    if message is not None:
        frame["message"] = message
    if context is not None:
        frame["context"] = context
    if attachments:
        frame["attachments"] = [{"file_id": f} for f in attachments]
    return frame


def message_frame(chat_id: str, text: str, multitask_strategy: str | None,
                  attachments: list[str] | None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "user.message", "chat_id": chat_id, "text": text,
                             "client_msg_id": str(uuid.uuid4())}
    if multitask_strategy:
        frame["multitask_strategy"] = multitask_strategy
    if attachments:
        frame["attachments"] = [{"file_id": f} for f in attachments]
    return frame


@dataclass
class Place:
    """Where a chat stands in its log, for this client: the last seq
    delivered, whether a replay is under way, and the frames sent but not
    yet answered in the log (sent again after a reconnect)."""

    chat_id: str
    last_seq: int = 0
    resuming: bool = False
    unanswered: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resume_frame(self) -> dict[str, Any]:
        self.resuming = True
        return {"type": "client.resume", "chat_id": self.chat_id, "lastClientIndex": self.last_seq}

    def take(self, raw: dict[str, Any]) -> tuple[Envelope | None, dict[str, Any] | None]:
        """A message of this chat from the server: the envelope to deliver
        (none for a duplicate, a gap or a frame outside the log), and a
        frame to send (a resume when a gap shows)."""
        if raw.get("type") == "chat.resume_boundary":
            self.resuming = False
            if raw.get("recovered") is False:
                # The server's log is behind this client's: start over.
                self.last_seq = 0
                return None, self.resume_frame()
            return None, None
        seq = raw.get("seq")
        if not isinstance(seq, int):
            return None, None
        if seq <= self.last_seq:
            return None, None
        if seq > self.last_seq + 1:
            return None, None if self.resuming else self.resume_frame()
        self.last_seq = seq
        envelope = parse(raw)
        self.answered(envelope)
        return envelope, None

    def answered(self, env: Envelope) -> None:
        """Forgets the frames this envelope answers."""
        raw = env.raw
        if env.type in ("chat.text", "chat.queued") and raw.get("agent") == "user":
            for key, frame in list(self.unanswered.items()):
                if key.startswith("msg:") and frame.get("text") == raw.get("content"):
                    del self.unanswered[key]
                    break
        elif env.type == "chat.input_ack":
            self.unanswered.pop(f"input:{raw.get('request_id')}", None)
        elif env.type == "chat.tool_response":
            self.unanswered.pop(f"ui:{raw.get('corr')}", None)
