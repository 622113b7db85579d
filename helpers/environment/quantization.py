"""Quantization advice for checklist step 4, after seed 003 §5.1 (and §5.4 pitfall 2, §6.3).

The seed's rules: FP8 is the production default (loss < 1%, about half the memory of BF16) where
the GPU has FP8 tensor cores — Hopper, Ada, Blackwell and MI300X, not Ampere; INT4 (loss 3-8%)
only when nothing else fits, checked on the user's own test set, and never for high-stakes
domains; a model that does not fit one GPU is a model-parallelism problem first.
"""

from __future__ import annotations

from helpers.environment.memory_plan import MemoryPlan, PrecisionPlan
from helpers.model.gpu_specs import GpuSpec, gpu_spec


def _fmt(r: PrecisionPlan, context: int) -> str:
    """One row in words."""
    return (
        f"{r.precision.upper()} at TP={r.tensor_parallel}: {r.weights_gib_per_gpu:.1f} GiB weights/GPU, "
        f"{r.kv_tokens:,} KV tokens ({r.max_concurrent_sequences} sequences of {context:,})"
    )


def _gpus_short(r: PrecisionPlan, plan: MemoryPlan) -> str:
    """Why a row does not fit the GPUs on hand, or nothing."""
    if r.fits:
        return ""
    if r.tp_needed is None:
        return f"; does not fit even at TP={r.tensor_parallel}"
    return f"; needs {r.tp_needed} GPUs per replica (have {plan.gpu_count})"


def quantization_advice(plan: MemoryPlan, gpu: GpuSpec | None = None) -> list[str]:
    """Plain-language advice on the weight precision (and KV dtype) for ``plan`` on ``gpu``.

    ``gpu`` defaults to the spec named in the plan; an unknown GPU gets the advice with FP8
    support stated as unknown.
    """
    gpu = gpu or gpu_spec(plan.gpu)
    rows = {r.precision: r for r in plan.rows}
    bf16, fp8, int4 = rows.get("bf16"), rows.get("fp8"), rows.get("int4")
    fp8_hw = None if gpu is None else gpu.supports_fp8
    gpu_label = gpu.name if gpu else plan.gpu
    advice: list[str] = []

    if fp8 is not None and fp8_hw and fp8.fits:
        line = f"Use FP8 weights on {gpu_label} (seed 003 §5.1: loss < 1%, about half the memory of BF16): "
        advice.append(line + _fmt(fp8, plan.context_tokens) + ".")
        if bf16 is not None:
            advice.append("For comparison, " + _fmt(bf16, plan.context_tokens) + _gpus_short(bf16, plan) + ".")
    elif fp8 is not None and fp8_hw:
        advice.append(
            f"FP8 is the default on {gpu_label} (seed 003 §5.1), but "
            + _fmt(fp8, plan.context_tokens)
            + _gpus_short(fp8, plan)
            + "."
        )
    elif fp8 is not None and fp8_hw is False:
        advice.append(
            f"{gpu_label} ({gpu.architecture}) has no FP8 tensor cores: FP8 checkpoints run there only as "
            "weight-only FP8 (memory saving, no compute speed-up). Prefer BF16, or INT8 (seed: 1-3% loss) "
            "where memory is short."
        )
    elif fp8_hw is None:
        advice.append(f"FP8 support of {gpu_label} is unknown (not in the GPU spec table); check the datasheet.")

    if bf16 is not None and bf16.fits and (fp8 is None or not fp8_hw):
        advice.append("BF16 fits: " + _fmt(bf16, plan.context_tokens) + ".")

    usable_8bit = [r for r in (bf16, fp8) if r is not None and r.fits and (r.precision == "bf16" or fp8_hw)]
    if int4 is not None:
        if usable_8bit:
            advice.append(
                "INT4 is not needed: a higher precision fits. INT4 costs 3-8% accuracy (seed 003 §5.1); "
                "keep it for when nothing else fits."
            )
        elif int4.fits:
            advice.append(
                "Only INT4 fits on the GPUs you have: " + _fmt(int4, plan.context_tokens) + ". Check accuracy "
                "on your own test set before using it (seed: 3-8% loss; accept < 2%), and do not use INT4 "
                "for medical, legal or financial answers."
            )
    if not any(r.fits for r in plan.rows):
        need = min((r.tp_needed for r in plan.rows if r.tp_needed), default=None)
        advice.append(
            f"Nothing fits on {plan.gpu_count} GPU(s)"
            + (f"; the smallest plan needs TP={need}" if need else "")
            + ". Seed 003 §6.3: solve model parallelism (more or larger GPUs) before choosing an engine."
        )

    if plan.kv_dtype == "auto" and fp8_hw:
        best = next((r for r in (fp8, bf16, int4) if r is not None and r.fits), None)
        if best is not None:
            advice.append(
                f"An FP8 KV cache (vLLM --kv-cache-dtype fp8, SGLang fp8_e4m3) would double the KV room "
                f"of {best.precision.upper()} to about {2 * best.kv_tokens:,} tokens; check accuracy on long "
                "contexts."
            )
    return advice
