"""A roofline bound for one benchmark point, from the model's shape and the GPU's datasheet, shown as measured / bound.

* **decode** is memory-bound: each step reads every weight once plus the KV cache of all running
  sequences at their average context (prompt + half the output), and yields one token per running
  sequence, so ``tok/s ≤ concurrency × bandwidth ÷ bytes per step``;
* **prefill** is compute-bound: ``2 × parameters × prompt tokens`` FLOPs for the projections plus
  ``2 × layers × prompt² × attention width`` for causal attention, at the peak dense FLOP/s of the
  weight precision (FP8 tensor cores when the weights are FP8 and the GPU has them);
* the **combined** bound serves ``concurrency`` requests by running their prefills one after the
  other and then their decode steps together: ``c·O ÷ (c·t_prefill + O·t_step)`` output tok/s.

Parameter and byte counts come from :mod:`helpers.environment.memory_plan`. Peak figures are datasheet numbers,
so a well-tuned engine reaches some 60-80% of the bound at batch 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.model.gpu_specs import GpuSpec
from helpers.model.shape import count_parameters, kv_bytes_per_token, read_model_shape, weight_bytes
from helpers.run.records import Point


def _weights(model_dir: str | Path, weight_bytes_per_param: float | None) -> tuple[Any, float, str]:
    """(shape, bytes of all weights, precision label) for the model folder."""
    s = read_model_shape(model_dir)
    if weight_bytes_per_param is None:
        return s, float(weight_bytes(s, s.checkpoint_precision)), s.checkpoint_precision
    label = {2: "bf16", 1: "fp8", 0.5: "int4"}.get(weight_bytes_per_param, f"{weight_bytes_per_param:g} B/param")
    return s, count_parameters(s).total * weight_bytes_per_param, label


def point_bound(
    model_dir: str | Path,
    gpu: GpuSpec | None,
    point: Point,
    kv_dtype_bytes: int = 2,
    weight_bytes_per_param: float | None = None,
    tensor_parallel: int = 1,
) -> dict[str, Any]:
    """The decode, prefill and combined bounds for ``point`` on ``gpu``, and measured / bound.

    ``weight_bytes_per_param`` None takes the checkpoint's own precision (FP8 linear layers with
    16-bit embeddings for an FP8 checkpoint); a number applies to every parameter. Prompt and output
    lengths are the point's measured means. ``tensor_parallel`` GPUs add their bandwidth and FLOP/s.
    Prompt tokens the engine served from its prefix cache (the point's measured hit rate) cost no
    prefill: only the rest is computed, attending over the whole prompt.
    Without a GPU spec (a CPU engine) the answer is ``{"available": False, "reason": ...}``.
    """
    if gpu is None:
        return {"available": False, "reason": "no GPU spec: the roofline needs a GPU's bandwidth and FLOP/s"}
    if not point.input_tokens_mean or not point.output_tokens_mean:
        return {"available": False, "reason": "the point has no measured prompt/output lengths"}
    s, w_bytes, precision = _weights(model_dir, weight_bytes_per_param)
    c, n_in, n_out = point.concurrency, float(point.input_tokens_mean), float(point.output_tokens_mean)
    bandwidth = gpu.hbm_bandwidth_tbps * 1e12 * tensor_parallel
    fp8 = precision == "fp8" and gpu.fp8_dense_tflops is not None
    peak = (gpu.fp8_dense_tflops if fp8 else gpu.bf16_dense_tflops) * 1e12 * tensor_parallel

    kv_per_token = kv_bytes_per_token(s) / s.dtype_bytes * kv_dtype_bytes
    kv_bytes = c * (n_in + n_out / 2) * kv_per_token
    step_s = (w_bytes + kv_bytes) / bandwidth
    decode_tok_s = c / step_s

    p = count_parameters(s)
    matmul_params = p.linear + (p.lm_head or p.embedding)  # the embedding lookup is no matmul; a tied head is
    hit = min(max(point.server.prefix_cache_hit_rate or 0.0, 0.0), 1.0)
    n_new = n_in * (1.0 - hit)  # prompt tokens computed; the cached ones are read, not recomputed
    prefill_flops = 2 * matmul_params * n_new + 2 * s.num_layers * n_new * n_in * s.num_heads * s.head_dim
    prefill_s = prefill_flops / peak

    combined = c * n_out / (c * prefill_s + n_out * step_s)
    measured = point.output_tok_s
    return {
        "available": True,
        "gpu": gpu.name,
        "tensor_parallel": tensor_parallel,
        "weight_precision": precision,
        "weights_gb": w_bytes / 1e9,
        "kv_gb_per_step": kv_bytes / 1e9,
        "decode_step_ms": step_s * 1e3,
        "decode_bound_tok_s": decode_tok_s,
        "prefill_ms_per_request": prefill_s * 1e3,
        "prefix_cache_hit_rate": hit,
        "prefill_bound_tok_s": n_in / prefill_s if prefill_s > 0 else None,
        "bound_output_tok_s": combined,
        "measured_output_tok_s": measured,
        "measured_over_bound": measured / combined if combined > 0 else None,
        "itl_over_step": (point.itl_ms_p50 / (step_s * 1e3)) if point.itl_ms_p50 else None,
    }


def ratio_text(bound: dict[str, Any]) -> str:
    """``"202 / 296 tok/s (0.68)"`` for a table cell, or the reason there is no bound."""
    if not bound.get("available"):
        return f"n/a ({bound.get('reason', 'no bound')})"
    m, b, r = bound["measured_output_tok_s"], bound["bound_output_tok_s"], bound.get("measured_over_bound")
    if r is None or not b:
        return "n/a (open-loop load: no fixed number of sequences to bound)"
    return f"{m:,.0f} / {b:,.0f} tok/s ({r:.2f})"
