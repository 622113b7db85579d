"""The seeds' claims table, on recorded H200 results (tests/fixtures/decision, from the shared probes)."""

import copy

from decision_data import SGLANG, VLLM, results

from helpers.claims import claims_table


def row(df, start: str) -> dict:
    return df[df["claim"].str.startswith(start)].iloc[0].to_dict()


def test_sglang_over_vllm_ratio_at_the_highest_common_concurrency():
    df = claims_table(results(VLLM, SGLANG))
    r = row(df, "SGLang / vLLM")
    assert r["measured here"] == f"{5347 / 5922:.2f}" == "0.90"
    assert "concurrency 100" in r["basis"] and "time cap" not in r["basis"]


def test_batching_gain_and_cold_starts():
    df = claims_table(results(VLLM, SGLANG))
    assert "vllm-h200-70b-fp8: 40.9×" in row(df, "Continuous batching")["measured here"]
    assert row(df, "vLLM cold start")["measured here"] == "vllm-h200-70b-fp8: 190 s"
    assert row(df, "SGLang cold start")["measured here"] == "sglang-h200-70b-fp8: 125 s"
    assert row(df, "TensorRT-LLM cold start")["measured here"] == "not measured in this run"


def test_prefix_saving_needs_on_and_off_configurations():
    vllm = results(VLLM)[0]
    assert row(claims_table([vllm]), "Prefix caching")["measured here"] == "not measured in this run"
    on, off = copy.deepcopy(vllm), copy.deepcopy(vllm)
    on.label, off.label = "on", "off"
    for p in on.points:
        p.knobs = {"prefix_caching": True}
        p.ttft_ms_p50 = 100.0
    for p in off.points:
        p.knobs = {"prefix_caching": False}
        p.ttft_ms_p50 = 500.0
    assert row(claims_table([on, off]), "Prefix caching")["measured here"] == "80% lower TTFT p50"


def test_time_capped_points_are_flagged():
    v, s = results(VLLM, SGLANG)
    for p in v.points:
        p.incomplete = 3
    assert (
        "time cap cut vllm-h200-70b-fp8 at c=100 (3 in flight)" in row(claims_table([v, s]), "SGLang / vLLM")["basis"]
    )
