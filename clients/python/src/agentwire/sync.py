"""The blocking client, for scripts and notebooks: the asyncio client run
on a loop of its own, in a thread of its own.

    with Client("http://127.0.0.1:8080") as client:
        chat = client.start_chat("demo", "hello")
        for envelope in chat.run():
            print(envelope)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from .aio import AsyncChat, AsyncClient, Upload
from .envelopes import Envelope, RunComplete

T = TypeVar("T")


class Chat:
    """One chat (see `AsyncChat`), its calls blocking."""

    def __init__(self, client: Client, inner: AsyncChat) -> None:
        self._client = client
        self._inner = inner
        self.id = inner.id

    @property
    def last_seq(self) -> int:
        return self._inner.last_seq

    def send(self, text: str, *, multitask_strategy: str | None = None,
             attachments: list[str] | None = None) -> str:
        return self._client._run(self._inner.send(text, multitask_strategy=multitask_strategy,
                                                  attachments=attachments))

    def answer(self, request_id: str, text: str) -> None:
        self._client._run(self._inner.answer(request_id, text))

    def respond(self, corr: str, data: Any) -> None:
        self._client._run(self._inner.respond(corr, data))

    def approve(self, corr: str, approved: bool = True, reason: str | None = None) -> None:
        self._client._run(self._inner.approve(corr, approved, reason))

    def cancel(self) -> None:
        self._client._run(self._inner.cancel())

    def next(self, timeout: float | None = None) -> Envelope:
        return self._client._run(self._inner.next(timeout))

    def __iter__(self) -> Iterator[Envelope]:
        while True:
            yield self.next()

    def run(self, timeout: float | None = 120) -> Iterator[Envelope]:
        """The envelopes up to and including the next `chat.run_complete`."""
        while True:
            envelope = self.next(timeout)
            yield envelope
            if isinstance(envelope, RunComplete):
                return

    def until_complete(self, timeout: float | None = 120) -> list[Envelope]:
        return list(self.run(timeout))

    def upload(self, file: Upload, *, name: str | None = None,
               media_type: str | None = None) -> dict[str, Any]:
        """Uploads a file to this chat: bytes, a path, a binary file object or
        an async iterable of bytes (all but bytes streamed; see `AsyncClient.upload`)."""
        return self._client._run(self._inner.upload(file, name=name, media_type=media_type))

    def run_workflow(self, workflow_id: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._client._run(self._inner.run_workflow(workflow_id, parameters))


class Client:
    """A blocking connection to an agentwire server (see `AsyncClient`)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", *, token: str | None = None,
                 reconnect: bool = True) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentwire", daemon=True)
        self._thread.start()

        async def make() -> AsyncClient:
            return AsyncClient(base_url, token=token, reconnect=reconnect)

        self._inner = self._run(make())
        try:
            self._run(self._inner.connect())
        except BaseException:
            self._stop()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._run(self._inner.close())
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def start_chat(self, agent: str = "demo", message: str | None = None, *,
                   chat_id: str | None = None, context: dict[str, Any] | None = None,
                   attachments: list[str] | None = None) -> Chat:
        inner = self._run(self._inner.start_chat(agent, message, chat_id=chat_id, context=context,
                                                 attachments=attachments))
        return Chat(self, inner)

    def open_chat(self, chat_id: str, *, last_seq: int = 0) -> Chat:
        return Chat(self, self._run(self._inner.open_chat(chat_id, last_seq=last_seq)))

    def drop_connection(self) -> None:
        self._run(self._inner.drop_connection())

    def agents(self) -> list[dict[str, Any]]:
        return self._run(self._inner.agents())

    def upload(self, chat_id: str, file: Upload, *, name: str | None = None,
               media_type: str | None = None) -> dict[str, Any]:
        return self._run(self._inner.upload(chat_id, file, name=name, media_type=media_type))

    def run_workflow(self, chat_id: str, workflow_id: str,
                     parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._run(self._inner.run_workflow(chat_id, workflow_id, parameters))
