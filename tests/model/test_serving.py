"""The serving-step arithmetic: hand-checked figures, and the same numbers as step 5's per-point roofline."""

import pytest

from helpers.benchmark.roofline import point_bound
from helpers.model.gpu_specs import gpu_spec
from helpers.model.serving import (
    combined_rate,
    decode_memory_seconds,
    decode_step_seconds,
    prefill_seconds,
    step_cost,
)
from helpers.model.shape import read_model_shape, weight_bytes
from helpers.run.records import Point

H200 = gpu_spec("H200")


def test_batch_one_decode_reads_every_weight_once():
    s = read_model_shape("llama-3.1-8b")
    c = step_cost(s, H200, "bf16")
    # 16.06 GB of bf16 weights at 4.8 TB/s, plus one sequence's KV: 3.36 ms (the H200 measured 4.9 ms)
    assert decode_step_seconds(c, 1, 640) == pytest.approx((weight_bytes(s, "bf16") + 640 * 131072) / 4.8e12)
    assert 3.3e-3 < decode_step_seconds(c, 1, 640) < 3.4e-3


def test_fp8_weights_use_the_fp8_peak_and_half_the_bytes():
    s = read_model_shape("llama-3.1-8b")
    bf16, fp8 = step_cost(s, H200, "bf16"), step_cost(s, H200, "fp8")
    assert fp8.peak_flops == pytest.approx(2 * bf16.peak_flops, rel=1e-3)
    assert fp8.weight_bytes < 0.6 * bf16.weight_bytes
    assert prefill_seconds(fp8, 512) == pytest.approx(prefill_seconds(bf16, 512) / 2, rel=1e-3)
    a100 = step_cost(s, gpu_spec("A100-SXM4-80GB"), "fp8")
    assert not a100.fp8_tensor_cores and a100.peak_flops == pytest.approx(312e12)


def test_a_large_batch_of_a_small_model_is_compute_bound():
    c = step_cost(read_model_shape("llama-3.1-8b"), H200, "bf16")
    assert decode_step_seconds(c, 1, 640) == pytest.approx(decode_memory_seconds(c, 1, 640))
    big = decode_step_seconds(c, 8192, 8)  # short contexts: little KV, many rows
    assert big > decode_memory_seconds(c, 8192, 8)


def test_cached_prompt_tokens_cost_no_prefill_and_tensor_parallel_adds_peaks():
    s = read_model_shape("llama-3.3-70b-fp8")
    c1, c2 = step_cost(s, H200, "fp8"), step_cost(s, H200, "fp8", tensor_parallel=2)
    assert prefill_seconds(c1, 1000, cached_share=1.0) == 0.0
    assert 0 < prefill_seconds(c1, 1000, cached_share=0.5) < prefill_seconds(c1, 1000) / 2 + 1e-9
    assert prefill_seconds(c2, 512) == pytest.approx(prefill_seconds(c1, 512) / 2)
    assert combined_rate(10, 0.01, 0.02, 100) == pytest.approx(10 / (10 * 0.01 + 100 * 0.02))


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.3-70b-fp8"])
def test_the_same_figures_as_the_per_point_roofline(model):
    """One definition: step 5's roofline and step 4's prediction agree on step and prefill time."""
    s = read_model_shape(model)
    point = Point(
        label="x", engine="vllm", concurrency=32, requests=64, duration_s=10, output_tok_s=1, total_tok_s=1,
        req_s=1, input_tokens_mean=512, output_tokens_mean=256,
    )  # fmt: skip
    bound = point_bound(model_dir=model, gpu=H200, point=point)
    c = step_cost(s, H200, s.checkpoint_precision)
    assert decode_memory_seconds(c, 32, 512 + 128) * 1e3 == pytest.approx(bound["decode_step_ms"], rel=1e-9)
    assert prefill_seconds(c, 512) * 1e3 == pytest.approx(bound["prefill_ms_per_request"], rel=1e-9)
    rate = combined_rate(32, prefill_seconds(c, 512), decode_memory_seconds(c, 32, 640), 256)
    assert rate * 256 == pytest.approx(bound["bound_output_tok_s"], rel=1e-9)
