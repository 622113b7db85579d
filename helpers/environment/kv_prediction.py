"""Predicted KV-cache capacity per engine configuration, to set beside what the engine logs.

GPU engines: the memory plan (``helpers.environment.memory_plan``) at the configuration's memory fraction,
read as the engine reads it (``EngineAdapter.kv_share``: a share of the GPU, or of what the weights leave free).
CPU engines: vLLM's CPU build sizes its KV cache as ``VLLM_CPU_KVCACHE_SPACE`` GiB, so the
capacity is that space divided by the KV bytes of one token.
"""

from __future__ import annotations

import pandas as pd

from helpers.core.config import DEFAULT_MEMORY_FRACTION, EngineSpec, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.engines import get_engine
from helpers.environment.memory_plan import MemoryPlan, memory_plan
from helpers.model.shape import ModelShape, kv_bytes_per_token, read_model_shape

CPU_KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"


def kv_dtype_of(spec: EngineSpec) -> str:
    """The KV dtype the memory plan uses for a configuration: fp8 when the knob asks for it, else the model's."""
    return "fp8" if spec.knobs.kv_cache_dtype == "fp8" else "auto"


def weight_precision(spec: EngineSpec, shape: ModelShape) -> str:
    """The weight precision a configuration serves: fp8 with the quantization knob, else the checkpoint's."""
    return "fp8" if spec.knobs.quantization == "fp8" else shape.checkpoint_precision


def kv_token_bytes(cfg: PlaybookConfig, spec: EngineSpec) -> int | None:
    """KV bytes of one token on one GPU of a configuration (its KV dtype and TP); None without a readable shape.

    What turns an engine's logged byte budget into tokens (``EngineAdapter.kv_capacity_from_log``).
    """
    try:
        shape = read_model_shape(cfg.model.directory)
        return kv_bytes_per_token(shape, kv_dtype_of(spec), spec.knobs.tensor_parallel)
    except (PlaybookError, OSError, ValueError):
        return None


def cpu_kv_tokens(cfg: PlaybookConfig, spec: EngineSpec) -> int | None:
    """KV capacity of a CPU engine configuration, or None for a GPU engine."""
    adapter = get_engine(spec.engine)
    if not adapter.runs_on_cpu:
        return None
    env = {**adapter.env(spec), **spec.launcher.env}
    try:
        space_gib = float(env.get(CPU_KV_SPACE_ENV, "0"))
    except ValueError:
        return None
    shape = read_model_shape(cfg.model.directory)
    return int(space_gib * 2**30 // kv_bytes_per_token(shape, kv_dtype_of(spec)))


def gpu_kv_tokens(cfg: PlaybookConfig, spec: EngineSpec, gpu: object) -> tuple[int | None, MemoryPlan | None]:
    """KV capacity the memory plan predicts for a GPU engine configuration on ``gpu``."""
    if get_engine(spec.engine).runs_on_cpu or gpu is None:
        return None, None
    wl = cfg.workload
    plan = memory_plan(
        cfg.model.directory,
        gpu,  # type: ignore[arg-type]
        memory_fraction=spec.knobs.memory_fraction or DEFAULT_MEMORY_FRACTION,
        context_tokens=wl.input_tokens + wl.output_tokens,
        gpu_count=spec.knobs.tensor_parallel,
        kv_dtype=kv_dtype_of(spec),
        tensor_parallel=spec.knobs.tensor_parallel,
        kv_share=get_engine(spec.engine).kv_share(spec),
    )
    return plan.row(weight_precision(spec, read_model_shape(cfg.model.directory))).kv_tokens, plan


def predicted_kv_tokens(cfg: PlaybookConfig, spec: EngineSpec, gpu: object = None) -> int | None:
    """The predicted KV capacity (tokens) of one engine configuration; None when it cannot be planned."""
    try:
        cpu = cpu_kv_tokens(cfg, spec)
        return cpu if cpu is not None else gpu_kv_tokens(cfg, spec, gpu)[0]
    except (PlaybookError, KeyError):
        return None


def cpu_kv_plan(cfg: PlaybookConfig) -> pd.DataFrame | None:
    """One row per CPU engine configuration: KV space, bytes per token, predicted tokens; None if none."""
    shape = read_model_shape(cfg.model.directory)
    rows = []
    for spec in cfg.engines:
        tokens = cpu_kv_tokens(cfg, spec)
        if tokens is None:
            continue
        env = {**get_engine(spec.engine).env(spec), **spec.launcher.env}
        rows.append(
            {
                "engine config": spec.label,
                "KV space GiB": float(env.get(CPU_KV_SPACE_ENV, "0")),
                "KV bytes/token": kv_bytes_per_token(shape, kv_dtype_of(spec)),
                "KV tokens predicted": tokens,
                "max sequences at this workload's context": tokens
                // (cfg.workload.input_tokens + cfg.workload.output_tokens),
            }
        )
    return pd.DataFrame(rows) if rows else None
