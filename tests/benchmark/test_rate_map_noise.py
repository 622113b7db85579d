"""The spread of a closed-loop capacity's map from streams to the rate served (a real CPU run, 2026-12-07).

Both configurations of the CPU default were near saturation at their edges: the served rate is flat in the
streams, so their capacities' intervals in streams (±15% and ±5%) mapped to rate intervals of ±0.1%, while
the points near the edge read 1.82-2.11 req/s (prefix cache off) and 6.18-6.60 (on). The difference of the
two came out +236.5% [+235.7%, +237.3%]. The map's own spread now widens both.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from helpers.benchmark.capacity_compare import Side, compare_capacities
from helpers.benchmark.sla import RateMap, capacity_side, representative
from helpers.core.config import load_config
from helpers.run.folder import RunFolder

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "cpu-two-flat-rates"


@pytest.fixture(scope="module")
def run():
    cfg = load_config(RUN / "config.yaml")
    return cfg, {r.label: r for r in RunFolder(RUN).engine_results()}


def _near_rates(result, value):
    """The req/s of the sustained points within 1.5 × of the capacity, as the map reads them."""
    return [
        p.req_s
        for p in result.points
        if p.phase in ("search", "sweep") and p.req_s > 0 and abs(math.log(p.concurrency / value)) <= math.log(1.5)
    ]


def test_the_rate_interval_is_as_wide_as_the_points_near_the_edge_spread(run):
    cfg, results = run
    for label, result in results.items():
        rep = representative(result, cfg)
        rate = rep.request_rate
        assert rate.low < rate.mean < rate.high, label
        rates = _near_rates(result, rep.capacity.mean)
        assert len(rates) >= 5, label
        # at least the standard error of their mean, t-scaled: the rate is no better known than the points say
        se = np.std(np.log(rates), ddof=1) / math.sqrt(len(rates))
        assert math.log(rate.high / rate.mean) >= 1.5 * se, (label, rate, se)
        assert math.log(rate.mean / rate.low) >= 1.5 * se, (label, rate, se)


def test_the_difference_of_two_flat_edges_carries_their_spread(run):
    cfg, results = run
    on = capacity_side(results["vllm-cpu prefix-cache on"], cfg, 1)
    off = capacity_side(results["vllm-cpu prefix-cache off"], cfg, 1)
    d = compare_capacities(on, off, margin=0.05)
    assert d.verdict == "measured" and d.ratio > 3  # 12.6 against 4.2 streams: 6.41 against 1.90 req/s
    # the map's spread alone (off: ±10% from eight points at 1.55-2.11 req/s) is more than ±5% of the ratio
    assert d.high / d.ratio > 1.05 and d.ratio / d.low > 1.05, d
    # without it, the interval was ±0.4%: the map was taken as exact
    exact = compare_capacities(
        Side(on.label, on.estimate, on.readings, on.accelerators, on.to_rate),
        Side(off.label, off.estimate, off.readings, off.accelerators, off.to_rate),
        margin=0.05,
    )
    assert exact.high / exact.ratio < 1.01 < d.high / d.ratio


def test_the_rate_axis_is_exact_and_a_line_s_half_width_grows_away_from_its_points():
    assert RateMap().half(math.log(30)) == 0.0 and RateMap()(1.5) == 1.5
    line = RateMap(icept=0.1, slope=0.5, s2=0.01, n=6, z_mean=2.0, sxx=0.2, dof=4)
    assert 0 < line.half(2.0) < line.half(2.3) < line.half(2.6)
    # two points leave no residual: each point's counting noise stands in, with a normal quantile
    two = RateMap(icept=0.0, slope=1.0, s2=1 / 20, n=2, z_mean=1.0, sxx=0.1, dof=0)
    assert two.half(1.0) == pytest.approx(1.959964 * math.sqrt(1 / 20 / 2), rel=1e-5)
