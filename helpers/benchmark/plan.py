"""The plan of step 5's work, before it starts: every unit of every engine configuration, asked of its phases.

Per configuration, in the order the phases run (``helpers.benchmark.phases.PHASES``), each phase's
``planned`` units: the cold start, the sweep points, the trace replay, the structured replays, the capacity
probes (at most ``evidence.search.max_probes`` and two per edge round) or the fixed-load trials of a run
without a search (up to ``evidence.trials.max_trials``), the engine's own client at each cross-check rate,
the two sides of the batching comparison where asked, and, per tuning value, a cold start and a point. The
seconds expected of each are priors from the config (``helpers.benchmark.priors``). The same phases name the
record files a complete configuration has (``planned_files``), which tells a resumed run what it may keep.

``step_progress`` hands the plan to ``helpers.benchmark.steps.StepProgress``, which writes it and the events
of each unit to the run folder for the console's progress bar.
"""

from __future__ import annotations

from pathlib import Path

from helpers.benchmark.phases import PHASES
from helpers.benchmark.steps import StepProgress
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.run.progress import Unit


def engine_units(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
    """Every unit of one engine configuration, in the order they run: each phase's own."""
    return [u for phase in PHASES for u in phase.planned(spec, cfg, run_dir)]


def plan_units(cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
    """The plan of the whole step: every engine configuration's units, in config order."""
    return [u for spec in cfg.engines for u in engine_units(spec, cfg, run_dir)]


def planned_files(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
    """The record files of a complete configuration, each phase's (probes and trials vary in number: none)."""
    return [path for phase in PHASES for path in phase.records(spec, cfg, run_dir)]


def step_progress(cfg: PlaybookConfig, run_dir: Path | None = None) -> StepProgress:
    """The progress events of step 5 with its plan (written into ``run_dir``; without one, nothing is written)."""
    return StepProgress(cfg, run_dir, plan_units(cfg, run_dir) if run_dir is not None else ())
