"""Launch and run failures become result rows with a reason and a log tail, and the run goes on.

The engines are ``tests/fakes/fake_openai_server.py`` started by the real python launcher through a
test-only adapter registered like any engine; guidellm drives them for real.
"""

import asyncio
import json
import sys

import pytest

from helpers.benchmark.evidence import rebuild_from_points
from helpers.benchmark.run import run_benchmarks
from helpers.benchmark.session import CUT, EngineSession
from helpers.core.errors import ConfigError
from helpers.engines import ENGINES
from helpers.engines.vllm import VllmAdapter
from helpers.launchers.config_check import parse_config
from helpers.run.records import load_engine_results

FAKE_ENGINE = "fake-vllm"


class FakeVllmAdapter(VllmAdapter):
    """The vLLM adapter's flags and metric names, started from the fake server module."""

    name = FAKE_ENGINE
    display_name = "Fake vLLM"
    module = "fake_openai_server"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


@pytest.fixture
def fake_engine():
    with ENGINES.temporarily(FAKE_ENGINE, FakeVllmAdapter()):
        yield FAKE_ENGINE


def fake(label: str, mode: str, **fields) -> dict:
    spec = {
        "label": label,
        "engine": FAKE_ENGINE,
        "launcher": {
            "kind": "python",
            "python": sys.executable,
            "pythonpath": ["tests/fakes"],
            "env": {"FAKE_ENGINE_MODE": mode, "FAKE_DIE_AFTER": "2"},
        },
        "startup_timeout_s": 20,
    }
    spec.update(fields)
    return spec


def config(engines: list[dict]):
    return parse_config(
        {
            "name": "faults",
            "model": {"path": "tiny-llama"},
            "engines": engines,
            "workload": {
                "input_tokens": 16,
                "output_tokens": 4,
                "concurrency": [2],
                "requests_per_point": 4,
                "max_seconds_per_point": 60,
            },
            # failures, not evidence, are tested here: no search, no trials
            "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},
        }
    )


def test_a_registered_test_adapter_passes_config_validation(fake_engine):
    cfg = config([fake("a", "ok")])
    assert cfg.engines[0].engine == FAKE_ENGINE


def test_an_unregistered_engine_is_refused():
    with pytest.raises(ConfigError, match=f"unknown engine '{FAKE_ENGINE}'"):
        config([fake("a", "ok")])


def test_every_failure_is_a_row_and_the_run_continues(fake_engine, tmp_path):
    cfg = config(
        [
            fake("dies", "die_mid_point"),
            fake("never-healthy", "never_healthy", startup_timeout_s=3),
            fake("bad-flag", "bad_flag"),
            {**fake("missing", "ok"), "launcher": {"kind": "python", "python": str(tmp_path / "no-such-python")}},
            fake("bad-metrics", "bad_metrics"),
        ]
    )
    said: list[str] = []
    results = asyncio.run(run_benchmarks(cfg, tmp_path, progress=said.append))
    by = {r.label: r for r in results}
    assert [r.label for r in results] == ["dies", "never-healthy", "bad-flag", "missing", "bad-metrics"]

    dies = by["dies"]
    assert dies.status == "partial"
    assert dies.reason == "engine process exited with code 3 during the point at concurrency 2"
    assert "dying after 2 streamed requests" in dies.log_tail
    assert dies.cold_start_s is not None and dies.points == []

    never = by["never-healthy"]
    assert never.status == "failed"
    assert never.reason.startswith("no health at http://127.0.0.1:") and never.reason.endswith("within 3 s")
    assert "fake engine (never_healthy)" in never.log_tail

    bad_flag = by["bad-flag"]
    assert (bad_flag.status, bad_flag.reason) == ("failed", "engine process exited with code 2 before becoming healthy")
    assert "unrecognized arguments" in bad_flag.log_tail

    missing = by["missing"]
    assert missing.status == "failed"
    assert missing.reason.startswith("could not start ") and "No such file or directory" in missing.reason

    bad_metrics = by["bad-metrics"]
    assert bad_metrics.status == "ok" and len(bad_metrics.points) == 1
    point = bad_metrics.points[0]
    assert point.requests == 4 and point.errors == 0 and point.output_tokens_mean == 4
    assert point.server.samples == 0 and "malformed metrics page" in point.server.error

    stored = {r.label: r for r in load_engine_results(tmp_path)}
    assert set(stored) == set(by) and stored["dies"].reason == dies.reason
    point_file = tmp_path / "points" / "bad-metrics" / "sweep-c0002.json"
    assert json.loads(point_file.read_text())["requests"] == 4
    assert any("never-healthy: failed" in s for s in said)


def test_an_engine_out_of_memory_at_start_is_a_row_that_names_it(fake_engine, tmp_path):
    """The row's reason names the fault and quotes the engine's line (above its log tail); the next engine runs."""
    cfg = config([fake("oom", "oom_at_start"), fake("ok", "ok")])
    oom, ok = asyncio.run(run_benchmarks(cfg, tmp_path))
    assert oom.status == "failed" and ok.status == "ok"
    assert oom.reason.startswith(
        "out of memory at start: engine process exited with code 1 before becoming healthy"
        " (log: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB."
    )
    assert "RuntimeError: Engine core initialization failed" in oom.log_tail and "OutOfMemory" not in oom.log_tail


def test_a_healthy_fake_gives_normalised_server_stats(fake_engine, tmp_path):
    (result,) = asyncio.run(run_benchmarks(config([fake("ok", "ok")]), tmp_path))
    assert result.status == "ok" and result.version is None
    p = result.points[0]
    assert (p.requests, p.errors, p.concurrency) == (4, 0, 2)
    assert p.server.error is None and p.server.samples >= 2
    assert p.server.prefix_cache_hit_rate == pytest.approx(0.5)


def test_a_command_that_cannot_be_built_is_a_row(tmp_path):
    spec = {"label": "no-image", "engine": "vllm-cpu", "launcher": {"kind": "docker"}}
    cfg = parse_config({"name": "faults", "model": {"path": "tiny-llama"}, "engines": [spec]})
    (result,) = asyncio.run(run_benchmarks(cfg, tmp_path))
    assert result.status == "failed" and "has no default image" in result.reason


class _Cut(BaseException):
    """The run stopped from outside (a device call's time limit), as a signal stops ``playbook run``."""


def test_a_run_cut_after_the_engine_started_keeps_what_the_start_found(fake_engine, tmp_path):
    """Seen on the H100 (2026-12-06): runs cut mid-search lost each engine's start record (cold start, version),
    so the re-rendered rows had no cold start. The start's record is saved as it is found; the whole result
    replaces it at the end."""
    cfg = config([fake("cut", "ok")])

    def stop_once_healthy(text: str) -> None:
        if text.startswith("cut: healthy after"):
            raise _Cut

    with pytest.raises(_Cut):
        asyncio.run(run_benchmarks(cfg, tmp_path, progress=stop_once_healthy))
    (stored,) = load_engine_results(tmp_path)
    assert (stored.status, stored.reason) == ("partial", CUT) and stored.cold_start_s is not None
    assert stored.command and stored.points == []
    rebuilt = rebuild_from_points(EngineSession(cfg.engines[0], cfg, tmp_path))
    assert rebuilt.status == "partial" and rebuilt.cold_start_s == stored.cold_start_s
    # a run that goes on replaces it with the whole result
    (whole,) = asyncio.run(run_benchmarks(cfg, tmp_path))
    assert whole.status == "ok" and load_engine_results(tmp_path)[0].status == "ok"
