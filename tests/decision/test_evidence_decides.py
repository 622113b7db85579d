"""The decision follows the evidence: its three verdicts (measured, equivalent, not conclusive) and who decides.

The configurations are searched against fake engines of known SLA capacity (``fakes.sim_engine``), as a live
run stores them: search points with their judged probes, and the estimate. Two configurations of one run
share a traffic seed (common random numbers), as they share streams.
"""

from decision_data import cfg
from decision_data import decide_measured as decide
from fakes.sim_engine import searched_result

from helpers.cost.analysis import analyse
from helpers.run.records import CapacitySummary, EngineResult, Point

PROFILE = {"format": "csv", "source": "trace.csv", "peak_requests_per_s": 2.0, "output_tokens_mean": 256}


def config(labels_engines, **sections):
    c = cfg([x for x, _ in labels_engines], **sections)
    for spec, (_, engine) in zip(c.engines, labels_engines, strict=True):
        spec.engine = engine
    return c


STABLE_SMALL_TEAM = {"cadence": {"updates_per_month": 0.1, "concurrent_models": 1},
                     "team": {"size": 3, "mlops_maturity": "low", "chase_peak": False}}  # fmt: skip


def test_equal_capacities_are_equivalent_and_the_tree_decides():
    a = searched_result("vllm-a", "vllm", 4.0, seed=1, traffic_seed=7)
    b = searched_result("sglang-b", "sglang", 4.0, seed=2, traffic_seed=7)
    d = decide([a, b], config([("vllm-a", "vllm"), ("sglang-b", "sglang")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict is not None and d.verdict.verdict == "equivalent" and not d.verdict.significant
    assert d.verdict.decided_by == "tree and operations cost"
    assert "equivalent within ±5%" in d.verdict.text and "paired over" in d.verdict.text
    assert d.primary_family == d.tree_family == "vllm" and d.contradiction is None
    assert any("equivalent within ±5%" in r for r in d.reasons)


def test_equivalent_configurations_of_one_engine_go_to_the_better_estimate_never_the_worse():
    # one engine family, one operations cost: the tree and the operations cost cannot separate them
    for seed in range(6):
        a = searched_result("vllm-a", "vllm", 4.0, seed=10 + seed, traffic_seed=seed)
        b = searched_result("vllm-b", "vllm", 4.04, seed=20 + seed, traffic_seed=seed)
        d = decide([a, b], config([("vllm-a", "vllm"), ("vllm-b", "vllm")], **STABLE_SMALL_TEAM), PROFILE)
        better = max((a, b), key=lambda r: r.capacity.estimate.value).label
        assert d.verdict.verdict in ("equivalent", "not_conclusive"), d.verdict.text
        assert d.primary == better == d.verdict.faster, (seed, d.verdict.text)
        if d.verdict.verdict == "equivalent":
            assert d.verdict.decided_by == "better estimate" and f"the better estimate, `{better}`" in d.verdict.text


def test_twice_the_capacity_wins_whatever_the_assumed_operations_hours():
    fast = searched_result("sglang-fast", "sglang", 8.0, seed=3, traffic_seed=9)
    slow = searched_result("vllm-slow", "vllm", 4.0, seed=4, traffic_seed=9)
    # operations hours favour vLLM heavily, and the tree says vLLM (small team, stable model); at 40 req/s
    # (6 vs 11 replicas) the GPUs saved outweigh 29 more engineer hours a month: the break-even holds
    ops = {"sglang": 30, "vllm": 1}
    sections = {**STABLE_SMALL_TEAM, "cost": {"gpu": "H200-SXM-141GB", "ops_hours_per_month": ops}}
    busy = {**PROFILE, "peak_requests_per_s": 40.0}
    d = decide([fast, slow], config([("sglang-fast", "sglang"), ("vllm-slow", "vllm")], **sections), busy)
    assert d.verdict.verdict == "measured" and d.verdict.significant and d.verdict.decided_by == "measurement"
    assert "serves" in d.verdict.text and "more requests per accelerator" in d.verdict.text
    assert 90 < d.verdict.difference_pct < 110 and d.verdict.low_pct > 0 and d.verdict.paired
    assert d.primary == "sglang-fast" and d.backup == "vllm-slow"
    assert d.tree_family == "vllm" and d.contradiction is not None
    assert d.contradiction.startswith("The measurements contradict the seed's decision tree: it points to vLLM")


def test_a_measured_winner_that_does_not_pay_for_its_operations_does_not_decide():
    fast = searched_result("sglang-fast", "sglang", 8.0, seed=3, traffic_seed=9)
    slow = searched_result("vllm-slow", "vllm", 4.0, seed=4, traffic_seed=9)
    tiny = {**PROFILE, "peak_requests_per_s": 0.01}  # one replica of either serves it: ops cost dominates
    sections = {
        **STABLE_SMALL_TEAM,
        "cost": {"gpu": "H200-SXM-141GB", "ops_hours_per_month": {"sglang": 300, "vllm": 1}},
    }
    d = decide([fast, slow], config([("sglang-fast", "sglang"), ("vllm-slow", "vllm")], **sections), tiny)
    assert d.verdict.significant and d.verdict.decided_by == "tree and operations cost"
    assert "break-even" in d.verdict.text and d.primary == "vllm-slow"


def test_too_few_probes_are_not_conclusive_first_with_what_it_would_take():
    # two edge rounds at most and a loose bracket: few probes near the edge, a difference inside the noise
    few = {"edge_rounds_min": 0, "edge_rounds_max": 0, "tolerance": 0.3, "max_probes": 4}
    a = searched_result("vllm-a", "vllm", 4.0, seed=5, traffic_seed=3, **few)
    b = searched_result("vllm-b", "vllm", 4.2, seed=6, traffic_seed=3, **few)
    d = decide([a, b], config([("vllm-a", "vllm"), ("vllm-b", "vllm")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict.verdict == "not_conclusive" and d.verdict.decided_by == "not conclusive"
    assert d.verdict.to_resolve and ("edge probe" in d.verdict.to_resolve)
    assert d.sentences[0].startswith("Not conclusive: provisionally use")
    assert d.primary == d.verdict.faster  # the better estimate, provisionally, never the worse


def test_a_search_that_never_failed_is_told_to_reach_a_failing_load_first():
    # one configuration met the SLA at the only load its budget reached: a lower bound under the other's estimate
    a = searched_result("vllm-a", "vllm", 5.0, seed=1, traffic_seed=7, max_probes=1, edge_rounds_min=0,
                        edge_rounds_max=0)  # fmt: skip
    b = searched_result("vllm-b", "vllm", 4.0, seed=2, traffic_seed=7)
    assert a.capacity.estimate.status == "at_least" and a.capacity.estimate.low < b.capacity.estimate.value
    d = decide([a, b], config([("vllm-a", "vllm"), ("vllm-b", "vllm")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict.verdict == "not_conclusive", d.verdict.text
    assert "`vllm-a` met the SLA at every load tried (up to 2)" in d.verdict.to_resolve
    assert "evidence.search.max_probes" in d.verdict.to_resolve and d.verdict.minutes_to_resolve is None
    assert d.sentences[0].startswith("Not conclusive")


def test_a_configuration_without_a_capacity_is_not_measured_never_a_tie():
    a = searched_result("vllm-a", "vllm", 4.0, seed=1, traffic_seed=7)
    none = EngineResult(label="sglang-b", engine="sglang", capacity=CapacitySummary(note="no probe"), points=[
        Point(label="sglang-b", engine="sglang", concurrency=4, phase="sweep", requests=10, duration_s=5.0,
              output_tok_s=500.0, total_tok_s=1500.0, req_s=2.0, ttft_ms_p95=300.0)
    ])  # fmt: skip
    d = decide([a, none], config([("vllm-a", "vllm"), ("sglang-b", "sglang")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict.verdict == "not_measured" and "nothing to compare" in d.verdict.text
    assert d.primary == "vllm-a"


def test_a_configuration_the_run_never_measured_makes_it_not_conclusive_not_a_win_by_default():
    a = searched_result("vllm-a", "vllm", 4.0, seed=1, traffic_seed=7)
    cut = EngineResult(label="tm-b", engine="lmdeploy", status="skipped", reason="its start was cut")
    d = decide([a, cut], config([("vllm-a", "vllm"), ("tm-b", "lmdeploy")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict.verdict == "not_conclusive" and d.verdict.decided_by == "not conclusive"
    assert d.verdict.text.startswith("`vllm-a` is the only configuration measured; `tm-b` was not measured in this")
    assert d.verdict.to_resolve == "measure `tm-b`: resume this run with `--engines` naming it"
    assert d.sentences[0].startswith("Not conclusive: provisionally use") and d.primary == "vllm-a"
    failed = cut.model_copy(update={"status": "failed", "reason": "out of memory"})  # a result, not a gap
    d = decide([a, failed], config([("vllm-a", "vllm"), ("tm-b", "lmdeploy")], **STABLE_SMALL_TEAM), PROFILE)
    assert d.verdict.verdict == "not_measured" and "nothing to compare" in d.verdict.text


def test_the_rubric_and_its_weights_are_in_the_decision():
    a = searched_result("vllm-a", "vllm", 4.0)
    d = decide([a], config([("vllm-a", "vllm")]), PROFILE)
    assert set(d.rubric["weights"]) == {"hardware", "stability", "workload", "team", "cost", "sla"}
    assert abs(sum(d.rubric["weights"].values()) - 1.0) < 1e-9


def test_a_capacity_known_from_below_is_worded_as_a_bound_and_qualifies_the_break_even():
    # sglang-a passed every load its budget reached (a lower bound); vllm-b has an estimate: not conclusive, so
    # the sentence gives sglang-a's figures as "at least" / "at most", and the break-even's "never" is the
    # estimates' only
    low = searched_result("sglang-a", "sglang", 5.0, seed=1, traffic_seed=7, max_probes=1, edge_rounds_min=0,
                          edge_rounds_max=0)  # fmt: skip
    est = searched_result("vllm-b", "vllm", 4.0, seed=2, traffic_seed=7)
    sections = {
        **STABLE_SMALL_TEAM,
        "cost": {"gpu": "H200-SXM-141GB", "ops_hours_per_month": {"sglang": 30, "vllm": 1}},
    }
    cfg_ = config([("sglang-a", "sglang"), ("vllm-b", "vllm")], **sections)
    d = decide([low, est], cfg_, PROFILE)
    assert d.verdict.verdict == "not_conclusive" and d.primary == "vllm-b" and d.backup == "sglang-a"
    backup = next(e for e in d.evidence if e["label"] == "sglang-a")
    assert backup["lower_bound"] is True
    fleet = {f.label: f for f in analyse([low, est], cfg_, PROFILE).fleet}
    assert "sized on the SLA capacity's lower bound" in fleet["sglang-a"].sizing_basis
    assert "95% low" not in fleet["sglang-a"].sizing_basis and "95% low" in fleet["vllm-b"].sizing_basis
    assert f"against at least {backup['output_tok_s']:,.0f} tok/s and at most $" in d.sentences[2]
    (row,) = [b for b in d.break_even if {b["harder"], b["easier"]} == {"sglang-a", "vllm-b"}]
    assert row["verdict"].startswith("never: sglang-a is not cheaper per token than vllm-b, at the estimates only")
    assert "their comparison is not conclusive (" in row["verdict"] and "is not measured" in row["verdict"]
    assert "no faster-but-harder configuration pays off at the estimates (their difference is not measured)" in (
        " ".join(d.sentences)
    )


def test_a_measured_difference_leaves_the_break_even_as_it_is():
    fast = searched_result("sglang-fast", "sglang", 8.0, seed=3, traffic_seed=9)
    slow = searched_result("vllm-slow", "vllm", 4.0, seed=4, traffic_seed=9)
    sections = {
        **STABLE_SMALL_TEAM,
        "cost": {"gpu": "H200-SXM-141GB", "ops_hours_per_month": {"sglang": 30, "vllm": 1}},
    }
    d = decide([fast, slow], config([("sglang-fast", "sglang"), ("vllm-slow", "vllm")], **sections), PROFILE)
    assert d.verdict.verdict == "measured"
    assert d.break_even and not any("at the estimates only" in b["verdict"] for b in d.break_even)
    assert not any(e["lower_bound"] for e in d.evidence)
