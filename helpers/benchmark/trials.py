"""Step 5's evidence phase: the capacity search with its edge rounds, or repeated trials at a fixed load.

``EVIDENCE`` (``EvidencePhase``) runs the capacity search (``helpers.benchmark.evidence.search``): every probe, the
coarse ones that bracket the edge and the edge rounds that straddle it, feeds one estimate of the capacity
with its 95% interval (``helpers.benchmark.boundary``); nothing else is repeated at the capacity.

With the search disabled, ``fixed_load_trials`` repeats closed-loop trials at one fixed number of streams
instead, until the 95% interval of throughput is within ``evidence.trials.target_rel_ci`` of the mean or
the trial cap is reached: no single grid point ever stands for a configuration. Trial k runs on stream
``t<k>`` (the same prompts for every configuration); a trial that did not keep up (errors over their share)
is marked, and stays out of every interval (``helpers.benchmark.sla``).
"""

from __future__ import annotations

from pathlib import Path

from helpers.benchmark.capacity import judge, measurement_from_load
from helpers.benchmark.evidence import (
    fixed_concurrency,
    fixed_load_record,
    resets_cache,
    search,
    structured_load,
)
from helpers.benchmark.judged import kept_up, load_of, sustained_view
from helpers.benchmark.priors import probe_seconds
from helpers.benchmark.probe_size import sized_requests
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.stats import enough_trials
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.run.progress import Unit
from helpers.run.records import Point


async def _trials_at(session: EngineSession, load: float, reset: bool, notes: list[str]) -> list[Point] | None:
    """Trials at ``load`` until the throughput interval is tight enough; None if the engine died."""
    t, s = session.cfg.evidence.trials, session.cfg.evidence.search
    done: list[Point] = []
    for i in range(t.max_trials):
        tag = f"t{i}"
        stored = session.stored_point("trial", tag, int(load))
        if stored is None or load_of(stored, "concurrency") != load:  # a stored trial is kept only at this load
            session.steps.begin(session.spec.label, "trial", tag, f"trial {i + 1}")
            if reset and (why := session.reset_prefix_cache()):
                notes.append(why)
                reset = False
            n = sized_requests(session, load)
            got = await session.measure_load(
                phase="trial",
                load=load,
                tag=tag,
                requests=n,
                warmup=t.warmup_requests,
                stream=tag,
                job=structured_load(session, load),
            )
            if got is None:
                return None
            stored, res, queue = got
            m = measurement_from_load(res, load=load, axis="concurrency", queue_samples=queue or None)
            sent = res.requests + res.errors + res.incomplete
            probe = judge(sustained_view(m, stored, sent), session.cfg.sla, s.min_sustained_ratio, s.max_client_lag_ms)
            stored.probe = probe.model_copy(update={"stream": tag}).model_dump(mode="json")
            stored.verdict, stored.trial = probe.why, i
            session.save(stored, tag=tag)
            session.steps.end(session.spec.label, "trial", tag)
        else:
            session.steps.kept(session.spec.label, "trial", tag)
        done.append(stored)
        good = [p.output_tok_s for p in done if kept_up(p)]
        stop, why = enough_trials(good, t.target_rel_ci, t.min_trials, t.max_trials) if good else (False, "")
        if stop:
            notes.append(why)
            break
    session.steps.drop(
        session.spec.label, "trial"
    )  # the interval was tight before the trial cap: the rest is not needed
    return done


async def fixed_load_trials(session: EngineSession) -> bool:
    """Search disabled: repeated trials at one fixed number of streams, recorded as a load, not a capacity.

    The load is the user's (``fixed_concurrency``), so it is not stepped down: trials that miss the SLA
    stand as missing it. False if the engine died.
    """
    load, cap = float(fixed_concurrency(session.cfg)), fixed_load_record(session.cfg)
    session.result.capacity = cap
    reset, notes = resets_cache(session), []
    done = await _trials_at(session, load, reset, notes)
    if done is None:
        return False
    session.result.points.extend(done)
    cap.trial_load = load
    behind = sum(not kept_up(p) for p in done)
    cache = "prefix cache reset before each trial" if reset else "prefix cache kept between trials"
    parts = [f"{len(done)} trial(s) at {load:g} streams, {cache}", *dict.fromkeys(notes)]
    if behind:
        parts.append(f"{behind} did not keep up (errors over their share): left out of the intervals")
    cap.trials_note = "; ".join(parts)
    return True


class EvidencePhase(Phase):
    """The capacity search with its edge rounds, or, with the search disabled, trials at a fixed load."""

    name = "evidence"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """The most probes the search may take (the coarse ones and two a round at the edge), or the most trials."""
        ev, probe = cfg.evidence, probe_seconds(cfg)
        if ev.search.enabled:
            most = ev.search.max_probes + 2 * ev.search.edge_rounds_max
            return [unit(spec.label, "probe", i, f"capacity probe {i + 1}", probe) for i in range(most)]
        if ev.trials.enabled:
            return [unit(spec.label, "trial", f"t{i}", f"trial {i + 1}", probe) for i in range(ev.trials.max_trials)]
        return []

    async def run(self, session: EngineSession) -> bool:
        """Search the capacity (with its edge rounds); record it on the result. False if the engine died.

        With the search disabled: trials at a fixed load (``fixed_load_trials``); with trials disabled too,
        nothing.
        """
        if not session.cfg.evidence.search.enabled:
            return await fixed_load_trials(session) if session.cfg.evidence.trials.enabled else True
        cap = await search(session)
        if cap is None:
            return False
        session.result.capacity = cap
        return True


EVIDENCE = EvidencePhase()
