"""Checklist step 5: benchmark every engine configuration of a config, on equal terms.

For each engine configuration a session (``helpers.benchmark.session.EngineSession``) holds the engine's
lifetime, and the phases of ``helpers.benchmark.phases.PHASES`` run on it in order: launch and time the first
completed request (cold start), answer the quality set, drive each concurrency level with guidellm while
scraping ``/metrics`` and NVML, replay the trace or multi-turn sessions, search the SLA capacity, optionally
run the engine's own client around it, optionally compare continuous with static batching, stop it, then
optionally tune its batch size to the SLA. Every point is written to the run folder as soon as it finishes;
a re-run with the same run folder resumes. A failing engine becomes a result row with the reason and its
log tail, and the next engine still runs. Under a time limit (``helpers.run.time_limit``) a configuration
whose least expected time no longer fits is not started, and a started one stops between two capacity probes
(``probe_size.ensure_time``): the step stops there, resumable.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from helpers.benchmark.evidence import rebuild_from_points, search_can_go_on
from helpers.benchmark.phases import PHASES
from helpers.benchmark.plan import least_seconds, planned_files, step_progress
from helpers.benchmark.session import EngineSession, Progress
from helpers.benchmark.steps import StepProgress
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import EngineError
from helpers.run.records import EngineResult, load_engine_result, save_engine_result
from helpers.run.rerender import measured_here
from helpers.run.time_limit import stop_unless_fits


class EngineRun:
    """One engine configuration's step 5: its phases in order on one session; every step leaves a record."""

    def __init__(
        self,
        spec: EngineSpec,
        cfg: PlaybookConfig,
        run_dir: Path,
        progress: Progress | None = None,
        steps: StepProgress | None = None,
    ):
        self.session = EngineSession(spec, cfg, run_dir, progress, steps)

    def _stored(self) -> EngineResult | None:
        """The stored result of an earlier, complete attempt in this run folder (resume), if any.

        Complete: its status ok, its capacity recorded where evidence was asked for, and every record file
        the phases name (``plan.planned_files``) in the run folder; not a search that ran out of coarse probes
        before it found its edge while the config now allows more (``evidence.search_can_go_on``).
        """
        s = self.session
        prev = load_engine_result(s.run_dir, s.spec.label)
        evidence = s.cfg.evidence.search.enabled or s.cfg.evidence.trials.enabled
        if prev is None or prev.status != "ok" or (evidence and prev.capacity is None):
            return None
        if search_can_go_on(prev.capacity, s.cfg.evidence.search):  # more probes allowed now: the search goes on
            return None
        return prev if all(p.is_file() for p in planned_files(s.spec, s.cfg, s.run_dir)) else None

    def _check_time(self) -> None:
        """Under a time limit: raise ``TimeLimitReached`` (recorded) when this configuration cannot finish in time."""
        s = self.session
        stop_unless_fits(s.run_dir, s.spec.label, lambda: least_seconds(s.spec, s.cfg, s.run_dir), s.say)

    async def run(self) -> EngineResult:
        """The phases in order (``phases.PHASES``); never raises for engine trouble (``TimeLimitReached`` before)."""
        s = self.session
        if not measured_here(s.spec.label):  # a re-render, or a configuration an earlier attempt measured
            s.steps.kept(s.spec.label)
            return rebuild_from_points(s)
        stored = self._stored()
        if stored is not None:
            s.say(f"{s.spec.label}: every point already measured in this run folder, kept")
            s.steps.kept(s.spec.label)
            return stored
        self._check_time()
        s.result.version = s.launcher.version(s.adapter, s.spec)
        try:
            for phase in (p for p in PHASES if p.on_engine):
                if not await phase.run(s):
                    return s.result
        except (EngineError, ValueError, OSError) as err:
            s.fail(str(err))
            return s.result
        except httpx.HTTPError as err:
            s.fail(f"request to the engine failed: {err}")
            return s.result
        finally:
            s.stop()
        for phase in (p for p in PHASES if not p.on_engine):
            await phase.run(s)
        return s.result


async def run_benchmarks(cfg: PlaybookConfig, run_dir: Path, progress: Progress | None = None) -> list[EngineResult]:
    """Benchmark every engine of ``cfg`` into ``run_dir``; returns one result per engine, in config order."""
    run_dir, results = Path(run_dir), []
    steps = step_progress(cfg, run_dir)  # the plan, and every unit's events, for the console's progress bar
    for spec in cfg.engines:
        result = await EngineRun(spec, cfg, run_dir, steps.telling(progress), steps).run()
        save_engine_result(run_dir, result)
        results.append(result)
    steps.finish()
    return results
