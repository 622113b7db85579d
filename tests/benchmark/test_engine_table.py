"""The seeds' engine table in step 5: per engine, at the seeds' load and at the SLA capacity, beside the seed.

Read on archived H200 runs (``reports/``) and on the recorded 70B FP8 sweep of the decision fixtures (the
only results with a point at concurrency 100). Content, not presence: every figure is the one the run
stored, every missing comparison says why.
"""

from __future__ import annotations

from pathlib import Path

from decision_data import SGLANG, TRT_FAILED, VLLM, cfg, results

from helpers.benchmark.engine_table import SEED_SOURCE, WHY, engine_table
from helpers.core.config import load_config
from helpers.run.folder import RunFolder

REPORTS = Path(__file__).resolve().parents[2] / "reports"
WORKLOADS = REPORTS.parent / "playbook" / "workloads"
AT_100, RATIO_100 = "at concurrency 100", "÷ vLLM at concurrency 100"
AT_CAP, RATIO_CAP, SEED = "at the SLA capacity", "÷ vLLM at the SLA capacity", "against the seed's figure"
NOT_MEASURED = f"not measured (see '{WHY}')"


def archived(run: str) -> dict[str, dict]:
    folder = REPORTS / run
    df = engine_table(RunFolder(folder).engine_results(), load_config(folder / "config.yaml"), "H200-SXM-141GB")
    return {row["engine"]: row for row in df.to_dict("records")}


def test_the_lmdeploy_run_gives_capacities_with_intervals_and_ratios_to_vllm():
    rows = archived("h200-20261201-chat-8b-lmdeploy")
    assert list(rows) == ["vLLM", "SGLang", "LMDeploy", "TensorRT-LLM"]  # the seed's order
    v, s, lm, trt = rows["vLLM"], rows["SGLang"], rows["LMDeploy"], rows["TensorRT-LLM"]
    assert [v[SEED_SOURCE], s[SEED_SOURCE], lm[SEED_SOURCE], trt[SEED_SOURCE]] == [
        "~12,500 (100%)",
        "~16,200 (130%)",
        "~16,200 (130%)",
        "~14,500-16,500 (116-132%)",
    ]
    # the grid was 1 and 32: nothing is claimed at the seeds' load
    for row in (v, s, lm):
        assert row[AT_100] == "not measured: this run's grid is 1, 32, not 100"
        assert row[RATIO_100] == "not measured: no point at concurrency 100"
    assert v[AT_CAP] == "7,515 ± 492 (n=25) / 22,545 ± 1,476 (n=25) at 29.36 ± 1.92 (n=25) req/s"
    assert v[RATIO_CAP] == "1 (the reference)"
    assert lm["configuration"] == "LMDeploy 0.18.0 (PyTorch)"
    assert lm[AT_CAP] == "3,680 ± 406 (n=21) / 11,039 ± 1,219 (n=21) at 14.37 ± 1.59 (n=21) req/s"
    assert lm[RATIO_CAP] == "0.49× (-51.0% [-57.3, -43.9] 95% CI, SLA capacities, unpaired)"
    assert s[RATIO_CAP] == "0.99× (-1.2% [-18.2, +19.2] 95% CI, SLA capacities, unpaired)"
    # an 8B bf16 shape is not the seed's, and the PyTorch backend is not the engine the seed's figure is of
    shape = "not comparable: model shape llama-3.1-8b: 8.0B parameters, 32 layers, hidden 4096, bf16 weights"
    assert v[SEED].startswith(shape) and s[SEED].startswith(shape)
    assert lm[SEED].endswith("; the pytorch backend, not turbomind (the engine's default, which the seed's figure "
                             "is of)")  # fmt: skip
    assert [trt[c] for c in (AT_100, RATIO_100, AT_CAP, RATIO_CAP)] == [NOT_MEASURED] * 4
    assert trt[WHY].startswith("no installable TensorRT-LLM for this Python in the package registry "
                               "(tensorrt-llm 1.2.1 pins torch ≤ 2.10")  # fmt: skip
    assert "trtllm-serve serve MODEL" in trt[WHY] and "engine: endpoint" in trt[WHY] and "--engines" in trt[WHY]
    assert v[WHY] == s[WHY] == lm[WHY] == ""


def test_the_70b_run_is_the_seeds_shape_and_lmdeploy_says_where_it_is_measured():
    rows = archived("h200-20261203-chat-70b-fp8")
    assert rows["vLLM"][SEED] == (
        "comparable: the seed's model shape; measured on H200-SXM-141GB, the seed on one H100 SXM5 80GB"
    )
    assert rows["SGLang"][RATIO_CAP] == "0.97× (-2.8% [-48.2, +82.1] 95% CI, SLA capacities, unpaired)"
    assert rows["SGLang"][AT_100] == "not measured: this run's grid is 1, 10, not 100"
    lm = rows["LMDeploy"]
    assert lm["configuration"] == "—" and lm[AT_CAP] == NOT_MEASURED
    assert lm[WHY] == (
        "not in this run's config; playbook/workloads/h200-offline/chat-8b-turbomind.yaml (Llama-3.1-8B bf16) and "
        "chat-70b-fp8-turbomind.yaml (the seed's Llama-3.3-70B FP8) measure LMDeploy's TurboMind beside vLLM and "
        "SGLang"
    )
    assert (WORKLOADS / "h200-offline" / "chat-70b-fp8-turbomind.yaml").is_file()  # the file it names


def test_at_the_seeds_load_the_ratio_is_of_the_concurrency_100_points_and_a_failed_engine_says_why():
    df = engine_table(results(VLLM, SGLANG, TRT_FAILED), cfg([VLLM, SGLANG, TRT_FAILED]), "H100 SXM5 80GB")
    rows = {row["configuration"]: row for row in df.to_dict("records")}
    v, s, trt = rows[VLLM], rows[SGLANG], rows[TRT_FAILED]
    assert v[AT_100] == "1,974 / 5,922 (one grid sample, no interval)" and v[RATIO_100] == "1 (the reference)"
    assert s[AT_100] == "1,782 / 5,347 (one grid sample, no interval)"
    assert s[RATIO_100] == "0.90 (5,347 / 5,922 total tok/s)"  # the seed says 130%
    assert s[AT_CAP].endswith("trials at a fixed concurrency 10 (no capacity search)")
    assert s[RATIO_CAP].startswith("1.00× (+0.2% [-2.1, +2.5] 95% CI, trials at a fixed 10 streams")
    assert v[SEED] == s[SEED] == "comparable: the seed's model shape"  # the seed's GPU: no caveat
    assert trt[AT_100] == NOT_MEASURED and trt[WHY].startswith("failed: tensorrt_llm 1.2.1 is not installable")
    assert "TensorRT-LLM" not in list(df["engine"])[3:]  # the failed row stands for it; no second row


def test_the_h100_70b_run_fills_the_seeds_row_and_a_lower_bound_is_a_bound_not_a_ratio():
    """One H100 80GB, the seed's condition (2026-12-06): all three engines at concurrency 100, TurboMind's and
    SGLang's capacities estimated, vLLM's only a lower bound (every load it tried passed)."""
    folder = REPORTS / "h100-20261206-chat-70b-fp8"
    df = engine_table(RunFolder(folder).engine_results(), load_config(folder / "config.yaml"), "H100-SXM5-80GB")
    rows = {row["engine"]: row for row in df.to_dict("records")}
    v, s, lm = rows["vLLM"], rows["SGLang"], rows["LMDeploy"]
    assert lm["configuration"] == "LMDeploy 0.18.0 (TurboMind)" and lm[SEED] == "comparable: the seed's model shape"
    assert lm[AT_100] == "639 / 1,917 (one grid sample, no interval)"
    assert lm[RATIO_100] == "1.79 (1,917 / 1,069 total tok/s)" and s[RATIO_100] == "1.45 (1,547 / 1,069 total tok/s)"
    assert v[AT_100].endswith("the time cap cut it (33 in flight): understated)")
    assert not lm[AT_CAP].startswith("≥") and lm[AT_CAP].endswith("at 2.72 req/s")
    assert s[AT_CAP] == "486 / 1,459 at 1.90 req/s"
    assert v[AT_CAP].startswith("≥ ") and v[AT_CAP].endswith("(a lower bound: no failing load sized)")
    # an estimate over vLLM's lower bound is an upper bound on the ratio
    assert lm[RATIO_CAP] == "≤ 3.87× (vLLM 0.26.0's capacity is a lower bound)"
    assert s[RATIO_CAP] == "≤ 2.70× (vLLM 0.26.0's capacity is a lower bound)"


def test_two_lower_bounds_give_no_ratio():
    """The 70B run as it stood before SGLang's search failed a load: SGLang's passing probes alone."""
    from helpers.benchmark.boundary import estimate_capacity
    from helpers.benchmark.judged import point_readings

    folder = REPORTS / "h100-20261206-chat-70b-fp8"
    c = load_config(folder / "config.yaml")
    res = RunFolder(folder).engine_results()
    sg = next(r for r in res if r.label == "SGLang 0.5.16")
    sg.capacity.estimate = estimate_capacity([r for r in point_readings(sg, c) if r.passed])
    assert sg.capacity.estimate.status == "at_least" and sg.capacity.estimate.low == max(
        r.load for r in point_readings(sg, c) if r.passed
    )
    rows = {row["engine"]: row for row in engine_table(res, c, "H100-SXM5-80GB").to_dict("records")}
    vllm = next(r for r in res if r.label == "vLLM 0.26.0").capacity.estimate
    assert vllm.status == "at_least"
    bounds = sg.capacity.estimate.low / vllm.low  # over vLLM's one passing probe
    assert rows["SGLang"][AT_CAP].startswith("≥ ")
    assert rows["SGLang"][RATIO_CAP] == f"no ratio: both capacities are lower bounds ({bounds:.2f}× of the bounds)"
