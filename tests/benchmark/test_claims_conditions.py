"""Each seed claim is measured under the seed's own conditions, or its row says why not (archived H200 runs)."""

from __future__ import annotations

import copy
from pathlib import Path

from decision_data import SGLANG, VLLM, cfg, results

from helpers.benchmark.batching import batching_table, combined, output_lengths
from helpers.benchmark.claims import claims_table
from helpers.benchmark.sla import representative
from helpers.core.config import load_config
from helpers.measure.loadgen import LoadResult
from helpers.run.folder import RunFolder
from helpers.run.records import BatchingRun

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def _claims(run: str):
    r = REPORTS / run
    df = claims_table(RunFolder(r).engine_results(), load_config(r / "config.yaml"), "H200-SXM-141GB")
    return {x["claim"].split(" (")[0]: x for x in df.to_dict("records")}


def test_the_70b_ratio_is_taken_at_the_capacity_not_at_concurrency_10():
    rows = _claims("h200-20261203-chat-70b-fp8")
    ratio = rows["SGLang / vLLM total throughput at high concurrency"]
    assert ratio["measured here"] == "0.97" and "at each one's SLA capacity" in ratio["basis"]
    assert "concurrency 10" not in ratio["basis"] and "H100 SXM5" in ratio["basis"]
    # the figure is the searched capacity's (rate × tokens), the one the fleet and the first page use
    run = REPORTS / "h200-20261203-chat-70b-fp8"
    (v,) = [r for r in RunFolder(run).engine_results() if r.label == "vLLM 0.26.0"]
    rep = representative(v, load_config(run / "config.yaml"))
    vllm = rows["vLLM total throughput at high concurrency"]
    assert vllm["measured here"] == f"{rep.total_tok_s.mean:,.0f} total tok/s" == "5,085 total tok/s"
    assert f"at its SLA capacity ({rep.request_rate.mean:.2f} req/s)" in vllm["basis"]


def test_other_model_shapes_are_not_compared_with_the_70b_figures():
    for run in ("h200-20261201-chat-8b-poisson", "h200-20261202-smollm2"):
        rows = _claims(run)
        for claim in ("SGLang / vLLM total throughput at high concurrency",
                      "vLLM total throughput at high concurrency"):  # fmt: skip
            got = rows[claim]["measured here"]
            assert got.startswith("not comparable: model shape") and "(the seed's: Llama 3.3 70B FP8)" in got, run
            assert "for reference" in rows[claim]["basis"]


def test_below_the_seeds_load_without_a_capacity_the_ratio_is_not_compared():
    v, s = (copy.deepcopy(r) for r in results(VLLM, SGLANG))
    for r in (v, s):
        r.points = [p for p in r.points if p.concurrency != 100]
    row = claims_table([v, s], cfg([VLLM, SGLANG])).set_index("claim").iloc[0]
    assert row["measured here"].startswith("not measured at the seed's load: the highest common concurrency is 50")


def test_the_fp8_row_shows_the_trials_interval():
    fp8 = _claims("h200-20261202-chat-8b-fp8-side")["FP8 weights / bf16, same engine and load"]
    assert fp8["measured here"] == "vLLM 0.26.0 fp8 weights: 1.26× (+25.8% [+24.7, +26.9] 95% CI, trials at a fixed " \
        "32 streams)"  # fmt: skip
    assert "single grid samples" not in fp8["measured here"] and "llama-3.1-8b" in fp8["basis"]


def test_the_ngram_row_says_its_prompts_had_nothing_to_copy():
    spec = _claims("h200-20261202-smollm2")["Speculative decoding speed-up"]
    assert "random-word prompts (nothing to copy" in spec["basis"] and "real weights" in spec["basis"]
    assert "95% CI" in spec["measured here"]
    edit = load_config(REPORTS / "h200-20261202-smollm2" / "config.yaml")
    edit = edit.model_copy(update={"workload": edit.workload.model_copy(update={"prompts": "edit-text"})})
    df = claims_table(RunFolder(REPORTS / "h200-20261202-smollm2").engine_results(), edit)
    basis = df[df["claim"].str.startswith("Speculative")].iloc[0]["basis"]
    assert "edit-this-text prompts (the answer repeats the prompt)" in basis and "nothing to copy" not in basis


def _side(base, mode: str, tok_s: float):
    p = copy.deepcopy(base)
    p.phase, p.output_tok_s = "batching", tok_s
    p.batching = BatchingRun(mode=mode, waves=3, output_tokens_min=8, output_tokens_max=128, output_tokens=900,
                             span_s=10.0)  # fmt: skip
    return p


def test_the_batching_row_reads_continuous_against_static_at_one_concurrency():
    v = results(VLLM)[0]
    base = next(p for p in v.points if p.phase == "sweep")
    v.points += [_side(base, "static", 100.0), _side(base, "continuous", 180.0)]
    row = claims_table([v]).set_index("claim").filter(like="Continuous batching", axis=0).iloc[0]
    assert row["measured here"] == f"{v.label}: 1.80× continuous ÷ static"
    assert "3 waves" in row["basis"] and "8-128 tokens log-uniform" in row["basis"]
    assert batching_table([v]).iloc[0]["continuous ÷ static"] == "1.80×"


def test_static_waves_add_their_tokens_over_their_own_spans():
    waves = [LoadResult(requests=4, errors=0, duration_s=9.0, output_tok_s=0, total_tok_s=0, req_s=0,
                        input_tokens_mean=100, output_tokens_mean=out, request_span_s=span,
                        ttft_values_ms=[10.0, 20.0, 30.0, 40.0])
             for out, span in ((50.0, 2.0), (25.0, 3.0))]  # fmt: skip
    c = combined(waves)
    assert c.requests == 8 and c.duration_s == 5.0
    assert c.output_tok_s == (4 * 50 + 4 * 25) / 5.0 and c.ttft_ms["p50"] == 25.0
    lengths = output_lengths(cfg([VLLM], batching={"enabled": True, "output_tokens_min": 8,
                                                   "output_tokens_max": 128}), 300)  # fmt: skip
    assert min(lengths) >= 8 and max(lengths) <= 128 and sorted(lengths)[150] < (8 + 128) / 2  # skewed to short


def test_the_batching_comparison_is_planned_and_its_labels_are_checked(tmp_path):
    import pytest

    from helpers.benchmark.plan import engine_units, planned_files
    from helpers.core.errors import ConfigError

    c = cfg([VLLM, SGLANG], batching={"enabled": True, "concurrency": 8})
    first, second = c.engines
    assert [p.name for p in planned_files(first, c, tmp_path)][-2:] == [
        "batching-static-c0008.json", "batching-continuous-c0008.json"]  # fmt: skip
    assert not any("batching" in p.name for p in planned_files(second, c, tmp_path))  # the first only, by default
    assert [u.kind for u in engine_units(first, c)].count("batching") == 2
    assert not any("batching" in p.name for p in planned_files(first, cfg([VLLM]), tmp_path))  # off by default
    with pytest.raises(ConfigError, match="batching.configurations"):
        cfg([VLLM], batching={"enabled": True, "configurations": ["nope"]})


def test_greedy_decoding_is_read_from_the_engines_flags():
    from helpers.benchmark.claim_conditions import sampling

    c = load_config(Path(__file__).resolve().parents[2] / "playbook" / "workloads" / "cpu-claims.yaml")
    assert {sampling(e) for e in c.engines} == {"greedy decoding"}
    assert sampling(cfg([VLLM]).engines[0]) == "the engine's default sampling"
