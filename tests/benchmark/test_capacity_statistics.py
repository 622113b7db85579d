"""The capacity search's statistics on fake engines of known capacity: coverage, width, paired comparisons.

``fakes.sim_engine.CurveEngine`` meets the TTFT limit at exactly its ``capacity`` (a queue's TTFT curve, with
noise that belongs partly to the traffic stream and partly to the measurement); ``QueueEngine`` simulates a
k-slot server request by request, and ``BatchEngine`` continuous batching step by step (a request's speed
depends on the batch it shares), for the sustained test at short and long requests. Every test is seeded:
the counts are what these seeds give, asserted against the issue's thresholds.
"""

import math
import statistics

import numpy as np
import pytest
from fakes.sim_engine import BatchEngine, CurveEngine, QueueEngine, run_search
from scipy import stats as st

from helpers.benchmark.boundary import Reading, estimate_capacity
from helpers.benchmark.capacity_compare import Side, compare_capacities
from helpers.benchmark.edge_search import EdgeSearch
from helpers.benchmark.judged import measurement_of
from helpers.benchmark.probe import Measurement, SlaLimits, judge
from helpers.benchmark.probe_size import LATENCY_SPANS
from helpers.core.config import parse_config
from helpers.core.errors import ConfigError
from helpers.measure.timing import keep_up, request_times, sending_and_latency
from helpers.run.records import Point

DEFAULT = {"tolerance": 0.05, "max_probes": 8, "edge_rounds_min": 2, "edge_rounds_max": 4}
"""The search's budget as the config's defaults set it (coarse probes, edge rounds)."""


def _search(capacity: float, seed: int, traffic: int, **options) -> EdgeSearch:
    return run_search(CurveEngine(capacity, seed=seed, traffic_seed=traffic), capacity / 2.5, **(DEFAULT | options))


def test_the_95_interval_covers_the_true_capacity_in_at_least_90_of_100_searches():
    covered, bounded, probes = 0, 0, []
    for seed in range(100):
        est = _search(10.0, seed, 1000 + seed).estimate()
        probes.append(est.probes)
        if est.low is not None and est.high is not None:
            bounded += 1
            covered += est.low <= 10.0 <= est.high
    print(f"covered {covered}/100, bounded {bounded}/100, median probes {statistics.median(probes)}")
    assert bounded >= 98 and covered >= 90


def test_the_interval_narrows_when_probes_are_added():
    def median_width(rounds: int) -> float:
        widths = []
        for seed in range(40):
            est = _search(10.0, seed, 2000 + seed, edge_rounds_min=rounds, edge_rounds_max=rounds).estimate()
            assert est.rel_half_width is not None
            widths.append(est.rel_half_width)
        return statistics.median(widths)

    two, four, eight = median_width(2), median_width(4), median_width(8)
    print(f"median half-width: 2 rounds ±{two:.2%}, 4 rounds ±{four:.2%}, 8 rounds ±{eight:.2%}")
    assert eight < four < two


def _compare(ca: float, cb: float, seed: int):
    a = _search(ca, 2 * seed, 5000 + seed)
    b = _search(cb, 2 * seed + 1, 5000 + seed)  # the same traffic streams: common random numbers
    return compare_capacities(Side("a", a.estimate(), a.readings()), Side("b", b.estimate(), b.readings()))


def test_two_engines_ten_percent_apart_are_told_apart_paired_in_at_least_90_of_100():
    told = 0
    for seed in range(100):
        d = _compare(10.0, 11.0, seed)
        assert d.paired and d.pairs >= 4
        told += d.verdict == "measured" and d.ratio < 1 and d.high < 1
    print(f"told apart {told}/100")
    assert told >= 90


def test_two_identical_engines_are_never_a_measured_winner_in_at_least_95_of_100():
    kinds = [_compare(10.0, 10.0, seed).verdict for seed in range(100)]
    counts = {k: kinds.count(k) for k in set(kinds)}
    print(f"identical engines: {counts}")
    assert counts.get("equivalent", 0) + counts.get("not_conclusive", 0) >= 95


def test_pairing_is_what_makes_the_difference_visible():
    # the same two engines compared on streams of their own: no pairs, the two intervals combined, wider
    a = _search(10.0, 1, 11)
    b = _search(10.5, 2, 12)
    unpaired = compare_capacities(Side("a", a.estimate(), a.readings()), Side("b", b.estimate(), b.readings()))
    b2 = _search(10.5, 2, 11)
    paired = compare_capacities(Side("a", a.estimate(), a.readings()), Side("b", b2.estimate(), b2.readings()))
    assert paired.paired and paired.pairs >= 4
    assert (paired.high - paired.low) < (unpaired.high - unpaired.low)


@pytest.mark.parametrize("service_s", [1.0, 60.0])
def test_the_sustained_test_holds_for_requests_of_one_second_and_of_one_minute(service_s):
    # a 64-slot server; probes of LATENCY_SPANS request latencies of arrivals, as the search sizes them
    verdicts: dict[float, list[bool]] = {0.8: [], 1.25: []}
    ratios: dict[float, list[float]] = {0.8: [], 1.25: []}
    for seed in range(20):
        engine = QueueEngine(slots=64, service_s=service_s, seed=seed)
        for share in verdicts:
            load = share * engine.capacity
            n = max(40, math.ceil(load * LATENCY_SPANS * service_s))
            sends, _firsts, ends = engine.probe(load, n)
            sustained, ratio = _judged(load, n, sends, ends)
            verdicts[share].append(sustained)
            ratios[share].append(ratio if ratio is not None else 0.0)
    print(f"{service_s:g} s requests: sustained at 0.8 of capacity {sum(verdicts[0.8])}/20, at 1.25 "
          f"{sum(verdicts[1.25])}/20; median served {statistics.median(ratios[0.8]):.3f} and "
          f"{statistics.median(ratios[1.25]):.3f}")  # fmt: skip
    assert sum(verdicts[0.8]) >= 18 and sum(verdicts[1.25]) <= 5
    assert abs(statistics.median(ratios[0.8]) - 1.0) < 0.06 and abs(statistics.median(ratios[1.25]) - 0.8) < 0.06


def _drain_included(sends: list[float], ends: list[float]) -> float:
    """Served share read the way it was before 2026-12-05: every send after the first latency, the drain kept."""
    latency = float(np.median(np.subtract(ends, sends)))
    x = np.array([s for s in sends if s >= latency])
    y = np.array([e for s, e in zip(sends, ends, strict=True) if s >= latency])
    return 1.0 / st.theilslopes(y, x)[0]


def _judged(load: float, n: int, sends: list[float], ends: list[float]) -> tuple[bool, float | None]:
    """The sustained verdict on one simulated probe (only the served share can fail), and the share read."""
    kept = keep_up(sends, ends)
    span, latency = sending_and_latency(sends, ends)
    m = Measurement(
        load=load, ttft_p95_ms=100.0, requests=n, served_ratio=kept.ratio if kept else None,
        served_ratio_low=kept.low if kept else None, send_span_s=span, latency_p50_s=latency,
    )  # fmt: skip
    probe = judge(m, SlaLimits(ttft_p95_ms=10_000.0))
    if kept is not None:
        assert kept.fill_s > 0 and kept.drain_s > 0 and (probe.margins["served"] <= 0) is probe.sustained
    return probe.sustained, kept.ratio if kept else None


@pytest.mark.parametrize("latency_s", [1.0, 60.0])
def test_the_sustained_test_holds_under_continuous_batching(latency_s):
    # requests share a batch whose step slows as it grows (vLLM, SGLang): the requests sent in the last
    # latency finish early as the batch drains; read with them, an engine that kept up served 109-458% (H100)
    verdicts: dict[float, list[bool]] = {0.5: [], 1.25: []}
    ratios: list[float] = []
    drained: dict[float, list[float]] = {0.5: [], 1.25: []}
    for seed in range(20):
        engine = BatchEngine.with_latency(latency_s, share=0.5, seed=seed)
        for share in verdicts:
            load = share * engine.capacity
            # sized as the search sizes a probe: LATENCY_SPANS latencies of the last passing load
            n = max(40, math.ceil(load * LATENCY_SPANS * engine.steady_latency(0.5 * engine.capacity)))
            sends, _firsts, ends = engine.probe(load, n)
            sustained, ratio = _judged(load, n, sends, ends)
            verdicts[share].append(sustained)
            if share == 0.5:
                assert ratio is not None
                ratios.append(ratio)
            drained[share].append(_drain_included(sends, ends))
    print(f"{latency_s:g} s requests, batching: sustained at 0.5 of capacity {sum(verdicts[0.5])}/20, at 1.25 "
          f"{sum(verdicts[1.25])}/20; median served at 0.5 {statistics.median(ratios):.3f}; read with the drain "
          f"{statistics.median(drained[0.5]):.3f} and {statistics.median(drained[1.25]):.3f}")  # fmt: skip
    assert sum(verdicts[0.5]) >= 17 and sum(verdicts[1.25]) <= 1
    assert abs(statistics.median(ratios) - 1.0) < 0.06
    # the artefact the drain cut removes: read with the drain, the overloaded engine served more than it was sent
    assert statistics.median(drained[1.25]) > 1.5


def test_a_stored_probe_is_judged_again_from_its_request_times():
    # a probe judged before the drain was left out: its share read 160%, the steady window's 78%, not sustained
    engine = BatchEngine.with_latency(5.0, share=0.5, seed=3)
    load = 0.5 * engine.capacity
    sends, _firsts, ends = engine.probe(load, math.ceil(load * LATENCY_SPANS * 5.0))
    old = Measurement(
        load=load, ttft_p95_ms=300.0, requests=len(sends), offered_rate=load, achieved_rate=0.78 * load,
        served_ratio=1.6, served_ratio_low=1.55, served_ratio_high=1.65,
    )  # fmt: skip
    stored = judge(old, SlaLimits(ttft_p95_ms=2000.0))
    assert not stored.sustained and "78%" in stored.why
    point = Point(
        label="e", engine="vllm", concurrency=0, phase="search", offered_rate=load, requests=len(sends),
        duration_s=max(ends), output_tok_s=1.0, total_tok_s=1.0, req_s=load, ttft_ms_p95=300.0,
        probe=stored.model_dump(mode="json"), request_times=request_times(sends, ends),
    )  # fmt: skip
    again = judge(measurement_of(point, "rate"), SlaLimits(ttft_p95_ms=2000.0))
    assert again.sustained and "finish against send times" in again.why
    assert again.served_ratio == pytest.approx(keep_up(sends, ends).ratio, abs=0.01)
    assert again.latency_p50_s == pytest.approx(float(np.median(np.subtract(ends, sends))), rel=0.01)


def test_a_search_that_cannot_bracket_the_edge_says_so_with_the_bound_it_has():
    never_fails = EdgeSearch(1.0, SlaLimits(ttft_p95_ms=1000.0), max_probes=3, max_load=8.0)
    while never_fails.next() is not None:
        never_fails.record({"ttft_p95_ms": 10.0, "requests": 50})
    est = never_fails.estimate()
    assert est.status == "at_least" and est.low == 4.0 and "at least 4" in est.note
    assert "probe budget (3) spent before a load failed" in never_fails.note()
    always_fails = EdgeSearch(4.0, SlaLimits(ttft_p95_ms=1000.0), max_probes=3, min_load=1.0)
    while always_fails.next() is not None:
        always_fails.record({"ttft_p95_ms": 5000.0, "requests": 50})
    assert always_fails.estimate().status == "below" and "below 1" in always_fails.estimate().note


def test_a_probe_that_contradicts_the_trend_is_measured_again_not_believed():
    search = EdgeSearch(4.0, SlaLimits(ttft_p95_ms=1000.0), max_probes=8, extra=[
        Reading(load=8.0, margins={"TTFT p95": -0.3}, passed=True, stream="sweep-c8")
    ])  # fmt: skip
    ask = search.next()
    search.record({"ttft_p95_ms": 1400.0, "requests": 50})  # fails at 4 while 8 passed: a contradiction
    again = search.next()
    assert again.load == ask.load and again.purpose == "re-probe" and again.stream != ask.stream


def test_an_equivalence_margin_of_zero_or_below_is_a_config_error_naming_the_field(tmp_path):
    engine = {"label": "a", "engine": "vllm-cpu", "launcher": {"python": "python3"}}
    base = {"name": "x", "model": {"path": "tiny-llama"}, "engines": [engine]}
    for bad in (0, -0.1):
        with pytest.raises(ConfigError, match="evidence.equivalence_margin"):
            parse_config({**base, "evidence": {"equivalence_margin": bad}}, "cfg.yaml")
    with pytest.raises(ValueError, match="margin must be > 0"):
        compare_capacities(Side("a", estimate_capacity([])), Side("b", estimate_capacity([])), margin=0)
