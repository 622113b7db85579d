"""The plan of step 5's work, before it starts: every unit of every engine configuration, asked of its phases.

Per configuration, in the order the phases run (``helpers.benchmark.phases.PHASES``), each phase's
``planned`` units: the cold start, the sweep points, the trace replay, the structured replays, the capacity
probes (at most ``evidence.search.max_probes`` and two per edge round) or the fixed-load trials of a run
without a search (up to ``evidence.trials.max_trials``), the engine's own client at each cross-check rate,
the two sides of the batching comparison where asked, and, per tuning value, a cold start and a point. The
seconds expected of each are priors from the config (``helpers.benchmark.priors``). The same phases name the
record files a complete configuration has (``planned_files``), which tells a resumed run what it may keep.

``step_progress`` hands the plan to ``helpers.benchmark.steps.StepProgress``, which writes it and the events
of each unit to the run folder for the console's progress bar. ``least_seconds`` is the least a configuration
can take (its fewest probes), which a run with a time limit (``helpers.run.time_limit``) asks before starting it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from helpers.benchmark.phases import PHASES
from helpers.benchmark.steps import StepProgress
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.run.folder import RunFolder
from helpers.run.progress import Unit
from helpers.run.records import point_path

UNIT_WORDS = {
    "cold": "cold start(s)",
    "sweep": "grid point(s)",
    "probe": "capacity probe(s)",
    "trial": "trial(s)",
    "crosscheck": "cross-check rate(s)",
}
"""How ``least_seconds`` names the units it counts (other kinds by their own name)."""


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


def least_seconds(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> tuple[float, str]:
    """The least expected seconds ``spec`` still needs in ``run_dir``, and what they are, in words.

    Every planned unit at its expected seconds (``helpers.benchmark.priors``), except that a search counts
    its fewest probes: one on each side of the edge and ``edge_rounds_min`` rounds of two, less the probes
    already stored in the run folder; a grid point already stored counts nothing.
    """
    units = engine_units(spec, cfg, run_dir)
    probes = [u for u in units if u.kind == "probe"]
    search = cfg.evidence.search
    # a probe measured again (too short, or under interference) is stored aside as superseded: not one of them
    stored = [p for p in RunFolder(run_dir).points(spec.label, "search") if not (p.probe or {}).get("superseded")]
    fewest = min(len(probes), 2 + 2 * search.edge_rounds_min) if probes else 0
    todo = max(0, fewest - len(stored))

    def swept(u: Unit) -> bool:
        return u.kind == "sweep" and point_path(run_dir, spec.label, "sweep", int(u.key.rsplit("|", 1)[1])).is_file()

    rest = [u for u in units if u.kind != "probe" and not swept(u)]
    seconds = sum(u.expected_s for u in rest) + todo * (probes[0].expected_s if probes else 0.0)
    counts = Counter(u.kind for u in rest) + Counter({"probe": todo} if todo else {})
    what = ", ".join(
        "cold start" if (k, n) == ("cold", 1) else f"{n} {UNIT_WORDS.get(k, k)}" for k, n in counts.items()
    )
    return seconds, what or "nothing"
