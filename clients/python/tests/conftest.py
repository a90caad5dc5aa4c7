"""The real agentwire binary (`AGENTWIRE_BIN`), started per test module on
a free port with its data in a temporary folder."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


WORKFLOW = """id: shout
title: Shout
description: Says a word back
category: Tools
parameters:
  type: object
  properties: {word: {type: string, minLength: 1}}
  required: [word]
prompt: "Say {word}"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = os.environ.get("AGENTWIRE_BIN")
    if not binary:
        pytest.fail("set AGENTWIRE_BIN to the agentwire binary (cargo build first)")
    dir = tmp_path_factory.mktemp("agentwire")
    agents = dir / "agents"
    (agents / "workflows").mkdir(parents=True)
    (agents / "workflows" / "shout.yaml").write_text(WORKFLOW)
    port = free_port()
    child = subprocess.Popen(
        [binary, "serve", "--listen", f"127.0.0.1:{port}",
         "--database-url", f"sqlite://{dir / 'data' / 'agentwire.db'}", "--agents", str(agents)],
        env={"PATH": os.environ.get("PATH", ""), "RUST_LOG": "error", "AGENTWIRE_TITLE_MODEL": "none"},
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    else:
        child.kill()
        pytest.fail("agentwire did not start")
    yield base
    child.kill()
    child.wait()


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("three words here\n")
    return path
