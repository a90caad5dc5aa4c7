"""The Python client against the real server: the demo agent's every kind
of turn, over the blocking and the asyncio client."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from agentwire import (
    AgentwireError,
    AsyncClient,
    Client,
    InputRequest,
    Print,
    RunComplete,
    Text,
    ToolCall,
    ToolResponse,
)


def texts(envelopes: list) -> list[tuple[str, str]]:
    return [(e.agent, e.content) for e in envelopes if isinstance(e, Text)]


def test_a_chat_streams_its_envelopes_typed_and_in_order(server: str) -> None:
    with Client(server) as client:
        chat = client.start_chat("demo", "hello")
        log = chat.until_complete()
        seqs = [e.seq for e in log]
        assert seqs == list(range(1, len(seqs) + 1)), "gap-free from 1"
        assert texts(log) == [("user", "hello"), ("demo", "You said: hello")]
        assert "".join(e.content for e in log if isinstance(e, Print)) == "You said: hello"
        assert isinstance(log[-1], RunComplete) and log[-1].reason == "completed"
        assert log[-1].raw["chat_id"] == chat.id

        # The next turn on the same chat.
        chat.send("again")
        assert texts(chat.until_complete())[-1] == ("demo", "You said: again")
        assert "demo" in [a["id"] for a in client.agents()]


def test_inputs_secrets_and_ui_tools_are_answered(server: str) -> None:
    with Client(server) as client:
        chat = client.start_chat("demo", "ask: Your name?")
        asked = next(e for e in chat if isinstance(e, InputRequest))
        assert (asked.prompt, asked.password) == ("Your name?", False)
        chat.answer(asked.request_id, "Ada")
        assert texts(chat.until_complete())[-1] == ("demo", "You answered: Ada")

        chat.send("secret: PIN?")
        asked = next(e for e in chat if isinstance(e, InputRequest))
        assert asked.password
        chat.answer(asked.request_id, "1234")
        assert texts(chat.until_complete())[-1] == ("demo", "Secret received (4 characters)")

        chat.send("ui: multiple_choice")
        shown = next(e for e in chat if isinstance(e, ToolCall))
        assert (shown.component_type, shown.awaiting_response) == ("multiple_choice", True)
        chat.respond(shown.corr, {"choice": "b"})
        rest = chat.until_complete()
        assert any(isinstance(e, ToolResponse) and e.corr == shown.corr for e in rest)
        assert texts(rest)[-1] == ("demo", 'Component returned: {"choice":"b"}')

        # An answer to nothing: the server's error, raised.
        chat.answer("no-such-request", "x")
        with pytest.raises(AgentwireError) as err:
            chat.next(timeout=10)
        assert err.value.code == "INPUT_REQUEST_NOT_FOUND"


def test_a_dropped_connection_resumes_with_nothing_lost_or_twice(server: str) -> None:
    with Client(server) as client:
        chat = client.start_chat("demo", "slow: 40")
        seen = []
        while len([e for e in seen if isinstance(e, Print)]) < 10:
            seen.append(chat.next(timeout=30))
        client.drop_connection()
        seen.extend(chat.until_complete())
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
        words = " ".join(f"w{i}" for i in range(1, 41))
        assert "".join(e.content for e in seen if isinstance(e, Print)).split() == words.split()
        assert texts(seen)[-1] == ("demo", words)
        assert any(e.replay for e in seen), "the missed envelopes came as a replay"

    # Another client picks the chat up after the seq it holds.
    with Client(server) as later:
        again = later.open_chat(chat.id, last_seq=seen[-3].seq)
        assert [e.seq for e in (again.next(10), again.next(10))] == [seen[-2].seq, seen[-1].seq]


def test_files_and_workflows(server: str, sample: Path) -> None:
    with Client(server) as client:
        chat_id = str(uuid.uuid4())
        stored = client.upload(chat_id, sample, media_type="text/plain")
        assert (stored["name"], stored["size"], stored["media_type"]) == ("notes.txt", 17, "text/plain")
        chat = client.start_chat("demo", "read this", chat_id=chat_id, attachments=[stored["id"]])
        first = chat.until_complete()
        said = next(e for e in first if isinstance(e, Text) and e.agent == "user")
        assert said.raw["attachments"][0]["file_id"] == stored["id"]

        ran = chat.run_workflow("shout", {"word": "hey"})
        assert ran["workflow_id"] == "shout"
        assert texts(chat.until_complete())[-1] == ("demo", "You said: Say hey")
        with pytest.raises(AgentwireError) as err:
            chat.run_workflow("shout", {"word": ""})
        assert (err.value.status, err.value.code) == (400, "SCHEMA_VALIDATION_FAILED")


def test_the_asyncio_client_is_the_same_client(server: str) -> None:
    async def main() -> None:
        async with AsyncClient(server) as client:
            chats = [await client.start_chat("demo", f"slow: {n}") for n in (5, 8)]
            logs = await asyncio.gather(*(c.until_complete() for c in chats))
            for n, log in zip((5, 8), logs):
                assert texts(log)[-1] == ("demo", " ".join(f"w{i}" for i in range(1, n + 1)))
            approvals = await client.start_chat("demo", "ask: Go on?")
            async for e in approvals.run():
                if isinstance(e, InputRequest):
                    await approvals.answer(e.request_id, "yes")
            assert approvals.last_seq > 0

    asyncio.run(main())


def test_an_unreachable_server_and_a_bad_url_are_clear_errors() -> None:
    with pytest.raises(OSError):
        Client("http://127.0.0.1:9", reconnect=False)
    with pytest.raises(ValueError):
        Client("ftp://example.invalid")


def test_the_protocol_version_is_stated_both_ways(server: str) -> None:
    import httpx

    from agentwire import PROTOCOL

    r = httpx.get(f"{server}/healthz")
    assert r.headers["agentwire-protocol"] == str(PROTOCOL)
    # A client of another version learns it when it connects.
    refused = httpx.get(f"{server}/v1/agents", headers={"agentwire-protocol": "99"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "SCHEMA_VALIDATION_FAILED"
    assert "protocol 1" in refused.json()["error"]["message"]
    ws = server.replace("http://", "ws://") + "/v1/ws?protocol=99"

    async def upgrade() -> int:
        import websockets

        try:
            async with websockets.connect(ws):
                return 101
        except websockets.InvalidStatus as e:
            return e.response.status_code

    assert asyncio.run(upgrade()) == 400


def test_the_notebook_example_runs_as_shipped(server: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import runpy

    monkeypatch.setenv("AGENTWIRE_URL", server)
    runpy.run_path(str(Path(__file__).parent.parent / "examples" / "notebook.py"))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "You said: hello"
    assert "run completed" in out
    assert out[-1] == "['chat.usage_summary', 'chat.run_complete']"
