"""TensorRT-LLM adapter (``trtllm-serve``, PyTorch backend by default; the compiled-engine path as an option).

Checked against TensorRT-LLM's ``tensorrt_llm/commands/serve.py`` (the ``trtllm-serve`` console
script is its ``main``, a click group whose default subcommand is ``serve``, with an
``if __name__ == "__main__"`` guard, so ``python -m tensorrt_llm.commands.serve serve MODEL`` and
``trtllm-serve serve MODEL`` are the same command). Settings without a flag go to a YAML file given
with ``--extra_llm_api_options``.

Metrics: ``/prometheus/metrics`` is mounted only when the LLM-API option ``return_perf_metrics`` is
true, so it is always written. In 1.2.x that page holds the request-level series (TTFT, TPOT, E2E
and queue-time histograms, ``trtllm_request_success_total``); the iteration-level gauges named in
``metrics`` (KV-cache hit rate and utilisation, running and waiting requests) arrive in later
releases. Dashboards and alerts use ``metrics``. The benchmark instead samples the JSON iteration
statistics at ``/metrics`` (``sample_*``), which 1.2.x already serves when ``enable_iter_perf_stats``
(PyTorch backend) is on, which is also written: ``numActiveRequests``, ``numQueuedRequests`` and
``kvCacheStats`` (used/max blocks, reused/missed blocks, ``cacheHitRate``).

Backends: ``pytorch`` (default) loads the checkpoint directly and can serve dummy weights;
``tensorrt`` builds a TensorRT engine from the checkpoint at start, so the build time lands in the
cold start the benchmark records. It needs real weights: ``load_format`` is a PyTorch-backend option
and is not written for it. Choose it with ``engine_options: {backend: tensorrt}`` where the config
has that field, or ``extra_args: [--backend, tensorrt]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.engines.base import EngineAdapter, MetricNames

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec

BACKENDS = ("pytorch", "tensorrt")
_BACKEND_ALIASES = {"trt": "tensorrt"}


class TrtllmAdapter(EngineAdapter):
    """``trtllm-serve serve``; extra LLM-API options go to a YAML file."""

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
    sample_path = "/metrics"
    sample_format = "trtllm-iterations"
    sample_metrics = MetricNames(
        prefix_hits="kvCacheStats.reusedBlocks",
        prefix_queries="kvCacheStats.lookedUpBlocks",
        hit_rate_gauge="kvCacheStats.cacheHitRate",
        kv_usage="kvCacheStats.usedFraction",
        waiting="numQueuedRequests",
        running="numActiveRequests",
    )
    install_hint = (
        "pip install tensorrt_llm==1.2.1 --extra-index-url https://pypi.nvidia.com "
        "(needs NVIDIA's index and torch<=2.10; or use the container image)"
    )
    # kvCacheManager.cpp: "[MemUsageChange] Allocated %0.2f GiB for max tokens in paged KV cache (%d)."
    kv_capacity_pattern = r"Allocated [\d.]+ GiB for max tokens in paged KV cache \((\d+)\)"
    options_flag = "--extra_llm_api_options"

    def calibration_key(self, spec: EngineSpec) -> str:
        """``trtllm-<backend>``: each backend is calibrated on its own (``EngineAdapter.calibration_key``)."""
        return f"trtllm-{self.backend(spec)}"

    def backend(self, spec: EngineSpec) -> str:
        """``pytorch`` or ``tensorrt``: from ``engine_options.backend``, else ``--backend`` in extra_args."""
        chosen = (getattr(spec, "engine_options", None) or {}).get("backend")
        args = list(spec.extra_args)
        if chosen is None and "--backend" in args:
            i = args.index("--backend")
            chosen = args[i + 1] if i + 1 < len(args) else None
        chosen = _BACKEND_ALIASES.get(chosen or "pytorch", chosen or "pytorch")
        if chosen not in BACKENDS:
            allowed = ", ".join(BACKENDS)
            raise ValueError(f"engine {spec.label!r}: unknown trtllm backend {chosen!r}; allowed: {allowed}")
        return chosen

    def extra_options(self, knobs: Knobs, backend: str = "pytorch") -> dict:
        """The LLM-API options that have no command-line flag (written to ``--extra_llm_api_options``)."""
        opts: dict = {"return_perf_metrics": True}
        if backend == "pytorch":
            opts["enable_iter_perf_stats"] = True
        kv: dict = {}
        if knobs.kv_cache_dtype == "fp8":
            kv["dtype"] = "fp8"
        if knobs.prefix_caching is not None:
            kv["enable_block_reuse"] = knobs.prefix_caching
        if knobs.memory_fraction is not None:
            # the YAML's kv_cache_config replaces the one built from flags, so the fraction goes here too
            kv["free_gpu_memory_fraction"] = knobs.memory_fraction
        if kv:
            opts["kv_cache_config"] = kv
        if knobs.dummy_weights and backend == "pytorch":
            opts["load_format"] = "dummy"
        return opts

    def launch_options(self, spec: EngineSpec) -> dict:
        """The extra LLM-API options for this engine configuration and its backend."""
        return self.extra_options(spec.knobs, self.backend(spec))

    def knob_flags(self, knobs: Knobs) -> list[str]:
        """Map knobs onto trtllm-serve flags (the rest go to the extra-options YAML)."""
        f: list[str] = []
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
        """``serve MODEL --host H --port P --backend B`` plus knob flags (the options YAML is added by the launcher).

        trtllm-serve has no served-name flag: it names the model after the folder's last part.
        """
        args = ["serve", model_path, "--host", host, "--port", str(port)]
        if "--backend" not in spec.extra_args:
            args += ["--backend", self.backend(spec)]
        return args + self.knob_flags(spec.knobs) + list(spec.extra_args)
