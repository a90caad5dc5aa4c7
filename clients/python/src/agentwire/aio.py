"""The asyncio client: one WebSocket for any number of chats, reconnected
and resumed by itself, and the HTTP routes a client needs (uploads,
workflows, agents).

    async with AsyncClient("http://127.0.0.1:8080") as client:
        chat = await client.start_chat("demo", "hello")
        async for envelope in chat.run():
            print(envelope)
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import mimetypes
import os
import random
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import IO, Any, Union

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from . import _core
from ._core import AgentwireError, Place
from .envelopes import Envelope, RunComplete

#: What `upload` takes: bytes, a path, a binary file object, or an async
#: iterable of bytes (the last three are streamed).
Upload = Union[bytes, str, Path, IO[bytes], AsyncIterable[bytes]]

#: How much of a streamed upload is read at a time.
CHUNK = 64 * 1024


async def _read_file(f: IO[bytes]) -> AsyncIterator[bytes]:
    """`f`'s bytes from where it stands, a chunk at a time (read off the loop)."""
    while chunk := await asyncio.to_thread(f.read, CHUNK):
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError("upload a file opened in binary mode ('rb'), not text")
        yield bytes(chunk)


async def _read_path(path: Path) -> AsyncIterator[bytes]:
    f = await asyncio.to_thread(path.open, "rb")
    try:
        async for chunk in _read_file(f):
            yield chunk
    finally:
        f.close()


def _remaining(f: IO[bytes]) -> int | None:
    """The bytes left in `f`, when it can tell (a file on disk, BytesIO)."""
    try:
        here = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(here)
        return end - here
    except (AttributeError, OSError, ValueError):
        return None


def _file_name(f: IO[bytes]) -> str | None:
    name = getattr(f, "name", None)
    return os.path.basename(name) if isinstance(name, str) and name else None


def _guess_type(name: str | None) -> str:
    return (mimetypes.guess_type(name)[0] if name else None) or "application/octet-stream"


class AsyncChat:
    """One chat this client follows: its envelopes in log order, each once,
    and what it can answer."""

    def __init__(self, client: AsyncClient, chat_id: str, last_seq: int = 0) -> None:
        self.client = client
        self.id = chat_id
        self.place = Place(chat_id, last_seq)
        self._inbox: asyncio.Queue[Envelope | AgentwireError] = asyncio.Queue()
        # Answers sent again after a reconnect: a "not found" for one of
        # them means the server had it already.
        self._resent: set[str] = set()

    @property
    def last_seq(self) -> int:
        """The seq of the last envelope delivered (what a resume starts after)."""
        return self.place.last_seq

    async def send(self, text: str, *, multitask_strategy: str | None = None,
                   attachments: list[str] | None = None) -> str:
        """A new user message (sent again after a reconnect until the log
        has it); `attachments`: ids of files uploaded to this chat. Returns
        its `client_msg_id`."""
        frame = _core.message_frame(self.id, text, multitask_strategy, attachments)
        self.place.unanswered[f"msg:{frame['client_msg_id']}"] = frame
        await self.client._send(frame)
        return frame["client_msg_id"]

    async def answer(self, request_id: str, text: str) -> None:
        """Answers a `chat.input_request` (a choice: one of its options)."""
        frame = {"type": "user.input.submit", "chat_id": self.id, "request_id": request_id,
                 "text": text, "last_client_seq": self.last_seq}
        self.place.unanswered[f"input:{request_id}"] = frame
        await self.client._send(frame)

    async def respond(self, corr: str, data: Any) -> None:
        """Answers a UI tool call that waits (`awaiting_response`)."""
        frame = {"type": "inline_component.result", "chat_id": self.id, "corr": corr, "data": data}
        self.place.unanswered[f"ui:{corr}"] = frame
        await self.client._send(frame)

    async def approve(self, corr: str, approved: bool = True, reason: str | None = None) -> None:
        """Answers an approval gate (a tool call with `component_type` "approval")."""
        data: dict[str, Any] = {"approved": approved}
        if reason is not None:
            data["reason"] = reason
        await self.respond(corr, data)

    async def cancel(self) -> None:
        """Ends the run in flight (`chat.cancel`)."""
        await self.client._send({"type": "chat.cancel", "chat_id": self.id})

    async def next(self, timeout: float | None = None) -> Envelope:
        """The next envelope; raises `AgentwireError` for an error the server
        sent this connection about this chat (not part of the log), and
        `TimeoutError` when nothing came within `timeout` seconds."""
        item = await asyncio.wait_for(self._inbox.get(), timeout)
        if isinstance(item, AgentwireError):
            raise item
        return item

    def __aiter__(self) -> AsyncIterator[Envelope]:
        return self._forever()

    async def _forever(self) -> AsyncIterator[Envelope]:
        while True:
            yield await self.next()

    async def run(self, timeout: float | None = 120) -> AsyncIterator[Envelope]:
        """The envelopes up to and including the next `chat.run_complete`."""
        while True:
            envelope = await self.next(timeout)
            yield envelope
            if isinstance(envelope, RunComplete):
                return

    async def until_complete(self, timeout: float | None = 120) -> list[Envelope]:
        """Every envelope up to and including the next `chat.run_complete`."""
        return [e async for e in self.run(timeout)]

    async def upload(self, file: Upload, *, name: str | None = None,
                     media_type: str | None = None) -> dict[str, Any]:
        """Uploads a file to this chat (`POST /v1/chats/{id}/files`), streamed
        unless it is bytes; its `id` goes in `send(..., attachments=[id])`."""
        return await self.client.upload(self.id, file, name=name, media_type=media_type)

    async def run_workflow(self, workflow_id: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Runs a workflow in this chat; its run's envelopes follow."""
        return await self.client.run_workflow(self.id, workflow_id, parameters)

    def _deliver(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """Takes a message of this chat; returns a frame to send, if any."""
        if not isinstance(raw.get("seq"), int) and raw.get("type") == "chat.error":
            code = str(raw.get("error_code", ""))
            message = str(raw.get("message", ""))
            if code == "INPUT_REQUEST_NOT_FOUND":
                # The answer it names is not sent again; one that was a
                # resend, the server had already: nothing to tell.
                named = [k for k in self.place.unanswered if f"`{k.split(':', 1)[1]}`" in message]
                for key in named:
                    del self.place.unanswered[key]
                if any(key in self._resent for key in named):
                    self._resent.difference_update(named)
                    return None
            if code == "RESUME_FAILED":
                self.place.resuming = False
            self._inbox.put_nowait(AgentwireError(code, message))
            return None
        boundary = raw.get("type") == "chat.resume_boundary"
        envelope, frame = self.place.take(raw)
        if envelope is not None:
            self._inbox.put_nowait(envelope)
        if boundary and frame is None:
            # What the replay did not answer is sent again.
            for key, resent in self.place.unanswered.items():
                if not key.startswith("msg:"):
                    self._resent.add(key)
                self.client._queue_send(resent)
        return frame


class AsyncClient:
    """A connection to an agentwire server at `base_url`."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", *, token: str | None = None,
                 reconnect: bool = True, max_backoff: float = 10.0,
                 http: httpx.AsyncClient | None = None) -> None:
        self.base_url, self.ws_url = _core.urls(base_url, token)
        self.token = token
        self.reconnect = reconnect
        self.max_backoff = max_backoff
        self.chats: dict[str, AsyncChat] = {}
        self.http = http or httpx.AsyncClient(base_url=self.base_url, headers=_core.headers(token), timeout=30)
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self._connected = asyncio.Event()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Opens the WebSocket (a refused one raises `AgentwireError`)."""
        await self._open()
        self._reader = asyncio.create_task(self._read())

    async def _open(self) -> None:
        try:
            ws = await connect(self.ws_url, max_size=16 << 20, additional_headers=_core.headers(self.token))
        except InvalidStatus as e:
            status = e.response.status_code
            try:
                body = json.loads(e.response.body or b"")
            except ValueError:
                body = None
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                raise _core.http_error(status, body) from e
            code = "UNAUTHORIZED" if status == 401 else "HTTP_ERROR"
            raise AgentwireError(code, f"the WebSocket upgrade was refused ({status})", status) from e
        try:
            _core.check_protocol(ws.response.headers.get(_core.PROTOCOL_HEADER) if ws.response else None)
        except AgentwireError:
            await ws.close()
            raise
        self._ws = ws
        self._connected.set()

    async def close(self) -> None:
        self._closed = True
        if self._reader:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._ws:
            await self._ws.close()
        await self.http.aclose()

    async def drop_connection(self) -> None:
        """Closes the socket as a network failure would (the client
        reconnects and resumes): for tests and for a caller that knows the
        connection went stale."""
        if self._ws:
            self._ws.transport.abort()

    async def start_chat(self, agent: str = "demo", message: str | None = None, *,
                         chat_id: str | None = None, context: dict[str, Any] | None = None,
                         attachments: list[str] | None = None) -> AsyncChat:
        """Starts a chat with `agent` (and its first turn, if `message`)."""
        chat = self._track(chat_id or str(uuid.uuid4()), 0)
        await self._send(_core.start_frame(chat.id, agent, message, context, attachments))
        return chat

    async def open_chat(self, chat_id: str, *, last_seq: int = 0) -> AsyncChat:
        """Follows an existing chat: what came after `last_seq` (everything
        with 0), then what comes."""
        chat = self._track(chat_id, last_seq)
        # A chat followed already is delivered again from there.
        chat.place.last_seq = last_seq
        await self._send(chat.place.resume_frame())
        return chat

    def _track(self, chat_id: str, last_seq: int) -> AsyncChat:
        chat = self.chats.get(chat_id)
        if chat is None:
            chat = self.chats[chat_id] = AsyncChat(self, chat_id, last_seq)
        return chat

    async def _send(self, frame: dict[str, Any]) -> None:
        await self._connected.wait()
        assert self._ws is not None
        try:
            await self._ws.send(json.dumps(frame))
        except ConnectionClosed:
            # Sent again once the connection is back (the unanswered ones).
            pass

    def _queue_send(self, frame: dict[str, Any]) -> None:
        asyncio.get_running_loop().create_task(self._send(frame))

    async def _read(self) -> None:
        attempt = 0
        while not self._closed:
            ws = self._ws
            assert ws is not None
            try:
                async for text in ws:
                    attempt = 0
                    try:
                        raw = json.loads(text)
                    except ValueError:
                        continue
                    chat = self.chats.get(raw.get("chat_id", ""))
                    if chat is not None:
                        frame = chat._deliver(raw)
                        if frame is not None:
                            await ws.send(json.dumps(frame))
            except ConnectionClosed:
                pass
            if self._closed or not self.reconnect:
                return
            self._connected.clear()
            # Back with a growing, jittered pause; then every chat resumes
            # from its last seq.
            while not self._closed:
                attempt += 1
                delay = min(self.max_backoff, 0.25 * 2 ** (attempt - 1))
                await asyncio.sleep(delay / 2 + random.random() * delay / 2)
                try:
                    await self._open()
                    break
                except (OSError, AgentwireError, InvalidStatus):
                    continue
            for chat in self.chats.values():
                await self._send(chat.place.resume_frame())

    # HTTP routes

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        r = await self.http.request(method, path, **kw)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text
        if r.status_code >= 400:
            raise _core.http_error(r.status_code, body)
        return body

    async def agents(self) -> list[dict[str, Any]]:
        """The agents the caller may start (`GET /v1/agents`)."""
        return (await self._json("GET", "/v1/agents"))["agents"]

    async def upload(self, chat_id: str, file: Upload, *, name: str | None = None,
                     media_type: str | None = None) -> dict[str, Any]:
        """Uploads a file to chat `chat_id` (started or not yet). `file` is
        bytes, a path, a binary file object or an async iterable of bytes;
        all but bytes are streamed (read 64 KiB at a time, never whole). The
        media type is guessed from the name unless given. A path's or a
        file's length is read before it is sent: a file that grows or shrinks
        meanwhile fails the upload."""
        params = {}
        if isinstance(file, (str, Path)):
            path = Path(file)
            name = name or path.name
            content: Any = _read_path(path)
            size: int | None = path.stat().st_size
        elif isinstance(file, (bytes, bytearray, memoryview)):
            content, size = bytes(file), None
        elif hasattr(file, "read"):
            if isinstance(file, io.TextIOBase):
                raise TypeError("upload a file opened in binary mode ('rb'), not text")
            name = name or _file_name(file)
            content, size = _read_file(file), _remaining(file)
        else:
            content, size = file, None
        if name:
            params["name"] = name
        headers = {"content-type": media_type or _guess_type(name)}
        if size is not None:
            headers["content-length"] = str(size)
        return await self._json("POST", f"/v1/chats/{chat_id}/files", content=content,
                                params=params or None, headers=headers)

    async def run_workflow(self, chat_id: str, workflow_id: str,
                           parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Runs workflow `workflow_id` in chat `chat_id`."""
        body = {"parameters": parameters} if parameters is not None else {}
        return await self._json("POST", f"/v1/chats/{chat_id}/workflows/{workflow_id}", json=body)
