"""Engine test environments (step 4): each launcher says whether its engine can run here."""

import sys

from helpers.core.config import parse_config
from helpers.environment.engine_status import engine_status_frame
from helpers.launchers.server import free_port


def cfg(*engines: dict):
    return parse_config({"name": "env", "model": {"path": "tiny-llama"}, "engines": list(engines)})


def test_missing_interpreter_is_a_row_with_the_install_command():
    c = cfg({"label": "v", "engine": "vllm", "launcher": {"kind": "python", "python": "/nonexistent/python3"}})
    row = engine_status_frame(c).iloc[0]
    assert row["status"] == "missing"
    assert "/nonexistent/python3" in row["detail"]
    assert "pip install vllm==0.26.0" in row["how to install"]


def test_interpreter_without_the_engine_is_missing():
    c = cfg({"label": "s", "engine": "sglang", "launcher": {"kind": "python", "python": sys.executable}})
    row = engine_status_frame(c).iloc[0]
    assert row["status"] == "missing" and "cannot import" in row["detail"]


def test_unreachable_endpoint():
    url = f"http://127.0.0.1:{free_port()}"
    c = cfg({"label": "e", "engine": "endpoint", "launcher": {"kind": "endpoint", "url": url}})
    row = engine_status_frame(c).iloc[0]
    assert row["status"] == "unreachable" and url in row["detail"]
