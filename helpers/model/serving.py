"""Time of one serving step of a Llama-style model on a GPU, from its shape and the GPU's datasheet.

The arithmetic the capacity prediction (step 4, ``helpers.environment.prediction``) is built on, and
the same figures the per-point roofline of step 5 (``helpers.benchmark.roofline``) computes:

* **decode step** at batch ``B``: every weight is read once and each running sequence's KV cache at its
  context, so ``bytes = weights + B × context × KV bytes/token`` at the memory bandwidth; the step also
  costs ``2 × matmul parameters × B`` FLOPs at the dense peak. The step takes the longer of the two
  (``max``: a roofline, memory and compute overlapping);
* **prefill** of one request: ``2 × matmul parameters × new tokens`` FLOPs for the projections plus
  ``2 × layers × new tokens × prompt tokens × attention width`` for causal attention, at the dense
  peak of the weight precision (FP8 tensor cores when the weights are FP8 and the GPU has them).
  Prompt tokens served from a prefix cache are not recomputed;
* the **combined rate** of ``B`` requests whose prefills run one after the other and whose decode
  steps run together: ``B ÷ (B × prefill + output tokens × step)`` requests per second.

``tensor_parallel`` GPUs add their bandwidth and FLOP/s. Peaks are datasheet numbers: engines reach
some 60-80% of them at batch 1, and the calibration of step 5 measures how far they fall short.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from helpers.model.gpu_specs import GpuSpec
from helpers.model.shape import ModelShape, count_parameters, kv_bytes_per_token, weight_bytes


class StepCost(BaseModel):
    """The per-step constants of one model on one GPU group: bytes, FLOPs and the peaks they run at."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str
    tensor_parallel: int = Field(gt=0)
    weight_precision: str
    weight_bytes: float = Field(description="Bytes of all weights (read once per decode step).")
    kv_bytes_per_token: float = Field(description="KV-cache bytes of one token, all layers, whole model.")
    matmul_parameters: int = Field(description="Parameters in matrix multiplies (linear layers and lm_head).")
    attention_flops_per_token_pair: float = Field(description="2 × layers × heads × head size.")
    bandwidth_bytes_s: float = Field(description="Memory bandwidth of the group, bytes/s.")
    peak_flops: float = Field(description="Dense FLOP/s of the group at the weight precision.")
    fp8_tensor_cores: bool = Field(description="Whether the peak is the FP8 one.")


def step_cost(
    shape: ModelShape, gpu: GpuSpec, precision: str, kv_dtype: str = "auto", tensor_parallel: int = 1
) -> StepCost:
    """The step constants of ``shape`` (``precision`` weights, ``kv_dtype`` KV) on ``tensor_parallel`` × ``gpu``."""
    p = count_parameters(shape)
    fp8 = precision == "fp8" and gpu.fp8_dense_tflops is not None
    peak = (gpu.fp8_dense_tflops if fp8 else gpu.bf16_dense_tflops) or gpu.bf16_dense_tflops
    return StepCost(
        gpu=gpu.name,
        tensor_parallel=tensor_parallel,
        weight_precision=precision,
        weight_bytes=float(weight_bytes(shape, precision)),
        kv_bytes_per_token=float(kv_bytes_per_token(shape, kv_dtype)),
        # the embedding lookup is no matmul; a tied lm_head is
        matmul_parameters=p.linear + (p.lm_head or p.embedding),
        attention_flops_per_token_pair=2.0 * shape.num_layers * shape.num_heads * shape.head_dim,
        bandwidth_bytes_s=gpu.hbm_bandwidth_tbps * 1e12 * tensor_parallel,
        peak_flops=peak * 1e12 * tensor_parallel,
        fp8_tensor_cores=fp8,
    )


def decode_step_seconds(c: StepCost, batch: float, context_tokens: float) -> float:
    """One decode step of ``batch`` sequences holding ``context_tokens`` each: max(memory time, compute time)."""
    memory = (c.weight_bytes + batch * context_tokens * c.kv_bytes_per_token) / c.bandwidth_bytes_s
    compute = batch * (2.0 * c.matmul_parameters + c.attention_flops_per_token_pair * context_tokens) / c.peak_flops
    return max(memory, compute)


def decode_memory_seconds(c: StepCost, batch: float, context_tokens: float) -> float:
    """The memory term alone (weights + KV bytes ÷ bandwidth): the roofline's decode step."""
    return (c.weight_bytes + batch * context_tokens * c.kv_bytes_per_token) / c.bandwidth_bytes_s


def prefill_seconds(c: StepCost, prompt_tokens: float, cached_share: float = 0.0) -> float:
    """Prefill of one prompt of ``prompt_tokens``, of which ``cached_share`` (0-1) comes from the prefix cache."""
    new = prompt_tokens * (1.0 - min(max(cached_share, 0.0), 1.0))
    flops = 2.0 * c.matmul_parameters * new + c.attention_flops_per_token_pair * new * prompt_tokens
    return flops / c.peak_flops


def combined_rate(batch: float, prefill_s: float, step_s: float, output_tokens: float) -> float:
    """Requests/s of ``batch`` sequences served by prefills in turn and decode steps together."""
    return batch / (batch * prefill_s + output_tokens * step_s)
