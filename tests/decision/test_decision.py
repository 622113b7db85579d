import json

import pytest
from decision_data import SGLANG, TRT, TRT_FAILED, VLLM, cfg, numbers_in, recorded, results, scaled
from decision_data import decide_measured as decide

from helpers.decision.scores import rank_candidates
from helpers.decision.tree import DecisionResult, EngineScore, run_tree, tree_verdict

STABLE = {"updates_per_month": 0.2}
BIG_TEAM = {"size": 12, "mlops_maturity": "high", "chase_peak": True}
PEAK = {"format": "mooncake", "source": "trace.jsonl", "peak_requests_per_s": 20, "output_tokens_mean": 256,
        "concurrency_p99": 120}  # fmt: skip

# (case, config sections, profile, tree family, step it ends at, condition of that step)
TREE_CASES = [
    ("amd planned", {"hardware": {"vendors": "amd-planned"}}, {}, "vllm", 1, "amd-planned"),
    ("mixed hardware", {"hardware": {"vendors": "mixed"}, "cadence": STABLE}, {}, "vllm", 1, "mixed"),
    ("frequent updates", {"cadence": {"updates_per_month": 4}}, {}, "vllm", 2, "frequent"),
    ("updates at threshold", {"cadence": {"updates_per_month": 1}}, {}, "vllm", 2, "frequent"),
    ("many models", {"cadence": {"updates_per_month": 0, "concurrent_models": 3}}, {}, "vllm", 2, "frequent"),
    ("heavy prefix reuse", {"cadence": STABLE}, {"prefix_reuse_ratio": 0.6}, "sglang", 3, "prefix_heavy"),
    ("reuse at threshold", {"cadence": STABLE}, {"prefix_reuse_ratio": 0.3}, "sglang", 3, "prefix_heavy"),
    ("light reuse, small team", {"cadence": STABLE}, {"prefix_reuse_ratio": 0.1}, "vllm", 4, "small"),
    ("no ratio, small team", {"cadence": STABLE}, {}, "vllm", 4, "small"),
    ("large team chasing peak", {"cadence": STABLE, "team": BIG_TEAM}, {"concurrency_p99": 120},
     "trtllm", 4, "large_peak"),
    ("middle team", {"cadence": STABLE, "team": {"size": 7, "mlops_maturity": "medium"}}, {},
     "vllm", 4, "middle"),
    ("small team chasing peak", {"cadence": STABLE, "team": {**BIG_TEAM, "size": 3}}, {},
     "vllm", 4, "small"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "sections", "profile", "family", "end", "condition"), TREE_CASES)
def test_tree_paths(case, sections, profile, family, end, condition):
    steps = run_tree(cfg(**sections), profile)
    assert tree_verdict(steps) == (family, end), case
    assert steps[end - 1].condition == condition
    assert [s.reached for s in steps] == [i < end for i in range(4)]
    assert all(s.outcome == "continue" for s in steps[: end - 1])


def test_tree_records_inputs_and_says_when_no_ratio_was_measured():
    steps = run_tree(cfg(cadence=STABLE), {"concurrency_p99": 80})
    wl = steps[2]
    assert wl.inputs == {"profile.prefix_reuse_ratio": None, "profile.concurrency_p99": 80}
    assert wl.thresholds["profile.prefix_reuse_ratio"] == 0.3
    assert "no measured prefix-reuse ratio" in wl.reason and wl.outcome == "continue"
    assert wl.condition == "high_concurrency"


def _decide(res, sections, profile):
    labels = [r.label for r in res]
    return decide(res, cfg(labels, **sections), profile)


# (case, result labels, config sections, profile, primary, backup, overruled)
DECIDE_CASES = [
    ("tree and data agree on TensorRT-LLM", [VLLM, SGLANG, TRT], {"cadence": STABLE, "team": BIG_TEAM}, PEAK,
     TRT, VLLM, False),
    ("amd planned excludes TensorRT-LLM", [VLLM, SGLANG, TRT], {"hardware": {"vendors": "amd-planned"}}, PEAK,
     VLLM, SGLANG, False),
    ("frequent updates keep vLLM", [VLLM, SGLANG], {"cadence": {"updates_per_month": 4}}, {},
     VLLM, SGLANG, False),
    ("failed engine is never primary", [TRT_FAILED, VLLM], {"cadence": STABLE, "team": BIG_TEAM}, PEAK,
     VLLM, None, False),
]  # fmt: skip


@pytest.mark.parametrize(("case", "labels", "sections", "profile", "primary", "backup", "overruled"), DECIDE_CASES)
def test_decide_on_recorded_h200_data(case, labels, sections, profile, primary, backup, overruled):
    d = _decide(results(*labels), sections, profile)
    assert (d.primary, d.backup, d.overruled) == (primary, backup, overruled), case
    measured = {r.label for r in results(*labels) if r.points}
    assert d.primary in measured and (d.backup is None or d.backup in measured)


def test_grid_points_alone_decide_nothing():
    """The fixtures as recorded (sweep points, no trials): nothing stands for them, the tree answers."""
    d = _decide(recorded(VLLM, SGLANG), {}, {})
    assert not d.measured and d.primary == "vllm" and d.backup is None and d.evidence == []
    assert all(not s.measured and not s.eligible for s in d.scores)
    assert "no eligible configuration was measured" in d.sentences[0]
    # the faster configuration without trials loses to the one whose trials stand for it, whatever the tree says
    res = [results(VLLM)[0], scaled(recorded(SGLANG)[0], 1.3)]
    d = decide(res, cfg([VLLM, SGLANG], cadence=STABLE, workload={"shared_prefix_tokens": 2000}),
               {"prefix_reuse_ratio": 0.6})  # fmt: skip
    assert d.tree_family == "sglang" and d.primary == VLLM and d.backup is None
    assert [e["label"] for e in d.evidence] == [VLLM]


def test_fixed_load_trials_are_said_to_be_a_fixed_load_not_a_capacity():
    d = _decide(results(VLLM, SGLANG), {}, {})  # no peak known: the last sentence names where it was measured
    assert {e["source"] for e in d.evidence} == {"fixed"}
    assert "in its trials at a fixed concurrency of 10" in d.sentences[2]
    assert d.sentences[3].endswith("that was measured at a fixed 10 streams, not at a searched SLA capacity.")
    d = _decide(results(VLLM, TRT), {"cadence": STABLE}, PEAK)  # +16%, intervals apart: the measurement decides
    assert d.verdict.decided_by == "measurement" and d.primary == TRT
    assert d.verdict.verdict == "measured" and "at a fixed load" in d.verdict.text
    assert "at the SLA" not in d.verdict.text


def test_measurements_overrule_the_tree_and_say_so():
    slow_sglang = scaled(results(SGLANG)[0], 0.6)
    res = [results(VLLM)[0], slow_sglang]
    d = decide(
        res,
        cfg([VLLM, SGLANG], cadence=STABLE, workload={"shared_prefix_tokens": 2000}),
        {"prefix_reuse_ratio": 0.6},
    )
    assert d.tree_family == "sglang" and d.primary == VLLM and d.backup == SGLANG and d.overruled
    assert any("overrule" in s for s in d.sentences)
    assert any("overrule" in r for r in d.reasons)


def test_tree_holds_when_data_agree():
    fast_sglang = scaled(results(SGLANG)[0], 1.3)
    res = [results(VLLM)[0], fast_sglang]
    d = decide(
        res,
        cfg([VLLM, SGLANG], cadence=STABLE, workload={"shared_prefix_tokens": 2000}),
        {"prefix_reuse_ratio": 0.6},
    )
    assert d.primary == SGLANG and not d.overruled and not any("overrule" in s for s in d.sentences)


@pytest.mark.parametrize(
    ("case", "labels", "sections", "profile", "needle"),
    [
        ("AMD planned, only TensorRT-LLM listed", [TRT], {"hardware": {"vendors": "amd-planned"}}, {},
         "engine list only holds TensorRT-LLM"),
        ("AMD planned, only TensorRT-LLM listed (tree)", [TRT], {"hardware": {"vendors": "amd-planned"}}, {},
         "no vLLM engine is in the config's engine list"),
        ("peak without MLOps", [VLLM], {"team": {"chase_peak": True, "mlops_maturity": "low"}}, {},
         "chase_peak is true but"),
        ("reuse not benchmarked", [VLLM, SGLANG], {"cadence": STABLE}, {"prefix_reuse_ratio": 0.7},
         "no shared prefix"),
        ("edge case", [VLLM], {"cadence": {"updates_per_month": 4}}, {"concurrency_p99": 200}, "Edge case"),
        ("failed engine", [TRT_FAILED, VLLM], {}, {}, "`trtllm-failed` failed"),
        ("SLA never met", [VLLM], {"sla": {"ttft_p95_ms": 10}}, {}, "No measured configuration meets"),
    ],
)  # fmt: skip
def test_contradictions_and_caveats_warn(case, labels, sections, profile, needle):
    d = _decide(results(*labels), sections, profile)
    assert any(needle in w for w in d.warnings), (case, d.warnings)


def test_amd_with_only_trtllm_does_not_pick_silently():
    d = _decide(results(TRT), {"hardware": {"vendors": "amd-planned"}}, {})
    assert not d.measured and d.primary == "vllm" and d.backup is None
    assert any("TensorRT-LLM cannot run" in s.why_not or "cannot run" in s.why_not for s in d.scores)
    assert "no eligible configuration was measured" in d.sentences[0]


def test_only_failed_results_fall_back_to_the_tree():
    d = _decide(results(TRT_FAILED), {"cadence": STABLE, "team": BIG_TEAM}, {})
    assert not d.measured and d.primary == "trtllm" and d.primary_family == "trtllm"


def _eng(label, family, total, cost=1.0, sla=0.5):
    return EngineScore(label=label, engine=family, family=family, status="ok", measured=True, eligible=True,
                       hardware=1, stability=1, workload=1, team=1, cost=1, sla=sla, total=total,
                       cost_value=cost, sla_share=sla)  # fmt: skip


@pytest.mark.parametrize(
    ("case", "scores", "tree", "order"),
    [
        ("higher total wins", [_eng("a", "vllm", 0.7), _eng("b", "sglang", 0.8)], "vllm", ["b", "a"]),
        ("tie: tree family first", [_eng("a", "vllm", 0.8), _eng("b", "sglang", 0.8)], "sglang", ["b", "a"]),
        ("tie: lower cost", [_eng("a", "vllm", 0.8, cost=3), _eng("b", "vllm", 0.8, cost=2)], "vllm",
         ["b", "a"]),
        ("tie: higher SLA share", [_eng("a", "vllm", 0.8, sla=0.5), _eng("b", "vllm", 0.8, sla=0.75)], "vllm",
         ["b", "a"]),
        ("tie: label", [_eng("b", "vllm", 0.8), _eng("a", "vllm", 0.8)], "vllm", ["a", "b"]),
    ],
)  # fmt: skip
def test_tie_breaks(case, scores, tree, order):
    assert [s.label for s in rank_candidates(scores, tree)] == order, case


def test_identical_configurations_tie_break_by_label_in_decide():
    a = scaled(results(VLLM)[0], 1.0, label="vllm-a")
    b = scaled(results(VLLM)[0], 1.0, label="vllm-b")
    d = decide([b, a], cfg(["vllm-a", "vllm-b"]), {})
    assert (d.primary, d.backup) == ("vllm-a", "vllm-b")
    assert any("no measured backup" in w for w in d.warnings) is False


def _table_numbers(d: DecisionResult) -> set[float]:
    vals: set[float] = set()
    for t in d.tables().values():
        for v in t.to_numpy().ravel():
            if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
                vals.add(round(float(v), 6))
    return vals


@pytest.mark.parametrize(
    ("labels", "sections", "profile"),
    [
        ([VLLM, SGLANG, TRT, TRT_FAILED], {"cadence": STABLE, "team": BIG_TEAM}, PEAK),
        ([VLLM, SGLANG, TRT], {"cadence": STABLE}, {"prefix_reuse_ratio": 0.6}),
        ([VLLM, SGLANG], {}, {}),
        ([VLLM, SGLANG, TRT], {"hardware": {"vendors": "mixed"}}, {"concurrency_p99": 64}),
        ([TRT_FAILED], {}, {}),
    ],
)
def test_every_number_in_the_answer_is_in_the_tables(labels, sections, profile):
    d = _decide(results(*labels), sections, profile)
    assert 4 <= len(d.sentences) <= 5
    table_values = _table_numbers(d)
    for sentence in d.sentences:
        for n in numbers_in(sentence):
            assert round(n, 6) in table_values, (n, sentence)


def test_four_sentence_shape_and_phase_plan():
    d = _decide(results(VLLM, SGLANG, TRT), {"cadence": STABLE, "team": BIG_TEAM}, PEAK)
    assert d.sentences[0].startswith(f"Use `{TRT}`") and "backup" in d.sentences[0]
    assert "step 4 (team)" in d.sentences[1]
    assert "2,000 ms" in d.sentences[2] and "$" in d.sentences[3] and "TCO" in d.sentences[3]
    phases = {p.phase: p for p in d.phase_plan}
    assert phases[1].configuration == VLLM and phases[1].numbers["output_tok_s"] == 417
    assert phases[3].applies and phases[3].numbers["break_even_output_tok_s"] > 0
    d = _decide(results(VLLM, SGLANG), {"hardware": {"vendors": "amd-planned"}}, {"prefix_reuse_ratio": 0.1})
    phases = {p.phase: p for p in d.phase_plan}
    assert not phases[3].applies and "NVIDIA only" in phases[3].note
    assert not phases[2].applies and phases[2].numbers["prefix_reuse_ratio"] == 0.1


def test_decision_result_round_trips_as_json():
    d = _decide(results(), {"cadence": STABLE, "team": BIG_TEAM}, PEAK)
    again = DecisionResult.model_validate_json(d.model_dump_json())
    assert again.primary == d.primary and json.loads(d.model_dump_json())["overruled"] is False


def test_endpoint_family_scores_neutral():
    ep = scaled(results(VLLM)[0], 1.0, label="ep")
    ep.engine = "endpoint"
    for p in ep.points:
        p.engine = "endpoint"
    c = cfg([VLLM])
    d = decide([results(VLLM)[0], ep], c, {})
    s = {x.label: x for x in d.scores}
    assert s["ep"].family == "" and s["ep"].hardware == 0.5
    assert d.primary == VLLM


def test_cpu_engine_is_priced_with_the_assumed_cpu_price_and_warned():
    cpu = scaled(results(VLLM)[0], 1.0)
    cpu.engine = "vllm-cpu"
    for p in cpu.points:
        p.engine = "vllm-cpu"
    d = decide([cpu], cfg([VLLM], cost={"gpu": "H100-SXM5-80GB"}), {})
    assert d.primary == VLLM and d.primary_family == "vllm"
    assert d.evidence[0]["priced_as"] == "cpu" and d.evidence[0]["price_per_hour"] == 0.1
    assert any("ASSUMED `cpu` price" in w for w in d.warnings)


def test_equal_fleets_break_toward_the_lower_cost_per_token():
    """At traffic one replica serves either way, equal TCO must not hide a 2x throughput difference."""
    slow = scaled(results(VLLM)[0], 1.0, label="vllm-slow")
    fast = scaled(results(VLLM)[0], 2.0, label="vllm-fast")
    low = {"format": "csv", "peak_requests_per_s": 0.01, "output_tokens_mean": 16, "concurrency_p99": 1}
    d = decide([slow, fast], cfg(["vllm-slow", "vllm-fast"]), low)
    by = {s.label: s for s in d.scores}
    assert by["vllm-slow"].cost_value == by["vllm-fast"].cost_value  # same one-replica fleet
    assert (d.primary, d.backup) == ("vllm-fast", "vllm-slow")


TEAM_CASES = [(4, "small", "vllm"), (6, "middle", "vllm"), (10, "middle", "vllm"), (11, "large_peak", "trtllm")]


@pytest.mark.parametrize(("size", "condition", "outcome"), TEAM_CASES)
def test_team_rule_as_the_seed_writes_it(size, condition, outcome):
    """Seed 003 §7.1: small < 5, big > 10; a 6-person peak-chasing team is in between, not TensorRT-LLM's."""
    team = {"size": size, "mlops_maturity": "high", "chase_peak": True}
    steps = run_tree(cfg(team=team, cadence={"updates_per_month": 0.1, "concurrent_models": 1}), None)
    step4 = next(s for s in steps if s.step == 4)
    assert (step4.condition, step4.outcome) == (condition, outcome)
    if condition == "middle":
        assert "no clear leaning" in step4.reason


def _with_replay(res, label: str, hit: float | None, caching: bool | None = True, usage: float | None = None):
    """Copy the results with one structured replay point added to ``label`` (achieved hit rate ``hit``)."""
    import copy

    from helpers.run.records import CacheSplit, StructuredCheck

    out = [copy.deepcopy(r) for r in res]
    r = next(r for r in out if r.label == label)
    p = copy.deepcopy(r.points[0])
    p.phase, p.server.prefix_cache_hit_rate = "structured", hit
    p.structure = StructuredCheck(
        workload="multi-turn", kind="sessions", requests_planned=320, prefix_caching=caching,
        usage=None if usage is None else CacheSplit(
            requests=320, reporting=320, prompt_tokens=1000, cached_tokens=int(usage * 1000), hit_rate=usage,
            hit_requests=300, ttft_hit_ms_p50=None, ttft_hit_ms_p95=None, ttft_miss_ms_p50=None,
            ttft_miss_ms_p95=None),
    )  # fmt: skip
    r.points.append(p)
    return out


def test_tree_step_3_judges_the_achieved_hit_rate_over_the_predictions():
    """Issue 15: the heavy-reuse branch uses the finite-cache prediction, and the achieved rate once measured."""
    profile = {"prefix_reuse_ratio": 0.8, "finite_cache_hit_rate": 0.5}
    wl = run_tree(cfg(cadence=STABLE), profile)[2]
    assert wl.inputs["profile.finite_cache_hit_rate"] == 0.5 and wl.condition == "prefix_heavy"
    assert wl.reason.startswith("finite-cache predicted prefix reuse 0.50 ≥ threshold 0.3 (the playbook's default")
    # the unbounded bound says heavy, the finite cache evicts: not heavy
    wl = run_tree(cfg(cadence=STABLE), {"prefix_reuse_ratio": 0.8, "finite_cache_hit_rate": 0.2})[2]
    assert wl.condition != "prefix_heavy" and "finite-cache predicted prefix reuse 0.20 < threshold" in wl.reason
    # once step 5 replayed the structure, what the best cache-on engine achieved decides
    base = results(VLLM, SGLANG)
    res = _with_replay(_with_replay(base, VLLM, 0.12), SGLANG, 0.25)
    wl = run_tree(cfg(cadence=STABLE), profile, res)[2]
    assert wl.inputs["step5.achieved_prefix_hit_rate"] == 0.25 and wl.condition != "prefix_heavy"
    assert f"prefix-cache hit rate achieved in step 5 ({SGLANG}, multi-turn replay) 0.25 < threshold" in wl.reason
    # a replay with caching off says nothing of the traffic's reuse; per-request cached tokens stand in
    res = _with_replay(_with_replay(base, VLLM, 0.0, caching=False), SGLANG, None, usage=0.4)
    wl = run_tree(cfg(cadence=STABLE), {"prefix_reuse_ratio": 0.1}, res)[2]
    assert wl.inputs["step5.achieved_prefix_hit_rate"] == 0.4 and wl.condition == "prefix_heavy"


def test_a_rate_capacity_without_peak_traffic_is_worded_as_a_request_rate():
    # trials at an open-loop SLA capacity (rate axis: no concurrency) and no peak traffic: no fleet is sized,
    # and the cost sentence names the capacity in req/s (this branch once formatted a missing concurrency)
    res = []
    for r in results(VLLM, SGLANG):
        for p in r.points:
            if p.phase == "trial":
                p.offered_rate, p.concurrency = 12.5, 0
        r.capacity = r.capacity.model_copy(update={"axis": "rate", "searched": True, "capacity": 12.5,
                                                   "trial_load": 12.5})  # fmt: skip
        res.append(r)
    d = decide(res, cfg([VLLM, SGLANG], cadence={"updates_per_month": 4}), {})
    text = " ".join(d.sentences)
    assert "No peak traffic is known" in text and "that is its SLA capacity" in text and "req/s per replica" in text
    assert "None" not in text


def test_capacities_within_the_sla_are_not_warned_as_missing_it_and_an_overrule_on_estimates_says_so():
    from helpers.core.config import load_config
    from helpers.core.paths import REPORTS_DIR
    from helpers.run.reader import engine_results

    run = REPORTS_DIR / "h100-20261206-chat-70b-fp8"  # concurrency 100 is past the 2 s SLA for every engine
    c = load_config(run / "config.yaml")
    d = decide(engine_results(run), c)
    measured = [s for s in d.scores if s.measured]
    assert measured and all(s.sla_share == 0 for s in measured)  # the grid's share: no point within the SLA
    assert not any("No measured configuration meets" in w for w in d.warnings), d.warnings
    assert d.verdict.verdict == "not_conclusive" and d.sentences[0].startswith("Not conclusive")
    # the tree's vLLM is overruled on estimates, and vLLM's own capacity is only a lower bound: both said
    assert d.overruled and d.sentences[3].startswith("At the estimates (not conclusive), these measurements overrule")
    assert d.sentences[3].endswith("the best vLLM configuration, its capacity only a lower bound.")
