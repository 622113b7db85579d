"""An end of a capacity's interval closed by the probes' monotone order where the edge fit leaves it open.

The CPU default of 2026-12-07 10:16 (``tests/fixtures/runs/cpu-open-edge``): prefix caching on read TTFT p95
within -5%..+8% of its 2-s limit from 12 to 16 streams, so the edge fit's 95% set ran out of its window below
(no interval: "the probes near the edge are too noisy"), while at 8 streams TTFT p95 was 1.1 s. The
comparison with caching off (4.85 streams [4.37, 5.40]) was "not conclusive" for 13 against 5 streams.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from helpers.benchmark.boundary import Reading, estimate_capacity
from helpers.benchmark.capacity_compare import compare_capacities
from helpers.benchmark.edge_bounds import monotone_bounds
from helpers.benchmark.sla import capacity_side, representative
from helpers.core.config import load_config
from helpers.run.folder import RunFolder

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "cpu-open-edge"


def _results(fresh: bool):
    cfg = load_config(RUN / "config.yaml")
    results = {r.label: r for r in RunFolder(RUN).engine_results()}
    if fresh:  # estimated again from the stored probes, as a run made now would
        for r in results.values():
            r.capacity.estimate = None
    return cfg, results


def test_the_recorded_estimate_had_no_interval_and_the_comparison_was_not_conclusive():
    cfg, results = _results(fresh=False)
    on, off = (capacity_side(results[f"vllm-cpu prefix-cache {k}"], cfg, 1) for k in ("on", "off"))
    assert on.estimate.low is None and "too noisy" in on.estimate.note
    assert compare_capacities(on, off, margin=cfg.evidence.equivalence_margin).verdict == "not_conclusive"


def test_a_pass_far_below_the_noise_closes_the_open_end_and_the_comparison_decides():
    cfg, results = _results(fresh=True)
    on, off = (capacity_side(results[f"vllm-cpu prefix-cache {k}"], cfg, 1) for k in ("on", "off"))
    est = on.estimate
    assert est.order_bound and est.low == pytest.approx(8.0) and est.high is not None and est.low < est.value < est.high
    assert "monotone order" in est.text("streams") and not est.conclusive
    assert not off.estimate.order_bound  # caching off had an interval of its own
    d = compare_capacities(on, off, margin=cfg.evidence.equivalence_margin)
    assert d.verdict == "measured" and not d.paired and d.low > 1.5, d.text  # unpaired: no delta method on it
    # the rate at 8 streams is taken in proportion to the streams (6.50 × 8 / 13.2 req/s), never the flat
    # line fitted near 13 streams: requests take no longer at fewer streams
    rate = representative(results["vllm-cpu prefix-cache on"], cfg).request_rate
    assert rate.low <= rate.mean * 8 / est.value * 1.0001


def test_a_failure_at_or_below_a_pass_keeps_the_end_open_and_noise_scales_with_requests():
    loads, margins, requests = [4, 8, 12, 13, 14], [-1.0, -0.6, -0.02, 0.03, 0.05], [8, 16, 24, 26, 28]
    low, high = monotone_bounds(loads, margins, requests, s2=0.001, dof=4, reference_requests=26)
    assert low == math.log(8) and high is None  # 0.05 at 14 is inside the noise
    # a failure at 6 contradicts the pass at 8: no bound above it
    low, _ = monotone_bounds([*loads, 6], [*margins, 0.2], [*requests, 12], s2=0.001, dof=4, reference_requests=26)
    assert low == math.log(4)
    # a probe of very few requests is noisier: a pass of 1 request at 8 is not past the noise
    thin = [-1.0, -0.25, -0.02, 0.03, 0.05]
    assert monotone_bounds(loads, thin, [8, 1, 24, 26, 28], 0.001, 4, 26)[0] == math.log(4)
    assert monotone_bounds(loads, thin, [8, 16, 24, 26, 28], 0.001, 4, 26)[0] == math.log(8)  # 16 requests: past it
    assert monotone_bounds(loads, margins, requests, s2=0.001, dof=0, reference_requests=26) == (None, None)


def _flat_edge(seed: int, capacity: float = 12.5) -> list[Reading]:
    """A margin that rises through 0 at ``capacity`` and flattens just past it, as the CPU engine's TTFT did."""
    rng = np.random.default_rng(seed)
    loads = [1, 4, 8, 16, 12, 13, 12, 13, 14, 14]
    out = []
    for i, x in enumerate(loads):
        true = min(1.5 * math.log(x / capacity), 0.08)
        n = 2 * x
        m = true + rng.normal(0, 0.03 * math.sqrt(26 / n))
        out.append(Reading(load=x, margins={"TTFT p95": m}, passed=m <= 0, stream=f"s{i}", requests=n))
    return out


def test_over_200_seeded_flat_edges_the_ends_by_order_cover_the_capacity():
    kinds = {True: [0, 0], False: [0, 0]}  # by order or by the fit: [bounded, covered]
    for seed in range(200):
        est = estimate_capacity(_flat_edge(seed), axis="concurrency")
        if est.low is not None and est.high is not None:
            kinds[est.order_bound][0] += 1
            kinds[est.order_bound][1] += est.low <= 12.5 <= est.high
    print(f"by order [bounded, covered]: {kinds[True]}, by the fit: {kinds[False]}")
    (n_order, c_order), (n_fit, c_fit) = kinds[True], kinds[False]
    assert n_order >= 20 and c_order >= 0.95 * n_order  # a probe's load, past the noise: conservative
    assert n_order + n_fit == 200 and c_order + c_fit >= 180
