"""The decision evidence end to end on a fake engine with a known capacity: search, trials, representative.

The fake engine (``tests/fakes/fake_openai_server.py``, ``FAKE_SERVICE_SLOTS``) serves at most 2 requests
at once for 4 tokens × 50 ms each: its capacity is 2 / 0.2 s = 10 requests/s. guidellm drives it for real.
"""

import asyncio
import sys
from collections import Counter

import pytest

from helpers.benchmark.probe import sustained_floor
from helpers.benchmark.run import run_benchmarks
from helpers.benchmark.sla import representative
from helpers.core.config import parse_config
from helpers.engines import ENGINES
from helpers.engines.vllm import VllmAdapter
from helpers.run.progress import PROGRESS_FILE, Tracker, read_events
from helpers.run.records import load_engine_results


class FakeVllmAdapter(VllmAdapter):
    name = "fake-vllm-evidence"
    module = "fake_openai_server"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


def config(tmp_path):
    return parse_config(
        {
            "name": "evidence",
            "model": {"path": "tiny-llama"},
            "engines": [
                {
                    "label": "slots-2",
                    "engine": FakeVllmAdapter.name,
                    "launcher": {
                        "kind": "python",
                        "python": sys.executable,
                        "pythonpath": ["tests/fakes"],
                        "env": {"FAKE_SERVICE_SLOTS": "2", "FAKE_TOKEN_DELAY_S": "0.05"},
                    },
                    "startup_timeout_s": 30,
                }
            ],
            "workload": {"input_tokens": 16, "output_tokens": 4, "concurrency": [1], "requests_per_point": 6},
            "sla": {"ttft_p95_ms": 300},
            "evidence": {
                "search": {"start": 4, "growth": 2, "tolerance": 0.3, "max_probes": 5, "probe_seconds": 3},
                "trials": {"min_trials": 3, "max_trials": 3, "warmup_requests": 2},
            },
        }
    )


@pytest.fixture
def fake_engine():
    with ENGINES.temporarily(FakeVllmAdapter.name, FakeVllmAdapter()):
        yield


def test_capacity_trials_and_the_representative(fake_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    cfg = config(tmp_path)
    run_dir = tmp_path / "run"
    (result,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert result.status == "ok", result.reason
    cap = result.capacity
    assert cap is not None and cap.capacity is not None and cap.bounded, cap.note
    # the analytic edge is 10 req/s; Poisson arrivals queue a little before it, and a served-rate shortfall
    # counts only beyond the noise of the probe's count (benchmark.probe.sustained_floor)
    at_cap = next(p for p in cap.probes if p["load"] == cap.capacity)
    assert 4 <= cap.capacity <= 1.05 * 10 / sustained_floor(cfg.evidence.search.min_sustained_ratio, at_cap["requests"])
    assert cap.bracket_high is not None and cap.bracket_high > cap.capacity
    trials = [p for p in result.points if p.phase == "trial"]
    assert cap.trial_load is not None and cap.trial_load <= cap.capacity
    assert len(trials) == 3 and all(p.offered_rate == cap.trial_load for p in trials)
    assert "prefix-cache reset failed" in cap.trials_note  # the fake has no reset route: said, not hidden
    assert set(result.gpu_seconds) >= {"cold start", "sweep", "search", "trials"}
    rep = representative(result, cfg)
    assert rep.source == "capacity" and rep.requests >= 3 * 12
    # the trials confirm the capacity, or the load stepped down until they did (at most twice)
    assert rep.meets_sla or cap.trials_note.count("stepped down") == 2, cap.trials_note
    assert rep.request_rate.n == 3 and rep.request_rate.low <= rep.request_rate.mean <= rep.request_rate.high
    assert "± " in rep.output_tok_s.text()

    # the progress: 5 probes and 3 trials planned; the units the search and trials did not need left the total
    events, offset = read_events(run_dir / PROGRESS_FILE)
    progress = Tracker()
    for ev in events:
        progress.apply(ev)
    probes = [p for p in result.points if p.phase == "search"]
    done = Counter(progress.units[k].kind for k, s in progress.state.items() if s == "done")
    assert done["probe"] + done["trial"] == len(probes) + len(trials)  # every probe and trial was a unit
    assert done["cold"] == 1 and done["sweep"] == 1
    assert progress.finished == progress.total == sum(done.values()) and progress.ended
    assert progress.eta_s(events[-1]["t"]) == 0

    # a second run in the same folder measures nothing again
    stored = {p.name: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")}
    (again,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert again.capacity == cap
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")} == stored
    assert load_engine_results(run_dir)[0].capacity == cap
    resumed = Tracker()
    for ev in read_events(run_dir / PROGRESS_FILE, offset)[0]:
        resumed.apply(ev)
    assert set(resumed.state.values()) <= {"kept", "dropped"} and resumed.finished == resumed.total > 0


def test_the_search_starts_at_the_busiest_grid_point_within_the_sla_and_probes_span_latencies(fake_engine, tmp_path):
    """Start: the grid point with the highest rate that met the SLA; probes: at least three latencies long."""
    from types import SimpleNamespace

    from helpers.benchmark.evidence import latency_estimate, probe_requests, start_load
    from helpers.run.records import EngineResult, Point

    cfg = config(tmp_path)
    cfg.evidence.search.start = None
    run = SimpleNamespace(cfg=cfg)

    def pt(c, req_s, ttft, e2e):
        return Point(label="x", engine="vllm", concurrency=c, phase="sweep", requests=10, errors=0, duration_s=1,
                     output_tok_s=1, total_tok_s=1, req_s=req_s, ttft_ms_p95=ttft, e2e_ms_p50=e2e)  # fmt: skip

    limit = cfg.sla.ttft_p95_ms
    result = EngineResult(label="x", engine="vllm", points=[pt(1, 0.8, 10, 1300), pt(8, 5.0, limit / 2, 1800),
                                                            pt(32, 9.0, limit * 3, 6000)])  # fmt: skip
    assert start_load(result, run) == 5.0  # c=32 missed the SLA: not the start
    result.points = [pt(8, 5.0, limit * 2, 1800)]
    assert start_load(result, run) == 5.0  # none within: the lowest grid point
    s = cfg.evidence.search
    lat = latency_estimate([pt(1, 0.8, 10, 1300), pt(8, 5.0, 10, 20_000)])
    assert lat == 20.0
    assert probe_requests(run, 10.0, lat) == min(s.max_requests, max(s.min_requests, 600))
    assert probe_requests(run, 10.0, None) == min(s.max_requests, max(s.min_requests, int(10 * s.probe_seconds)))


def test_on_the_concurrency_axis_the_search_starts_where_the_grid_crosses_the_sla(fake_engine, tmp_path):
    """A grid level within the SLA and the next one past it: start on the straight line between them."""
    from types import SimpleNamespace

    from helpers.benchmark.evidence import start_load
    from helpers.run.records import EngineResult, Point

    cfg = config(tmp_path)
    cfg.evidence.search.start, cfg.evidence.search.axis = None, "concurrency"
    cfg.sla.ttft_p95_ms = 2000
    run = SimpleNamespace(cfg=cfg)

    def pt(c, ttft, errors=0):
        return Point(label="x", engine="vllm", concurrency=c, phase="sweep", requests=10, errors=errors, duration_s=1,
                     output_tok_s=1, total_tok_s=1, req_s=1, ttft_ms_p95=ttft)  # fmt: skip

    # measured on the CPU default (prefix cache off, 2026-12-01): 900 ms at 1 stream, 3,711 ms at 4
    assert start_load(EngineResult(label="x", engine="vllm", points=[pt(1, 900), pt(4, 3711)]), run) == 2.0
    wide = EngineResult(label="x", engine="vllm", points=[pt(1, 900), pt(16, 2100)])
    assert start_load(wide, run) == 14.0  # 14.75, rounded down
    # past the SLA by errors, not TTFT: no line to read, the busiest level within
    assert start_load(EngineResult(label="x", engine="vllm", points=[pt(1, 900), pt(4, 1000, errors=5)]), run) == 1.0
    # nothing past the SLA: the busiest level within; nothing within: the lowest level
    assert start_load(EngineResult(label="x", engine="vllm", points=[pt(1, 900), pt(4, 1268)]), run) == 4.0
    assert start_load(EngineResult(label="x", engine="vllm", points=[pt(2, 2500), pt(4, 3000)]), run) == 2.0


def test_without_the_search_the_trials_run_at_a_fixed_number_of_streams(fake_engine, tmp_path, monkeypatch):
    """Search disabled: closed-loop trials at ``fixed_concurrency`` stand for the configuration, as a load."""
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    cfg = config(tmp_path)
    cfg.evidence.search.enabled, cfg.evidence.search.min_requests = False, 8
    cfg.evidence.trials.fixed_concurrency = 2
    run_dir = tmp_path / "run"
    (result,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert result.status == "ok", result.reason
    cap, trials = result.capacity, [p for p in result.points if p.phase == "trial"]
    assert (cap.axis, cap.searched, cap.capacity, cap.trial_load, cap.probes) == ("concurrency", False, None, 2.0, [])
    assert not any(p.phase == "search" for p in result.points)  # no probe: nothing was searched
    assert len(trials) == 3 and {p.concurrency for p in trials} == {2} and [p.trial for p in trials] == [0, 1, 2]
    assert all(p.offered_rate is None and p.warmup_requests == 2 for p in trials)  # closed loop, warmed up
    assert cap.trials_note.startswith("3 trial(s) at 2 streams")
    rep = representative(result, cfg)
    assert (rep.source, rep.concurrency, rep.requests) == ("fixed", 2, sum(p.requests for p in trials))
    assert rep.output_tok_s.n == 3 and rep.output_tok_s.low <= rep.output_tok_s.mean <= rep.output_tok_s.high

    # a run cut after its trials (no engine row saved) keeps them: nothing is measured again
    stored = {p.name: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")}
    for row in (run_dir / "engines").glob("*.json"):
        row.unlink()
    (again,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert again.capacity.trial_load == 2.0 and representative(again, cfg).key == rep.key
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")} == stored
