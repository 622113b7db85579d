"""Step 5's first phases on a session: the engine's start (its cold start) and the closed-loop sweep.

``START`` launches the configuration's engine and times its first answer (``EngineSession.launch``);
``SWEEP`` measures each concurrency level of the grid (``helpers.workload.levels.sweep_levels``), one saved
point per level (``points/<label>/sweep-c<c>.json``), kept by a re-run.
"""

from __future__ import annotations

from pathlib import Path

from helpers.benchmark.priors import cold_start_seconds, point_seconds
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.run.progress import Unit
from helpers.run.records import point_path
from helpers.workload.levels import sweep_levels


class StartPhase(Phase):
    """The engine's launch and its first answer: the cold start."""

    name = "start"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """One cold start."""
        return [unit(spec.label, "cold", "main", "cold start", cold_start_seconds(spec))]

    async def run(self, session: EngineSession) -> bool:
        """Launch the configuration's engine and wait for its first answer (raises for engine trouble)."""
        session.launch(session.spec)
        return True


class SweepPhase(Phase):
    """One closed-loop point per concurrency level of the grid."""

    name = "sweep"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """A point per sweep level."""
        return [unit(spec.label, "sweep", c, f"sweep c={c}", point_seconds(cfg, c)) for c in sweep_levels(cfg, run_dir)]

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """The point file of each level."""
        return [point_path(run_dir, spec.label, "sweep", c) for c in sweep_levels(cfg, run_dir)]

    async def run(self, session: EngineSession) -> bool:
        """Each level in turn; False if the engine died."""
        for c in sweep_levels(session.cfg, session.run_dir):
            p = await session.measure(session.spec, c, "sweep")
            if p is None:
                return False
            session.result.points.append(p)
        return True


START = StartPhase()
SWEEP = SweepPhase()
