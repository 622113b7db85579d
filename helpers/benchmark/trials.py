"""Step 5's evidence phase: the capacity search with its edge rounds, or repeated trials at a fixed load.

``measure_evidence`` runs the capacity search (``helpers.benchmark.evidence.search``): every probe, the
coarse ones that bracket the edge and the edge rounds that straddle it, feeds one estimate of the capacity
with its 95% interval (``helpers.benchmark.boundary``); nothing else is repeated at the capacity.

With the search disabled, ``fixed_load_trials`` repeats closed-loop trials at one fixed number of streams
instead, until the 95% interval of throughput is within ``evidence.trials.target_rel_ci`` of the mean or
the trial cap is reached: no single grid point ever stands for a configuration. Trial k runs on stream
``t<k>`` (the same prompts for every configuration); a trial that did not keep up (errors over their share)
is marked, and stays out of every interval (``helpers.benchmark.sla``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.benchmark.capacity import judge, measurement_from_load
from helpers.benchmark.evidence import (
    fixed_concurrency,
    fixed_load_record,
    latency_estimate,
    probe_requests,
    reset_prefix_cache,
    resets_cache,
    search,
)
from helpers.benchmark.judged import kept_up, load_of, sustained_view
from helpers.benchmark.stats import enough_trials
from helpers.run.records import Point

if TYPE_CHECKING:
    from helpers.benchmark.run import EngineRun


async def _trials_at(run: EngineRun, load: float, reset: bool, notes: list[str]) -> list[Point] | None:
    """Trials at ``load`` until the throughput interval is tight enough; None if the engine died."""
    t, s = run.cfg.evidence.trials, run.cfg.evidence.search
    done: list[Point] = []
    for i in range(t.max_trials):
        tag = f"t{i}"
        stored = run.stored_point("trial", tag, int(load))
        if stored is None or load_of(stored, "concurrency") != load:  # a stored trial is kept only at this load
            run.steps.begin(run.spec.label, "trial", tag, f"trial {i + 1}")
            if reset and (why := reset_prefix_cache(run)):
                notes.append(why)
                reset = False
            n = probe_requests(run, load, latency_estimate(run.result.points))
            got = await run.measure_load(
                phase="trial", load=load, tag=tag, requests=n, warmup=t.warmup_requests, stream=tag
            )
            if got is None:
                return None
            stored, res, queue = got
            m = measurement_from_load(res, load=load, axis="concurrency", queue_samples=queue or None)
            sent = res.requests + res.errors + res.incomplete
            probe = judge(sustained_view(m, stored, sent), run.cfg.sla, s.min_sustained_ratio, s.max_client_lag_ms)
            stored.probe = probe.model_copy(update={"stream": tag}).model_dump(mode="json")
            stored.verdict, stored.trial = probe.why, i
            run.save(stored, tag=tag)
            run.steps.end(run.spec.label, "trial", tag)
        else:
            run.steps.kept(run.spec.label, "trial", tag)
        done.append(stored)
        good = [p.output_tok_s for p in done if kept_up(p)]
        stop, why = enough_trials(good, t.target_rel_ci, t.min_trials, t.max_trials) if good else (False, "")
        if stop:
            notes.append(why)
            break
    run.steps.drop(run.spec.label, "trial")  # the interval was tight before the trial cap: the rest is not needed
    return done


async def fixed_load_trials(run: EngineRun) -> bool:
    """Search disabled: repeated trials at one fixed number of streams, recorded as a load, not a capacity.

    The load is the user's (``fixed_concurrency``), so it is not stepped down: trials that miss the SLA
    stand as missing it. False if the engine died.
    """
    load, cap = float(fixed_concurrency(run.cfg)), fixed_load_record(run.cfg)
    run.result.capacity = cap
    reset, notes = resets_cache(run), []
    done = await _trials_at(run, load, reset, notes)
    if done is None:
        return False
    run.result.points.extend(done)
    cap.trial_load = load
    behind = sum(not kept_up(p) for p in done)
    cache = "prefix cache reset before each trial" if reset else "prefix cache kept between trials"
    parts = [f"{len(done)} trial(s) at {load:g} streams, {cache}", *dict.fromkeys(notes)]
    if behind:
        parts.append(f"{behind} did not keep up (errors over their share): left out of the intervals")
    cap.trials_note = "; ".join(parts)
    return True


async def measure_evidence(run: EngineRun) -> bool:
    """Search the capacity (with its edge rounds); record it on the result. False if the engine died.

    With the search disabled: trials at a fixed load (``fixed_load_trials``); with trials disabled too,
    nothing.
    """
    if not run.cfg.evidence.search.enabled:
        return await fixed_load_trials(run) if run.cfg.evidence.trials.enabled else True
    cap = await search(run)
    if cap is None:
        return False
    run.result.capacity = cap
    return True
