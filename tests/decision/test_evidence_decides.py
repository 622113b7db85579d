"""The decision follows the evidence: ties within noise, measured winners, and contradictions with the tree."""

import numpy as np
from decision_data import cfg

from helpers.decision.compute import decide
from helpers.run.records import CapacitySummary, EngineResult, Point

PROFILE = {"format": "csv", "source": "trace.csv", "peak_requests_per_s": 2.0, "output_tokens_mean": 256}


def trial_result(label: str, engine: str, tok_s: list[float], rate: float) -> EngineResult:
    """A configuration whose SLA capacity search ended at ``rate`` req/s with trials of ``tok_s``."""
    points = [
        Point(label=label, engine=engine, concurrency=0, phase="trial", trial=i, offered_rate=rate, requests=200,
              duration_s=20.0, output_tok_s=v, total_tok_s=3 * v, req_s=v / 256, ttft_ms_p95=500.0)
        for i, v in enumerate(tok_s)
    ]  # fmt: skip
    cap = CapacitySummary(capacity=rate, bracket_low=rate, bracket_high=rate * 1.05, bounded=True, converged=True,
                          note="test", trial_load=rate)  # fmt: skip
    return EngineResult(label=label, engine=engine, capacity=cap, points=points, cold_start_s=100.0)


def config(labels_engines, **sections):
    c = cfg([x for x, _ in labels_engines], **sections)
    for spec, (_, engine) in zip(c.engines, labels_engines, strict=True):
        spec.engine = engine
    return c


STABLE_SMALL_TEAM = {"cadence": {"updates_per_month": 0.1, "concurrent_models": 1},
                     "team": {"size": 3, "mlops_maturity": "low", "chase_peak": False}}  # fmt: skip


def test_overlapping_intervals_are_a_tie_and_the_tree_decides():
    rng = np.random.default_rng(0)
    a = trial_result("vllm-a", "vllm", list(1000 + rng.normal(0, 60, 3)), 4.0)
    b = trial_result("sglang-b", "sglang", list(1030 + rng.normal(0, 60, 3)), 4.1)
    d = decide([a, b], config([("vllm-a", "vllm"), ("sglang-b", "sglang")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict is not None and not d.verdict.significant
    assert d.verdict.decided_by == "tree and operations cost"
    assert "a tie within noise (±" in d.verdict.text
    assert d.primary_family == d.tree_family == "vllm" and d.contradiction is None
    assert any("tie within noise" in r for r in d.reasons)


def test_twice_the_capacity_wins_whatever_the_assumed_operations_hours():
    fast = trial_result("sglang-fast", "sglang", [2000.0, 2010.0, 1995.0], 8.0)
    slow = trial_result("vllm-slow", "vllm", [1000.0, 1004.0, 998.0], 4.0)
    # operations hours favour vLLM heavily, and the tree says vLLM (small team, stable model); at 40 req/s
    # (6 vs 11 replicas) the GPUs saved outweigh 29 more engineer hours a month: the break-even holds
    ops = {"sglang": 30, "vllm": 1}
    sections = {**STABLE_SMALL_TEAM, "cost": {"gpu": "H200-SXM-141GB", "ops_hours_per_month": ops}}
    busy = {**PROFILE, "peak_requests_per_s": 40.0}
    d = decide([fast, slow], config([("sglang-fast", "sglang"), ("vllm-slow", "vllm")], **sections), busy)
    assert d.verdict.significant and d.verdict.decided_by == "measurement"
    assert "at their SLA capacities (3 and 3 trials" in d.verdict.text  # searched: capacities, not fixed loads
    assert d.primary == "sglang-fast" and d.backup == "vllm-slow"
    assert d.tree_family == "vllm" and d.contradiction is not None
    assert d.contradiction.startswith("The measurements contradict the seed's decision tree: it points to vLLM")


def test_a_measured_winner_that_does_not_pay_for_its_operations_does_not_decide():
    fast = trial_result("sglang-fast", "sglang", [2000.0, 2010.0, 1995.0], 8.0)
    slow = trial_result("vllm-slow", "vllm", [1000.0, 1004.0, 998.0], 4.0)
    tiny = {**PROFILE, "peak_requests_per_s": 0.01}  # one replica of either serves it: ops cost dominates
    sections = {
        **STABLE_SMALL_TEAM,
        "cost": {"gpu": "H200-SXM-141GB", "ops_hours_per_month": {"sglang": 300, "vllm": 1}},
    }
    d = decide([fast, slow], config([("sglang-fast", "sglang"), ("vllm-slow", "vllm")], **sections), tiny)
    assert d.verdict.significant and d.verdict.decided_by == "tree and operations cost"
    assert "break-even" in d.verdict.text and d.primary == "vllm-slow"


def test_single_samples_never_decide_alone():
    a = trial_result("vllm-a", "vllm", [1000.0], 4.0)
    b = trial_result("sglang-b", "sglang", [2000.0], 8.0)
    d = decide([a, b], config([("vllm-a", "vllm"), ("sglang-b", "sglang")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict.decided_by == "tree and operations cost" and "no interval" in d.verdict.text


def test_the_rubric_and_its_weights_are_in_the_decision():
    a = trial_result("vllm-a", "vllm", [1000.0, 1001.0, 999.0], 4.0)
    d = decide([a], config([("vllm-a", "vllm")]), PROFILE)
    assert set(d.rubric["weights"]) == {"hardware", "stability", "workload", "team", "cost", "sla"}
    assert abs(sum(d.rubric["weights"].values()) - 1.0) < 1e-9
