"""Running a structured replay (``helpers.workload.structured``) and reading what the engine's cache served.

``run_data`` drives one guidellm ``--data`` entry (a Mooncake block replay or conversation graphs)
with guidellm's replay profile (timestamps and think times, scaled) or at a fixed concurrency, and
keeps guidellm's per-request records (``helpers.measure.loadgen.RequestRecord``).
``run_structured_replay`` runs a ``ReplayDataset`` that way; ``cache_split`` turns the engine's
per-request ``usage.prompt_tokens_details.cached_tokens`` into the achieved hit rate and TTFT of hit
and miss requests (a ``helpers.run.records.CacheSplit``, which step 5 keeps in its structured point).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helpers.core.errors import EngineError
from helpers.measure.guidellm_setup import configure_guidellm
from helpers.measure.loadgen import (
    LoadResult,
    RequestRecord,
    _backend_spec,
    _check_answers,
    request_records,
    summarize,
)
from helpers.run.records import CacheSplit
from helpers.workload.structured import ReplayDataset


@dataclass
class StructuredReplay:
    """What a structured replay measured: guidellm's figures, per-request records and the cache split."""

    load: LoadResult
    requests: list[RequestRecord]
    cache: CacheSplit
    dataset: ReplayDataset


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def cache_split(records: list[RequestRecord]) -> CacheSplit:
    """Achieved hit rate from per-request ``cached_tokens``, and TTFT of hit and miss requests."""
    rep = [r for r in records if r.cached_tokens is not None and r.prompt_tokens]
    hit = [r.ttft_ms for r in rep if r.cached_tokens and r.ttft_ms is not None]
    miss = [r.ttft_ms for r in rep if not r.cached_tokens and r.ttft_ms is not None]
    prompt = sum(int(r.prompt_tokens or 0) for r in rep)
    cached = sum(int(r.cached_tokens or 0) for r in rep)
    return CacheSplit(
        requests=len(records),
        reporting=len(rep),
        prompt_tokens=prompt,
        cached_tokens=cached,
        hit_rate=cached / prompt if prompt else None,
        hit_requests=sum(1 for r in rep if r.cached_tokens),
        ttft_hit_ms_p50=_pct(hit, 50),
        ttft_hit_ms_p95=_pct(hit, 95),
        ttft_miss_ms_p50=_pct(miss, 50),
        ttft_miss_ms_p95=_pct(miss, 95),
    )


async def run_data(
    base_url: str,
    served_model: str,
    tokenizer_dir: Path,
    data: dict[str, Any],
    requests: int,
    *,
    time_scale: float = 1.0,
    concurrency: int | None = None,
    max_seconds: float = 300.0,
    api_key: str | None = None,
    request_timeout_s: float = 600.0,
) -> tuple[LoadResult, list[RequestRecord]]:
    """Drive ``requests`` requests of one guidellm ``--data`` entry (``data``); keep per-request records.

    Without ``concurrency`` guidellm's replay profile sends each request at its (scaled) timestamp and
    a conversation's next turn after its idle gap; with it, ``concurrency`` streams send as fast as
    they are answered.
    """
    configure_guidellm()
    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.benchmark.entrypoints import benchmark_generative_text

    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.schemas.benchmark import BenchmarkScenario

    # guidellm reads its log level at import and pulls in torch: imported when a load runs
    from guidellm.utils.typing import BLANK

    profile = (
        {"kind": "replay", "time_scale": time_scale}
        if concurrency is None
        else {"kind": "concurrent", "streams": concurrency}
    )
    spec = {
        "backend": _backend_spec(base_url, served_model, api_key, request_timeout_s),
        "tokenizer": {"kind": "hf_auto", "model": str(tokenizer_dir)},
        "data": [data],
        "profile": profile,
        "constraints": [
            {"kind": "max_requests", "count": requests},
            {"kind": "max_duration", "seconds": max_seconds},
        ],
        "outputs": [],
    }
    await _check_answers(spec["backend"])
    args = BenchmarkScenario.create(spec=spec, benchmarks=BLANK, metadata={"labels": {}}, scenario=None)
    try:
        report, _ = await benchmark_generative_text(args=args, progress=False, console=None)
    except RuntimeError as err:  # guidellm's own failures: a row, not a traceback
        raise EngineError(f"load generator failed: {str(err).strip().splitlines()[0]}") from None
    if not report.benchmarks:
        raise EngineError("load generator produced no benchmark for this replay")
    bench = report.benchmarks[-1]
    return summarize(bench), request_records(bench)


async def run_structured_replay(
    base_url: str,
    served_model: str,
    tokenizer_dir: Path,
    dataset: ReplayDataset,
    *,
    time_scale: float = 1.0,
    concurrency: int | None = None,
    max_seconds: float = 300.0,
    api_key: str | None = None,
    request_timeout_s: float = 600.0,
) -> StructuredReplay:
    """Replay ``dataset`` with guidellm (timestamps and think times scaled by ``time_scale``, or at ``concurrency``).

    Returns guidellm's figures (``load``, a ``LoadResult`` like every other point), the per-request
    records and the achieved prefix-cache split from the engine's ``cached_tokens``.
    """
    load, records = await run_data(
        base_url,
        served_model,
        tokenizer_dir,
        dataset.data,
        dataset.requests,
        time_scale=time_scale,
        concurrency=concurrency,
        max_seconds=max_seconds,
        api_key=api_key,
        request_timeout_s=request_timeout_s,
    )
    return StructuredReplay(load, records, cache_split(records), dataset)
