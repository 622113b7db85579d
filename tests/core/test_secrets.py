"""An endpoint's API key from the environment reaches the server and nothing the playbook writes."""

import asyncio

import httpx
import pytest
from fakes.fake_process import fake_server

from helpers.benchmark.run import run_benchmarks
from helpers.core.config import parse_config
from helpers.measure.metrics import parse_page
from helpers.report.run_summary import build_summary

KEY = "sk-playbook-test-4f9c2e7a1b"


@pytest.fixture
def keyed_server(tmp_path):
    """The fake engine on a free port, requiring ``KEY``; stopped by its own pid."""
    with fake_server(tmp_path, {"FAKE_API_KEY": KEY}) as url:
        yield url


def endpoint_config(url: str, key_env: str):
    return parse_config(
        {
            "name": "secrets",
            "model": {"path": "tiny-llama"},
            "engines": [
                {
                    "label": "remote",
                    "engine": "endpoint",
                    "launcher": {"kind": "endpoint", "url": url, "api_key_env": key_env},
                }
            ],
            "workload": {"input_tokens": 16, "output_tokens": 4, "concurrency": [2], "requests_per_point": 4},
            "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},  # the key, not evidence
        }
    )


def test_the_key_is_sent_but_never_written(keyed_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYBOOK_TEST_API_KEY", KEY)
    cfg = endpoint_config(keyed_server, "PLAYBOOK_TEST_API_KEY")
    run_dir = tmp_path / "run"
    (result,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert result.status == "ok", result.reason
    assert result.points[0].requests == 4 and result.points[0].errors == 0

    served = parse_page(httpx.get(keyed_server + "/metrics").text)
    assert served["fake:authorized_requests_total"] == served["fake:requests_total"] >= 6  # health + first + 4

    summary = build_summary(run_dir, cfg).model_dump_json()
    assert KEY not in summary
    written = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.parent.name == "logs" for p in written) and any(p.parent.name == "engines" for p in written)
    for p in written:
        assert KEY not in p.read_text(encoding="utf-8", errors="replace"), p
    assert KEY not in result.model_dump_json()


def test_without_the_key_the_server_refuses_and_the_row_says_so(keyed_server, tmp_path, monkeypatch):
    monkeypatch.delenv("PLAYBOOK_TEST_MISSING_KEY", raising=False)
    cfg = endpoint_config(keyed_server, "PLAYBOOK_TEST_MISSING_KEY")
    cfg.engines[0].startup_timeout_s = 2
    (result,) = asyncio.run(run_benchmarks(cfg, tmp_path))
    assert result.status == "failed" and result.reason.endswith("/v1/models within 2 s")
