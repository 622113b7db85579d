"""Step 5's lengths-only trace replay: the trace's own arrivals and lengths, on the running engine.

With ``workload.replay.structure: lengths`` each configuration replays the trace's window with guidellm's
replay profile after its sweep (``helpers.workload.levels.write_replay_trace`` writes it once per session); the
point (phase ``replay``, ``points/<label>/replay-c0000.json``) is saved at once and kept by a re-run. A
replay with its structure (blocks, sessions) is ``helpers.benchmark.structured_phase``.
"""

from __future__ import annotations

from pathlib import Path

from helpers.benchmark.points import point_from
from helpers.benchmark.priors import replay_seconds
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.measure.loadgen import run_replay
from helpers.run.progress import Unit
from helpers.run.records import Point, load_point, point_path, write_json_atomic
from helpers.workload.levels import write_replay_trace


def lengths_replay(cfg: PlaybookConfig) -> bool:
    """Whether the config asks for the lengths-only replay of the trace's arrivals (``measure_replay``)."""
    rp = cfg.workload.replay
    return rp is not None and rp.structure == "lengths"


async def measure_replay(session: EngineSession) -> Point | None:
    """Replay the trace's own arrivals, lengths only (guidellm's replay profile); None if the engine died."""
    assert session.handle is not None and session.cfg.workload.replay is not None
    path = point_path(session.run_dir, session.spec.label, "replay", 0)
    stored = load_point(path)
    if stored is not None:
        session.steps.kept(session.spec.label, "replay", 0)
        return stored
    session.steps.begin(session.spec.label, "replay", 0)
    rows = Path(session.run_dir) / "data" / "replay-trace.jsonl"
    if not rows.is_file():
        write_replay_trace(session.cfg, rows)
    load = run_replay(
        session.handle.base_url,
        session.adapter.served_model_name(session.cfg.model),
        session.cfg.model.directory,
        rows,
        time_scale=session.cfg.workload.replay.time_scale,
        max_seconds=session.cfg.workload.max_seconds_per_point,
        api_key=session.handle.api_key,
    )
    sampled = await session.sampled(load, "the trace replay")
    if sampled is None:
        return None
    res, server_stats, gpu_stats, _queue = sampled
    knobs = session.spec.knobs.model_dump(exclude_defaults=True)
    point = point_from(session.spec, session.cfg, 0, "replay", res, knobs)
    point.concurrency = max(1, round(res.concurrency_mean or 0))  # what the replay put in flight, on average
    session.complete(session.spec, point, res, server_stats, gpu_stats)
    write_json_atomic(path, point.model_dump(mode="json"))
    session.steps.end(session.spec.label, "replay", 0)
    ttft = f"TTFT p95 {point.ttft_ms_p95 or 0:,.0f} ms"
    session.say(f"{session.spec.label}: trace replay {point.output_tok_s:,.0f} out tok/s, {ttft}")
    return point


class ReplayPhase(Phase):
    """The lengths-only replay of the trace's arrivals, where the config asks for it."""

    name = "replay"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """One replay, or nothing."""
        return [unit(spec.label, "replay", 0, "trace replay", replay_seconds(cfg))] if lengths_replay(cfg) else []

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """Its point file, or nothing."""
        return [point_path(run_dir, spec.label, "replay", 0)] if lengths_replay(cfg) else []

    async def run(self, session: EngineSession) -> bool:
        """The replay, where asked; False if the engine died."""
        if not lengths_replay(session.cfg):
            return True
        p = await measure_replay(session)
        if p is None:
            return False
        session.result.points.append(p)
        return True


REPLAY = ReplayPhase()
