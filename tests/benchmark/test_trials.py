"""Where the trials start: one step below a capacity whose probe passed close to the TTFT limit."""

from types import SimpleNamespace

from helpers.benchmark.trials import close_pass, step_down
from helpers.core.config import parse_config
from helpers.run.records import CapacitySummary


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
