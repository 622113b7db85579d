"""SGLang adapter (``sglang.launch_server``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.engines.base import EngineAdapter, MetricNames

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec


class SglangAdapter(EngineAdapter):
    """SGLang's server. Its ``sglang:cache_hit_rate`` gauge reads 0.0 on 0.5.16: use the counters."""

    name = "sglang"
    display_name = "SGLang"
    family = "sglang"
    module = "sglang.launch_server"
    package = "sglang"
    default_image = "lmsysorg/sglang:v0.5.16"
    container_entrypoint = ["python3", "-m", "sglang.launch_server"]
    default_port = 30000
    metrics = MetricNames(
        prefix_hits="sglang:cached_tokens_total",
        prefix_queries="sglang:prompt_tokens_total",
        hit_rate_gauge="sglang:cache_hit_rate",
        kv_usage="sglang:token_usage",
        waiting="sglang:num_queue_reqs",
        running="sglang:num_running_reqs",
    )
    install_hint = "python3 -m venv .engines/sglang && .engines/sglang/bin/pip install sglang==0.5.16"
    kv_capacity_pattern = r"max_total_num_tokens=(\d+)"

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """Map knobs onto SGLang flags."""
        f: list[str] = []
        if knobs.max_num_seqs:
            f += ["--max-running-requests", str(knobs.max_num_seqs)]
        if knobs.max_batched_tokens:
            f += ["--chunked-prefill-size", str(knobs.max_batched_tokens)]
        if knobs.prefix_caching is False:
            f.append("--disable-radix-cache")
        if knobs.kv_cache_dtype == "fp8":
            f += ["--kv-cache-dtype", "fp8_e4m3"]
        if knobs.quantization != "none":
            f += ["--quantization", knobs.quantization]
        if knobs.tensor_parallel > 1:
            f += ["--tp-size", str(knobs.tensor_parallel)]
        if knobs.memory_fraction is not None:
            f += ["--mem-fraction-static", str(knobs.memory_fraction)]
        if knobs.dummy_weights:
            f += ["--load-format", "dummy"]
        if knobs.max_model_len:
            f += ["--context-length", str(knobs.max_model_len)]
        return f

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """``--model-path DIR --host H --port P --enable-metrics --enable-cache-report`` plus knobs."""
        args = ["--model-path", model_path, "--served-model-name", self.served_model_name(model)]
        args += ["--host", host, "--port", str(port), "--enable-metrics", "--enable-cache-report"]
        if model.dtype != "auto":
            args += ["--dtype", model.dtype]
        return args + self.knob_flags(spec.knobs) + list(spec.extra_args)

    def env(self, spec: EngineSpec) -> dict[str, str]:
        """Keep SGLang offline."""
        return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
