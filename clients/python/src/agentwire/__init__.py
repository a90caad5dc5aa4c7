"""agentwire's Python client: start chats with agents, stream their
envelopes as typed objects, answer what a run asks (inputs, approvals, UI
tools), and resume after a dropped connection without losing or repeating
an envelope. `Client` blocks; `AsyncClient` is asyncio's."""

from ._core import PROTOCOL, AgentwireError
from .aio import AsyncChat, AsyncClient, Upload
from .envelopes import (
    Envelope,
    Error,
    InputRequest,
    Print,
    RunComplete,
    SelectSpeaker,
    Text,
    ToolCall,
    ToolResponse,
    UsageSummary,
    parse,
)
from .sync import Chat, Client

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL",
    "AgentwireError",
    "AsyncChat",
    "AsyncClient",
    "Chat",
    "Client",
    "Envelope",
    "Error",
    "InputRequest",
    "Print",
    "RunComplete",
    "SelectSpeaker",
    "Text",
    "ToolCall",
    "ToolResponse",
    "Upload",
    "UsageSummary",
    "parse",
]
