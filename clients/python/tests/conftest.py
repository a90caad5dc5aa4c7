"""The real agentwire binary (`AGENTWIRE_BIN`), started per test module on
a free port with its data in a temporary folder."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
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


#: The HS256 secret of the `signed_server` (jwt auth mode).
JWT_SECRET = "a-test-secret-of-32-bytes-length"


def start(dir: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """The binary on a free port, its data and agents in `dir`; its URL once healthy."""
    binary = os.environ.get("AGENTWIRE_BIN")
    if not binary:
        pytest.fail("set AGENTWIRE_BIN to the agentwire binary (cargo build first)")
    agents = dir / "agents"
    (agents / "workflows").mkdir(parents=True)
    (agents / "workflows" / "shout.yaml").write_text(WORKFLOW)
    port = free_port()
    child = subprocess.Popen(
        [binary, "serve", "--listen", f"127.0.0.1:{port}",
         "--database-url", f"sqlite://{dir / 'data' / 'agentwire.db'}", "--agents", str(agents), *extra],
        env={"PATH": os.environ.get("PATH", ""), "RUST_LOG": "error", "AGENTWIRE_TITLE_MODEL": "none"},
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{base}/healthz").status_code == 200:
                return child, base
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    child.kill()
    pytest.fail("agentwire did not start")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    child, base = start(tmp_path_factory.mktemp("agentwire"))
    yield base
    child.kill()
    child.wait()


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server in `jwt` auth mode (HS256, `JWT_SECRET`), files up to 1 MiB."""
    child, base = start(tmp_path_factory.mktemp("agentwire-jwt"), "--auth", "jwt", "--jwt-secret", JWT_SECRET,
                        "--max-file-bytes", str(1 << 20))
    yield base
    child.kill()
    child.wait()


def _token(sub: str, secret: str = JWT_SECRET) -> str:
    def b64(o: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    unsigned = f"{b64({'alg': 'HS256', 'typ': 'JWT'})}.{b64({'sub': sub, 'exp': int(time.time()) + 3600})}"
    signature = hmac.new(secret.encode(), unsigned.encode(), hashlib.sha256).digest()
    return f"{unsigned}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


@pytest.fixture
def token() -> Callable[[str], str]:
    """Signs an HS256 token for a user, as an identity provider would."""
    return _token


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("three words here\n")
    return path
