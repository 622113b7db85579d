"""Where the trials start: one step below a capacity whose probe passed close to the TTFT limit; and, with
the search disabled, at which fixed load they run and how their record is rebuilt from stored trials."""

from types import SimpleNamespace

from helpers.benchmark.evidence import fixed_concurrency, fixed_load_summary, load_axis
from helpers.benchmark.sla import representative
from helpers.benchmark.trials import close_pass, step_down
from helpers.core.config import parse_config
from helpers.run.records import CapacitySummary, EngineResult, Point


def run_with(margin: float | None = None):
    search = {"axis": "concurrency"} | ({"trial_margin": margin} if margin is not None else {})
    cfg = parse_config(
        {
            "name": "margin",
            "model": {"path": "tiny-llama"},
            "engines": [{"label": "e", "engine": "vllm-cpu", "launcher": {"kind": "python", "python": "python3"}}],
            "sla": {"ttft_p95_ms": 2000},
            "evidence": {"search": search},
        }
    )
    return SimpleNamespace(cfg=cfg)


def cap(load: float, ttft_ms: float, axis: str = "concurrency") -> CapacitySummary:
    probes = [{"load": load / 2, "ttft_p95_ms": 400.0}, {"load": load, "ttft_p95_ms": ttft_ms}]
    return CapacitySummary(axis=axis, capacity=load, tolerance=0.05, probes=probes)


def test_a_pass_by_a_hair_starts_the_trials_one_stream_below():
    c = cap(8, 1900)
    why = close_pass(run_with(), c)
    assert why is not None and "within 10% of the TTFT limit (1,900 of 2,000 ms)" in why
    assert step_down(8, c) == 7


def test_a_clear_pass_keeps_the_trials_at_the_capacity():
    assert close_pass(run_with(), cap(8, 1799)) is None
    assert close_pass(run_with(margin=0.0), cap(8, 1999)) is None  # the rule can be switched off


def test_no_step_below_one_stream_and_the_rate_axis_steps_by_the_tolerance():
    assert close_pass(run_with(), cap(1, 1950)) is None  # one stream is the floor: nothing lower to try
    rate = cap(20.0, 1950, axis="rate")
    assert close_pass(run_with(), rate) is not None and step_down(20.0, rate) == 20.0 * 0.95


def fixed_cfg(trials: dict | None = None, **workload):
    """A config with the search disabled: the trials run at a fixed number of streams."""
    return parse_config(
        {
            "name": "fixed",
            "model": {"path": "tiny-llama"},
            "engines": [{"label": "e", "engine": "vllm-cpu", "launcher": {"kind": "python", "python": "python3"}}],
            "workload": {"concurrency": [1, 8], **workload},
            "evidence": {"search": {"enabled": False}, "trials": trials or {}},
        }
    )


def point(c: int, phase: str = "sweep", trial: int | None = None, tok_s: float = 100.0, requests: int = 20) -> Point:
    return Point(label="e", engine="vllm-cpu", concurrency=c, phase=phase, trial=trial, requests=requests,
                 duration_s=1.0, output_tok_s=tok_s, total_tok_s=2 * tok_s, req_s=1.0, ttft_ms_p95=500.0)  # fmt: skip


def test_the_fixed_load_is_configured_else_the_target_else_the_top_sweep_level():
    assert fixed_concurrency(fixed_cfg()) == 8
    assert fixed_concurrency(fixed_cfg(target_concurrency=4)) == 4
    assert fixed_concurrency(fixed_cfg({"fixed_concurrency": 2}, target_concurrency=4)) == 2
    assert load_axis(fixed_cfg()) == "concurrency"  # closed loop, whatever the search's axis says


def test_the_fixed_load_summary_is_rebuilt_from_the_trials_stored_at_that_load():
    cfg = fixed_cfg({"fixed_concurrency": 8})
    trials = [point(8, "trial", i, tok) for i, tok in enumerate((95.0, 100.0, 105.0))]
    r = EngineResult(
        label="e", engine="vllm-cpu", points=[point(1), point(8), *trials, point(8, "trial", 3, requests=0)]
    )
    cap = fixed_load_summary(r, cfg)
    assert (cap.axis, cap.searched, cap.capacity, cap.trial_load) == ("concurrency", False, None, 8.0)
    assert cap.trials_note == "3 trial(s) at 8 streams"  # the trial that completed nothing is not one
    assert "search disabled" in cap.note and "not a capacity" in cap.note
    r.capacity = cap
    rep = representative(r, cfg)
    assert (rep.source, rep.concurrency, rep.requests) == ("fixed", 8, 60)
    assert rep.output_tok_s.mean == 100.0 and rep.output_tok_s.n == 3
    # only grid points, or trials at another load than the configured one: no fixed-load record
    assert fixed_load_summary(EngineResult(label="e", engine="vllm-cpu", points=[point(1), point(8)]), cfg) is None
    assert fixed_load_summary(r, fixed_cfg({"fixed_concurrency": 4})) is None
