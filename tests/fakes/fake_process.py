"""Start ``fake_openai_server`` on a free port for a test, and stop it by its own pid.

It is started and stopped like an engine, through ``helpers.launchers.server`` (its own process group,
health polling, stop by pid), with the vLLM adapter's health path (``/health``, which needs no API key).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.engines import get_engine
from helpers.launchers.server import free_port, start_process

FAKES = Path(__file__).parent


@contextmanager
def fake_server(log_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Yield the base URL of a healthy fake engine (its behaviour set by ``env``); log in ``log_dir``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "fake_openai_server", "--port", str(port)]
    handle = start_process(
        cmd, {**(env or {}), "PYTHONPATH": str(FAKES)}, Path(log_dir) / "fake-server.log", url, get_engine("vllm")
    )
    try:
        handle.wait_healthy(30)
        yield url
    finally:
        handle.stop(grace_s=5)
