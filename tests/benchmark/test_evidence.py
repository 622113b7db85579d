"""The decision evidence end to end on fake engines with a known capacity: search, edge rounds, representative.

The fake engine (``tests/fakes/fake_openai_server.py``, ``FAKE_SERVICE_SLOTS``) serves at most k requests
at once for 4 tokens × 50 ms each: its capacity is k / 0.2 s requests/s (10 for k=2, 15 for k=3). guidellm
drives it for real.
"""

import asyncio
import json
import math
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers.benchmark.capacity_compare import compare_capacities
from helpers.benchmark.judged import measurement_of
from helpers.benchmark.run import run_benchmarks
from helpers.benchmark.sla import capacity_side, representative
from helpers.core.config import parse_config
from helpers.engines import ENGINES
from helpers.engines.vllm import VllmAdapter
from helpers.run.progress import PROGRESS_FILE, Tracker, read_events


class FakeVllmAdapter(VllmAdapter):
    name = "fake-vllm-evidence"
    module = "fake_openai_server"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


def engine(label: str, slots: int, capture: Path | None = None) -> dict:
    """A fake engine of ``slots`` requests at once, 4 tokens × 50 ms each: capacity slots / 0.2 s req/s."""
    env = {"FAKE_SERVICE_SLOTS": str(slots), "FAKE_TOKEN_DELAY_S": "0.05"}
    if capture is not None:
        env["FAKE_CAPTURE_FILE"] = str(capture)
    return {
        "label": label,
        "engine": FakeVllmAdapter.name,
        "launcher": {"kind": "python", "python": sys.executable, "pythonpath": ["tests/fakes"], "env": env},
        "startup_timeout_s": 30,
    }


def config(tmp_path, engines: list[dict] | None = None):
    return parse_config(
        {
            "name": "evidence",
            "model": {"path": "tiny-llama"},
            "engines": engines or [engine("slots-2", 2)],
            "workload": {"input_tokens": 16, "output_tokens": 4, "concurrency": [1], "requests_per_point": 6},
            "sla": {"ttft_p95_ms": 2000},  # the served share binds: the engine's own edge, sharp against noise
            "evidence": {
                "search": {
                    "start": 4,
                    "growth": 2,
                    "tolerance": 0.2,
                    "max_probes": 5,
                    "probe_seconds": 4,
                    "edge_rounds_min": 2,
                    "edge_rounds_max": 2,
                    "edge_step": 0.1,
                },
                "trials": {"min_trials": 3, "max_trials": 3, "warmup_requests": 2},
            },
        }  # fmt: skip
    )


@pytest.fixture
def fake_engine():
    with ENGINES.temporarily(FakeVllmAdapter.name, FakeVllmAdapter()):
        yield


def _sent(capture: Path) -> list[dict]:
    return [json.loads(line) for line in capture.read_text().splitlines() if line.strip()]


def test_two_engines_on_the_same_streams_get_a_capacity_an_interval_and_a_paired_verdict(
    fake_engine, tmp_path, monkeypatch
):
    """Two fake engines, 10 and 15 req/s: every probe on a named stream, the same prompts and arrivals for both."""
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    caps = {"slots-2": tmp_path / "two.jsonl", "slots-3": tmp_path / "three.jsonl"}
    cfg = config(tmp_path, [engine("slots-2", 2, caps["slots-2"]), engine("slots-3", 3, caps["slots-3"])])
    run_dir = tmp_path / "run"
    two, three = asyncio.run(run_benchmarks(cfg, run_dir))
    for result, mu in ((two, 10.0), (three, 15.0)):
        assert result.status == "ok", result.reason
        est = result.capacity.estimate
        assert est is not None and est.status == "estimated", result.capacity.note
        # Poisson arrivals queue a little before mu; the served share counts only below its floor (5% less the noise)
        assert 0.4 * mu <= est.value <= 1.2 * mu and est.low is not None and est.low <= est.value <= est.high
        streams = [p["stream"] for p in result.capacity.probes]
        assert streams[0] == "p0" and {"e0-lo", "e0-hi", "e1-lo", "e1-hi"} <= set(streams)
        assert all(p.phase == "search" and p.probe["stream"] for p in result.points if p.phase in ("search", "trial"))
        for p in (p for p in result.points if p.phase == "search"):  # every request's times kept, to judge again
            assert p.request_times and len(p.request_times) == p.requests + p.errors + p.incomplete
            again, live = measurement_of(p, "rate").served_ratio, p.probe["served_ratio"]
            assert (again is None) == (live is None) and (live is None or again == pytest.approx(live, abs=0.02))
        rep = representative(result, cfg)
        assert rep.source == "capacity" and rep.capacity.mean == est.value and rep.request_rate.mean == est.value
        assert rep.output_tok_s.mean == pytest.approx(est.value * 4, rel=0.01)  # the rate times 4 tokens a request
        assert rep.output_tok_s.low == pytest.approx(est.low * 4, rel=0.01)
    assert set(two.gpu_seconds) >= {"cold start", "sweep", "search"}
    # the same stream is the same traffic: prompts in the same order, arrival gaps in proportion to the loads
    loads = {r.label: next(p["load"] for p in r.capacity.probes if p["stream"] == "p0") for r in (two, three)}
    assert loads["slots-2"] == loads["slots-3"] == 4  # both start at 4 req/s on p0
    n = {
        r.label: next(p.requests + p.errors for p in r.points if p.probe and p.probe["stream"] == "p0")
        for r in (two, three)
    }
    # a probe spans at least four of the engine's own request latencies (read from its grid), so the two counts
    # may differ by a request or two; the requests both were sent are the same, in the same order
    assert min(n.values()) >= 12 and max(n.values()) - min(n.values()) <= max(1, 0.1 * min(n.values())), n
    common = min(n.values())
    p0 = {
        label: _sent(path)[7 : 7 + common] for label, path in caps.items()
    }  # after the first request and the sweep's 6
    assert [r["prompt"] for r in p0["slots-2"]] == [r["prompt"] for r in p0["slots-3"]]
    gaps = {k: [b["t"] - a["t"] for a, b in zip(v, v[1:], strict=False)] for k, v in p0.items()}
    # the same schedule: gap by gap within 50 ms (the median, so that one stall of a loaded machine, which
    # lengthens one gap and shortens the next as the schedule catches up, does not hide it), where two
    # independent Poisson draws at 4 req/s differ by 0.25 s a gap on average (median about 0.17 s)
    diffs = sorted(abs(a - b) for a, b in zip(gaps["slots-2"], gaps["slots-3"], strict=True))
    assert diffs[len(diffs) // 2] < 0.05 and sum(x < 0.1 for x in diffs) >= 0.75 * len(diffs), diffs
    d = compare_capacities(capacity_side(two, cfg, 1), capacity_side(three, cfg, 1))
    assert d.paired and d.pairs >= 4 and d.verdict == "measured" and d.ratio < 1, d.text

    # the progress: every probe was a unit; the units the search did not need left the total
    events, offset = read_events(run_dir / PROGRESS_FILE)
    progress = Tracker()
    for ev in events:
        progress.apply(ev)
    # a probe measured again (interference on a busy machine, or too short to read) is one unit: its first
    # measurement is kept aside as superseded (on 2026-12-05, beside other loads, 5 of 23 points were)
    probes = [p for r in (two, three) for p in r.points if p.phase == "search" and not p.probe["superseded"]]
    done = Counter(progress.units[k].kind for k, s in progress.state.items() if s == "done")
    assert done["probe"] == len(probes) and done["cold"] == 2 and done["sweep"] == 2
    assert progress.finished == progress.total == sum(done.values()) and progress.ended

    # a second run in the same folder measures nothing again
    stored = {p.name: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")}
    again = asyncio.run(run_benchmarks(cfg, run_dir))
    assert [r.capacity for r in again] == [two.capacity, three.capacity]
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")} == stored
    resumed = Tracker()
    for ev in read_events(run_dir / PROGRESS_FILE, offset)[0]:
        resumed.apply(ev)
    assert set(resumed.state.values()) <= {"kept", "dropped"} and resumed.finished == resumed.total > 0


def test_the_search_starts_at_the_busiest_grid_point_within_the_sla_and_probes_span_latencies(fake_engine, tmp_path):
    """Start: the grid point with the highest rate that met the SLA; probes: at least four latencies long."""
    from types import SimpleNamespace

    from helpers.benchmark.evidence import start_load
    from helpers.benchmark.probe_size import latency_estimate, probe_requests
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
    # at least LATENCY_SPANS (4) latencies of arrivals: 10 req/s × 4 × 20 s
    assert probe_requests(run, 10.0, lat) == min(s.max_requests, max(s.min_requests, 800))
    assert probe_requests(run, 10.0, None) == min(s.max_requests, max(s.min_requests, int(10 * s.probe_seconds)))
    # a cap that holds fewer latencies than the served share needs is said, naming the setting
    said: list[str] = []
    capped = SimpleNamespace(cfg=cfg, spec=SimpleNamespace(label="x"), say=said.append)
    s.max_requests = 300
    assert probe_requests(capped, 10.0, lat) == 300
    assert said and "evidence.search.max_requests (300) holds 30.0 s of arrivals" in said[0]
    assert "1.5 request latencies of 20.0 s" in said[0]


def test_a_probe_above_its_reference_load_is_sized_for_a_latency_grown_with_the_load():
    from helpers.benchmark.capacity import Probe
    from helpers.benchmark.probe_size import latency_estimate
    from helpers.run.records import Point

    def pt(phase, req_s, e2e, **kw):
        return Point(label="x", engine="sglang", concurrency=100 if phase == "sweep" else 0, phase=phase, requests=10,
                     duration_s=1, output_tok_s=1, total_tok_s=1, req_s=req_s, e2e_ms_p50=e2e, **kw)  # fmt: skip

    # SGLang on an H100 (h100-20261205-chat-8b-late): the grid's c=100 served 26.5 req/s in 3.85 s a request;
    # the first probe, at 33.89 req/s, took 6.2 s a request
    grid = pt("sweep", 26.5, 3850)
    assert latency_estimate([grid]) == 3.85  # the reference's own latency without a load
    assert latency_estimate([grid], 33.89) == pytest.approx(3.85 * 33.89 / 26.5)  # 4.9 s: 4 latencies read 6.2-s ones
    assert latency_estimate([grid], 20.0) == 3.85  # below the reference: not shrunk
    passed = Probe(load=36.21, ttft_p95_ms=114.0, requests=538, meets_sla=True, sustained=True, why="pass")
    probe = pt("search", 36.2, 5500, offered_rate=36.21, probe=passed.model_dump(mode="json"))
    assert latency_estimate([grid, probe], 40.47) == pytest.approx(5.5 * 40.47 / 36.21)  # from the last passing probe


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


def test_a_probe_too_short_for_its_own_latency_is_measured_again_longer_once():
    """Sized from the last passing load's latency, a probe whose own requests took longer could not be read."""
    from types import SimpleNamespace

    from helpers.benchmark.edge_search import Ask
    from helpers.benchmark.evidence import _longer_for_itself
    from helpers.benchmark.probe import Measurement

    cfg = parse_config({"name": "x", "model": {"path": "tiny-llama"}, "engines": [engine("a", 2)],
                        "evidence": {"search": {"max_requests": 1000}}})  # fmt: skip
    session = SimpleNamespace(cfg=cfg, spec=SimpleNamespace(label="a"), say=lambda _: None)
    ask = Ask(35.06, "e0-lo", "edge")

    def m(**kw) -> Measurement:
        base = {"load": 35.06, "axis": "rate", "ttft_p95_ms": 700.0, "requests": 541, "offered_rate": 35.0,
                "latency_p50_s": 6.7, "send_span_s": 15.4, "steady_window_s": 8.0}  # fmt: skip
        return Measurement(**{**base, **kw})

    # SGLang on an H100 (2026-12-05): 541 requests, 15.4 s of arrivals, 6.7-s requests: four of them is 26.8 s
    assert _longer_for_itself(session, ask, m()) == math.ceil(35.06 * 4 * 6.7)
    # read at that length already, or the cap holds no more: an unreadable probe fell behind, no second try
    assert _longer_for_itself(session, ask, m(requests=1000, latency_p50_s=12.8, send_span_s=26.7)) is None
    assert _longer_for_itself(session, ask, m(send_span_s=27.0)) is None
    # a served share was read: nothing to repeat
    assert _longer_for_itself(session, ask, m(served_ratio=0.9, latency_p50_s=5.0)) is None


def _one_edge_round(tmp_path: Path):
    """The config of ``one_round``: one edge round, an interval target never reached, a busy machine not re-measured."""
    cfg = config(tmp_path)
    cfg.evidence.search.edge_rounds_min = cfg.evidence.search.edge_rounds_max = 1  # one round is enough here
    cfg.evidence.search.target_rel_ci = 0.001  # never reached: the rounds allowed decide
    cfg.evidence.max_other_cpu_cores = 64.0  # what is counted is the retry: no re-measure for a busy machine
    return cfg


@pytest.fixture(scope="module")
def one_round(tmp_path_factory):
    """A first attempt two tests resume, each in a copy of its run folder: one edge round, the first probe retried.

    The first probe reads as too short (forced): measured again with 30 requests. Returns the result and
    the run folder.
    """
    import helpers.benchmark.evidence as evidence

    asked: list[str] = []

    def once(session, ask, m):  # the first probe reads as too short: 30 requests the second time
        asked.append(ask.stream)
        return 30 if len(asked) == 1 else None

    base = tmp_path_factory.mktemp("one-round")
    with pytest.MonkeyPatch.context() as mp, ENGINES.temporarily(FakeVllmAdapter.name, FakeVllmAdapter()):
        mp.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
        mp.setattr(evidence, "_longer_for_itself", once)
        (first,) = asyncio.run(run_benchmarks(_one_edge_round(base), base / "run"))
    return first, base / "run"


def _resumable_copy(one_round, tmp_path: Path):
    """``one_round``'s result, its config, and a copy of its run folder to resume (each test its own)."""
    first, source = one_round
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    return first, _one_edge_round(tmp_path), run_dir


def test_a_too_short_probe_is_measured_again_and_a_resumed_search_keeps_its_probes_as_points(
    one_round, fake_engine, tmp_path, monkeypatch
):
    """The retry of a too-short probe (forced on the first), then a resume after the coarse probes.

    Resumed, the probes already measured are the result's points again, and the next ones are sized from
    them (the latency of the last that passed), as they were the first time.
    """
    import helpers.benchmark.evidence as evidence
    from helpers.benchmark.probe_size import latency_estimate

    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    monkeypatch.setattr(evidence, "_longer_for_itself", lambda *_: None)  # the forced retry was the first probe's
    first, cfg, run_dir = _resumable_copy(one_round, tmp_path)
    assert first.status == "ok", first.reason
    p0 = [p for p in first.points if p.phase == "search" and p.probe["stream"] == "p0"]
    assert len(p0) == 2 and p0[0].probe["superseded"] and not p0[1].probe["superseded"]
    assert p0[1].requests + p0[1].errors + p0[1].incomplete == 30
    assert (run_dir / "points" / "slots-2" / "search-p0-short-c0000.json").is_file()
    assert [p["superseded"] for p in first.capacity.probes if p["stream"] == "p0"] == [False, True]

    def n(p) -> int:
        return p.requests + p.errors + p.incomplete

    before = {p.probe["stream"]: p for p in first.points if p.phase == "search" and not p.probe["superseded"]}
    order = [p["stream"] for p in first.capacity.probes if not p["superseded"]]
    coarse = set(order[: next(i for i, s in enumerate(order) if s.startswith("e"))])  # those before the edge rounds
    # stopped after its coarse probes: the engine's record and the edge rounds' points are not there
    (run_dir / "engines" / "slots-2.json").unlink()
    for f in (run_dir / "points" / "slots-2").glob("search-e*.json"):
        f.unlink()
    (again,) = asyncio.run(run_benchmarks(cfg, run_dir))
    after = {p.probe["stream"]: p for p in again.points if p.phase == "search" and not p.probe["superseded"]}
    # the edge probes are measured again, with fresh noise: one that contradicts a coarse verdict sends the search
    # on to a further coarse probe (p4) in one attempt and not in the other; those before the edge are kept
    assert coarse < set(after) and {"e0-lo", "e0-hi"} <= set(after)
    assert all(after[s].model_dump() == before[s].model_dump() for s in coarse)  # kept, not measured again
    assert sum(p.probe["superseded"] for p in again.points if p.phase == "search") == 1  # the short one, kept aside
    # the first edge probe is sized from the same latency as the first time: the last coarse probe that passed
    assert latency_estimate([p for p in again.points if p.phase != "search" or p.probe["stream"] in coarse]) == (
        latency_estimate([p for p in first.points if p.phase != "search" or p.probe["stream"] in coarse])
    )
    assert n(after["e0-lo"]) == n(before["e0-lo"])
    # the engine time counts both attempts, each with its cold start (kept in logs/engine-seconds/ as it adds up)
    assert again.gpu_seconds["cold start"] > first.gpu_seconds["cold start"] > 0
    assert again.gpu_seconds["search"] > first.gpu_seconds["search"]


def test_raising_max_probes_on_a_resume_carries_a_search_that_found_no_failing_load_on(
    fake_engine, tmp_path, monkeypatch
):
    """The report's advice for a lower bound ("raise evidence.search.max_probes") works on the same run id.

    A search whose two coarse probes both passed is a lower bound. Run again with the same config, it is kept
    as it is. Run with more probes allowed and another start (step 4's prediction moved), it resumes from
    where it started: its two probes are kept, not measured again, and the next ones reach the edge.
    """
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    cfg = config(tmp_path)
    # 2 and 4 req/s, both well within the engine's 10: a lower bound (a probe has 20 requests at least, the
    # fewest whose served share reads: 10 s at 2 req/s, 20 s at 1)
    cfg.evidence.search.start, cfg.evidence.search.max_probes = 2.0, 2
    cfg.evidence.search.edge_rounds_min = cfg.evidence.search.edge_rounds_max = 1
    cfg.evidence.max_other_cpu_cores = 64.0
    run_dir = tmp_path / "run"
    (first,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert first.status == "ok" and first.capacity.estimate.status == "at_least", first.capacity.note
    assert [p["stream"] for p in first.capacity.probes] == ["p0", "p1"]
    (same,) = asyncio.run(run_benchmarks(cfg, run_dir))  # nothing more allowed: the stored result
    assert same.capacity.model_dump() == first.capacity.model_dump()
    cfg.evidence.search.start, cfg.evidence.search.max_probes = 3.0, 8
    (more,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert more.status == "ok", more.reason
    streams = [p["stream"] for p in more.capacity.probes if not p["superseded"]]
    assert streams[:2] == ["p0", "p1"] and len({s for s in streams if s.startswith("p")}) > 2
    kept = {p.probe["stream"]: p.model_dump() for p in first.points if p.phase == "search"}
    again = {p.probe["stream"]: p.model_dump() for p in more.points if p.phase == "search"}
    assert again["p0"] == kept["p0"] and again["p1"] == kept["p1"]  # kept, not measured again
    assert more.capacity.estimate.status != "at_least", more.capacity.note  # it found a failing load
    # the config now starts elsewhere (3): the earlier start's reason is not claimed for it
    assert "started from 2 (where the earlier attempt in this run folder started)" in more.capacity.note


def test_a_resume_carries_on_the_edge_rounds_a_search_did_not_finish(one_round, fake_engine, tmp_path, monkeypatch):
    """A search whose edge rounds stopped short (a run cut during them, re-rendered since) goes on when resumed.

    One edge round, then the interval is wider than asked: with ``edge_rounds_max`` raised to 2 the same run id
    runs the second round, keeping every probe of the first attempt. Once the rounds allowed are done, a resume
    keeps the stored result as it is.
    """
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    first, cfg, run_dir = _resumable_copy(one_round, tmp_path)  # target_rel_ci 0.001: the rounds allowed decide
    assert first.status == "ok" and first.capacity.estimate.status == "estimated", first.capacity.note
    assert not first.capacity.estimate.conclusive
    streams = [p["stream"] for p in first.capacity.probes if not p["superseded"]]
    assert "e0-lo" in streams and "e1-lo" not in streams
    cfg.evidence.search.edge_rounds_max = 2
    (more,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert more.status == "ok", more.reason
    again = [p["stream"] for p in more.capacity.probes if not p["superseded"]]
    assert again[: len(streams)] == streams and {"e1-lo", "e1-hi"} <= set(again)
    # the same config starts where the earlier attempt did, for the same reason: the note says both
    assert "started from 4 (configured: where the earlier attempt in this run folder started)" in more.capacity.note
    kept = {p.probe["stream"]: p.model_dump() for p in first.points if p.phase == "search"}
    now = {p.probe["stream"]: p.model_dump() for p in more.points if p.phase == "search"}
    assert all(now[s] == kept[s] for s in kept)  # the first attempt's probes, kept and not measured again
    (same,) = asyncio.run(run_benchmarks(cfg, run_dir))  # both rounds done: the stored result
    assert same.capacity.model_dump() == more.capacity.model_dump()
