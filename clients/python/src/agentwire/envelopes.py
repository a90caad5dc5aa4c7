"""The envelopes of a chat's log as typed objects.

Every outbound chat-scoped envelope has `type`, `chat_id`, `seq` and `ts`
and its own fields at top level (protocol/README.md). `parse` gives the
class of its type when the client knows it, else `Envelope`; every one keeps
the whole object as `raw`, so a field this client does not name is still
there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Envelope:
    """Any envelope of a chat's log."""

    type: str
    chat_id: str
    seq: int
    ts: str
    replay: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    TYPE: ClassVar[str] = ""

    def get(self, key: str, default: Any = None) -> Any:
        """A field of the envelope as sent."""
        return self.raw.get(key, default)


@dataclass(frozen=True)
class Text(Envelope):
    """`chat.text`: a finished turn (`agent` "user" for the user's)."""

    TYPE: ClassVar[str] = "chat.text"
    agent: str = ""
    content: str = ""
    partial: bool = False


@dataclass(frozen=True)
class Print(Envelope):
    """`chat.print`: a streamed fragment of a turn."""

    TYPE: ClassVar[str] = "chat.print"
    agent: str = ""
    content: str = ""


@dataclass(frozen=True)
class SelectSpeaker(Envelope):
    """`chat.select_speaker`: a model turn begins (in a group: who, and how chosen)."""

    TYPE: ClassVar[str] = "chat.select_speaker"
    agent: str = ""
    method: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class InputRequest(Envelope):
    """`chat.input_request`: the run waits for the user to type something
    (`options`: a choice; `password`: a secret)."""

    TYPE: ClassVar[str] = "chat.input_request"
    request_id: str = ""
    prompt: str = ""
    password: bool = False
    options: list[str] | None = None
    tool_name: str | None = None


@dataclass(frozen=True)
class ToolCall(Envelope):
    """`chat.tool_call`: a tool runs, or (`awaiting_response`) a component
    waits for the client's result (`component_type` "approval": a gate)."""

    TYPE: ClassVar[str] = "chat.tool_call"
    tool_name: str = ""
    corr: str = ""
    payload: Any = None
    component_type: str | None = None
    awaiting_response: bool = False
    agent: str | None = None

    @property
    def is_approval(self) -> bool:
        return self.component_type == "approval"


@dataclass(frozen=True)
class ToolResponse(Envelope):
    """`chat.tool_response`: a tool's (or a component's) result."""

    TYPE: ClassVar[str] = "chat.tool_response"
    tool_name: str = ""
    corr: str = ""
    content: Any = None
    success: bool = True
    agent: str | None = None


@dataclass(frozen=True)
class Error(Envelope):
    """`chat.error` logged in the chat."""

    TYPE: ClassVar[str] = "chat.error"
    error_code: str = ""
    message: str = ""
    recoverable: bool = False


@dataclass(frozen=True)
class UsageSummary(Envelope):
    """`chat.usage_summary`: what the run used (per member in a group)."""

    TYPE: ClassVar[str] = "chat.usage_summary"
    total_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_agent: dict[str, Any] | None = None
    cost: float | None = None


@dataclass(frozen=True)
class RunComplete(Envelope):
    """`chat.run_complete`: the run ended, and why (`completed`, `cancelled`,
    `max_turns`, `max_rounds`, `timeout`, `error`, `interrupted`)."""

    TYPE: ClassVar[str] = "chat.run_complete"
    reason: str = ""


_KNOWN: dict[str, type[Envelope]] = {
    cls.TYPE: cls
    for cls in (Text, Print, SelectSpeaker, InputRequest, ToolCall, ToolResponse, Error, UsageSummary, RunComplete)
}


def parse(raw: dict[str, Any]) -> Envelope:
    """The typed envelope of a logged one (`raw` has a `seq`)."""
    cls = _KNOWN.get(raw.get("type", ""), Envelope)
    common = {
        "type": raw.get("type", ""),
        "chat_id": raw.get("chat_id", ""),
        "seq": int(raw["seq"]),
        "ts": raw.get("ts", ""),
        "replay": bool(raw.get("replay", False)),
        "raw": raw,
    }
    own = {
        name: raw[name]
        for name in cls.__dataclass_fields__
        if name not in common and name in raw
    }
    return cls(**common, **own)
