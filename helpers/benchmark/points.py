"""Step 5's point-level pieces: the prompts of one load, the cold-start request, a ``Point`` from a load's figures.

Also the warning for a point its time cap cut.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from helpers.benchmark.goodput import goodput_req_s
from helpers.benchmark.sla import meets_sla
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.launchers.server import ServerHandle
from helpers.measure.loadgen import LoadResult
from helpers.measure.prompts import RequestShape, write_dataset
from helpers.run.records import EngineResult, Point
from helpers.workload.levels import workload_shapes


def prepare_dataset(cfg: PlaybookConfig, run_dir: Path, key: str, n: int | None = None) -> Path:
    """The prompts of one load level, written once per run and replayed by every engine.

    Each level gets its own prompts (seeded by ``key``) so that a later level never hits the
    prefix cache on an earlier level's prompts; a shared system prompt stays shared.
    """
    path = Path(run_dir) / "data" / f"prompts-{key}.jsonl"
    if not path.is_file():
        shapes: list[RequestShape] = workload_shapes(cfg, run_dir, n)
        seed = sum(ord(ch) * (i + 1) for i, ch in enumerate(key))
        write_dataset(shapes, cfg.model.directory, path, seed=seed, style=cfg.workload.prompts)
    return path


def first_request(handle: ServerHandle, served_model: str, timeout_s: float) -> float:
    """Send one short completion and return seconds since launch when it completed."""
    body = {"model": served_model, "prompt": "w3 w4 w5 w6", "max_tokens": 1}
    r = httpx.post(handle.base_url + "/v1/completions", json=body, headers=handle.headers, timeout=timeout_s)
    r.raise_for_status()
    return time.monotonic() - handle.started_at


def point_from(spec: EngineSpec, cfg: PlaybookConfig, c: int, phase: str, res: LoadResult, knobs: dict) -> Point:
    """The ``Point`` of one load's guidellm figures (SLA verdict by ``benchmark.sla.meets_sla``)."""
    p95 = res.ttft_ms.get("p95")
    point = Point(
        label=spec.label,
        engine=spec.engine,
        concurrency=c,
        phase=phase,  # type: ignore[arg-type]
        knobs=knobs,
        requests=res.requests,
        errors=res.errors,
        incomplete=res.incomplete,
        duration_s=res.duration_s,
        input_tokens_mean=res.input_tokens_mean,
        output_tokens_mean=res.output_tokens_mean,
        output_tok_s=res.output_tok_s,
        total_tok_s=res.total_tok_s,
        req_s=res.req_s,
        ttft_ms_p50=res.ttft_ms.get("p50"),
        ttft_ms_p95=p95,
        ttft_ms_p99=res.ttft_ms.get("p99"),
        itl_ms_p50=res.itl_ms.get("p50"),
        itl_ms_p95=res.itl_ms.get("p95"),
        e2e_ms_p50=res.e2e_ms.get("p50"),
        e2e_ms_p95=res.e2e_ms.get("p95"),
        goodput_req_s=goodput_req_s(res.ttft_values_ms, cfg.sla.ttft_p95_ms, res.requests, res.req_s),
    )
    point.sla_met = meets_sla(point, cfg.sla)
    return point


def time_cap_notes(results: list[EngineResult], cap: float) -> list[str]:
    """One warning per point the time cap cut: a closed-loop level by its concurrency, an open-loop probe by rate."""
    notes = []
    for r in results:
        for p in (p for p in r.points if p.incomplete):
            if p.offered_rate:  # an open-loop probe or trial: it has no concurrency level
                notes.append(
                    f"{r.label}, {p.phase} at {p.offered_rate:.3g} req/s offered: the {cap:g} s time cap ended it "
                    f"with {p.incomplete} request(s) in flight. Its throughput counts completed requests only "
                    "(understated); its judgement counts the cut requests as sent and not served."
                )
                continue
            notes.append(
                f"{r.label} at concurrency {p.concurrency}: the {cap:g} s time cap ended the point with "
                f"{p.incomplete} request(s) in flight. guidellm counts completed requests only, so throughput there "
                "is understated (TTFT and ITL are unaffected); workload.requests_per_stream makes every level run "
                "whole waves."
            )
    return notes
