"""TensorRT-LLM adapter (``trtllm-serve``, PyTorch backend by default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.engines.base import EngineAdapter, MetricNames, register_engine

if TYPE_CHECKING:
    from helpers.config import EngineSpec, Knobs, ModelSpec


@register_engine
class TrtllmAdapter(EngineAdapter):
    """``trtllm-serve`` with the PyTorch backend; extra LLM-API options go to a YAML file."""

    name = "trtllm"
    display_name = "TensorRT-LLM"
    family = "trtllm"
    module = "tensorrt_llm.commands.serve"
    package = "tensorrt_llm"
    default_image = "nvcr.io/nvidia/tensorrt-llm/release:1.2.1"
    container_entrypoint = ["trtllm-serve"]
    metrics_path = "/prometheus/metrics"
    metrics = MetricNames(
        hit_rate_gauge="trtllm_kv_cache_hit_rate",
        kv_usage="trtllm_kv_cache_utilization",
        waiting="trtllm_num_requests_waiting",
        running="trtllm_num_requests_running",
    )
    install_hint = (
        "pip install tensorrt_llm==1.2.1 --extra-index-url https://pypi.nvidia.com "
        "(needs NVIDIA's index and torch<=2.10; or use the container image)"
    )

    def extra_options(self, knobs: Knobs) -> dict:
        """The LLM-API options that have no command-line flag (written to ``--extra_llm_api_options``)."""
        kv: dict = {}
        if knobs.kv_cache_dtype == "fp8":
            kv["dtype"] = "fp8"
        if knobs.prefix_caching is not None:
            kv["enable_block_reuse"] = knobs.prefix_caching
        if knobs.memory_fraction is not None:
            kv["free_gpu_memory_fraction"] = knobs.memory_fraction
        opts: dict = {"kv_cache_config": kv} if kv else {}
        if knobs.dummy_weights:
            opts["load_format"] = "dummy"
        return opts

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """Map knobs onto trtllm-serve flags (the rest go to the extra-options YAML)."""
        f = ["--backend", "pytorch"]
        if knobs.max_num_seqs:
            f += ["--max_batch_size", str(knobs.max_num_seqs)]
        if knobs.max_batched_tokens:
            f += ["--max_num_tokens", str(knobs.max_batched_tokens)]
        if knobs.tensor_parallel > 1:
            f += ["--tp_size", str(knobs.tensor_parallel)]
        if knobs.memory_fraction is not None:
            f += ["--kv_cache_free_gpu_memory_fraction", str(knobs.memory_fraction)]
        if knobs.max_model_len:
            f += ["--max_seq_len", str(knobs.max_model_len)]
        return f

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """``serve MODEL --host H --port P`` plus knob flags (the options YAML is added by the launcher)."""
        args = [model_path, "--host", host, "--port", str(port)]
        return args + self.knob_flags(spec.knobs) + list(spec.extra_args)
