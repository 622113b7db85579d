"""Step 5's structured replays: each engine configuration replays the traffic with its structure, cache predicted.

When the workload asks for one — a trace replay with ``workload.replay.structure`` ``blocks`` (Mooncake
hash ids: equal ids, equal token blocks) or ``sessions`` (an OpenAI log's conversation ids: each turn the
history plus the new message), or a synthetic ``workload.multi_turn`` (chat sessions, or an agent loop's
long shared tool prompt and many short calls) — every engine configuration replays it after its sweep,
on the same engine process: ``helpers.workload.structured`` writes it, ``helpers.workload.replay_run``
drives it with guidellm (the trace's own times and think times, scaled by ``replay.time_scale``).

The point (phase ``structured``, ``points/<label>/structured-<workload>-c0000.json``) is saved before the
next phase and kept by a re-run. It carries a ``StructuredCheck``: the share of prompt tokens an LRU prefix
cache would serve on exactly the requests replayed (``helpers.workload.cache_sim``), unbounded and at this
engine's KV capacity (its log, else the step-4 memory plan) and block size (its log, its flag, else its
default), beside what it achieved: its own counters over the replay (``server.prefix_cache_hit_rate``)
and its per-request ``usage.prompt_tokens_details.cached_tokens``, which also split TTFT by hit and miss.
The prefix cache is emptied first where the engine has an endpoint for it, so the replay starts as the
simulation does.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from helpers.benchmark.points import point_from
from helpers.benchmark.priors import structured_seconds
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.environment.records import MemoryPlanRecord
from helpers.run.folder import RunFolder
from helpers.run.progress import Unit
from helpers.run.records import EngineResult, Point, StructuredCheck, load_point, point_path, write_json_atomic
from helpers.workload.cache_sim import CACHE_SIM_MODEL, simulate_prefix_cache
from helpers.workload.replay_run import StructuredReplay, run_structured_replay
from helpers.workload.structured import ReplayDataset, multi_turn_dataset, replay_dataset

LIVE_REPLY_NOTE = (
    "replies are threaded live: the engine may also reuse the blocks its own replies filled, which the "
    "simulation does not count (it predicts the history of earlier prompts only)"
)


def structured_workloads(cfg: PlaybookConfig) -> list[str]:
    """The structured replays the config asks for: ``trace`` (blocks or sessions) and ``multi-turn``."""
    rp = cfg.workload.replay
    out = ["trace"] if rp is not None and rp.structure != "lengths" else []
    return out + (["multi-turn"] if cfg.workload.multi_turn is not None else [])


def evidence_workload(cfg: PlaybookConfig) -> str | None:
    """The structured replay the evidence phase drives (the first the config asks for), or None: plain prompts.

    A workload whose value lies in its structure (shared blocks, sessions with history) is decided on that
    structure: every capacity probe (or fixed-load trial) replays it, not unstructured prompts of its lengths.
    """
    found = structured_workloads(cfg)
    return found[0] if found else None


def replay_rate(ds: ReplayDataset) -> float | None:
    """Requests per second of a replay at its own times (time scale 1); None for fewer than two or no span."""
    starts = ds.trace.requests["start_s"].to_numpy(dtype=float)
    span = float(starts.max() - starts.min()) if starts.size else 0.0
    return (starts.size - 1) / span if starts.size >= 2 and span > 0 else None


async def structured_probe(session: EngineSession, load: float, axis: str, max_seconds: float):
    """One evidence load of the structured replay: the whole replay, started from an empty prefix cache.

    Rate axis: its own times scaled so that it arrives at ``load`` req/s; concurrency axis: ``load``
    sessions (streams) at once, each turn sent when the last is answered. Every probe replays the same
    requests (the configurations compared see the same traffic), so the cache is emptied before each;
    where the engine cannot, the probe says so in the run's messages. Returns guidellm's ``LoadResult``.
    """
    assert session.handle is not None
    workload = evidence_workload(session.cfg)
    ds = getattr(session, "evidence_replay", None)
    if ds is None:
        block = session.adapter.block_size(session.spec, session.whole_log())
        ds = session.evidence_replay = _dataset(session, workload, block[0] or session.cfg.workload.source.block_size)
    why = session.reset_prefix_cache()
    if why:
        session.say(f"{session.spec.label}: {why}: this {workload} probe starts with what earlier probes cached")
    rate = replay_rate(ds)
    if axis == "rate" and not rate:
        raise ValueError(f"the {workload} replay has no arrival times to scale to {load:.3g} req/s")
    replay = await run_structured_replay(
        session.handle.base_url,
        session.adapter.served_model_name(session.cfg.model),
        session.cfg.model.directory,
        ds,
        time_scale=rate / load if axis == "rate" and rate else 1.0,
        concurrency=int(load) if axis == "concurrency" else None,
        max_seconds=max_seconds,
        api_key=session.handle.api_key,
    )
    return replay.load


def kv_capacity(session: EngineSession) -> tuple[int | None, str]:
    """The engine's KV capacity in tokens and where it came from: its log, else step 4's memory plan."""
    if session.result.kv_capacity_tokens:
        return session.result.kv_capacity_tokens, "engine log"
    try:
        plan = RunFolder(session.run_dir).load(MemoryPlanRecord)
    except PlaybookError:
        plan = None
    predicted = plan.predicted(session.spec.label) if plan is not None else None
    if predicted:
        return predicted, "memory plan (step 4)"
    return None, "neither the engine log nor the memory plan gives it"


def _dataset(session: EngineSession, workload: str, block_size: int | None) -> ReplayDataset:
    """The replay of ``workload``, its kept trace at the engine's block size (for the prediction)."""
    make = replay_dataset if workload == "trace" else multi_turn_dataset
    ds = make(session.cfg, session.run_dir, block_size)
    if ds is None:  # structured_workloads only names replays the config has
        raise ValueError(f"the config has no {workload} replay")
    return ds


def _description(cfg: PlaybookConfig, workload: str, ds: ReplayDataset) -> str:
    """What was replayed, in words (file names only: no machine paths in a report)."""
    if workload == "multi-turn":
        return ds.notes[0] if ds.notes else f"{ds.sessions} synthetic sessions, {ds.requests} turns"
    name = Path(cfg.workload.source.path or "trace").name
    what = "shared token blocks (hash ids)" if ds.kind == "blocks" else f"{ds.sessions} sessions with history"
    rp = cfg.workload.replay
    scale = f", time scale {rp.time_scale:g}" if rp is not None else ""
    return f"{name}: {ds.requests} requests as {what}{scale}"


def predict(ds: ReplayDataset, capacity: int | None, block_size: int) -> tuple[dict, str]:
    """Predicted hit rates of ``ds`` (unbounded; finite at ``capacity``) as check fields, and the model or why none."""
    try:
        sim = simulate_prefix_cache(ds.trace, capacity or 0, block_size).summary
    except ValueError as err:
        return {}, f"no prediction: {err}"
    fields = {"predicted_unbounded": sim.unbounded_hit_rate}
    if capacity:
        fields.update(predicted_finite=sim.hit_rate, evicted_blocks=sim.evicted_blocks)
    note = CACHE_SIM_MODEL + ("" if capacity else "; no KV capacity known, so no finite-cache prediction")
    return fields, note + ("; " + LIVE_REPLY_NOTE if ds.live_reply else "")


def check_of(
    session: EngineSession,
    workload: str,
    ds: ReplayDataset,
    replay: StructuredReplay,
    block: tuple[int, str],
    reset: str,
) -> StructuredCheck:
    """The ``StructuredCheck`` of one replay on this engine: predicted beside achieved (``usage``)."""
    block_size, block_source = block
    description = _description(session.cfg, workload, ds)
    capacity, capacity_source = kv_capacity(session)
    fields, note = predict(ds, capacity, block_size)
    return StructuredCheck(
        workload=workload,  # type: ignore[arg-type]
        kind=ds.kind,
        description=description,
        requests_planned=ds.requests,
        sessions=ds.sessions,
        live_reply=ds.live_reply,
        skipped=ds.skipped,
        skipped_examples=ds.skipped_examples,
        notes=[n for n in ds.notes if n != description],
        prefix_caching=session.spec.knobs.prefix_caching,
        block_size=block_size,
        block_size_source=block_source,
        capacity_tokens=capacity,
        capacity_source=capacity_source,
        prediction_note=note,
        cache_reset=reset,
        usage=replay.cache,
        **fields,
    )


def _reset(session: EngineSession) -> str:
    """Empty the engine's prefix cache before the replay; say whether it was."""
    why = session.reset_prefix_cache()
    if why is None:
        return "prefix cache emptied before the replay"
    return f"not emptied first ({why}); the earlier points' prompts share nothing with the replay and go first"


async def measure_one(session: EngineSession, workload: str) -> Point | None:
    """Replay ``workload`` on the running engine and save its point; the stored one if measured before.

    None if the engine died (the result row says why).
    """
    path = point_path(session.run_dir, session.spec.label, "structured", 0, workload)
    stored = load_point(path)
    if stored is not None:
        session.steps.kept(session.spec.label, "structured", workload)
        session.say(f"{session.spec.label}: {workload} replay already measured, kept")
        return stored
    assert session.handle is not None
    session.steps.begin(session.spec.label, "structured", workload)
    block = session.adapter.block_size(session.spec, session.whole_log())
    if block[0] is None:
        block = (session.cfg.workload.source.block_size, f"workload.source.block_size ({block[1]})")
    ds = _dataset(session, workload, block[0])
    reset = _reset(session)
    rp, done = session.cfg.workload.replay, []

    async def load():
        replay = await run_structured_replay(
            session.handle.base_url,
            session.adapter.served_model_name(session.cfg.model),
            session.cfg.model.directory,
            ds,
            time_scale=rp.time_scale if (workload == "trace" and rp is not None) else 1.0,
            max_seconds=session.cfg.workload.max_seconds_per_point,
            api_key=session.handle.api_key,
        )
        done.append(replay)
        return replay.load

    t0 = time.monotonic()
    sampled = await session.sampled(load(), f"the {workload} replay")
    session.account("structured", t0)
    if sampled is None:
        return None
    res, server_stats, gpu_stats, _queue = sampled
    point = point_from(
        session.spec, session.cfg, 0, "structured", res, session.spec.knobs.model_dump(exclude_defaults=True)
    )
    point.concurrency = max(1, round(res.concurrency_mean or 0))  # what the replay put in flight, on average
    session.complete(session.spec, point, res, server_stats, gpu_stats)
    point.structure = check_of(session, workload, ds, done[0], block, reset)
    write_json_atomic(path, point.model_dump(mode="json"))
    session.steps.end(session.spec.label, "structured", workload)
    s = point.structure
    session.say(
        f"{session.spec.label}: {workload} replay {point.output_tok_s:,.0f} out tok/s; prefix-cache hit rate predicted "
        f"{_pct(s.predicted_finite)} (unbounded {_pct(s.predicted_unbounded)}), achieved "
        f"{_pct(point.server.prefix_cache_hit_rate)}"
    )
    return point


class StructuredPhase(Phase):
    """Every structured replay the config asks for (``structured_workloads``), on the running engine."""

    name = "structured"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """One unit per structured replay."""
        return [unit(spec.label, "structured", w, f"{w} replay", structured_seconds(cfg, w))
                for w in structured_workloads(cfg)]  # fmt: skip

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """The point file of each structured replay."""
        return [point_path(run_dir, spec.label, "structured", 0, w) for w in structured_workloads(cfg)]

    async def run(self, session: EngineSession) -> bool:
        """Each replay in turn; False if the engine died."""
        for workload in structured_workloads(session.cfg):
            p = await measure_one(session, workload)
            if p is None:
                return False
            session.result.points.append(p)
        return True


STRUCTURED = StructuredPhase()


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _pp(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{(a - b) * 100:+.1f}"


def structured_points(results: list[EngineResult]) -> list[Point]:
    """The structured points of every configuration, in config order."""
    return [p for r in results for p in r.points if p.phase == "structured" and p.structure is not None]


def structured_table(results: list[EngineResult]) -> pd.DataFrame:
    """Per configuration and structured replay: predicted vs achieved prefix-cache hit rate, TTFT by hit/miss."""
    rows = []
    for p in structured_points(results):
        s = p.structure
        assert s is not None
        u, achieved = s.usage, p.server.prefix_cache_hit_rate
        off = s.prefix_caching is False
        rows.append(
            {
                "engine config": p.label,
                "replay": s.workload,
                "requests": f"{p.requests} of {s.requests_planned}" + (f" ({p.errors} failed)" if p.errors else ""),
                "prefix caching": "off" if off else "on" if s.prefix_caching else "engine default",
                "block size": f"{s.block_size} ({s.block_size_source})" if s.block_size else "–",
                "KV capacity tokens": f"{s.capacity_tokens:,} ({s.capacity_source})" if s.capacity_tokens else "–",
                "predicted, unbounded": _pct(s.predicted_unbounded),
                "predicted, finite (LRU at KV capacity)": "0.0% (caching off)" if off else _pct(s.predicted_finite),
                "achieved (server counters)": _pct(achieved),
                "achieved (per-request cached_tokens)": _pct(u.hit_rate if u else None),
                "achieved − predicted finite (pp)": _pp(achieved, 0.0 if off else s.predicted_finite),
                "TTFT p50 ms hit / miss": f"{_ms(u.ttft_hit_ms_p50)} / {_ms(u.ttft_miss_ms_p50)}" if u else "–",
                "TTFT p95 ms hit / miss": f"{_ms(u.ttft_hit_ms_p95)} / {_ms(u.ttft_miss_ms_p95)}" if u else "–",
                "requests hit / reporting": f"{u.hit_requests} / {u.reporting}" if u else "–",
                "output tok/s": round(p.output_tok_s),
                "in flight (mean)": p.concurrency,
            }
        )
    return pd.DataFrame(rows)


def structured_notes(results: list[EngineResult]) -> list[str]:
    """What each structured replay was, how it was predicted, and where a figure is missing, why (one line each)."""
    out, seen = [], set()
    for p in structured_points(results):
        s = p.structure
        assert s is not None
        if (s.workload, s.description) not in seen:
            seen.add((s.workload, s.description))
            out.append(f"{s.workload} replay: {s.description}" + "".join(f"; {n}" for n in s.notes))
            if s.skipped:
                out.append(f"{s.workload} replay: {s.skipped} trace line(s) left out: " + "; ".join(s.skipped_examples))
        out.append(f"{p.label}, {s.workload}: {s.prediction_note}; {s.cache_reset}")
        if s.usage is None or not s.usage.reporting:
            out.append(
                f"{p.label}, {s.workload}: the engine reported no per-request cached tokens, so TTFT cannot be "
                "split by cache hit and miss"
            )
        if p.server.prefix_cache_hit_rate is None:
            out.append(
                f"{p.label}, {s.workload}: no prefix-cache counters over the replay ({p.server.error or 'none'})"
            )
    return out
