"""A test-only engine adapter that starts ``fake_openai_server`` through the real python launcher.

It has the vLLM adapter's flags, health path and metric names; register it for a test with
``ENGINES.temporarily(FAKE_ENGINE, FakeEngineAdapter())``; ``fake_spec`` builds an engine entry of a
config that launches it.
"""

from __future__ import annotations

import sys

from helpers.engines.vllm import VllmAdapter

FAKE_ENGINE = "fake-engine"


class FakeEngineAdapter(VllmAdapter):
    """The vLLM adapter, started from the fake server module."""

    name = FAKE_ENGINE
    display_name = "Fake engine"
    module = "fake_openai_server"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


def fake_spec(label: str, mode: str = "ok", env: dict[str, str] | None = None, **fields) -> dict:
    """An ``engines`` entry that launches the fake server in ``mode`` with extra ``env``."""
    spec = {
        "label": label,
        "engine": FAKE_ENGINE,
        "launcher": {
            "kind": "python",
            "python": sys.executable,
            "pythonpath": ["tests/fakes"],
            "env": {"FAKE_ENGINE_MODE": mode, **(env or {})},
        },
        "startup_timeout_s": 20,
    }
    spec.update(fields)
    return spec
