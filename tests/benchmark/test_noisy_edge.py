"""A capacity whose edge probes are too noisy for an interval of its own bounds no difference either.

The shape of the 70B FP8 run on an H100 (``reports/h100-20261206-chat-70b-fp8``): TurboMind passed at 2.92 req/s
above failures at 2.73 and 2.86, SGLang passed twice at 2.00 and failed there once, and failed at 1.91. Each
capacity's edge fit rose through the SLA, but not steeply enough against its scatter for a bounded interval.
The comparison had still printed "+43.5% [+26.3%, +63.0%]: the measurement decides" from the fits' delta
method, and the first page read "Use TurboMind" without a caveat.
"""

from __future__ import annotations

from helpers.benchmark.boundary import Reading, estimate_capacity
from helpers.benchmark.capacity_compare import Side, compare_capacities
from helpers.benchmark.sla import capacity_side
from helpers.core.config import load_config
from helpers.core.paths import REPORTS_DIR
from helpers.run.reader import engine_results

RUN = REPORTS_DIR / "h100-20261206-chat-70b-fp8"


def _ttft(load: float, margin: float, stream: str) -> Reading:
    return Reading(load=load, margins={"TTFT p95": margin}, passed=margin <= 0, stream=stream, requests=200)


CLEAN = [(2.0, -0.6), (2.4, -0.3), (2.6, -0.08), (2.8, 0.07), (3.2, 0.3), (2.5, -0.15), (2.9, 0.15)]
NOISY = [(1.41, -2.6), (1.727, -0.66), (1.811, -2.4), (1.811, -2.5), (1.811, -2.05), (1.885, -2.3), (1.912, 0.18),
         (2.002, -1.26), (2.002, -2.2), (2.002, 0.38), (2.084, 0.94), (2.116, 0.08)]  # fmt: skip
"""TTFT margins (log of TTFT p95 over the SLA) by load: a clean edge near 2.7 and SGLang's 70B probes."""


def _side(label: str, probes: list[tuple[float, float]], scale: float = 1.0) -> Side:
    readings = [_ttft(scale * x, m, f"s{i}") for i, (x, m) in enumerate(probes)]
    return Side(label, estimate_capacity(readings), readings)


def test_an_unbounded_capacity_leaves_the_difference_unbounded_and_the_comparison_not_conclusive():
    a, b = _side("clean", CLEAN), _side("noisy", NOISY)
    clean, noisy = a.estimate, b.estimate
    assert clean.status == "estimated" and clean.low is not None and clean.high is not None
    assert noisy.status == "estimated" and noisy.low is None and noisy.high is None, noisy
    d = compare_capacities(a, b)
    assert d.verdict == "not_conclusive", d.text
    assert d.ratio is not None and d.ratio > 1.3  # the estimates stay: only their difference is not bounded
    assert d.low is None and d.high is None and not d.paired
    assert "bounded interval each" in d.to_resolve
    # the clean edge against itself moved up by 40% is a measured difference: the rule is about the bounds
    assert compare_capacities(_side("up", CLEAN, 1.4), a).verdict == "measured"


def test_the_archived_70b_run_compares_its_two_noisy_capacities_as_not_conclusive():
    cfg = load_config(RUN / "config.yaml")
    results = {r.label: r for r in engine_results(RUN)}
    tm = capacity_side(results["LMDeploy 0.18.0 (TurboMind)"], cfg, 1)
    sg = capacity_side(results["SGLang 0.5.16"], cfg, 1)
    assert tm is not None and sg is not None
    for side in (tm, sg):
        assert side.estimate.status == "estimated" and side.estimate.low is None, side.estimate
    d = compare_capacities(tm, sg, margin=cfg.evidence.equivalence_margin)
    assert d.verdict == "not_conclusive" and d.ratio is not None and d.ratio > 1.3
    assert d.low is None and d.high is None
