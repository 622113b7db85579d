"""PromQL for the serving signals that alerts and dashboards watch, in each engine's own metric names.

Queue, KV-cache usage and prefix-cache names come from the adapter's ``MetricNames``. The TTFT
histogram and the generation-token counter are not in ``MetricNames`` yet, so ``EXTRA_SERIES``
holds them by engine family, read from the engines' metric pages: vLLM 0.26.0 and SGLang 0.5.16
(``tests/fixtures/metrics/*-metrics.txt``, captured on the H200) and TensorRT-LLM's
``tensorrt_llm/metrics/collector.py`` (``trtllm_`` prefix, served on ``/prometheus/metrics``). An adapter
attribute of the same name (``metrics.ttft_histogram`` / ``metrics.generation_tokens``) wins once the
adapters carry it.

GPU signals come from NVIDIA's DCGM exporter: ``DCGM_FI_DEV_GPU_UTIL`` (percent) and
``DCGM_FI_DEV_FB_USED`` / ``DCGM_FI_DEV_FB_FREE`` (MiB). With Kubernetes pod mapping the exporter
labels each GPU with the pod using it; scraped through a ServiceMonitor without ``honorLabels`` that
label arrives as ``exported_pod`` (``pod`` is then the exporter's own pod), so every GPU selector
matches either: ``exported_pod`` copied into ``pod`` with ``label_replace``, ``or`` the plain ``pod``.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.core.errors import PlaybookError
from helpers.engines import EngineAdapter

DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"


@dataclass(frozen=True)
class ExtraSeries:
    """Series an engine family exposes that ``MetricNames`` does not name yet."""

    ttft_histogram: str  # base name; PromQL reads ``<name>_bucket``
    generation_tokens: str  # counter of output tokens


EXTRA_SERIES: dict[str, ExtraSeries] = {
    "vllm": ExtraSeries("vllm:time_to_first_token_seconds", "vllm:generation_tokens_total"),
    "sglang": ExtraSeries("sglang:time_to_first_token_seconds", "sglang:generation_tokens_total"),
    "trtllm": ExtraSeries("trtllm_time_to_first_token_seconds", "trtllm_generation_tokens_total"),
    "lmdeploy": ExtraSeries("lmdeploy:time_to_first_token_seconds", "lmdeploy:generation_tokens_total"),
}


@dataclass(frozen=True)
class Signals:
    """PromQL expressions for one deployed engine, scoped by label selectors."""

    ttft_p95_s: str
    output_tok_s: str
    queue: str
    running: str | None
    kv_usage: str | None  # 0-1
    prefix_hit_rate: str | None  # 0-1
    liveness: str  # a series that exists while the engine exports metrics
    gpu_util_pct: str | None  # per pod, averaged over its GPUs
    gpu_mem_pct: str | None  # per GPU
    kv_usage_sum: str | None = None  # 0-1 per replica, summed over replicas (autoscaling divides by replicas)
    output_tok_s_by_instance: str | None = None  # output tok/s of each scraped engine (one replica)
    running_by_instance: str | None = None  # requests running in each engine, averaged over the window


def _sel(name: str, selector: str) -> str:
    return f"{name}{{{selector}}}" if selector else name


def dcgm(name: str, pod_regex: str) -> str:
    """A DCGM series of the pods matching ``pod_regex``, labelled ``pod`` with or without honorLabels."""
    exported = f'label_replace({name}{{exported_pod=~"{pod_regex}"}}, "pod", "$1", "exported_pod", "(.+)")'
    return f'({exported} or {name}{{pod=~"{pod_regex}"}})'


def signals(adapter: EngineAdapter, engine_selector: str, gpu_selector: str | None, window: str = "5m") -> Signals:
    """The expressions for ``adapter``'s metrics; ``gpu_selector`` (a pod-name regex) None means no GPU."""
    m = adapter.metrics
    extra = EXTRA_SERIES.get(adapter.family)
    ttft = getattr(m, "ttft_histogram", None) or (extra.ttft_histogram if extra else None)
    gen = getattr(m, "generation_tokens", None) or (extra.generation_tokens if extra else None)
    if not (ttft and gen and m.waiting):
        raise PlaybookError(
            f"engine {adapter.name!r}: no TTFT histogram, token counter or queue gauge known "
            f"(add them to its MetricNames or to {__name__}.EXTRA_SERIES)"
        )
    es = engine_selector
    if m.prefix_hits and m.prefix_queries:
        hit = (
            f"sum(rate({_sel(m.prefix_hits, es)}[{window}])) / "
            f"clamp_min(sum(rate({_sel(m.prefix_queries, es)}[{window}])), 1e-9)"
        )
    elif m.hit_rate_gauge:
        hit = f"avg({_sel(m.hit_rate_gauge, es)})"
    else:
        hit = None
    gpu_util = gpu_mem = None
    if gpu_selector is not None:
        used, free = dcgm(DCGM_FB_USED, gpu_selector), dcgm(DCGM_FB_FREE, gpu_selector)
        gpu_util = f"avg by (pod) ({dcgm(DCGM_GPU_UTIL, gpu_selector)})"
        gpu_mem = f"100 * {used} / ({used} + {free})"
    return Signals(
        ttft_p95_s=f"histogram_quantile(0.95, sum by (le) (rate({_sel(ttft + '_bucket', es)}[{window}])))",
        output_tok_s=f"sum(rate({_sel(gen, es)}[1m]))",
        queue=f"sum({_sel(m.waiting, es)})",
        running=f"sum({_sel(m.running, es)})" if m.running else None,
        kv_usage=f"max({_sel(m.kv_usage, es)})" if m.kv_usage else None,
        prefix_hit_rate=hit,
        liveness=_sel(m.waiting, es),
        gpu_util_pct=gpu_util,
        gpu_mem_pct=gpu_mem,
        kv_usage_sum=f"sum({_sel(m.kv_usage, es)})" if m.kv_usage else None,
        output_tok_s_by_instance=f"sum by (instance) (rate({_sel(gen, es)}[{window}]))",
        running_by_instance=(
            f"sum by (instance) (avg_over_time({_sel(m.running, es)}[{window}]))" if m.running else None
        ),
    )


def pod_restarts(deployment: str) -> str:
    """Container restarts of the deployment's pods over the last hour (kube-state-metrics)."""
    return f'sum(increase(kube_pod_container_status_restarts_total{{pod=~"{gpu_selector(deployment)}"}}[1h]))'


def engine_selector(served_name: str) -> str:
    """The label selector of one deployment's engine series: every engine labels them ``model_name``."""
    return f'model_name="{served_name}"'


def gpu_selector(deployment: str) -> str:
    """The regex of the deployment's pod names (as the DCGM exporter and kube-state-metrics label them)."""
    return f"{deployment}-.*"
