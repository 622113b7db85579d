"""The seeds' claims table, on recorded H200 results (tests/fixtures/decision, from the shared probes)."""

import copy

from decision_data import SGLANG, VLLM, cfg, results

from helpers.benchmark.claims import claims_table


def row(df, start: str) -> dict:
    return df[df["claim"].str.startswith(start)].iloc[0].to_dict()


SEED_CFG = cfg([VLLM, SGLANG])  # the fixtures' model: Llama 3.3 70B FP8, the seed's shape


def test_sglang_over_vllm_ratio_at_the_seeds_concurrency_on_the_seeds_model():
    df = claims_table(results(VLLM, SGLANG), SEED_CFG)
    r = row(df, "SGLang / vLLM")
    assert r["measured here"] == f"{5347 / 5922:.2f}" == "0.90"
    assert "at concurrency 100" in r["basis"] and "time cap" not in r["basis"]


def test_batching_row_and_cold_starts():
    df = claims_table(results(VLLM, SGLANG), SEED_CFG)
    assert row(df, "Continuous batching")["measured here"].startswith("not measured in this run: batching.enabled")
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
        p.ttft_ms_p50 = 100.0 if p.concurrency == 100 else 400.0
        p.server.prefix_cache_hit_rate = 0.75
    for p in off.points:
        p.knobs = {"prefix_caching": False}
        p.ttft_ms_p50 = 500.0
    r = row(claims_table([on, off]), "Prefix caching")
    assert r["measured here"] == "on: 75% of prompt tokens from cache, TTFT p50 80% lower"
    assert r["basis"].startswith("100 vs 500 ms at concurrency 100 (on vs off)")


def test_prefix_saving_on_the_archived_h200_run():
    """Both engines of the shared-prefix run (2,000 of 2,512 prompt tokens shared) are compared."""
    from pathlib import Path

    from helpers.run.records import load_engine_results

    rs = load_engine_results(Path(__file__).resolve().parents[2] / "reports" / "h200-20261129-shared-prefix-8b")
    measured = row(claims_table(rs), "Prefix caching")["measured here"]
    for label in ("vLLM 0.26.0 prefix-cache on", "SGLang 0.5.16 prefix-cache on"):
        on = next(r for r in rs if r.label == label)
        off = next(r for r in rs if r.label == label.replace(" on", " off"))
        a, b = on.points[-1], off.points[-1]
        assert a.concurrency == b.concurrency == 32
        saving = 1 - a.ttft_ms_p50 / b.ttft_ms_p50
        assert saving > 0.5  # the cache must show: most of each prompt is the shared prefix
        hit = a.server.prefix_cache_hit_rate
        assert 0.7 < hit <= 2000 / 2512
        assert f"{label}: {hit:.0%} of prompt tokens from cache, TTFT p50 {saving:.0%} lower" in measured


def test_time_capped_points_are_flagged():
    v, s = results(VLLM, SGLANG)
    for p in v.points:
        p.incomplete = 3
    assert (
        "time cap cut vllm-h200-70b-fp8 at c=100 (3 in flight)"
        in row(claims_table([v, s], SEED_CFG), "SGLang / vLLM")["basis"]
    )


def test_multi_turn_lead_reads_the_structured_replays_of_both_engines():
    from helpers.run.records import StructuredCheck

    v, s = (copy.deepcopy(r) for r in results(VLLM, SGLANG))
    assert row(claims_table([v, s]), "SGLang leads multi-turn")["measured here"] == "not measured in this run"
    for r, tok_s, hit in ((v, 1000.0, 0.70), (s, 1300.0, 0.72)):
        p = copy.deepcopy(r.points[0])
        p.phase, p.output_tok_s, p.server.prefix_cache_hit_rate = "structured", tok_s, hit
        p.structure = StructuredCheck(
            workload="multi-turn", kind="sessions", requests_planned=320, description="64 x 5"
        )
        r.points.append(p)
    r = row(claims_table([v, s]), "SGLang leads multi-turn")
    assert r["seed says"] == "~30% ahead of vLLM (seed 000 §5.2)" and r["measured here"] == "SGLang +30%"
    assert r["basis"].startswith("1,300 / 1,000 output tok/s on the same multi-turn replay")
    assert "prompt tokens from cache 72% / 70%" in r["basis"]


def _variant(base, label: str, knobs: dict, factor: float):
    v = copy.deepcopy(base)
    v.label = label
    for p in v.points:
        p.knobs = {**p.knobs, **knobs}
        p.output_tok_s *= factor
    return v


def test_fp8_and_speculative_rows_compare_each_variant_with_its_own_baseline():
    """A variant is paired only with the configuration whose knobs differ by that knob alone."""
    base = results(VLLM)[0]
    for p in base.points:
        p.knobs = {"max_model_len": 4096}
    df = claims_table([base])
    assert row(df, "FP8 weights")["measured here"] == "not measured in this run"
    fp8 = _variant(base, "fp8", {"quantization": "fp8"}, 1.5)
    spec = _variant(base, "ngram", {"speculative": {"method": "ngram", "num_tokens": 4}}, 2.0)
    other = _variant(base, "fp8 other length", {"quantization": "fp8", "max_model_len": 2048}, 9.0)
    df = claims_table([base, fp8, spec, other])
    levels = sorted(p.concurrency for p in base.points if p.phase == "sweep")
    got = row(df, "FP8 weights")["measured here"]  # both have trials: their interval, not single grid samples
    assert got.startswith("fp8: 1.50× (+50.0% [") and got.endswith("95% CI, trials at a fixed 10 streams)")
    no_trials = [r.model_copy(update={"capacity": None}) for r in (base, fp8)]
    got = row(claims_table(no_trials), "FP8 weights")["measured here"]
    assert got == "fp8: " + ", ".join(f"1.50× at c={c}" for c in levels) + " (single grid samples)"
    assert row(df, "Speculative decoding")["measured here"].startswith("ngram: 2.00× (+100.0% [")
    assert "ngram ÷" in row(df, "Speculative decoding")["basis"]
