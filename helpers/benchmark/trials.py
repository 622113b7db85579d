"""Step 5's repeated trials at a configuration's SLA capacity, and the evidence phase that ends with them.

``measure_evidence`` runs the capacity search (``helpers.benchmark.evidence.search``), then ``trials``
repeats loads at the capacity until the 95% interval of throughput is within
``evidence.trials.target_rel_ci`` of the mean, or the trial cap is reached. A single probe set the
capacity, so the trials confirm it: a round whose trials miss the SLA on average, or one of whose
trials falls behind (the round stops there), steps the load down by the search's tolerance (one
stream on the concurrency axis). A probe that passed within ``evidence.search.trial_margin`` of the
TTFT limit is a coin toss for the trials' average, so the trials start one step below it. With the
search disabled, ``fixed_load_trials`` repeats closed-loop trials at one fixed number of streams instead:
no single grid point ever stands for a configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.benchmark.capacity import Probe, judge, measurement_from_load
from helpers.benchmark.evidence import (
    fixed_concurrency,
    fixed_load_record,
    latency_estimate,
    load_axis,
    probe_requests,
    reset_prefix_cache,
    resets_cache,
    search,
    sustained_view,
)
from helpers.benchmark.sla import load_of
from helpers.benchmark.stats import enough_trials
from helpers.run.records import CapacitySummary, Point

if TYPE_CHECKING:
    from helpers.benchmark.run import EngineRun


def step_down(load: float, cap: CapacitySummary) -> float:
    """The next lower load of a trial round: less by the search's tolerance, or one stream fewer."""
    return load * (1 - cap.tolerance) if cap.axis == "rate" else max(1.0, load - 1)


def close_pass(run: EngineRun, cap: CapacitySummary) -> str | None:
    """Why the trials start below the capacity (its probe passed close to the TTFT limit), or None."""
    margin, limit = run.cfg.evidence.search.trial_margin, run.cfg.sla.ttft_p95_ms
    at = next((p for p in cap.probes if p.get("load") == cap.capacity), None)
    ttft = at.get("ttft_p95_ms") if at else None
    if not margin or ttft is None or ttft <= (1 - margin) * limit or step_down(cap.capacity, cap) >= cap.capacity:
        return None
    return (
        f"the probe at the capacity passed within {margin:.0%} of the TTFT limit ({ttft:,.0f} of {limit:,.0f} ms): "
        "the trials start one step below it"
    )


def _trials_meet_sla(run: EngineRun, done: list[Point]) -> bool:
    """Whether the trials, on average, hold the SLA (the representative's own test) and each one kept up."""
    ttft = [p.ttft_ms_p95 for p in done if p.ttft_ms_p95 is not None]
    return bool(ttft) and sum(ttft) / len(ttft) <= run.cfg.sla.ttft_p95_ms and all(_kept_up(run, p) for p in done)


def _kept_up(run: EngineRun, p: Point) -> bool:
    """Whether one trial kept up with its load (sustained) within the SLA's error share."""
    errors_ok = p.errors <= run.cfg.sla.max_error_share * (p.requests + p.errors)
    return errors_ok and (not p.probe or Probe.model_validate(p.probe).sustained)


async def _trials_at(
    run: EngineRun, load: float, round_: int, reset: bool, notes: list[str], stepping: bool = True
) -> list[Point] | None:
    """Trials at ``load`` until the throughput interval is tight enough; None if the engine died.

    ``stepping``: a round that can step down stops at its first trial that falls behind; a fixed load
    cannot, so its trials go on (each one that fell behind is marked, and the average misses the SLA).
    """
    t, s, axis = run.cfg.evidence.trials, run.cfg.evidence.search, load_axis(run.cfg)
    done: list[Point] = []
    for i in range(t.max_trials):
        tag = f"t{i}" if round_ == 0 else f"s{round_}-t{i}"
        stored = run.stored_point("trial", tag, int(load) if axis == "concurrency" else 0)
        if stored is None or load_of(stored, axis) != load:  # a stored trial is kept only at this load
            run.steps.begin(
                run.spec.label, "trial", tag, f"trial {i + 1}" + (f" (step down {round_})" if round_ else "")
            )
            if reset and (why := reset_prefix_cache(run)):
                notes.append(why)
                reset = False
            n = probe_requests(run, load, latency_estimate(run.result.points))
            got = await run.measure_load(phase="trial", load=load, tag=tag, requests=n, warmup=t.warmup_requests)
            if got is None:
                return None
            stored, res, queue = got
            m = measurement_from_load(res, load=load, axis=axis, queue_samples=queue or None)
            sent = res.requests + res.errors + res.incomplete
            probe = judge(sustained_view(m, stored, sent), run.cfg.sla, s.min_sustained_ratio, s.max_client_lag_ms)
            stored.probe, stored.verdict = probe.model_dump(mode="json"), probe.why
            stored.trial = i
            run.save(stored, tag=tag)
            run.steps.end(run.spec.label, "trial", tag)
        else:
            run.steps.kept(run.spec.label, "trial", tag)
        done.append(stored)
        if stepping and not _kept_up(run, stored):  # every trial must keep up: this round fails, step down now
            break
        stop, why = enough_trials([p.output_tok_s for p in done], t.target_rel_ci, t.min_trials, t.max_trials)
        if stop:
            notes.append(why)
            break
    run.steps.drop(run.spec.label, "trial")  # the interval was tight before the trial cap: the rest is not needed
    return done


async def trials(run: EngineRun, cap: CapacitySummary, max_steps_down: int = 2) -> bool:
    """Repeated trials at the capacity; False if the engine died.

    A single probe decided the capacity, so the trials confirm it: when they miss the SLA on average or
    one falls behind, the load steps down by the search's tolerance (one stream on the concurrency axis)
    and the trials are repeated there (at most ``max_steps_down`` times); the trials that stand are the
    last ones, and the note says so. They start one step below the capacity when its probe passed
    close to the TTFT limit (``close_pass``).
    """
    load = cap.capacity
    if not run.cfg.evidence.trials.enabled:
        cap.trials_note = "trials disabled (evidence.trials.enabled: false): nothing stands for this configuration"
        run.steps.drop(run.spec.label, "trial")
        return True
    if load is None:
        cap.trials_note = "no load met the SLA: nothing to repeat"
        run.steps.drop(run.spec.label, "trial")
        return True
    reset, notes = resets_cache(run), []
    if (close := close_pass(run, cap)) is not None:
        load = step_down(load, cap)
        notes.append(close)
    for round_ in range(max_steps_down + 1):
        done = await _trials_at(run, load, round_, reset, notes)
        if done is None:
            return False
        if _trials_meet_sla(run, done) or round_ == max_steps_down:
            break
        notes.append(f"trials at {load:.4g} missed the SLA on average or fell behind: stepped down")
        for p in done:
            p.phase = "search"  # kept as evidence of the edge, no longer the representative's trials
            run.save(p, tag=f"{p.offered_rate or p.concurrency:.5g}-trial{p.trial}")
        run.result.points.extend(done)
        load = step_down(load, cap)
    run.result.points.extend(done)
    cap.trial_load = load
    cache = "prefix cache reset before each trial" if reset else "prefix cache kept between trials"
    cap.trials_note = "; ".join([f"{len(done)} trial(s) at {load:.4g}, {cache}", *dict.fromkeys(notes)])
    return True


async def fixed_load_trials(run: EngineRun) -> bool:
    """Search disabled: repeated trials at one fixed number of streams, recorded as a load, not a capacity.

    The load is the user's (``fixed_concurrency``), so it is not stepped down: trials that miss the SLA
    stand as missing it. False if the engine died.
    """
    load, cap = float(fixed_concurrency(run.cfg)), fixed_load_record(run.cfg)
    run.result.capacity = cap
    reset, notes = resets_cache(run), []
    done = await _trials_at(run, load, 0, reset, notes, stepping=False)
    if done is None:
        return False
    run.result.points.extend(done)
    cap.trial_load = load
    cache = "prefix cache reset before each trial" if reset else "prefix cache kept between trials"
    cap.trials_note = "; ".join([f"{len(done)} trial(s) at {load:g} streams, {cache}", *dict.fromkeys(notes)])
    return True


async def measure_evidence(run: EngineRun) -> bool:
    """Search the capacity and repeat trials at it; record it on the result. False if the engine died.

    With the search disabled: trials at a fixed load (``fixed_load_trials``); with trials disabled too,
    nothing.
    """
    if not run.cfg.evidence.search.enabled:
        return await fixed_load_trials(run) if run.cfg.evidence.trials.enabled else True
    cap = await search(run)
    if cap is None:
        return False
    run.result.capacity = cap  # the trials complete it in place
    return await trials(run, cap)
