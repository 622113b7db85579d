"""Step 5's batch-size tuning: each ``tune_max_num_seqs`` value launched and measured at the target concurrency.

``TUNING`` runs after the configuration's own engine stopped: each value is a launch of its own (a cold
start, ``cold|seqs<n>`` in the plan) and one point at the target concurrency
(``points/<label>/tune-seqs<n>-c<c>.json``).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from helpers.benchmark.loads import target_concurrency
from helpers.benchmark.priors import cold_start_seconds, point_seconds
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.sla import meets_sla
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import EngineError
from helpers.run.progress import Unit
from helpers.run.records import Point, point_path
from helpers.workload.levels import sweep_levels


def tuned_values(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[int]:
    """The batch sizes tuning launches: the sweep's own point at the target already stands for the configured one."""
    swept = target_concurrency(cfg) in sweep_levels(cfg, run_dir)
    return [s for s in spec.tune_max_num_seqs if not (swept and s == spec.knobs.max_num_seqs)]


async def tune(session: EngineSession) -> None:
    """Try each batch size at the target concurrency; keep the best throughput within the SLA.

    The sweep's point at the target concurrency (the configured batch size) is a candidate too,
    so a value already measured there is not launched again.
    """
    target = target_concurrency(session.cfg)
    base = next((p for p in session.result.points if p.phase == "sweep" and p.concurrency == target), None)
    tried: list[Point] = [base] if base is not None else []
    for seqs in session.spec.tune_max_num_seqs:
        if base is not None and seqs == session.spec.knobs.max_num_seqs:
            continue
        spec = session.spec.model_copy(deep=True)
        spec.knobs.max_num_seqs = seqs
        try:
            session.launch(spec, tag=f"tune-seqs{seqs}")
            p = await session.measure(spec, target, "tune")
        except (EngineError, httpx.HTTPError, ValueError, OSError) as err:
            session.say(f"{session.spec.label}: tuning max_num_seqs={seqs} failed: {err}")
            session.steps.drop(session.spec.label, "cold", "tune", idents=[f"seqs{seqs}"])
            p = None
        finally:
            session.stop()
        if p is not None:
            tried.append(p)
            session.result.points.append(p)
    within = [p for p in tried if meets_sla(p, session.cfg.sla)]
    if within:
        best = max(within, key=lambda p: p.output_tok_s)
        session.result.tuned_knobs = dict(best.knobs)


class TuningPhase(Phase):
    """Each ``tune_max_num_seqs`` value: a launch of its own and a point at the target concurrency."""

    name = "tuning"
    on_engine = False

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """Per value tuning launches: its cold start and its point."""
        cold, target, units = cold_start_seconds(spec), target_concurrency(cfg), []
        for seqs in tuned_values(spec, cfg, run_dir):
            units.append(unit(spec.label, "cold", f"seqs{seqs}", f"cold start (max_num_seqs={seqs})", cold))
            units.append(
                unit(spec.label, "tune", f"seqs{seqs}", f"tuning max_num_seqs={seqs}", point_seconds(cfg, target))
            )
        return units

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """The point file of each value tuning launches."""
        target = target_concurrency(cfg)
        return [point_path(run_dir, spec.label, "tune", target, f"seqs{s}") for s in tuned_values(spec, cfg, run_dir)]

    async def run(self, session: EngineSession) -> bool:
        """Tune where the configuration asks for it (its engine already stopped); never stops the benchmark."""
        if session.spec.tune_max_num_seqs:
            await tune(session)
        return True


TUNING = TuningPhase()
