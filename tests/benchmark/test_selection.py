"""The one selector: which measurement represents an engine configuration, and the one SLA definition."""

from helpers.benchmark.plots import tuning_candidates
from helpers.benchmark.sla import meets_sla, representative
from helpers.core.config import SLA, parse_config
from helpers.run.records import EngineResult, Point


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


def test_the_highest_throughput_sla_point_represents_whatever_its_phase():
    tuned = point(16, "tune", 8, 1200.0, 800)
    pts = [
        point(1, "sweep", 16, 100.0, 100),
        point(16, "sweep", 16, 900.0, 900),
        tuned,
        point(64, "sweep", 16, 2000.0, 5000),
    ]
    r = EngineResult(label="x", engine="vllm", points=pts)
    rep = representative(r, cfg(ttft_p95_ms=1000))
    assert rep.source == "grid" and rep.meets_sla
    assert (rep.phase, rep.concurrency, rep.knobs, rep.output_tok_s.mean) == ("tune", 16, {"max_num_seqs": 8}, 1200.0)
    assert "3 of 4" in rep.basis


def test_no_sla_point_gives_the_closest_flagged():
    r = EngineResult(
        label="x", engine="vllm", points=[point(16, "sweep", 16, 900.0, 3000), point(4, "sweep", 16, 300.0, 2500)]
    )
    rep = representative(r, cfg(ttft_p95_ms=1000))
    assert not rep.meets_sla and rep.concurrency == 4 and "no grid point meets" in rep.basis


def test_nothing_measured():
    rep = representative(EngineResult(label="x", engine="vllm", status="failed"), cfg())
    assert rep.source == "none" and not rep.meets_sla


def test_tuning_candidates_are_the_tune_points_and_the_target_sweep_point():
    base = point(16, "sweep", 16, 900.0, 500)
    r = EngineResult(
        label="x", engine="vllm", points=[point(1, "sweep", 16, 100.0, 10), base, point(16, "tune", 4, 500.0, 10)]
    )
    assert tuning_candidates(r, 16) == [base, r.points[2]]
