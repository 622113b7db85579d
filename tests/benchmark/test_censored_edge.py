"""A capacity whose failures above it have no size (requests that outgrew the probe): a bracket, said as such.

The shape of SGLang's search on an H100 (``reports/h100-20261205-chat-8b-paired``): every probe up to 33.9
req/s served what it was sent, every probe at 37.4-37.5 failed because its requests took longer than its
arrivals could show, and a round of edge probes at the estimate ± 5% landed on the bracket's two ends again.
"""

from __future__ import annotations

import math

from helpers.benchmark.boundary import Reading, estimate_capacity
from helpers.benchmark.capacity_compare import Side, compare_capacities
from helpers.benchmark.edge_search import EdgeSearch
from helpers.benchmark.probe import SlaLimits


def _served(load: float, margin: float, stream: str) -> Reading:
    return Reading(load=load, margins={"TTFT p95": -1.0, "served": margin}, passed=margin <= 0, stream=stream,
                   requests=700, served=0.95 / math.exp(margin))  # fmt: skip


def _outgrown(load: float, stream: str) -> Reading:
    return Reading(load=load, margins={"TTFT p95": -0.7}, passed=False, censored=True, stream=stream, requests=900)


def test_failures_without_a_size_above_the_passes_bound_the_capacity_from_above():
    readings = [_served(25.0, -0.18, "p0"), _outgrown(37.5, "p1"), _served(30.6, -0.01, "p2"),
                _served(33.9, -0.07, "p3"), _outgrown(37.4, "e0-hi")]  # fmt: skip
    est = estimate_capacity(readings)
    assert est.status == "at_least" and est.low == 33.9 and est.high == 37.4
    assert "below 37.4" in est.note and not est.conclusive
    assert est.text() == "≥ 33.9 and < 37.4 req/s (above 33.9 it failed only without a size)"
    # with no failure above, it stays one-sided
    alone = estimate_capacity([r for r in readings if not r.censored])
    assert alone.status == "at_least" and alone.high is None and "every load tried met the SLA" in alone.text()


def test_a_comparison_with_such_a_bracket_is_bounded_and_says_what_the_bracket_needs():
    vllm = [(25.0, -0.15), (30.9, -0.10), (34.1, -0.15), (34.1, -0.03), (37.7, 0.07), (34.8, 0.01), (38.4, 0.04)]
    measured = estimate_capacity([_served(x, m, f"s{i}") for i, (x, m) in enumerate(vllm)])
    bracket = estimate_capacity([_served(33.9, -0.07, "p3"), _served(25.0, -0.18, "p0"), _outgrown(37.4, "p1")])
    assert measured.status == "estimated" and bracket.status == "at_least" and bracket.high == 37.4
    d = compare_capacities(Side("a", measured), Side("b", bracket))
    assert d.verdict == "not_conclusive" and d.low is not None and d.high is not None
    # the bracket enters from its geometric middle, not from its passing end
    assert d.ratio == math.exp(math.log(measured.value) - (math.log(33.9) + math.log(37.4)) / 2)
    assert "`b` passed up to 33.9 and failed above it only without a size (at 37.4" in d.to_resolve
    assert "met the SLA at every load" not in d.to_resolve
    # a bracket far below the other's interval is still a measured difference
    low = estimate_capacity([_served(20.0, -0.07, "p3"), _outgrown(21.0, "p1")])
    assert compare_capacities(Side("a", measured), Side("b", low)).verdict == "measured"


def test_an_edge_round_without_a_fitted_edge_probes_inside_a_narrow_bracket_not_its_ends():
    search = EdgeSearch(25.0, SlaLimits(ttft_p95_ms=2000.0), max_probes=4, growth=1.5, tolerance=0.1,
                        edge_step=0.05, edge_rounds_min=1, edge_rounds_max=1)  # fmt: skip
    asked = []
    while (ask := search.next()) is not None:
        asked.append(ask)
        if ask.load < 36.0:  # kept up, with a served share to read
            search.record({"ttft_p95_ms": 100.0, "requests": 700, "offered_rate": ask.load, "served_ratio": 1.0,
                           "served_ratio_low": 0.97, "latency_p50_s": 5.0, "send_span_s": 20.0})  # fmt: skip
        else:  # fell behind: requests outgrew the probe, no served share can be read
            search.record({"ttft_p95_ms": 600.0, "requests": 900, "offered_rate": ask.load,
                           "latency_p50_s": 12.0, "send_span_s": 25.0})  # fmt: skip
    coarse = [a.load for a in asked if a.purpose == "coarse"]
    edge = [a.load for a in asked if a.purpose == "edge"]
    lo = max(x for x in coarse if x < 36.0)
    hi = min(x for x in coarse if x >= 36.0)
    assert hi / lo <= 1.2 and len(edge) == 2
    assert all(lo * 1.01 < x < hi / 1.01 for x in edge)  # inside, not at the bracket's ends
    assert math.isclose(edge[0] * edge[1], lo * hi, rel_tol=1e-9)  # the thirds, in log load
