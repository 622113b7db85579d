"""Start ``fake_openai_server`` on a free port for a test, and stop it by its own pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from helpers.server import free_port

FAKES = Path(__file__).parent


@contextmanager
def fake_server(log_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Yield the base URL of a healthy fake engine (its behaviour set by ``env``); log in ``log_dir``."""
    port = free_port()
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": str(FAKES)}
    with open(Path(log_dir) / "fake-server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fake_openai_server", "--port", str(port)],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
