"""The roofline bound against the H200 measurements in ``/work/shared/gpu/README.md`` (512 in / 256 out)."""

import pytest

from helpers.benchmark.roofline import point_bound, ratio_text
from helpers.model.gpu_specs import gpu_spec
from helpers.model.shape import count_parameters, read_model_shape
from helpers.run.records import Point

H200 = gpu_spec("NVIDIA H200")


def point(concurrency: int, output_tok_s: float, itl_ms: float | None = None) -> Point:
    return Point(
        label="vllm",
        engine="vllm",
        concurrency=concurrency,
        requests=64,
        duration_s=10.0,
        output_tok_s=output_tok_s,
        total_tok_s=3 * output_tok_s,
        req_s=1.0,
        input_tokens_mean=512,
        output_tokens_mean=256,
        itl_ms_p50=itl_ms,
    )


def test_8b_bf16_batch_1_decode_reads_16_gb_per_token():
    b = point_bound("llama-3.1-8b", H200, point(1, 202, itl_ms=4.9))
    assert b["available"] and b["weight_precision"] == "bf16"
    assert b["weights_gb"] == pytest.approx(16.06, rel=0.01)
    assert b["decode_bound_tok_s"] == pytest.approx(4.8e12 / 16.1e9, rel=0.02)  # ≈ 300 tok/s
    assert b["bound_output_tok_s"] < b["decode_bound_tok_s"]  # the prefill costs a little
    assert b["measured_over_bound"] == pytest.approx(202 / 295, rel=0.02)  # ≈ 0.68
    assert b["itl_over_step"] == pytest.approx(4.9 / 3.36, rel=0.02)


def test_70b_fp8_batch_1():
    flat = point_bound("llama-3.3-70b-fp8", H200, point(1, 48), weight_bytes_per_param=1)
    params = count_parameters(read_model_shape("llama-3.3-70b-fp8")).total
    assert flat["weights_gb"] == pytest.approx(params / 1e9) == pytest.approx(70.6, rel=0.01)
    assert flat["decode_bound_tok_s"] == pytest.approx(68, rel=0.02)
    assert flat["measured_over_bound"] == pytest.approx(48 / 68, rel=0.03)
    # the checkpoint's own layout keeps embeddings and lm_head in BF16: 2.1 GB more to read per token
    own = point_bound("llama-3.3-70b-fp8", H200, point(1, 48))
    assert own["weight_precision"] == "fp8" and own["weights_gb"] == pytest.approx(72.7, rel=0.01)
    assert own["decode_bound_tok_s"] == pytest.approx(66, rel=0.02)


def test_fp8_prefill_uses_fp8_tensor_cores():
    bf16 = point_bound("llama-3.3-70b-fp8", H200, point(1, 48), weight_bytes_per_param=2)
    fp8 = point_bound("llama-3.3-70b-fp8", H200, point(1, 48))
    assert bf16["prefill_ms_per_request"] == pytest.approx(2 * fp8["prefill_ms_per_request"], rel=1e-3)


def test_kv_reads_grow_with_concurrency_and_the_bound_stays_above_measurements():
    measured = {1: 202, 16: 2526, 64: 6355, 128: 8179}
    bounds = {c: point_bound("llama-3.1-8b", H200, point(c, tok)) for c, tok in measured.items()}
    assert [bounds[c]["kv_gb_per_step"] for c in measured] == sorted(bounds[c]["kv_gb_per_step"] for c in measured)
    assert bounds[128]["decode_step_ms"] > bounds[1]["decode_step_ms"]
    for b in bounds.values():
        assert 0.5 < b["measured_over_bound"] < 1.0


def test_fp8_kv_halves_kv_bytes():
    two = point_bound("llama-3.1-8b", H200, point(64, 6355))
    one = point_bound("llama-3.1-8b", H200, point(64, 6355), kv_dtype_bytes=1)
    assert one["kv_gb_per_step"] == pytest.approx(two["kv_gb_per_step"] / 2)


def test_tensor_parallel_adds_bandwidth():
    one = point_bound("llama-3.3-70b-fp8", H200, point(1, 48))
    two = point_bound("llama-3.3-70b-fp8", H200, point(1, 48), tensor_parallel=2)
    assert two["decode_bound_tok_s"] == pytest.approx(2 * one["decode_bound_tok_s"])


def test_cpu_has_no_bound():
    b = point_bound("tiny-llama", None, point(4, 500))
    assert b["available"] is False and "no GPU spec" in b["reason"]
    assert ratio_text(b).startswith("n/a (no GPU spec")


def test_ratio_text():
    assert ratio_text(point_bound("llama-3.1-8b", H200, point(1, 202))) == "202 / 295 tok/s (0.69)"


def test_prompt_tokens_served_from_the_prefix_cache_cost_no_prefill():
    """Measured on the H200 (shared-prefix run): 2,000 of 2,512 prompt tokens shared, hit rate 0.79;
    a bound that recomputed the whole prompt put vLLM at 1.50× its own bound at concurrency 32."""
    p = point(32, 3090)
    p.input_tokens_mean, p.output_tokens_mean = 2512, 128
    cold = point_bound("llama-3.1-8b", H200, p)
    p.server.prefix_cache_hit_rate = 0.79
    warm = point_bound("llama-3.1-8b", H200, p)
    assert warm["prefix_cache_hit_rate"] == 0.79 and cold["prefix_cache_hit_rate"] == 0.0
    assert warm["prefill_ms_per_request"] == pytest.approx(0.21 * cold["prefill_ms_per_request"], rel=1e-6)
    assert warm["decode_step_ms"] == cold["decode_step_ms"]  # the KV is read in full either way
    assert cold["measured_over_bound"] > 1 > warm["measured_over_bound"]
    p.server.prefix_cache_hit_rate = 1.0
    assert point_bound("llama-3.1-8b", H200, p)["prefill_bound_tok_s"] is None
