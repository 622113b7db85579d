"""The workload profile (checklist step 1): what a trace says about lengths, traffic and prefix reuse.

``profile_trace`` turns a loaded ``helpers.workload.traces.Trace`` into a ``Profile`` (a pydantic model,
JSON-ready with ``model_dump(mode="json")``). ``profile_from_config`` does it for a workload config
(synthetic or trace file); ``profile_command`` is what ``playbook profile TRACE`` prints.
Everything is computed with numpy/pandas over whole columns, so a million requests take seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import TraceSource
from helpers.core.paths import resolve_model_dir, resolve_repo_path
from helpers.run.records import Artifact
from helpers.workload.cache_sim import CacheSimulation, simulate_prefix_cache
from helpers.workload.reuse import ATTRIBUTION_RULES, analyse_blocks
from helpers.workload.sessions import SessionStats, session_stats
from helpers.workload.traces import Trace, load_trace
from helpers.workload.traces.synthetic import trace_from_workload

QUANTILE_POINTS = 101
"""Percentiles 0..100 of each length distribution kept in the profile (to sample from)."""
HISTOGRAM_BINS = 40
MAX_TIMELINE_BUCKETS = 120
NICE_BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
PEAK_WINDOW_S = 60.0
"""Window of the measured peak rate; shorter traces (< 10 windows) use the timeline bucket."""
CACHE_MODEL = (
    "block-level prefix cache: full blocks only, a block is reusable when an earlier request had the "
    "same chain of block hashes up to and including it; unbounded cache (no eviction), so an upper bound"
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenStats(_Model):
    """Distribution of a per-request token count."""

    count: int = Field(description="Requests counted.")
    mean: float = Field(description="Mean tokens per request.")
    min: int = Field(description="Smallest value.")
    max: int = Field(description="Largest value.")
    p50: float = Field(description="Median.")
    p95: float = Field(description="95th percentile.")
    p99: float = Field(description="99th percentile.")
    quantiles: list[float] = Field(description="Percentiles 0, 1, ..., 100 (the empirical distribution).")
    histogram_edges: list[float] = Field(description="Histogram bin edges (tokens), one more than counts.")
    histogram_counts: list[int] = Field(description="Requests per histogram bin.")


class PrefixReuse(_Model):
    """How much of the prompt tokens a prefix cache could have served, and where it comes from."""

    block_size: int = Field(description="KV-cache block size (tokens) the reuse is measured in.")
    prompt_tokens: int = Field(description="All prompt tokens of the trace.")
    reusable_tokens: int = Field(description="Prompt tokens in reusable blocks.")
    system_prompt_tokens: int = Field(description="Reusable tokens attributed to a shared system prompt.")
    multi_turn_tokens: int = Field(description="Reusable tokens attributed to multi-turn history.")
    system_prompt_ratio: float = Field(description="system_prompt_tokens / prompt_tokens.")
    multi_turn_ratio: float = Field(description="multi_turn_tokens / prompt_tokens.")
    requests_with_reuse: float = Field(description="Share of requests with at least one reusable block.")
    attribution: Literal["marked", "structure"] = Field(description="Rule used to split system vs history.")
    attribution_rule: str = Field(description="The attribution rule in words.")
    cache_model: str = Field(description="The cache model the ratio assumes.")


class Timeline(_Model):
    """Traffic over time in fixed buckets (lists are aligned; one entry per bucket)."""

    bucket_s: float = Field(description="Bucket width (s).")
    t_s: list[float] = Field(description="Bucket start (s from the first request).")
    requests: list[int] = Field(description="Requests arriving in the bucket.")
    requests_per_s: list[float] = Field(description="Arrival rate in the bucket (req/s).")
    concurrency_mean: list[float] = Field(description="Time-averaged requests in flight.")
    concurrency_max: list[int] = Field(description="Most requests in flight at once.")
    prefix_reuse_ratio: list[float | None] | None = Field(
        description="Reusable share of prompt tokens of the requests arriving in the bucket (None: none)."
    )


class Profile(Artifact):
    """The workload profile of one trace (checklist step 1)."""

    artifact: ClassVar[str] = "profile.json"

    source: str = Field(description="Trace file, or 'synthetic'.")
    format: str = Field(description="Registered trace format it was read as.")
    requests: int = Field(description="Requests profiled.")
    skipped_lines: int = Field(description="Malformed lines skipped while reading.")
    skipped_examples: list[str] = Field(description="The first skipped lines, with line numbers and why.")
    notes: list[str] = Field(description="What the reader and the profile had to assume.")
    duration_s: float = Field(description="Time from the first to the last arrival (s).")
    mean_requests_per_s: float | None = Field(description="Requests / duration; None for a single instant.")
    peak_requests_per_s: float | None = Field(description="Busiest window's arrival rate (req/s).")
    peak_window_s: float = Field(description="Window length of the peak rate (s).")
    concurrency_method: Literal["measured", "estimated"] = Field(
        description="measured: from start and end times; estimated: end times from the latency model."
    )
    concurrency_model: str | None = Field(description="The latency model used when estimated.")
    concurrency_mean: float = Field(description="Time-averaged requests in flight.")
    concurrency_p50: float = Field(description="Median requests in flight (time-weighted).")
    concurrency_p95: float = Field(description="95th percentile of requests in flight (time-weighted).")
    concurrency_p99: float = Field(description="99th percentile of requests in flight (time-weighted).")
    concurrency_max: int = Field(description="Most requests in flight at once.")
    input_tokens: TokenStats = Field(description="Prompt length distribution.")
    output_tokens: TokenStats = Field(description="Output length distribution.")
    input_tokens_mean: float = Field(description="Mean prompt tokens per request (input_tokens.mean, flat).")
    output_tokens_mean: float = Field(description="Mean output tokens per request (output_tokens.mean, flat).")
    prefix_reuse_ratio: float | None = Field(
        description="Share (0-1) of prompt tokens a prefix cache could serve; None: the trace cannot tell."
    )
    prefix_reuse_reason: str | None = Field(description="Why prefix_reuse_ratio is None.")
    prefix_reuse: PrefixReuse | None = Field(description="Detail of the prefix reuse, when known.")
    timeline: Timeline = Field(description="Arrivals, concurrency and reuse over time.")
    sessions: SessionStats | None = Field(
        default=None, description="Sessions, turns per session and history growth; None: no session ids."
    )
    finite_cache_hit_rate: float | None = Field(
        default=None,
        description="Share of prompt tokens an LRU prefix cache of the given capacity serves (beside the "
        "unbounded prefix_reuse_ratio); None: no capacity given or no block hashes.",
    )
    finite_cache: CacheSimulation | None = Field(default=None, description="Detail of that simulation.")


def token_stats(values: np.ndarray) -> TokenStats:
    """Distribution summary of integer token counts."""
    v = np.asarray(values, dtype=np.int64)
    q = np.percentile(v, np.linspace(0, 100, QUANTILE_POINTS))
    counts, edges = np.histogram(v, bins=HISTOGRAM_BINS)
    return TokenStats(
        count=len(v),
        mean=float(v.mean()),
        min=int(v.min()),
        max=int(v.max()),
        p50=float(np.percentile(v, 50)),
        p95=float(np.percentile(v, 95)),
        p99=float(np.percentile(v, 99)),
        quantiles=[float(x) for x in q],
        histogram_edges=[float(x) for x in edges],
        histogram_counts=[int(x) for x in counts],
    )


def _bucket(span: float) -> float:
    for b in NICE_BUCKETS_S:
        if span / b <= MAX_TIMELINE_BUCKETS:
            return float(b)
    return float(np.ceil(span / MAX_TIMELINE_BUCKETS / 86400) * 86400)


def _weighted_quantiles(levels: np.ndarray, weights: np.ndarray, qs: list[float]) -> list[float]:
    if weights.sum() <= 0:
        return [float(np.percentile(levels, q * 100)) if len(levels) else 0.0 for q in qs]
    order = np.argsort(levels, kind="stable")
    cw = np.cumsum(weights[order]) / weights.sum()
    return [float(levels[order][min(np.searchsorted(cw, q), len(cw) - 1)]) for q in qs]


def _events(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Event times and the number in flight just after each (starts sort before ends at a tie)."""
    times = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((-delta, times))
    return times[order], np.cumsum(delta[order])


def _end_times(
    start: np.ndarray,
    end: np.ndarray,
    inp: np.ndarray,
    out: np.ndarray,
    per_token_ms: float,
    prefill_ms_per_1k: float,
    notes: list[str],
) -> tuple[np.ndarray, str | None]:
    """End times with the missing ones (NaN) estimated by the latency model, and the model's text (None: none)."""
    missing = np.isnan(end)
    model = None
    if missing.any():
        est = start + (prefill_ms_per_1k * inp / 1000.0 + per_token_ms * out) / 1000.0
        end = np.where(missing, est, end)
        model = f"duration = {prefill_ms_per_1k:g} ms per 1,000 input tokens"
        model += f" + {per_token_ms:g} ms per output token"
        if not missing.all():
            notes.append(f"{int(missing.sum())} of {len(end)} end times estimated ({model})")
    return np.maximum(end, start), model


def _bucket_concurrency(
    t: np.ndarray, level: np.ndarray, dt: np.ndarray, lasting: np.ndarray, edges: np.ndarray, bucket: float
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and highest requests in flight in each timeline bucket (``edges``: the buckets' bounds)."""
    nb = len(edges) - 1
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * dt)])
    conc_bucket = np.diff(np.interp(edges, t, area)) / bucket
    at_edge = np.concatenate([[0], level])[np.searchsorted(t, edges[:-1], side="right")]
    ev_b = np.minimum((t // bucket).astype(np.int64), nb - 1)
    ev_max = np.zeros(nb, np.int64)
    np.maximum.at(ev_max, ev_b, np.where(lasting, level, 0))
    return conc_bucket, np.maximum(ev_max, at_edge)


def profile_trace(
    trace: Trace,
    per_token_ms: float = 20.0,
    prefill_ms_per_1k: float = 50.0,
    cache_capacity_tokens: int | None = None,
    cache_block_size: int | None = None,
) -> Profile:
    """Profile a loaded trace; end times missing from it come from the given latency model.

    With ``cache_capacity_tokens`` (the engine's KV capacity, or the memory plan's), the profile also
    simulates a finite LRU prefix cache at ``cache_block_size`` (default: the trace's block size).
    """
    df = trace.requests
    start = df["start_s"].to_numpy(dtype=float)
    inp = df["input_tokens"].to_numpy(dtype=np.int64)
    out = df["output_tokens"].to_numpy(dtype=np.int64)
    end = df["end_s"].to_numpy(dtype=float)
    missing = np.isnan(end)
    notes = list(trace.notes)
    end, model = _end_times(start, end, inp, out, per_token_ms, prefill_ms_per_1k, notes)
    t, level = _events(start, end)
    dt = np.diff(t)
    lasting = np.append(dt > 0, False)  # levels held for no time (ties) do not count as concurrency
    held = level[lasting] if lasting.any() else level
    p50, p95, p99 = _weighted_quantiles(level[:-1], dt, [0.5, 0.95, 0.99])
    horizon = float(t[-1] - t[0])
    conc_mean = float((end - start).sum() / horizon) if horizon > 0 else float(held.max())
    duration = float(start.max() - start.min())

    bucket = _bucket(max(float(end.max()), 1.0))
    nb = max(1, int(np.ceil(float(end.max()) / bucket)))
    edges = np.arange(nb + 1) * bucket
    b_of = np.minimum((start // bucket).astype(np.int64), nb - 1)
    arrivals = np.bincount(b_of, minlength=nb)
    conc_bucket, conc_max = _bucket_concurrency(t, level, dt, lasting, edges, bucket)

    peak_window = PEAK_WINDOW_S if duration >= 10 * PEAK_WINDOW_S else bucket
    _, per_window = np.unique(start // peak_window, return_counts=True)  # sparse: an outlier time is one more window
    reuse, reuse_reason, reuse_t = _reuse(trace, b_of, nb)
    finite = _finite_cache(trace, cache_capacity_tokens, cache_block_size, notes)
    return Profile(
        source=trace.source,
        format=trace.format,
        requests=len(df),
        skipped_lines=trace.skipped,
        skipped_examples=trace.skipped_examples,
        notes=notes,
        duration_s=duration,
        mean_requests_per_s=len(df) / duration if duration > 0 else None,
        peak_requests_per_s=float(per_window.max() / peak_window) if duration > 0 else None,
        peak_window_s=peak_window,
        concurrency_method="estimated" if missing.any() else "measured",
        concurrency_model=model,
        concurrency_mean=conc_mean,
        concurrency_p50=p50,
        concurrency_p95=p95,
        concurrency_p99=p99,
        concurrency_max=int(held.max()),
        input_tokens=token_stats(inp),
        output_tokens=token_stats(out),
        input_tokens_mean=float(inp.mean()),
        output_tokens_mean=float(out.mean()),
        prefix_reuse_ratio=None if reuse is None else reuse.reusable_tokens / max(reuse.prompt_tokens, 1),
        prefix_reuse_reason=reuse_reason,
        prefix_reuse=reuse,
        timeline=Timeline(
            bucket_s=bucket,
            t_s=[float(x) for x in edges[:-1]],
            requests=[int(x) for x in arrivals],
            requests_per_s=[float(x) / bucket for x in arrivals],
            concurrency_mean=[float(x) for x in conc_bucket],
            concurrency_max=[int(x) for x in conc_max],
            prefix_reuse_ratio=reuse_t,
        ),
        sessions=session_stats(trace),
        finite_cache_hit_rate=finite.hit_rate if finite else None,
        finite_cache=finite,
    )


def _finite_cache(
    trace: Trace, capacity_tokens: int | None, block_size: int | None, notes: list[str]
) -> CacheSimulation | None:
    """The finite-cache simulation when a capacity is given and the trace has block hashes (else a note why not)."""
    if capacity_tokens is None or not trace.has_blocks or not trace.block_size:
        return None
    try:
        return simulate_prefix_cache(trace, capacity_tokens, block_size or trace.block_size).summary
    except ValueError as err:
        notes.append(f"finite prefix cache not simulated: {err}")
        return None


def _reuse(trace: Trace, b_of: np.ndarray, nb: int) -> tuple[PrefixReuse | None, str | None, list | None]:
    """Prefix-reuse summary, the reason when unknown, and the per-bucket ratio."""
    blocks = analyse_blocks(trace)
    if blocks is None:
        why = trace.no_reuse_reason or f"the {trace.format} trace carries no prompt content or block hashes"
        return None, why, None
    n = len(trace)
    inp = trace.requests["input_tokens"].to_numpy(dtype=np.int64)
    hit = blocks.hit_tokens_per_request(n)
    sys_hit = blocks.system_tokens_per_request(n)
    prompt = int(inp.sum())
    reusable, system = int(hit.sum()), int(sys_hit.sum())
    per_bucket_hit = np.bincount(b_of, weights=hit, minlength=nb)
    per_bucket_in = np.bincount(b_of, weights=inp, minlength=nb)
    curve = [float(h / p) if p > 0 else None for h, p in zip(per_bucket_hit, per_bucket_in, strict=True)]
    detail = PrefixReuse(
        block_size=blocks.block_size,
        prompt_tokens=prompt,
        reusable_tokens=reusable,
        system_prompt_tokens=system,
        multi_turn_tokens=reusable - system,
        system_prompt_ratio=system / max(prompt, 1),
        multi_turn_ratio=(reusable - system) / max(prompt, 1),
        requests_with_reuse=float((hit > 0).mean()),
        attribution=blocks.attribution,  # type: ignore[arg-type]
        attribution_rule=ATTRIBUTION_RULES[blocks.attribution],
        cache_model=CACHE_MODEL,
    )
    return detail, None, curve


def profile_from_config(
    cfg: Any, n_synthetic: int = 1000, cache_capacity_tokens: int | None = None, cache_block_size: int | None = None
) -> Profile:
    """Profile a ``PlaybookConfig``'s workload: its trace file, or a synthetic trace from its numbers.

    ``cache_capacity_tokens`` and ``cache_block_size`` add the finite-cache hit rate (see ``profile_trace``).
    """
    src = cfg.workload.source
    if src.kind == "trace":
        trace = load_trace(
            resolve_repo_path(src.path), src.format, model_dir=cfg.model.directory, block_size=src.block_size
        )
    else:
        trace = trace_from_workload(cfg.workload, n=n_synthetic)
    return profile_trace(
        trace,
        per_token_ms=src.per_token_ms,
        prefill_ms_per_1k=src.prefill_ms_per_1k,
        cache_capacity_tokens=cache_capacity_tokens,
        cache_block_size=cache_block_size,
    )


def profile_command(path: str, fmt: str | None, model_dir: str | None) -> dict:
    """``playbook profile TRACE [--format NAME]``: the profile as JSON-ready data (default latency model)."""
    src = TraceSource()
    trace = load_trace(
        Path(path),
        fmt,
        model_dir=resolve_model_dir(model_dir) if model_dir else None,
        block_size=src.block_size,
    )
    prof = profile_trace(trace, per_token_ms=src.per_token_ms, prefill_ms_per_1k=src.prefill_ms_per_1k)
    return prof.model_dump(mode="json")
