"""SGLang adapter (``sglang.launch_server``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.core.paths import resolve_model_dir
from helpers.engines.base import EngineAdapter, MetricNames

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, Knobs, ModelSpec, Speculative


def speculative_flags(spec: Speculative) -> list[str]:
    """SGLang 0.5.16 flags: ``NGRAM`` (its trie of earlier tokens) or ``STANDALONE`` (a small draft model).

    SGLang counts the verified root in ``--speculative-num-draft-tokens``, so it is ``num_tokens + 1``;
    ``ngram_max`` is the depth of its n-gram trie (``--speculative-ngram-max-trie-depth``).
    """
    if spec.method == "ngram":
        return ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(spec.num_tokens + 1),
                "--speculative-ngram-max-trie-depth", str(spec.ngram_max)]  # fmt: skip
    return ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path",
            str(resolve_model_dir(spec.draft_model or "")), "--speculative-num-steps", str(spec.num_tokens),
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(spec.num_tokens + 1)]  # fmt: skip


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
    cache_reset_path = "/flush_cache"
    metrics = MetricNames(
        prefix_hits="sglang:cached_tokens_total",
        prefix_queries="sglang:prompt_tokens_total",
        hit_rate_gauge="sglang:cache_hit_rate",
        kv_usage="sglang:token_usage",
        waiting="sglang:num_queue_reqs",
        running="sglang:num_running_reqs",
        spec_accept_rate_gauge="sglang:spec_accept_rate",
        spec_accept_length_gauge="sglang:spec_accept_length",
    )
    speculative_methods = frozenset({"ngram", "draft"})
    install_hint = "python3 -m venv .engines/sglang && .engines/sglang/bin/pip install sglang==0.5.16"
    kv_capacity_pattern = r"max_total_num_tokens=(\d+)"
    block_size_flag = "--page-size"
    block_size_pattern = r"\bpage_size=(\d+)"  # its server_args line (0.5.16: page_size=1, a token-level radix tree)
    default_block_size = 1

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
        if knobs.speculative is not None:
            f += speculative_flags(knobs.speculative)
        return f

    def check_spec(self, spec: EngineSpec) -> None:
        """Refuse speculative settings SGLang 0.5.16 has no flag for."""
        s = spec.knobs.speculative
        if s is not None and s.ngram_min is not None:
            raise ValueError("knobs.speculative.ngram_min has no SGLang 0.5.16 flag (its n-gram trie has only a depth)")

    def server_args(self, spec: EngineSpec, model: ModelSpec, model_path: str, host: str, port: int) -> list[str]:
        """``--model-path DIR --host H --port P --enable-metrics --enable-cache-report`` plus knobs."""
        args = ["--model-path", model_path, "--served-model-name", self.served_model_name(model)]
        args += ["--host", host, "--port", str(port), "--enable-metrics", "--enable-cache-report"]
        if model.dtype != "auto":
            args += ["--dtype", model.dtype]
        return args + self.knob_flags(spec.knobs) + list(spec.extra_args)

    def kv_share(self, spec: EngineSpec) -> str:
        """``static``: ``--mem-fraction-static`` holds the weights and the KV pool, not the activations.

        Its activations and CUDA graphs live outside the fraction (the memory plan's module doc gives the logs
        this is checked on).
        """
        return "static"

    def env(self, spec: EngineSpec) -> dict[str, str]:
        """Keep SGLang offline."""
        return {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
