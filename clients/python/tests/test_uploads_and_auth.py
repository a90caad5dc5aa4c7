"""Uploads streamed from a path, a file object or an async iterable (never
read whole), and the client in `jwt` auth mode: its token on the socket and
on every HTTP route, and a clear error without one."""

from __future__ import annotations

import asyncio
import io
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from agentwire import AgentwireError, AsyncClient, Client, InputRequest, Text, Upload


def stored_bytes(base: str, file_id: str, token: str | None = None) -> bytes:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(f"{base}/v1/files/{file_id}", headers=headers)
    r.raise_for_status()
    return r.content


def test_a_path_and_a_file_object_are_streamed_and_stored_whole(server: str, tmp_path: Path) -> None:
    pdf = b"%PDF-1.7\n" + os.urandom(700_000)  # > 10 chunks
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdf)
    text = b"".join(b"line %d of the notes\n" % i for i in range(40_000))
    notes = tmp_path / "notes.txt"
    notes.write_bytes(text)
    with Client(server) as client:
        chat_id = str(uuid.uuid4())
        by_path = client.upload(chat_id, path)
        assert (by_path["name"], by_path["size"], by_path["media_type"]) == ("scan.pdf", len(pdf), "application/pdf")
        assert stored_bytes(server, by_path["id"]) == pdf

        with notes.open("rb") as f:
            f.seek(100)  # from where the file object stands
            by_file = client.upload(chat_id, f)
        assert (by_file["name"], by_file["size"], by_file["media_type"]) == ("notes.txt", len(text) - 100, "text/plain")
        assert stored_bytes(server, by_file["id"]) == text[100:]

        # The declared type comes from the name (the server keeps CSV as declared).
        in_memory = client.upload(chat_id, io.BytesIO(b"a,b\n1,2\n"), name="table.csv")
        assert (in_memory["size"], in_memory["media_type"]) == (8, "text/csv")

        # A file opened as text is the caller's mistake, said as such.
        with notes.open("r") as f, pytest.raises(TypeError, match="binary"):
            client.upload(chat_id, f)  # type: ignore[arg-type]


def test_an_async_iterable_is_streamed_without_a_length(server: str) -> None:
    sizes = [1, 65_536, 3, 200_000]
    parts = [(b"%d" % i) * n for i, n in enumerate(sizes)]

    async def produce() -> AsyncIterator[bytes]:
        for part in parts:
            await asyncio.sleep(0)
            yield part

    async def main() -> None:
        async with AsyncClient(server) as client:
            chat = await client.start_chat("demo")
            stored = await chat.upload(produce(), name="parts.txt")
            assert (stored["name"], stored["size"], stored["media_type"]) == ("parts.txt", sum(sizes), "text/plain")
            assert await asyncio.to_thread(stored_bytes, server, stored["id"]) == b"".join(parts)

    asyncio.run(main())


def test_a_file_over_the_limit_is_refused_with_its_code(signed_server: str, token: Callable[[str], str],
                                                        tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * ((1 << 20) + 1))

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(17):
            yield b"y" * 65_536  # 1 MiB + 64 KiB, no length given

    with Client(signed_server, token=token("ada")) as client:
        chat_id = str(uuid.uuid4())
        upload: Upload
        for upload in (big, chunks()):
            with pytest.raises(AgentwireError) as err:
                client.upload(chat_id, upload)
            assert (err.value.status, err.value.code) == (413, "SCHEMA_VALIDATION_FAILED")
        # The connection and the chat are fine: a file within the limit goes in.
        assert client.upload(chat_id, b"small")["size"] == 5


def test_in_jwt_mode_the_token_goes_on_the_socket_and_every_route(signed_server: str, token: Callable[[str], str],
                                                                  sample: Path) -> None:
    ada = token("ada")
    with Client(signed_server, token=ada) as client:
        chat_id = str(uuid.uuid4())
        stored = client.upload(chat_id, sample)
        assert stored["media_type"] == "text/plain"
        chat = client.start_chat("demo", "ask: Your name?", chat_id=chat_id, attachments=[stored["id"]])
        seen = []
        for e in chat.run():
            seen.append(e)
            if isinstance(e, InputRequest):
                chat.answer(e.request_id, "Ada")
        said = [(e.agent, e.content) for e in seen if isinstance(e, Text)]
        assert said[-1] == ("demo", "You answered: Ada")
        assert stored_bytes(signed_server, stored["id"], ada) == sample.read_bytes()
        assert any(a["id"] == "demo" for a in client.agents())

    # Another user cannot read Ada's chat or her file.
    with Client(signed_server, token=token("bob")) as bob:
        with pytest.raises(AgentwireError) as err:
            bob.upload(chat_id, b"mine now")
        assert (err.value.status, err.value.code) == (404, "RESUME_FAILED")
    theirs = httpx.get(f"{signed_server}/v1/files/{stored['id']}", headers={"authorization": f"Bearer {token('bob')}"})
    assert (theirs.status_code, theirs.json()["error"]["code"]) == (404, "FILE_NOT_FOUND")

    # No token, or a forged one: refused at connect, with the contract's code.
    for bad in (None, token("ada", "another-secret-of-32-bytes-long!")):
        with pytest.raises(AgentwireError) as err:
            with Client(signed_server, token=bad) as stranger:
                stranger.start_chat("demo", "hello")
        assert (err.value.status, err.value.code) == (401, "UNAUTHORIZED")
