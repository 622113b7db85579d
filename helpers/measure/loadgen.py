"""Load generation with guidellm's in-process Python API.

The playbook writes the prompts (``helpers.measure.prompts``) and guidellm replays them at a fixed
concurrency against an OpenAI-compatible server, with ``ignore_eos`` so outputs have the
requested length. ``run_point`` returns the client-side figures of one load level. A load whose
requests did not all complete is followed by one bounded health probe: an engine that then gives no
answer hung during the load, and the result says so (``LoadResult.hung``): it is not a measurement.

Requests are streamed and ask for token usage in the final chunk only: guidellm's default also
asks for ``continuous_usage_stats``, which makes vLLM serialise a usage block into every streamed
token, work that real clients rarely ask for and that the summary does not read (it takes the
final usage). Plain HTTP/1.1 is used, as the engines serve it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from helpers.core.errors import EngineError
from helpers.measure.guidellm_setup import configure_guidellm
from helpers.measure.timing import request_timing


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
    # Open-loop points (``run_rate``) and the capacity search read these; older callers ignore them.
    offered_rate: float | None = None  # the arrival rate asked of guidellm (req/s); None for concurrency points
    sent_rate: float | None = None  # sends per second over the steady window: the rate the client really offered
    completed_rate: float | None = None  # completions per second over the steady window: the rate served
    steady_window_s: float | None = None  # first finish to last send (s); None: fewer than two requests
    served_ratio: float | None = None  # served ÷ offered from finish against send times (``timing.keep_up``)
    served_ratio_low: float | None = None  # its 95% interval
    served_ratio_high: float | None = None
    dispatch_delay_p95_ms: float | None = None  # how late guidellm sent requests against its schedule
    request_starts_s: list[float] = field(default_factory=list)  # every request sent, s after the first send
    request_ends_s: list[float | None] = field(default_factory=list)  # same order; None: still in flight
    hung: str | None = None  # requests did not complete and the engine then did not answer: not a measurement
    interference: str | None = None  # what else loaded the machine meanwhile (``measure.interference``)


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
    requests = int(totals.get("successful") or 0)
    input_mean, output_mean = _stat(m, "prompt_token_count", "mean"), _stat(m, "output_token_count", "mean")
    if len(successful) > requests:
        # guidellm's totals count the requests inside its measurement window, which ends at the finish that met
        # the request cap (in the order its messages arrived): a request sent late by a busy client can fall
        # outside it although it finished. What the engine served counts, here as in the per-request figures.
        requests = len(successful)
        means = [[float(r[k]) for r in successful if r.get(k) is not None] for k in ("prompt_tokens", "output_tokens")]
        input_mean, output_mean = (float(np.mean(v)) if v else None for v in means)
    ttfts = [float(r["time_to_first_token_ms"]) for r in successful if r.get("time_to_first_token_ms") is not None]
    first_error = None
    for r in data.get("requests", {}).get("errored") or []:
        msg = (r.get("info") or {}).get("error") or r.get("error")
        if msg:
            first_error = str(msg)[:max_error_chars]
            break
    return LoadResult(
        requests=requests,
        errors=int(totals.get("errored") or 0),
        incomplete=int(totals.get("incomplete") or 0),
        duration_s=duration,
        request_span_s=span,
        output_tok_s=float(_stat(m, "output_tokens_per_second", "mean") or 0.0),
        total_tok_s=float(_stat(m, "tokens_per_second", "mean") or 0.0),
        req_s=float(_stat(m, "requests_per_second", "mean") or 0.0),
        input_tokens_mean=input_mean,
        output_tokens_mean=output_mean,
        ttft_ms={k: _stat(m, "time_to_first_token_ms", k) for k in ("p50", "p95", "p99")},
        itl_ms={k: _stat(m, "inter_token_latency_ms", k) for k in ("p50", "p95")},
        e2e_ms={k: (v * 1000 if (v := _stat(m, "request_latency", k)) is not None else None) for k in ("p50", "p95")},
        ttft_values_ms=ttfts,
        first_error=first_error,
        concurrency_mean=_stat(m, "request_concurrency", "mean"),
        **request_timing(data.get("requests") or {}),
    )


async def _run(spec: dict[str, Any]) -> LoadResult:
    """Run one guidellm benchmark described by ``spec`` and summarise it."""
    configure_guidellm()
    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.benchmark.entrypoints import benchmark_generative_text

    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.schemas.benchmark import BenchmarkScenario

    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.utils.typing import BLANK

    await _check_answers(spec["backend"])
    args = BenchmarkScenario.create(spec=spec, benchmarks=BLANK, metadata={"labels": {}}, scenario=None)
    try:
        report, _ = await benchmark_generative_text(args=args, progress=False, console=None)
    except RuntimeError as err:  # guidellm's own failures (e.g. its backend check): a row, not a traceback
        raise EngineError(f"load generator failed: {str(err).strip().splitlines()[0]}") from None
    if not report.benchmarks:
        raise EngineError("load generator produced no benchmark for this point")
    result = summarize(report.benchmarks[-1])
    if result.incomplete or result.errors:  # cut by the time cap or failed: a slow engine, or a hung one?
        silence = await _unanswered(spec["backend"])
        if silence:
            done = result.requests + result.errors + result.incomplete
            result.hung = f"{silence}; {result.requests} of {done} requests done, {result.incomplete} cut"
    return result


HEALTH_TIMEOUT_S = 10.0  # guidellm's own check of the server waits the request timeout (10 min) on a hung engine


async def _unanswered(backend: dict[str, Any]) -> str | None:
    """Why ``GET <target>/health`` got no answer at all within ``HEALTH_TIMEOUT_S``; None when it answered.

    Any status is an answer (guidellm judges it); no answer means the engine hung or is gone.
    """
    url = str(backend["target"]).rstrip("/") + "/health"
    headers = {"Authorization": f"Bearer {backend['api_key']}"} if backend.get("api_key") else {}
    try:
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:
            await client.get(url, headers=headers)
    except httpx.TimeoutException:
        return f"{url} gave no answer in {HEALTH_TIMEOUT_S:g} s"
    except httpx.HTTPError as err:
        return f"{url}: {type(err).__name__}"
    return None


async def _check_answers(backend: dict[str, Any]) -> None:
    """Raise ``EngineError`` before a load when the engine does not answer (``_unanswered``)."""
    silence = await _unanswered(backend)
    if silence:
        raise EngineError(f"engine not answering: {silence} (hung?)")


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


def _profile(profile: dict[str, Any], warmup_requests: int) -> dict[str, Any]:
    """A guidellm profile whose first ``warmup_requests`` are left out of the figures (guidellm's warm-up phase)."""
    if warmup_requests > 0:
        return {**profile, "warmup": {"mode": "requests", "value": warmup_requests}}
    return profile


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
    warmup_requests: int = 0,
) -> LoadResult:
    """Drive ``max_requests`` requests from ``dataset`` at ``concurrency`` streams; await inside Jupyter."""
    spec = {
        "backend": _backend_spec(base_url, served_model, api_key, request_timeout_s),
        "tokenizer": {"kind": "hf_auto", "model": str(tokenizer_dir)},
        "data": [{"kind": "json_file", "path": str(dataset)}],
        "profile": _profile({"kind": "concurrent", "streams": concurrency}, warmup_requests),
        "constraints": [
            {"kind": "max_requests", "count": max_requests},
            {"kind": "max_duration", "seconds": max_seconds},
        ],
        "outputs": [],
    }
    return await _run(spec)


SCHEDULE_LEAD_S = 0.75
"""Seconds between guidellm's benchmark start and the first scheduled send of a Poisson probe.

guidellm's replay profile counts the schedule from the benchmark's start time, and its messaging
hands the first requests to the workers only after that: with no lead the first one to three
requests left 120-300 ms late, together (2026-12-03, 2-core machine with busy loops beside it, 10
workers, 10 req/s against a stand-in server). With a lead of 0.5 s every request left within 10 ms of
its time (2 or 10 workers, busy loops beside it; ``test_a_poisson_probe_sends_its_schedule_with_several_workers``
passed quiet and with two loops). 0.75 s keeps a margin for a slower host. It was 2.0 s while
guidellm's own start delay was its default second (``guidellm_setup.START_DELAY_S``).
"""


def poisson_schedule(rate: float, n: int, seed: int) -> list[float]:
    """``n`` arrival times (s after the first) of a Poisson process at ``rate`` req/s, sent at exactly ``rate``.

    The gaps are exponential draws from one seeded generator, scaled together so that the ``n`` arrivals
    span ``(n - 1) / rate`` seconds: a Poisson process conditioned on its count (normalised exponential
    gaps are the spacings of uniform order statistics), so the bursts stay and the rate sent is the rate
    asked. Unscaled, one stream's draw sent 0.89 of its target at every load it ran (H100, 2026-12-05:
    the edge probes at ± 5% of an estimate sent 28.1 and 28.7 req/s), more than the steps of the search.
    """
    if rate <= 0 or n < 1:
        raise ValueError(f"a Poisson schedule needs rate > 0 and n >= 1 (got rate={rate}, n={n})")
    gaps = np.random.default_rng(seed).exponential(1.0, size=n - 1)
    if n > 1:
        gaps *= (n - 1) / rate / gaps.sum()
    return [0.0, *np.cumsum(gaps).tolist()]


def scheduled_dataset(dataset: Path, times: list[float], out: Path) -> Path:
    """A copy of the prompts in ``dataset`` with a ``relative_timestamp`` each (cycled to ``len(times)`` rows).

    guidellm's replay profile sends each row at the benchmark's start plus its ``relative_timestamp``.
    """
    rows = [json.loads(line) for line in Path(dataset).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise EngineError(f"{dataset}: no prompts to schedule")
    with open(out, "w", encoding="utf-8") as f:
        for i, t in enumerate(times):
            f.write(json.dumps({**rows[i % len(rows)], "relative_timestamp": round(t, 6)}) + "\n")
    return out


async def run_rate(
    base_url: str,
    served_model: str,
    tokenizer_dir: Path,
    dataset: Path,
    rate: float,
    max_requests: int,
    max_seconds: float,
    api_key: str | None = None,
    request_timeout_s: float = 600.0,
    arrivals: str = "poisson",
    seed: int = 42,
    warmup_requests: int = 0,
) -> LoadResult:
    """Send requests from ``dataset`` open-loop at ``rate`` req/s; await inside Jupyter.

    Poisson arrivals are drawn here (``poisson_schedule``: exponential gaps from one seeded generator)
    and sent at their times by guidellm's replay profile; ``arrivals="constant"`` uses guidellm's evenly
    spaced ``constant`` profile. Either way requests are sent on schedule whether or not earlier ones
    have finished, so a server slower than ``rate`` builds a queue. The result carries ``offered_rate``
    (= ``rate``), the rates really sent and served, and every request's send/finish time for
    ``helpers.benchmark.capacity``.

    Why not guidellm's own ``poisson`` profile: in guidellm 0.8.1 each worker process seeds its own
    generator with the same seed and adds its draw to one shared clock, so the gaps come in runs of
    one per worker and a probe's sending span varies as if it held only ``n / workers`` requests.
    Measured here (fake server, 180 requests at 15 req/s): 8 worker processes sent at 21.3, 21.3 and
    38.1 req/s; one worker at 15.6. On the H200 (8 workers) probes sent 20-33 req/s at one target.
    """
    if arrivals not in ("poisson", "constant"):
        raise ValueError(f"arrivals must be 'poisson' or 'constant', not {arrivals!r}")
    if arrivals == "poisson":
        times = [SCHEDULE_LEAD_S + t for t in poisson_schedule(rate, max_requests, seed)]
        dataset = scheduled_dataset(
            dataset, times, Path(dataset).with_name(f"{Path(dataset).stem}.arrivals-{seed}.jsonl")
        )
        profile: dict[str, Any] = {"kind": "replay", "time_scale": 1.0}
    else:
        profile = {"kind": "constant", "rate": float(rate)}
    spec = {
        "backend": _backend_spec(base_url, served_model, api_key, request_timeout_s),
        "tokenizer": {"kind": "hf_auto", "model": str(tokenizer_dir)},
        "data": [{"kind": "json_file", "path": str(dataset)}],
        "profile": _profile(profile, warmup_requests),
        "constraints": [
            {"kind": "max_requests", "count": max_requests},
            {"kind": "max_duration", "seconds": max_seconds},
        ],
        "seed": {"kind": "static", "value": seed},
        "outputs": [],
    }
    result = await _run(spec)
    result.offered_rate = float(rate)
    return result


@dataclass
class RequestRecord:
    """One successful request as guidellm recorded it: tokens, prompt tokens the engine served from cache, TTFT.

    ``cached_tokens`` is the engine's ``usage.prompt_tokens_details.cached_tokens`` (vLLM reports it with
    ``--enable-prompt-tokens-details``); None when the engine does not report it.
    """

    prompt_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    ttft_ms: float | None
    start_time: float | None
    conversation_id: str | None = None
    node_id: str | None = None


def request_records(bench: Any) -> list[RequestRecord]:
    """Per-request records of one guidellm ``GenerativeBenchmark``'s successful requests, in start order."""
    rows = bench.model_dump(mode="json").get("requests", {}).get("successful") or []
    out = [
        RequestRecord(
            prompt_tokens=r.get("prompt_tokens"),
            cached_tokens=r.get("cached_tokens"),
            output_tokens=r.get("output_tokens"),
            ttft_ms=r.get("time_to_first_token_ms"),
            start_time=r.get("request_start_time"),
            conversation_id=(r.get("info") or {}).get("conversation_id"),
            node_id=(r.get("info") or {}).get("node_id"),
        )
        for r in rows
    ]
    return sorted(out, key=lambda r: r.start_time or 0.0)
