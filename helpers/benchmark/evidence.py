"""Step 5's decision evidence for one running engine: its SLA capacity search (trials: ``benchmark.trials``).

After the grid, ``search`` finds the highest sustained load at which the SLA holds
(``helpers.benchmark.capacity``, open-loop Poisson arrivals by default); ``helpers.benchmark.trials``
then repeats trials at that load. Every probe and trial is a ``Point`` saved as it finishes (phases
``search`` and ``trial``): a re-run resumes the search from its probes and keeps finished trials, and
``rejudged_capacity`` judges stored probes again without an engine. The prefix cache is reset before
each trial where the engine has an endpoint for it, unless the workload shares prefixes (then caching
is what is measured). Warm-up requests open each trial and are left out.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Literal

import httpx

from helpers.benchmark.capacity import CapacitySearch, Measurement, Probe, judge, measurement_from_load
from helpers.benchmark.sla import load_of, meets_sla, trial_points
from helpers.core.config import PlaybookConfig
from helpers.core.text import label_slug
from helpers.run.records import CapacitySummary, EngineResult, Point, load_engine_result, load_point

if TYPE_CHECKING:
    from helpers.benchmark.run import EngineRun


def load_axis(cfg: PlaybookConfig) -> Literal["rate", "concurrency"]:
    """The axis of the probes and trials: the search's, or closed-loop concurrency when the search is disabled."""
    return cfg.evidence.search.axis if cfg.evidence.search.enabled else "concurrency"


def fixed_concurrency(cfg: PlaybookConfig) -> int:
    """Streams of the fixed-load trials (search disabled): configured, else the target or top sweep level."""
    wl = cfg.workload
    return cfg.evidence.trials.fixed_concurrency or wl.target_concurrency or max(wl.concurrency)


LATENCY_SPANS = 3.0
"""A probe offers arrivals for at least this many request latencies, so that its steady window is long."""


def probe_requests(run: EngineRun, load: float, latency_s: float | None = None) -> int:
    """Requests of one probe or trial: about ``probe_seconds`` of arrivals, within the configured bounds.

    With the request latency seen so far (``latency_s``: the last passing probe's, else the grid's),
    the arrivals span at least ``LATENCY_SPANS`` latencies: a probe shorter than a few latencies ends
    before its first requests finish and shows no steady window (and so no served rate).
    """
    s = run.cfg.evidence.search
    seconds = max(s.probe_seconds, LATENCY_SPANS * (latency_s or 0.0))
    want = load * seconds if load_axis(run.cfg) == "rate" else load * max(2, seconds / 5)
    return int(min(s.max_requests, max(s.min_requests, math.ceil(want))))


def latency_estimate(points: list[Point]) -> float | None:
    """The median end-to-end latency (s) of the most recent passing probe, else the slowest grid point's."""
    passing = [p for p in points if p.phase == "search" and p.probe and Probe.model_validate(p.probe).passed]
    pool = passing[-1:] or [p for p in points if p.phase == "sweep"]
    lat = [p.e2e_ms_p50 for p in pool if p.e2e_ms_p50]
    return max(lat) / 1000.0 if lat else None


def start_load(result: EngineResult, run: EngineRun) -> float:
    """The search's first load: configured, else where the grid puts the SLA edge.

    Rate axis: the rate of the busiest grid point within the SLA. That closed-loop point served its
    rate within the SLA (the lowest grid point when none did), so the search starts near the edge
    rather than doubling up from one request at a time. Concurrency axis: the grid's own levels are
    loads of this axis, so where the grid already brackets the edge (a level within the SLA, the next
    one past it) the search starts at the level where TTFT p95 reaches the limit on the straight line
    between the two (``sla_crossing``); else at the busiest level within the SLA.
    """
    s = run.cfg.evidence.search
    if s.start is not None:
        return s.start
    sweep = sorted((p for p in result.points if p.phase == "sweep" and p.requests > 0), key=lambda p: p.concurrency)
    within = [p for p in sweep if meets_sla(p, run.cfg.sla)] or sweep[:1]
    if s.axis == "concurrency":
        if not within:
            return 1.0
        edge = within[-1]
        past = next((p for p in sweep if p.concurrency > edge.concurrency and not meets_sla(p, run.cfg.sla)), None)
        crossing = sla_crossing(edge, past, run.cfg.sla.ttft_p95_ms) if past is not None else None
        return float(crossing if crossing is not None else edge.concurrency)
    return max(0.05, max(p.req_s for p in within)) if within else 1.0


def sla_crossing(within: Point, past: Point, ttft_limit_ms: float) -> int | None:
    """The whole number of streams between two grid levels where TTFT p95 reaches the limit, on a straight line.

    ``within`` met the SLA, ``past`` (more streams) did not. None when the TTFT figures do not rise
    across the limit between them (past missed the SLA by errors or ITL, not TTFT): no line to read.
    The level is rounded down and kept inside the bracket (at least ``within``, below ``past``).
    """
    lo, hi = within.ttft_ms_p95, past.ttft_ms_p95
    if lo is None or hi is None or not lo <= ttft_limit_ms < hi:
        return None
    at = within.concurrency + (past.concurrency - within.concurrency) * (ttft_limit_ms - lo) / (hi - lo)
    return max(within.concurrency, min(past.concurrency - 1, math.floor(at)))


DRAIN_SHARE = 0.9
"""A probe whose in-flight requests reached this share of all it sent never drained: the engine fell behind.

Seen on the H200 (2026-12-01): vLLM admitted every request of an overloaded probe into its running
batch (none waited), so its waiting-request gauge stayed flat while the batch grew to the whole probe;
TTFT stayed inside the SLA because prefill ran first, and only the completions showed the overload.
"""
PLAUSIBLE_SERVED = 1.2
"""A client-side served rate above this multiple of the sent rate is an artefact, not a measurement."""


def sustained_view(m: Measurement, point: Point, sent: int) -> Measurement:
    """``m`` with the overload tests that hold on every engine: in-flight growth and a plausible served rate.

    The server's in-flight count (running + waiting requests, ``/metrics``) that reached
    ``DRAIN_SHARE`` of the requests sent marks the load as not sustained (queue grew); a served rate
    the client computed above ``PLAUSIBLE_SERVED`` × the sent rate is dropped (not measured).
    """
    data = m.model_dump()
    inflight = (point.server.running_max or 0) + (point.server.queue_max or 0)
    if sent and inflight >= DRAIN_SHARE * sent:
        data["queue_growing"] = True
        data["queue_growth"] = None
    if m.offered_rate and m.achieved_rate and m.achieved_rate > PLAUSIBLE_SERVED * m.offered_rate:
        data["offered_rate"] = data["achieved_rate"] = None
    return Measurement.model_validate(data)


def measurement_of(point: Point, axis: str) -> Measurement:
    """The measurement a stored probe or trial stands for (to judge it again, e.g. with a corrected rule).

    A point that kept its judged probe is re-judged from everything the live judgement saw (sent and
    served rates, steady window, queue trend, client lag); an older one from its figures alone.
    """
    attempted = point.requests + point.errors
    if point.probe:
        fields = Measurement.model_fields
        m = Measurement.model_validate({k: v for k, v in point.probe.items() if k in fields})
        return sustained_view(m, point, attempted + point.incomplete)
    m = Measurement(
        load=load_of(point, axis),
        axis=axis,  # type: ignore[arg-type]
        ttft_p95_ms=point.ttft_ms_p95,
        itl_p95_ms=point.itl_ms_p95,
        error_share=point.errors / attempted if attempted else 0.0,
        requests=point.requests,
    )
    return sustained_view(m, point, attempted)


def reset_prefix_cache(run: EngineRun) -> str | None:
    """Ask the engine to drop its prefix cache; None when done, else why not."""
    path = run.adapter.cache_reset_path
    if not path or run.handle is None:
        return "the engine has no prefix-cache reset endpoint"
    try:
        r = httpx.post(run.handle.base_url + path, headers=run.handle.headers, timeout=30.0)
        r.raise_for_status()
    except httpx.HTTPError as err:
        return f"prefix-cache reset failed ({err})"
    return None


def resets_cache(run: EngineRun) -> bool:
    """Whether trials start from an empty prefix cache (config, else: unless prompts share a prefix)."""
    t, wl = run.cfg.evidence.trials, run.cfg.workload
    if t.reset_prefix_cache is not None:
        return t.reset_prefix_cache
    return wl.shared_prefix_tokens == 0 and wl.source.kind == "synthetic"


async def search(run: EngineRun) -> CapacitySummary | None:
    """The capacity search on the running engine; None if the engine died (the result row says why)."""
    s, result = run.cfg.evidence.search, run.result
    reuse = [Probe.model_validate(p.probe) for p in run.stored_points("search") if p.probe]
    machine = CapacitySearch(
        start_load(result, run),
        run.cfg.sla,
        axis=s.axis,
        growth=s.growth,
        tolerance=s.tolerance,
        max_probes=s.max_probes,
        min_sustained_ratio=s.min_sustained_ratio,
        max_client_lag_ms=s.max_client_lag_ms,
        retries=s.retries,
        reuse=reuse,
    )
    label = result.label
    for number in itertools.count():
        if (load := machine.next_load()) is None:
            break
        probe = machine.take_reused(load)
        if probe is None:
            run.steps.begin(label, "probe", number, f"capacity probe {number + 1}")
            attempt = sum(1 for p in machine.probes if p.load == load)
            n = probe_requests(run, load, latency_estimate(result.points))
            got = await run.measure_load(phase="search", load=load, tag=f"{load:.5g}-{attempt}", requests=n)
            if got is None:
                return None
            point, res, queue = got
            m = measurement_from_load(res, load=load, axis=s.axis, queue_samples=queue or None)
            probe = machine.record(sustained_view(m, point, res.requests + res.errors + res.incomplete))
            point.probe, point.verdict = probe.model_dump(mode="json"), probe.why
            run.save(point, tag=f"{load:.5g}-{attempt}")
            run.steps.end(label, "probe", number)
            run.result.points.append(point)
        else:
            run.steps.kept(label, "probe", number)
            machine.record(probe)
        run.say(f"{result.label}: capacity probe {load:.4g} → {'pass' if probe.passed else 'fail'}: {probe.why}")
    run.steps.drop(label, "probe")  # the bracket is narrow enough: the probes left are not needed
    found = machine.result()
    return CapacitySummary(
        axis=found.axis,
        capacity=found.capacity,
        bracket_low=found.bracket_low,
        bracket_high=found.bracket_high,
        bounded=found.bounded,
        converged=found.converged,
        tolerance=found.tolerance,
        note=found.note,
        probes=[p.model_dump(mode="json") for p in found.probes],
    )


def rejudged_capacity(result: EngineResult, run: EngineRun) -> CapacitySummary | None:
    """The capacity from a configuration's stored probes, judged again with today's rules (no engine needed).

    Used when a run is re-rendered from its points (``playbook run --from-points``): the capacity is the
    highest passing load below the lowest failing one; trials count only where they ran at that load.
    """
    s, limits = run.cfg.evidence.search, run.cfg.sla
    stored = [p for p in result.points if p.phase == "search" and p.trial is None]  # probes, not stepped-down trials
    if not stored:
        return None
    probes = [judge(measurement_of(p, s.axis), limits, s.min_sustained_ratio, s.max_client_lag_ms) for p in stored]
    fails = [p.load for p in probes if not p.passed]
    ceiling = min(fails) if fails else float("inf")
    passes = [p.load for p in probes if p.passed and p.load < ceiling]
    cap = max(passes) if passes else None
    high = ceiling if fails else None
    bounded = cap is not None and high is not None
    converged = bounded and (high - cap) / cap <= s.tolerance
    if cap is None:
        note = f"SLA missed at the lowest load tried ({min(fails):.3g}): capacity is below it"
    elif high is None:
        note = f"SLA met at the highest load tried ({cap:.3g}): capacity is at least that"
    else:
        why = next(p.why for p in probes if p.load == high)
        note = f"capacity {cap:.3g}: passed there, failed at {high:.3g} ({why})"
        if not converged:
            note += f"; bracket wider than the {s.tolerance:.0%} tolerance (the search did not finish)"

    # a round of trials that missed was saved again as search points (same load and trial number): superseded
    superseded = {(load_of(p, s.axis), p.trial) for p in result.points if p.phase == "search" and p.trial is not None}
    trials = [p for p in result.points if p.phase == "trial"]
    live = [p for p in trials if (load_of(p, s.axis), p.trial) not in superseded]
    rounds = sorted({load_of(p, s.axis) for p in live if cap is not None and load_of(p, s.axis) <= cap * (1 + 1e-9)})
    trial_load = rounds[0] if rounds else None  # each step down ran lower: the lowest round is the last one
    kept = [p for p in live if trial_load is not None and load_of(p, s.axis) == trial_load]
    summary = CapacitySummary(
        axis=s.axis,
        capacity=cap,
        bracket_low=cap,
        bracket_high=high,
        bounded=bounded,
        converged=converged,
        tolerance=s.tolerance,
        note=f"re-judged from the stored probes: {note}",
        probes=[p.model_dump(mode="json") for p in probes],
        trial_load=trial_load if kept else None,
    )
    dropped = len(live) - len(kept)
    at = "the capacity" if trial_load == cap else f"{trial_load:.4g} (stepped down from the capacity)"
    summary.trials_note = (f"{len(kept)} trial(s) at {at}" if kept else "no trial at the capacity") + (
        f"; {dropped} trial(s) ran at a load the re-judged search no longer passes: not used" if dropped else ""
    )
    if len(trials) > len(live):
        summary.trials_note += f"; {len(trials) - len(live)} trial(s) missed the SLA or fell behind (stepped down)"
    for p in trials:
        if p not in kept:
            p.phase = "search"
    return summary


def rebuild_from_points(run: EngineRun) -> EngineResult:
    """A configuration rebuilt from the run folder alone (``playbook run --from-points``): nothing is launched.

    The stored engine result when there is one, else a ``partial`` row rebuilt from the stored points
    (with the KV capacity its engine log reported); the capacity is judged again from the stored probes
    with today's rules.
    """
    prev = load_engine_result(run.run_dir, run.spec.label)
    result = prev or EngineResult(
        label=run.spec.label,
        engine=run.spec.engine,
        status="partial",
        reason="no engine result was saved (the run was stopped mid-way): rebuilt from its stored points",
    )
    if result.kv_capacity_tokens is None:  # what the engine logged at start survives a cut run
        result.kv_capacity_tokens = run.adapter.kv_capacity_from_log(run.whole_log())
    folder = run.run_dir / "points" / label_slug(run.spec.label)
    found = (load_point(p) for p in sorted(folder.glob("*.json")))
    result.points = [p for p in found if p is not None]
    if not result.points and prev is None:
        result.status, result.reason = "skipped", "not measured in this run folder (re-rendered from points)"
    run.result = result
    if run.cfg.evidence.search.enabled:
        result.capacity = rejudged_capacity(result, run)
    elif result.capacity is None:  # a cut run: its fixed-load trials were saved one by one
        result.capacity = fixed_load_summary(result, run.cfg)
    return result


def fixed_load_record(cfg: PlaybookConfig) -> CapacitySummary:
    """The record of fixed-load trials (search disabled), before its trials: a load, not a capacity.

    A fixed load is the user's choice: ``capacity`` stays None and ``searched`` False.
    """
    load = float(fixed_concurrency(cfg))
    return CapacitySummary(
        axis="concurrency",
        searched=False,
        tolerance=cfg.evidence.search.tolerance,
        note=f"search disabled: trials at a fixed {load:g} streams (a load, not a capacity)",
    )


def fixed_load_summary(result: EngineResult, cfg: PlaybookConfig) -> CapacitySummary | None:
    """The record of fixed-load trials, from the trials stored at that load; None without any."""
    cap = fixed_load_record(cfg)
    cap.trial_load = float(fixed_concurrency(cfg))
    kept = [p for p in trial_points(result) if load_of(p, "concurrency") == cap.trial_load]
    if not kept:
        return None
    cap.trials_note = f"{len(kept)} trial(s) at {cap.trial_load:g} streams"
    return cap
