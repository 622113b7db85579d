"""The one selector: which measurement represents an engine configuration, and the one SLA definition."""

import pytest

from helpers.benchmark.plots import tuning_candidates
from helpers.benchmark.sla import meets_sla, representative
from helpers.core.config import SLA, parse_config
from helpers.run.records import CapacitySummary, EngineResult, Point


def point(c: int, phase: str, seqs: int, tok_s: float, ttft: float, errors: int = 0, itl: float | None = None) -> Point:
    return Point(
        label="x", engine="vllm", concurrency=c, phase=phase, knobs={"max_num_seqs": seqs}, requests=100,
        errors=errors, duration_s=1.0, output_tok_s=tok_s, total_tok_s=tok_s * 2, req_s=1.0, ttft_ms_p95=ttft,
        itl_ms_p95=itl,
    )  # fmt: skip


def cfg(**sla):
    return parse_config(
        {
            "name": "t",
            "model": {"path": "tiny-llama"},
            "engines": [
                {"label": "x", "engine": "endpoint", "launcher": {"kind": "endpoint", "url": "http://127.0.0.1:1"}}
            ],
            "sla": sla,
        }
    )


def test_meets_sla_is_ttft_itl_and_error_share():
    sla = SLA(ttft_p95_ms=1000, itl_p95_ms=50, max_error_share=0.01)
    assert meets_sla(point(1, "sweep", 1, 10, 900), sla)
    assert not meets_sla(point(1, "sweep", 1, 10, 1100), sla)
    assert not meets_sla(point(1, "sweep", 1, 10, 900, itl=60), sla)
    assert meets_sla(point(1, "sweep", 1, 10, 900, errors=1), sla)  # 1 of 101 failed: within 1%
    assert not meets_sla(point(1, "sweep", 1, 10, 900, errors=2), sla)


def _grid() -> list[Point]:
    return [
        point(1, "sweep", 16, 100.0, 100),
        point(16, "sweep", 16, 900.0, 900),
        point(16, "tune", 8, 1200.0, 800),
        point(64, "sweep", 16, 2000.0, 5000),
    ]


def _trial(i: int, c: int, tok_s: float, ttft: float, requests: int) -> Point:
    return point(c, "trial", 16, tok_s, ttft).model_copy(update={"trial": i, "requests": requests})


def test_grid_points_alone_never_represent_whatever_their_throughput():
    r = EngineResult(label="x", engine="vllm", points=_grid())  # three of four meet the SLA, one at 1,200 tok/s
    rep = representative(r, cfg(ttft_p95_ms=1000))
    assert rep.source == "none" and not rep.meets_sla and rep.output_tok_s is None
    assert rep.basis.startswith("no repeated trials")


def test_fixed_load_trials_represent_with_their_mean_and_interval():
    trials = [_trial(0, 16, 980.0, 700, 90), _trial(1, 16, 1000.0, 760, 100), _trial(2, 16, 1020.0, 820, 110)]
    cap = CapacitySummary(axis="concurrency", searched=False, trial_load=16.0, note="search disabled: fixed 16")
    r = EngineResult(label="x", engine="vllm", capacity=cap, points=[*_grid(), *trials])
    rep = representative(r, cfg(ttft_p95_ms=1000))
    assert (rep.source, rep.phase, rep.concurrency, rep.meets_sla) == ("fixed", "trial", 16, True)
    out = rep.output_tok_s
    assert out.mean == pytest.approx(1000.0) and out.n == 3 and out.low < 980.0 and out.high > 1020.0
    assert rep.ttft_ms_p95.mean == pytest.approx(760.0) and rep.requests == 300  # all the trials' requests
    assert "3 trial(s) at a fixed load" in rep.basis and rep.key == "x@fixed:c16"
    # the same trials averaging above the limit stand as missing it (a fixed load is not stepped down)
    assert not representative(r, cfg(ttft_p95_ms=750)).meets_sla


def test_a_search_that_found_no_capacity_leaves_nothing_to_represent():
    cap = CapacitySummary(axis="rate", searched=True, capacity=None, note="no load met the SLA")
    r = EngineResult(label="x", engine="vllm", capacity=cap, points=_grid())
    rep = representative(r, cfg(ttft_p95_ms=1000))
    assert rep.source == "none" and not rep.meets_sla and "no load met the SLA" in rep.basis


def test_nothing_measured():
    rep = representative(EngineResult(label="x", engine="vllm", status="failed"), cfg())
    assert rep.source == "none" and not rep.meets_sla


def test_tuning_candidates_are_the_tune_points_and_the_target_sweep_point():
    base = point(16, "sweep", 16, 900.0, 500)
    r = EngineResult(
        label="x", engine="vllm", points=[point(1, "sweep", 16, 100.0, 10), base, point(16, "tune", 4, 500.0, 10)]
    )
    assert tuning_candidates(r, 16) == [base, r.points[2]]
