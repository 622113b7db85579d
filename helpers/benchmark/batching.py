"""Continuous against static batching on one engine (seed 000's appendix: continuous batching gains 3-10×).

An optional phase of step 5 (``batching.enabled``), on the configurations ``batching.configurations`` names
(default: the first), on the running engine after its capacity search. Both sides send the same number of
requests with the same prompt and output lengths at the same concurrency ``c``:

* static: ``batching.waves`` waves of ``c`` requests sent together; the next wave starts when the slowest
  request of the last is done, so a batch shrinks as its short requests finish and waits for its longest;
* continuous: ``c`` streams, each sending its next request as soon as its last is done (guidellm's
  concurrent profile), so the engine's batch refills at once.

Output lengths are drawn log-uniformly between ``output_tokens_min`` and ``output_tokens_max`` (many short
answers, a few long ones: the spread that makes a wave wait), seeded, the same in both; ``ignore_eos``
holds each to its length. Throughput on both sides is output tokens over the time the requests took (first
sent to last done, summed over the waves), so guidellm's start-up between waves is not counted. guidellm
has no barrier between requests, hence one load per wave. Each side is one point (phase ``batching``,
``points/<label>/batching-<mode>-c<c>.json``) saved before the next and kept by a re-run.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd

from helpers.benchmark.points import point_from
from helpers.benchmark.priors import batching_seconds
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.measure.loadgen import LoadResult, run_point
from helpers.measure.prompts import RequestShape, write_dataset
from helpers.run.progress import Unit
from helpers.run.records import BatchingRun, EngineResult, Point, load_point, point_path, write_json_atomic

MODES = ("static", "continuous")


def batching_labels(cfg: PlaybookConfig) -> list[str]:
    """The configurations the comparison runs on (none when it is disabled)."""
    b = cfg.batching
    if not b.enabled:
        return []
    return list(b.configurations) or [cfg.engines[0].label]


def batching_concurrency(cfg: PlaybookConfig) -> int:
    """The streams (continuous) and the wave size (static)."""
    return cfg.batching.concurrency or max(cfg.workload.concurrency)


def output_lengths(cfg: PlaybookConfig, n: int) -> list[int]:
    """``n`` output lengths, log-uniform between the configured bounds, from one seeded generator."""
    b, rng = cfg.batching, random.Random(f"batching-{cfg.name}")
    lo, hi = math.log(b.output_tokens_min), math.log(b.output_tokens_max)
    return [max(b.output_tokens_min, min(b.output_tokens_max, round(math.exp(rng.uniform(lo, hi))))) for _ in range(n)]


def batching_shapes(cfg: PlaybookConfig) -> list[RequestShape]:
    """The requests of one side: the workload's prompt lengths, the spread output lengths."""
    wl, n = cfg.workload, batching_concurrency(cfg) * cfg.batching.waves
    return [RequestShape(wl.input_tokens, out, wl.shared_prefix_tokens) for out in output_lengths(cfg, n)]


def _dataset(session: EngineSession, mode: str) -> Path:
    """One side's prompts (own words per side, so the second does not hit the first's prefix cache)."""
    c = batching_concurrency(session.cfg)
    path = session.run_dir / "data" / f"prompts-batching-{mode}-c{c}.jsonl"
    if not path.is_file():
        cfg = session.cfg
        write_dataset(batching_shapes(cfg), cfg.model.directory, path, seed=1 + MODES.index(mode) * 7919,
                      style=cfg.workload.prompts)  # fmt: skip
    return path


def _tokens(r: LoadResult) -> float:
    return (r.output_tokens_mean or 0.0) * r.requests


def combined(results: list[LoadResult]) -> LoadResult:
    """The waves of a static side as one load: tokens and requests summed over the summed spans."""
    span = sum(r.request_span_s or r.duration_s for r in results)
    requests = sum(r.requests for r in results)
    out = sum(_tokens(r) for r in results)
    inp = sum((r.input_tokens_mean or 0.0) * r.requests for r in results)
    ttfts = [t for r in results for t in r.ttft_values_ms]
    pct = {k: (float(np.percentile(ttfts, q)) if ttfts else None) for k, q in (("p50", 50), ("p95", 95), ("p99", 99))}
    return LoadResult(
        requests=requests,
        errors=sum(r.errors for r in results),
        incomplete=sum(r.incomplete for r in results),
        duration_s=span,
        output_tok_s=out / span if span else 0.0,
        total_tok_s=(out + inp) / span if span else 0.0,
        req_s=requests / span if span else 0.0,
        input_tokens_mean=inp / requests if requests else None,
        output_tokens_mean=out / requests if requests else None,
        ttft_ms=pct,
        ttft_values_ms=ttfts,
        first_error=next((r.first_error for r in results if r.first_error), None),
        request_span_s=span,
        hung=next((r.hung for r in results if r.hung), None),
    )


async def _load(session: EngineSession, mode: str, dataset: Path) -> LoadResult:
    """Drive one side: waves of ``c`` (static) or ``c`` streams over all the requests (continuous)."""
    assert session.handle is not None
    c, waves = batching_concurrency(session.cfg), session.cfg.batching.waves
    common = dict(base_url=session.handle.base_url, served_model=session.adapter.served_model_name(session.cfg.model),
                  tokenizer_dir=session.cfg.model.directory, max_seconds=session.cfg.workload.max_seconds_per_point,
                  api_key=session.handle.api_key)  # fmt: skip
    if mode == "continuous":
        res = await run_point(dataset=dataset, concurrency=c, max_requests=c * waves, **common)
        span = res.request_span_s or res.duration_s
        res.output_tok_s = _tokens(res) / span if span else 0.0
        res.duration_s = span
        return res
    rows = [line for line in dataset.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for w in range(waves):
        wave = dataset.with_name(f"{dataset.stem}.wave{w}.jsonl")
        wave.write_text("\n".join(rows[w * c : (w + 1) * c]) + "\n", encoding="utf-8")
        out.append(await _wave(wave, c, common))
        if out[-1].hung:
            break
    return combined(out)


async def _wave(wave: Path, c: int, common: dict) -> LoadResult:
    """One static wave of ``c`` requests, measured again once when the client came back with fewer.

    Now and then guidellm returns one request short of a wave, counted nowhere (11 of 12 on the CPU engine,
    three times in runs of the suite; in guidellm 0.8.1 a request cancelled before it started is the one kind
    its totals leave out). A wave short of a request waits for fewer than ``c``, and its span and tokens are not
    those of the continuous side's requests.
    """
    res = await run_point(dataset=wave, concurrency=c, max_requests=c, **common)
    if not res.hung and res.requests + res.errors + res.incomplete < c:
        res = await run_point(dataset=wave, concurrency=c, max_requests=c, **common)
    return res


async def measure_side(session: EngineSession, mode: str) -> Point | None:
    """One side of the comparison on the running engine (the stored point when measured before); None: it died."""
    c, b, label = batching_concurrency(session.cfg), session.cfg.batching, session.spec.label
    path = point_path(session.run_dir, label, "batching", c, mode)
    stored = load_point(path)
    if stored is not None:
        session.steps.kept(label, "batching", mode)
        return stored
    session.steps.begin(label, "batching", mode)
    t0 = time.monotonic()
    dataset = _dataset(session, mode)
    sampled = await session.sampled(_load(session, mode, dataset), f"the {mode} batching load")
    session.account("batching", t0)
    if sampled is None:
        return None
    res, server_stats, gpu_stats, _queue = sampled
    point = point_from(
        session.spec, session.cfg, c, "batching", res, session.spec.knobs.model_dump(exclude_defaults=True)
    )
    session.complete(session.spec, point, res, server_stats, gpu_stats)
    asked = sum(json.loads(x)["output_tokens_count"] for x in dataset.read_text(encoding="utf-8").splitlines() if x)
    point.batching = BatchingRun(mode=mode, waves=b.waves, output_tokens_min=b.output_tokens_min,  # type: ignore[arg-type]
                                 output_tokens_max=b.output_tokens_max, output_tokens=asked,
                                 span_s=round(res.duration_s, 3))  # fmt: skip
    write_json_atomic(path, point.model_dump(mode="json"))
    session.steps.end(label, "batching", mode)
    session.say(f"{label}: {mode} batching at {c} streams: {point.output_tok_s:,.0f} out tok/s")
    return point


class BatchingPhase(Phase):
    """Both sides of the comparison on the running engine, on the configurations ``batching_labels`` names."""

    name = "batching"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """One unit per side, or nothing."""
        if spec.label not in batching_labels(cfg):
            return []
        return [unit(spec.label, "batching", m, f"{m} batching", batching_seconds(cfg, m)) for m in MODES]

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """The point file of each side, or nothing."""
        if spec.label not in batching_labels(cfg):
            return []
        return [point_path(run_dir, spec.label, "batching", batching_concurrency(cfg), m) for m in MODES]

    async def run(self, session: EngineSession) -> bool:
        """Both sides when the config asks for it here; False if the engine died."""
        if session.spec.label not in batching_labels(session.cfg):
            return True
        for mode in MODES:
            p = await measure_side(session, mode)
            if p is None:
                return False
            session.result.points.append(p)
        return True


BATCHING = BatchingPhase()


def batching_pairs(results: list[EngineResult]) -> list[tuple[EngineResult, Point, Point]]:
    """(result, static point, continuous point) of every configuration that measured both at one concurrency."""
    out = []
    for r in results:
        sides = {(p.batching.mode, p.concurrency): p for p in r.points if p.phase == "batching" and p.batching}
        for (mode, c), p in sorted(sides.items()):
            if mode == "static" and ("continuous", c) in sides and p.requests:
                out.append((r, p, sides[("continuous", c)]))
    return out


def conditions(p: Point) -> str:
    """The conditions of a pair in words (from its static side)."""
    b = p.batching
    assert b is not None
    return (f"{p.concurrency} streams, {b.waves} waves of {p.concurrency}, outputs {b.output_tokens_min}-"
            f"{b.output_tokens_max} tokens log-uniform ({b.output_tokens:,} in all), "
            f"{round(p.input_tokens_mean or 0)} prompt tokens")  # fmt: skip


def batching_table(results: list[EngineResult]) -> pd.DataFrame:
    """Per configuration: static and continuous output tok/s, the gain, TTFT p95 of each, the conditions."""
    rows = []
    for r, s, c in batching_pairs(results):
        rows.append({
            "engine config": r.label,
            "static waves (out tok/s)": round(s.output_tok_s, 1),
            "continuous (out tok/s)": round(c.output_tok_s, 1),
            "continuous ÷ static": f"{c.output_tok_s / s.output_tok_s:.2f}×" if s.output_tok_s else "–",
            "TTFT p95 ms static / continuous": f"{s.ttft_ms_p95 or 0:,.0f} / {c.ttft_ms_p95 or 0:,.0f}",
            "requests static / continuous": f"{s.requests} / {c.requests}",
            "conditions": conditions(s),
        })  # fmt: skip
    return pd.DataFrame(rows)
