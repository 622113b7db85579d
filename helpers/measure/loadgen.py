"""Load generation with guidellm's in-process Python API.

The playbook writes the prompts (``helpers.measure.prompts``) and guidellm replays them at a fixed
concurrency against an OpenAI-compatible server, with ``ignore_eos`` so outputs have the
requested length. ``run_point`` returns the client-side figures of one load level.

Requests are streamed and ask for token usage in the final chunk only: guidellm's default also
asks for ``continuous_usage_stats``, which makes vLLM serialise a usage block into every streamed
token, work that real clients rarely ask for and that the summary does not read (it takes the
final usage). Plain HTTP/1.1 is used, as the engines serve it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LoadResult:
    """Client-side figures of one point, as guidellm measured them."""

    requests: int
    errors: int
    duration_s: float  # guidellm's measurement window (its throughputs are over this)
    output_tok_s: float
    total_tok_s: float
    req_s: float
    input_tokens_mean: float | None
    output_tokens_mean: float | None
    ttft_ms: dict[str, float | None] = field(default_factory=dict)  # p50/p95/p99
    itl_ms: dict[str, float | None] = field(default_factory=dict)  # p50/p95
    e2e_ms: dict[str, float | None] = field(default_factory=dict)  # p50/p95
    ttft_values_ms: list[float] = field(default_factory=list)  # per successful request
    first_error: str | None = None
    incomplete: int = 0  # in flight when the point's time cap ended it (not failures)
    concurrency_mean: float | None = None  # requests in flight, time-averaged (replays)
    request_span_s: float | None = None  # first request sent to last one done (scheduler timestamps)


def _configure_guidellm() -> None:
    """Quiet guidellm's console logging and size its worker pool for this machine.

    The log level is read by guidellm when it is first imported, so it is set through its
    environment variable before that import (reconfiguring its logger later hangs its workers).
    """
    level = os.environ.get("PLAYBOOK_GUIDELLM_LOG_LEVEL", "WARNING")
    os.environ.setdefault("GUIDELLM__LOGGING__CONSOLE_LOG_LEVEL", level)
    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.settings import settings

    cpus = os.cpu_count() or 2
    settings.max_worker_processes = int(os.environ.get("PLAYBOOK_GUIDELLM_WORKERS", str(min(10, max(1, cpus)))))


def _stat(metrics: dict[str, Any], name: str, key: str) -> float | None:
    """A statistic of the successful requests' distribution ``name`` (``mean`` or a percentile)."""
    dist = (metrics.get(name) or {}).get("successful") or {}
    if not dist or not dist.get("count"):
        return None
    if key == "mean":
        return dist.get("mean")
    return (dist.get("percentiles") or {}).get(key)


def _backend_spec(base_url: str, served_model: str, api_key: str | None, timeout_s: float) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": "openai_http",
        "target": base_url,
        "model": served_model,
        "request_format": "/v1/completions",
        "timeout": timeout_s,
        "http2": False,
        "extras": {"body": {"stream_options": {"include_usage": True, "continuous_usage_stats": False}}},
    }
    if api_key:
        spec["api_key"] = api_key
    return spec


def summarize(bench: Any, max_error_chars: int = 300) -> LoadResult:
    """Turn one guidellm ``GenerativeBenchmark`` into a ``LoadResult``."""
    data = bench.model_dump(mode="json")
    m = data["metrics"]
    totals = m.get("request_totals") or {}
    sched = data.get("scheduler_metrics") or {}
    start, end = sched.get("measure_start_time"), sched.get("measure_end_time")
    duration = float(end - start) if start and end else 0.0
    first, last = sched.get("request_start_time"), sched.get("request_end_time")
    span = float(last - first) if first and last and last > first else None
    successful = data.get("requests", {}).get("successful") or []
    ttfts = [float(r["time_to_first_token_ms"]) for r in successful if r.get("time_to_first_token_ms") is not None]
    first_error = None
    for r in data.get("requests", {}).get("errored") or []:
        msg = (r.get("info") or {}).get("error") or r.get("error")
        if msg:
            first_error = str(msg)[:max_error_chars]
            break
    return LoadResult(
        requests=int(totals.get("successful") or 0),
        errors=int(totals.get("errored") or 0),
        incomplete=int(totals.get("incomplete") or 0),
        duration_s=duration,
        request_span_s=span,
        output_tok_s=float(_stat(m, "output_tokens_per_second", "mean") or 0.0),
        total_tok_s=float(_stat(m, "tokens_per_second", "mean") or 0.0),
        req_s=float(_stat(m, "requests_per_second", "mean") or 0.0),
        input_tokens_mean=_stat(m, "prompt_token_count", "mean"),
        output_tokens_mean=_stat(m, "output_token_count", "mean"),
        ttft_ms={k: _stat(m, "time_to_first_token_ms", k) for k in ("p50", "p95", "p99")},
        itl_ms={k: _stat(m, "inter_token_latency_ms", k) for k in ("p50", "p95")},
        e2e_ms={k: (v * 1000 if (v := _stat(m, "request_latency", k)) is not None else None) for k in ("p50", "p95")},
        ttft_values_ms=ttfts,
        first_error=first_error,
        concurrency_mean=_stat(m, "request_concurrency", "mean"),
    )


async def _run(spec: dict[str, Any]) -> LoadResult:
    """Run one guidellm benchmark described by ``spec`` and summarise it."""
    _configure_guidellm()
    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.benchmark.entrypoints import benchmark_generative_text

    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.schemas.benchmark import BenchmarkScenario

    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.utils.typing import BLANK

    args = BenchmarkScenario.create(spec=spec, benchmarks=BLANK, metadata={"labels": {}}, scenario=None)
    report, _ = await benchmark_generative_text(args=args, progress=False, console=None)
    if not report.benchmarks:
        raise RuntimeError("guidellm produced no benchmark for this point")
    return summarize(report.benchmarks[-1])


async def run_replay(
    base_url: str,
    served_model: str,
    tokenizer_dir: Path,
    trace_rows: Path,
    time_scale: float,
    max_seconds: float,
    api_key: str | None = None,
    request_timeout_s: float = 600.0,
) -> LoadResult:
    """Replay a trace's arrivals (JSONL: timestamp s, input_length, output_length) with guidellm.

    guidellm's replay profile sends each request at its (scaled) timestamp; its trace reader makes a
    prompt of each row's length from English text, which the playbook's tokenizers count exactly.
    """
    rows = sum(1 for line in open(trace_rows, encoding="utf-8") if line.strip())
    spec = {
        "backend": _backend_spec(base_url, served_model, api_key, request_timeout_s),
        "tokenizer": {"kind": "hf_auto", "model": str(tokenizer_dir)},
        "data": [
            {
                "kind": "trace_synthetic",
                "source": {"kind": "json_file", "path": str(trace_rows)},
                "timestamp_column": "timestamp",
                "prompt_tokens_column": "input_length",
                "output_tokens_column": "output_length",
            }
        ],
        "profile": {"kind": "replay", "time_scale": time_scale},
        "constraints": [
            {"kind": "max_requests", "count": rows},
            {"kind": "max_duration", "seconds": max_seconds},
        ],
        "outputs": [],
    }
    return await _run(spec)


async def run_point(
    base_url: str,
    served_model: str,
    tokenizer_dir: Path,
    dataset: Path,
    concurrency: int,
    max_requests: int,
    max_seconds: float,
    api_key: str | None = None,
    request_timeout_s: float = 600.0,
) -> LoadResult:
    """Drive ``max_requests`` requests from ``dataset`` at ``concurrency`` streams; await inside Jupyter."""
    spec = {
        "backend": _backend_spec(base_url, served_model, api_key, request_timeout_s),
        "tokenizer": {"kind": "hf_auto", "model": str(tokenizer_dir)},
        "data": [{"kind": "json_file", "path": str(dataset)}],
        "profile": {"kind": "concurrent", "streams": concurrency},
        "constraints": [
            {"kind": "max_requests", "count": max_requests},
            {"kind": "max_duration", "seconds": max_seconds},
        ],
        "outputs": [],
    }
    return await _run(spec)
