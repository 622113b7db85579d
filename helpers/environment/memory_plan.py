"""Checklist step 4: the GPU memory plan of a Llama-style model, per weight precision.

What fills a GPU that an engine has been given ``memory_fraction`` of:

* **weights** — parameters counted from ``config.json`` (embeddings; per layer q/k/v/o with
  grouped-query attention, gate/up/down, two RMSNorms; the final norm; ``lm_head`` unless tied)
  times the bytes of the precision. FP8 and INT4 quantize the linear layers only; embeddings,
  ``lm_head`` and norms stay 16-bit, as vLLM and SGLang keep them.
* **overhead** (:class:`OverheadModel`) — what the engine's start-up profile measures besides
  weights: the activation peak of one forward pass over ``max_batched_tokens`` tokens (the MLP's
  live tensors, ``2·hidden + 3·intermediate/TP`` values per token), the sampler's FP32 logits for
  ``max_num_seqs`` rows, and a fixed runtime reserve for memory outside torch tensors (cuBLAS and
  attention workspaces, NCCL buffers, compile caches).
* **KV cache** — everything left; ``layers × KV heads × head size × 2 (K and V) × KV dtype bytes``
  per token, so an FP8 KV cache holds twice the tokens.

``kv_share`` says how the engine reads ``memory_fraction``: ``gpu`` (vLLM) as above, a share of the whole
GPU that must hold weights, overhead and KV; ``static`` (SGLang, ``--mem-fraction-static``) a share of the
whole GPU for weights and KV only, with the runtime reserve: KV = fraction × GPU − weights − reserve (its
activations and CUDA graphs live in the rest of the GPU); ``free`` (LMDeploy's TurboMind,
``--cache-max-entry-count``) as a share of the memory free once the weights, the runtime reserve and its
prefill buffers (``prefill_buffers_gib``: allocated before it reads what is free) are taken: KV = fraction ×
(GPU − weights − reserve − prefill buffers).

Calibration: vLLM 0.26.0 on one H200 (143,771 MiB) at 0.92 logged 919,824 KV tokens for
Llama-3.1-8B BF16 and 191,328 for Llama-3.3-70B FP8. After weights and the modelled activation
and logits terms, the remainder was 0.66 GiB (8B) and 1.06 GiB (70B); one shared 1.0 GiB reserve
puts both plans within 0.5% of the engine (see ``tests/environment/test_memory_plan.py``). SGLang 0.5.16 at
0.92 logged 468,566 tokens (8B, H100), 197,381 (70B FP8, H200) and 14,620 (70B FP8, H100): the ``gpu`` reading
put it 2-3% low on the first two and 43% low on the third, where the KV room is small; the ``static`` reading
with the same 1.0 GiB reserve is within 0.5%, 0.5% and 3.2%. TurboMind (LMDeploy 0.18.0) at 0.8 logged a
budget of 414,695 tokens (8B, H100) and 24,566 (70B FP8, H100): with its prefill buffers taken before the ratio
the plan is within 0.6% and 0.5%; without them it was 0.65% and 17% high.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import DEFAULT_MEMORY_FRACTION
from helpers.core.errors import ConfigError
from helpers.model.gpu_specs import GpuSpec, gpu_spec
from helpers.model.shape import (
    GIB,
    KV_BLOCK_TOKENS,
    WEIGHT_FORMATS,
    ModelShape,
    count_parameters,
    kv_bytes_per_token,
    read_model_shape,
    weight_bytes,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OverheadModel(_Strict):
    """Non-weight, non-KV memory per GPU, as an engine's start-up profile finds it (module doc).

    ``max_batched_tokens``/``max_num_seqs`` left ``None`` take vLLM's server defaults: 8192/1024
    on GPUs of 70 GiB or more other than A100, 2048/256 otherwise.
    """

    runtime_reserve_gib: float = Field(
        default=1.0, ge=0, description="Fixed non-tensor memory: workspaces, NCCL, compile caches."
    )
    max_batched_tokens: int | None = Field(default=None, gt=0, description="Tokens of the profiled forward.")
    max_num_seqs: int | None = Field(default=None, gt=0, description="Rows of sampler logits.")
    activation_bytes: int = Field(default=2, gt=0, description="Bytes per activation value (BF16).")

    def batch_limits(self, gpu_memory_gib: float, gpu_name: str = "") -> tuple[int, int]:
        """(max_batched_tokens, max_num_seqs) after defaults."""
        big = gpu_memory_gib >= 70 and "a100" not in gpu_name.lower()
        return self.max_batched_tokens or (8192 if big else 2048), self.max_num_seqs or (1024 if big else 256)

    def activation_gib(self, s: ModelShape, tp: int, tokens: int) -> float:
        """The MLP's live tensors of one forward pass over ``tokens`` tokens on one GPU, in GiB."""
        return tokens * (2 * s.hidden_size + 3 * s.intermediate_size / tp) * self.activation_bytes / GIB

    def parts_gib(self, s: ModelShape, tp: int, gpu_memory_gib: float, gpu_name: str = "") -> dict[str, float]:
        """Activation peak, sampler logits and runtime reserve on one GPU, in GiB."""
        tokens, seqs = self.batch_limits(gpu_memory_gib, gpu_name)
        return {
            "activation": self.activation_gib(s, tp, tokens),
            "logits": min(seqs, tokens) * s.vocab_size * 4 / GIB,
            "reserve": self.runtime_reserve_gib,
        }


class PrecisionPlan(_Strict):
    """One row of the plan: a weight precision and what it leaves for the KV cache."""

    precision: str
    checkpoint: bool = Field(description="True for the precision the checkpoint itself is in.")
    weights_gib: float
    weights_gib_per_gpu: float
    overhead_gib_per_gpu: float
    kv_gib_per_gpu: float
    kv_bytes_per_token: int = Field(description="Whole model, all layers.")
    kv_tokens: int = Field(description="KV capacity of one replica (a TP group), in tokens.")
    max_concurrent_sequences: int = Field(description="Per replica, each holding context_tokens.")
    tp_needed: int | None = Field(description="Smallest TP size holding one full-context sequence.")
    tensor_parallel: int = Field(description="TP size the row is computed at.")
    replicas: int = Field(description="Replicas of that TP size that gpu_count GPUs hold.")
    fits: bool
    needs_fp8_hardware: bool


KV_SHARES = ("gpu", "static", "free")
"""What ``memory_fraction`` is a share of (module doc): the whole GPU with activations, the whole GPU for weights
and KV only, or the memory the weights leave free."""


class MemoryPlan(_Strict):
    """The memory plan of one model on one GPU type."""

    model: str
    parameters: int
    gpu: str
    gpu_memory_gib: float
    memory_fraction: float
    kv_share: str = Field(default="gpu", description="What memory_fraction is a share of: gpu or free (module doc).")
    context_tokens: int
    gpu_count: int
    kv_dtype: str
    overhead: OverheadModel
    rows: list[PrecisionPlan]

    def row(self, precision: str) -> PrecisionPlan:
        """Return the row of ``precision``."""
        for r in self.rows:
            if r.precision == precision:
                return r
        raise KeyError(f"no {precision!r} row; rows: {', '.join(r.precision for r in self.rows)}")


def _tp_sizes(s: ModelShape) -> list[int]:
    """TP sizes the model can be split into (heads divide evenly; KV heads split or replicate)."""
    return [t for t in TP_CANDIDATES if s.num_heads % t == 0 and (s.num_kv_heads % t == 0 or t % s.num_kv_heads == 0)]


def _resolve_gpu(gpu: GpuSpec | float | int | str) -> tuple[str, float]:
    """(name, total GiB) of a spec, a spec name, or a bare memory size in GiB."""
    if isinstance(gpu, GpuSpec):
        return gpu.name, gpu.memory_gib
    if isinstance(gpu, str):
        spec = gpu_spec(gpu)
        if spec is None:
            raise ConfigError(f"unknown GPU {gpu!r}: not in helpers/data/gpu_specs.yaml; give its memory in GiB")
        return spec.name, spec.memory_gib
    if gpu <= 0:
        raise ConfigError(f"GPU memory must be positive, got {gpu} GiB")
    return f"{gpu:g} GiB GPU", float(gpu)


TURBOMIND_PREFILL_TOKENS = 8192
"""LMDeploy 0.18.0's ``max_prefill_token_num`` default: the tokens TurboMind sizes its forward buffers for."""


def prefill_buffers_gib(s: ModelShape, ov: OverheadModel, tp: int) -> float:
    """The forward buffers TurboMind allocates before it reads the free memory, in GiB on one GPU.

    The MLP's live tensors (``OverheadModel.activation_gib``) for ``max_batched_tokens`` tokens, else
    ``TURBOMIND_PREFILL_TOKENS``. It doubles from the 8B to the 70B shape: without it the plan was 0.65% (8B)
    and 17% (70B FP8) above TurboMind's logged budget on an H100.
    """
    return ov.activation_gib(s, tp, ov.max_batched_tokens or TURBOMIND_PREFILL_TOKENS)


def _overhead_and_kv(
    s: ModelShape, ov: OverheadModel, tp: int, mem_gib: float, gpu_name: str, w: float, fraction: float, share: str
) -> tuple[float, float]:
    """(overhead, KV) GiB on one GPU holding ``w`` GiB of weights, ``fraction`` read as ``share`` (module doc)."""
    if share == "free":  # prefill buffers are taken with the weights; the cache takes its share of the rest
        o = ov.runtime_reserve_gib + prefill_buffers_gib(s, ov, tp)
        return o, max(0.0, (mem_gib - w - o) * fraction)
    if share == "static":  # weights and KV inside the fraction; activations and graphs outside it
        return ov.runtime_reserve_gib, max(0.0, mem_gib * fraction - w - ov.runtime_reserve_gib)
    o = sum(ov.parts_gib(s, tp, mem_gib, gpu_name).values())
    return o, max(0.0, mem_gib * fraction - w - o)


def memory_plan(
    model_dir: str | Path,
    gpu: GpuSpec | float | str,
    memory_fraction: float = DEFAULT_MEMORY_FRACTION,
    context_tokens: int = 4096,
    gpu_count: int = 1,
    *,
    kv_dtype: str = "auto",
    precisions: tuple[str, ...] = ("bf16", "fp8", "int4"),
    tensor_parallel: int | None = None,
    overhead: OverheadModel | None = None,
    kv_share: str = "gpu",
) -> MemoryPlan:
    """Plan weights, overhead and KV cache per precision for ``model_dir`` on ``gpu``.

    ``gpu`` is a :class:`GpuSpec`, a name ``gpu_spec`` knows, or total memory in GiB (NVML's
    ``memory.total`` / 1024). ``context_tokens`` is one sequence's prompt plus output.
    ``tensor_parallel`` None picks the smallest TP size at which one full-context sequence fits;
    ``gpu_count`` GPUs then hold ``gpu_count // TP`` replicas. ``kv_share``: ``gpu``, ``static`` or ``free``
    (module doc).
    """
    if kv_share not in KV_SHARES:
        raise ConfigError(f"kv_share must be one of {', '.join(KV_SHARES)}, got {kv_share!r}")
    if not 0 < memory_fraction <= 1:
        raise ConfigError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    if context_tokens <= 0 or gpu_count <= 0:
        raise ConfigError("context_tokens and gpu_count must be positive")
    gpu_name, mem_gib = _resolve_gpu(gpu)
    ov = overhead or OverheadModel()
    s = read_model_shape(model_dir)
    sizes = _tp_sizes(s)
    if tensor_parallel is not None and tensor_parallel not in sizes:
        raise ConfigError(f"tensor_parallel={tensor_parallel} does not split {s.name}; allowed: {sizes}")

    def at(precision: str, tp: int) -> tuple[float, float, int]:
        w = weight_bytes(s, precision) / GIB / tp
        o, kv_gib = _overhead_and_kv(s, ov, tp, mem_gib, gpu_name, w, memory_fraction, kv_share)
        tokens = int(kv_gib * GIB // kv_bytes_per_token(s, kv_dtype, tp)) // KV_BLOCK_TOKENS * KV_BLOCK_TOKENS
        return w, o, tokens

    rows = []
    for prec in precisions:
        needed = next((t for t in sizes if at(prec, t)[2] >= context_tokens), None)
        tp = tensor_parallel or needed or sizes[-1]
        w, o, tokens = at(prec, tp)
        replicas = gpu_count // tp
        rows.append(
            PrecisionPlan(
                precision=prec,
                checkpoint=prec == s.checkpoint_precision,
                weights_gib=round(weight_bytes(s, prec) / GIB, 3),
                weights_gib_per_gpu=round(w, 3),
                overhead_gib_per_gpu=round(o, 3),
                kv_gib_per_gpu=round(tokens * kv_bytes_per_token(s, kv_dtype, tp) / GIB, 3),
                kv_bytes_per_token=kv_bytes_per_token(s, kv_dtype),
                kv_tokens=tokens,
                max_concurrent_sequences=tokens // context_tokens,
                tp_needed=needed,
                tensor_parallel=tp,
                replicas=replicas,
                fits=needed is not None and replicas >= 1 and tokens >= context_tokens,
                needs_fp8_hardware=WEIGHT_FORMATS[prec].needs_fp8_hardware,
            )
        )
    return MemoryPlan(
        model=s.name,
        parameters=count_parameters(s).total,
        gpu=gpu_name,
        gpu_memory_gib=round(mem_gib, 3),
        memory_fraction=memory_fraction,
        kv_share=kv_share,
        context_tokens=context_tokens,
        gpu_count=gpu_count,
        kv_dtype=kv_dtype,
        overhead=ov,
        rows=rows,
    )


def memory_plan_frame(plan: MemoryPlan) -> pd.DataFrame:
    """Return the plan as a table, one row per precision."""
    return pd.DataFrame(
        [
            {
                "precision": r.precision + (" (checkpoint)" if r.checkpoint else ""),
                "weights GiB": r.weights_gib,
                "TP": r.tensor_parallel,
                "weights GiB/GPU": r.weights_gib_per_gpu,
                "overhead GiB/GPU": r.overhead_gib_per_gpu,
                "KV GiB/GPU": r.kv_gib_per_gpu,
                "KV bytes/token": r.kv_bytes_per_token,
                "KV tokens": r.kv_tokens,
                f"sequences @ {plan.context_tokens:,} tokens": r.max_concurrent_sequences,
                "replicas": r.replicas,
                "fits": r.fits,
            }
            for r in plan.rows
        ]
    )


def plot_memory_plan(plan: MemoryPlan) -> Figure:
    """Stacked bars per precision: weights, overhead and KV cache on one GPU, against its memory."""
    # matplotlib is heavy: imported only where a figure is drawn
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.subplots()
    labels = [f"{r.precision}\nTP={r.tensor_parallel}" for r in plan.rows]
    bottom = [0.0] * len(plan.rows)
    parts = [
        ("weights", [r.weights_gib_per_gpu for r in plan.rows], "#4c72b0"),
        ("overhead", [r.overhead_gib_per_gpu for r in plan.rows], "#dd8452"),
        ("KV cache", [r.kv_gib_per_gpu for r in plan.rows], "#55a868"),
    ]
    for name, values, color in parts:
        ax.bar(labels, values, bottom=bottom, label=name, color=color)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.axhline(plan.gpu_memory_gib, color="black", linewidth=1, label=f"GPU memory {plan.gpu_memory_gib:.0f} GiB")
    ax.axhline(
        plan.gpu_memory_gib * plan.memory_fraction,
        color="grey",
        linestyle="--",
        linewidth=1,
        label=f"engine share {plan.memory_fraction:.2f}",
    )
    ax.set_ylabel("GiB per GPU")
    ax.set_title(f"{plan.model} on {plan.gpu} (KV dtype {plan.kv_dtype})")
    fig.legend(loc="outside right upper", fontsize=8)
    return fig
