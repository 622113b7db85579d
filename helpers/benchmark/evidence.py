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
from collections.abc import Awaitable

from helpers.benchmark.boundary import Reading
from helpers.benchmark.capacity import Measurement, Probe, judge, measurement_from_load
from helpers.benchmark.edge_search import Ask, EdgeSearch, edge_rounds_done, is_coarse_stream
from helpers.benchmark.judged import grid_readings, load_of, rejudged, sustained_view
from helpers.benchmark.loads import fixed_concurrency, load_axis
from helpers.benchmark.probe import too_long_to_read
from helpers.benchmark.probe_size import LATENCY_SPANS, ensure_time, probe_requests, sized_requests
from helpers.benchmark.session import CUT, EngineSession
from helpers.benchmark.sla import meets_sla, trial_points
from helpers.benchmark.structured_phase import evidence_workload, structured_probe
from helpers.core.config import PlaybookConfig
from helpers.core.config_workload import CapacitySearch
from helpers.core.text import label_slug
from helpers.environment.prediction_check import predicted_capacity
from helpers.measure.interference import wait_quiet
from helpers.measure.loadgen import LoadResult
from helpers.run.progress import cut_starts, started_times
from helpers.run.records import CapacitySummary, EngineResult, Point, load_engine_result, load_point


def start_load(result: EngineResult, session: EngineSession) -> float:
    """The search's first load: configured, else where the grid puts the SLA edge.

    Rate axis: the rate of the busiest grid point within the SLA. That closed-loop point served its
    rate within the SLA (the lowest grid point when none did), so the search starts near the edge
    rather than doubling up from one request at a time. Concurrency axis: the grid's own levels are
    loads of this axis, so where the grid already brackets the edge (a level within the SLA, the next
    one past it) the search starts at the level where TTFT p95 reaches the limit on the straight line
    between the two (``sla_crossing``); else at the busiest level within the SLA.
    """
    s = session.cfg.evidence.search
    if s.start is not None:
        return s.start
    sweep = sorted((p for p in result.points if p.phase == "sweep" and p.requests > 0), key=lambda p: p.concurrency)
    within = [p for p in sweep if meets_sla(p, session.cfg.sla)] or sweep[:1]
    if s.axis == "concurrency":
        if not within:
            return 1.0
        edge = within[-1]
        past = next((p for p in sweep if p.concurrency > edge.concurrency and not meets_sla(p, session.cfg.sla)), None)
        crossing = sla_crossing(edge, past, session.cfg.sla.ttft_p95_ms) if past is not None else None
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


def structured_load(session: EngineSession, load: float) -> Awaitable[LoadResult] | None:
    """The evidence load at ``load`` as the workload's structured replay; None: plain prompts (``measure_load``).

    A workload whose value lies in its structure is decided on it (``structured_phase.evidence_workload``).
    """
    if evidence_workload(session.cfg) is None:
        return None
    return structured_probe(session, load, load_axis(session.cfg), session.cfg.workload.max_seconds_per_point)


def resets_cache(session: EngineSession) -> bool:
    """Whether trials start from an empty prefix cache (config, else: unless prompts share a prefix)."""
    t, wl = session.cfg.evidence.trials, session.cfg.workload
    if t.reset_prefix_cache is not None:
        return t.reset_prefix_cache
    return wl.shared_prefix_tokens == 0 and wl.source.kind == "synthetic"


def _edge_search(session: EngineSession, start: float, reuse: dict[str, Probe], extra: list[Reading]) -> EdgeSearch:
    """The search's state machine with the config's settings."""
    s = session.cfg.evidence.search
    return EdgeSearch(
        start,
        session.cfg.sla,
        axis=s.axis,
        growth=s.growth,
        tolerance=s.tolerance,
        max_probes=s.max_probes,
        min_sustained_ratio=s.min_sustained_ratio,
        max_client_lag_ms=s.max_client_lag_ms,
        retries=s.retries,
        edge_rounds_min=s.edge_rounds_min,
        edge_rounds_max=s.edge_rounds_max,
        edge_step=s.edge_step,
        target_rel=s.target_rel_ci,
        reuse=reuse,
        extra=extra,
    )


def summary_of(machine: EdgeSearch, cfg: PlaybookConfig, note_prefix: str = "") -> CapacitySummary:
    """The record of a finished search: the estimate from every valid probe, and every probe."""
    est = machine.estimate()
    return CapacitySummary(
        axis=machine.axis,
        capacity=est.value if est.status == "estimated" else (est.low if est.status == "at_least" else None),
        bracket_low=est.bracket_low,
        bracket_high=est.bracket_high,
        bounded=est.status == "estimated",
        converged=est.conclusive,
        tolerance=cfg.evidence.search.tolerance,
        note=note_prefix + machine.note(),
        probes=[p.model_dump(mode="json") for p in machine.probes],
        estimate=est,
    )


def search_can_go_on(capacity: CapacitySummary | None, search_cfg: CapacitySearch) -> bool:
    """Whether a search, resumed under ``search_cfg``, would probe further.

    True when it found no failing load (or no passing one) and spent fewer coarse probes (``p0``, ``p1``, …)
    than ``search_cfg.max_probes`` now allows: the report's advice, "raise evidence.search.max_probes", then
    works on the same run id. True too when it has an estimate but fewer whole edge rounds than it runs:
    fewer than ``edge_rounds_min``, or fewer than ``edge_rounds_max`` while the interval is wider than asked (a
    run cut during its edge rounds, re-rendered since from its points, or ``edge_rounds_max`` raised).
    """
    est = capacity.estimate if capacity is not None and capacity.searched else None
    if est is None:
        return False
    streams = [p.get("stream") for p in capacity.probes]
    if est.status in ("at_least", "below"):
        return len({s for s in streams if is_coarse_stream(s)}) < search_cfg.max_probes
    rounds = edge_rounds_done(streams)
    if est.status != "estimated" or rounds >= search_cfg.edge_rounds_max:
        return False
    return rounds < search_cfg.edge_rounds_min or not est.conclusive


def start_of(result: EngineResult, session: EngineSession) -> tuple[float, str]:
    """Where the search starts, and why: configured, else step 4's prediction, else the grid (``start_load``)."""
    s = session.cfg.evidence.search
    if s.start is not None:
        return s.start, "configured"
    if s.start_from == "prediction":
        predicted = predicted_capacity(session.run_dir, result.label, s.axis)
        if predicted:
            return (float(max(1, round(predicted))) if s.axis == "concurrency" else predicted), "step 4's prediction"
    return start_load(result, session), "the grid"


async def search(session: EngineSession) -> CapacitySummary | None:
    """The capacity search on the running engine; None if the engine died (the result row says why).

    Each ask of the state machine (``edge_search.EdgeSearch``) is measured on its stream. A probe during
    which other programs loaded the machine (``measure.interference``) is kept, marked superseded, and
    measured once more on the same stream once the machine is quiet again (``interference.wait_quiet``, at
    most 90 s; the prefix cache reset first where the engine allows it).
    """
    result = session.result
    stored = [p for p in session.stored_points("search") if p.probe and p.probe.get("stream")]
    stored_at = {p.probe["stream"]: p for p in stored if not p.probe.get("superseded")}
    reuse = {stream: Probe.model_validate(p.probe) for stream, p in stored_at.items()}
    start, why = start_of(result, session)
    if "p0" in reuse:  # resumed: where the earlier attempt started, so that its probes are asked (and kept) again
        earlier = "where the earlier attempt in this run folder started"
        same = math.isclose(start, reuse["p0"].load, rel_tol=1e-9)  # then its reason is the same too: say it
        start, why = reuse["p0"].load, f"{why}: {earlier}" if same else earlier
    machine = _edge_search(session, start, reuse, grid_readings(result, session.cfg))
    set_aside = [p for p in stored if p.probe.get("superseded")]
    result.points += set_aside
    kept_aside = [Probe.model_validate(p.probe) for p in set_aside]
    label = result.label
    session.say(f"{label}: capacity search from {start:.4g} ({why})")
    for number in itertools.count():
        if (ask := machine.next()) is None:
            break
        probe = machine.take_reused(ask)
        if probe is not None:  # resumed: its point is this result's again (and sizes the probes that follow)
            session.steps.kept(label, "probe", number)
            result.points.append(stored_at[ask.stream])
            machine.record(probe)
        else:
            session.steps.begin(label, "probe", number, f"capacity probe {number + 1} ({ask.purpose})")
            got = await _measure_ask(session, ask, ask.stream)
            if got is None:
                return None
            if interference := got[1].interference:  # measured while something else loaded the machine: once more
                kept_aside.append(_set_aside(session, got, f"{ask.stream}-interfered"))
                waited, still = await wait_quiet(
                    session.engine_pid, session.cfg.evidence.max_other_cpu_cores, need_cores=session.load_cores
                )
                session.say(
                    f"{label}: probe {ask.stream} measured under interference ({interference}); "
                    + (f"measured again after {waited:.0f} s, the machine quiet" if still is None
                       else f"measured again after waiting {waited:.0f} s, still loaded ({still})")
                )  # fmt: skip
                session.reset_prefix_cache()
                got = await _measure_ask(session, ask, ask.stream)
                if got is None:
                    return None
            longer = _longer_for_itself(session, ask, got[1])
            if longer is not None:  # too short for its own requests' latency: once more, long enough to read
                aside = _set_aside(session, got, f"{ask.stream}-short")
                kept_aside.append(aside)
                session.say(
                    f"{label}: probe {ask.stream} at {ask.load:.4g} was too short to read ({aside.why}); "
                    f"measured again with {longer:,} requests ({LATENCY_SPANS:g} of its own latencies)"
                )
                got = await _measure_ask(session, ask, ask.stream, requests=longer)
                if got is None:
                    return None
            point, m = got
            probe = machine.record(m)
            _save_probe(session, point, probe, ask.stream)
            session.steps.end(label, "probe", number)
        verdict = "pass" if probe.passed else "fail"
        session.say(f"{label}: capacity probe {ask.load:.4g} ({ask.stream}) → {verdict}: {probe.why}")
    session.steps.drop(label, "probe")  # the estimate is tight enough: the probes left are not needed
    summary = summary_of(machine, session.cfg, note_prefix=f"started from {start:.4g} ({why}); ")
    summary.probes += [p.model_dump(mode="json") for p in kept_aside]
    return summary


def _set_aside(session: EngineSession, got: tuple[Point, Measurement], tag: str) -> Probe:
    """Judge a measurement that will be made again, mark it superseded and save its point under ``tag``."""
    point, m = got
    aside = judge(m, session.cfg.sla, *_judging(session)).model_copy(update={"superseded": True})
    _save_probe(session, point, aside, tag)
    return aside


def _judging(session: EngineSession) -> tuple[float, float | None]:
    s = session.cfg.evidence.search
    return s.min_sustained_ratio, s.max_client_lag_ms


def _longer_for_itself(session: EngineSession, ask: Ask, m: Measurement) -> int | None:
    """Requests for a longer probe when ``m`` could not be read because it was short for its own latency, else None.

    A probe is sized from the latency of the last load that passed; its own requests may take longer
    (they do near the edge). Unreadable (``probe.too_long_to_read``) and under ``LATENCY_SPANS`` of its
    own latency, it says nothing yet: it is measured once more with ``LATENCY_SPANS`` of its own latency,
    where ``max_requests`` holds at least a quarter more requests than it had (plain prompts only: a
    structured replay sets its own length). Read again at that length, an unreadable probe fell behind:
    its latency grew with the probe.
    """
    if load_axis(session.cfg) != "rate" or m.served_ratio is not None or not too_long_to_read(m):
        return None
    if evidence_workload(session.cfg) is not None:  # a structured replay sets its own length: no longer probe
        return None
    own = m.latency_p50_s or 0.0
    if m.send_span_s is None or m.send_span_s >= LATENCY_SPANS * own:
        return None
    want = probe_requests(session, ask.load, own)
    return want if want >= 1.25 * max(1, m.requests) else None


async def _measure_ask(
    session: EngineSession, ask: Ask, stream: str, requests: int | None = None
) -> tuple[Point, Measurement] | None:
    """Measure one ask on ``stream``: its point and the measurement the search judges; None if the engine died.

    ``requests``: how many (else sized from the latency of the last passing probe, ``probe_requests``).
    """
    axis = session.cfg.evidence.search.axis
    n = requests or sized_requests(session, ask.load)
    ensure_time(session, ask.load, n, f"the capacity probe on stream {stream}")
    got = await session.measure_load(
        phase="search", load=ask.load, tag=stream, requests=n, stream=stream, job=structured_load(session, ask.load)
    )
    if got is None:
        return None
    point, res, queue = got
    m = measurement_from_load(res, load=ask.load, axis=axis, queue_samples=queue or None)
    m = sustained_view(m, point, res.requests + res.errors + res.incomplete)
    return point, m.model_copy(update={"stream": stream, "interference": res.interference})


def _save_probe(session: EngineSession, point: Point, probe: Probe, tag: str) -> None:
    """Keep the judged probe on its point and write the point now."""
    point.probe, point.verdict = probe.model_dump(mode="json"), probe.why
    session.save(point, tag=tag)
    session.result.points.append(point)


def rejudged_capacity(result: EngineResult, session: EngineSession) -> CapacitySummary | None:
    """The capacity from a configuration's stored probes, judged again with today's rules (no engine needed).

    Used when a run is re-rendered from its points (``playbook run --from-points``). Every stored probe
    counts, and so do the trials of runs made before the edge rounds existed (each was a probe at its load);
    probes marked superseded (measured again under interference) stay out.
    """
    s = session.cfg.evidence.search
    stored = [p for p in result.points if p.phase in ("search", "trial")]
    if not stored:
        return None
    probes = [rejudged(p, session.cfg) for p in stored]
    machine = _edge_search(session, probes[0].load, {}, grid_readings(result, session.cfg))
    machine.probes = probes
    summary = summary_of(machine, session.cfg, note_prefix="re-judged from the stored probes: ")
    summary.note = f"re-judged from the stored probes: capacity {summary.estimate.text(_unit(s.axis))}"
    for p in stored:
        p.phase = "search"  # a trial of an older run is one more probe of the estimate
    return summary


def _unit(axis: str) -> str:
    return "streams" if axis == "concurrency" else "req/s"


def rebuild_from_points(session: EngineSession) -> EngineResult:
    """A configuration rebuilt from the run folder alone (``playbook run --from-points``): nothing is launched.

    The stored engine result when there is one (a run cut after its engine started left one, ``partial``,
    with the start's version, times and KV capacity), else a ``partial`` row rebuilt from the stored points
    (the KV capacity from its engine log, the first start's times from the progress file, for archives made
    before that record was saved); a stored ``skipped`` result gives way to points a later attempt measured.
    The capacity is judged again from the stored probes with today's rules.
    """
    run_dir, label = session.run_dir, session.spec.label
    prev = load_engine_result(run_dir, label)
    folder = run_dir / "points" / label_slug(label)
    found = (load_point(p) for p in sorted(folder.glob("*.json")))
    points = [p for p in found if p is not None]
    if prev is None or (prev.status == "skipped" and points):  # skipped in one attempt, measured in a later one
        prev = None
        result = EngineResult(label=label, engine=session.spec.engine, status="partial", reason=CUT)
    else:
        result = prev
    # what the engine logged at start, and its first start's times, survive a cut run
    if result.kv_capacity_tokens is None:
        result.kv_capacity_tokens = session.logged_kv_tokens()
    if result.cold_start_s is None and (starts := started_times(run_dir, label)):
        result.ready_s, result.cold_start_s = starts[0]
    result.points = points
    if not result.points and (prev is None or prev.status == "skipped"):
        result.status, result.reason = "skipped", "not measured in this run folder (re-rendered from points)"
        cut = cut_starts(session.run_dir, session.spec.label)
        if cut:
            last = f"; last progress: {cut[-1]}" if cut[-1] else ""
            result.reason = (
                f"not measured: its start was begun {len(cut)} time(s) and the run was stopped each time before "
                f"it served{last}"
            )
    session.result = result
    if session.cfg.evidence.search.enabled:
        result.capacity = rejudged_capacity(result, session)
    elif result.capacity is None:  # a cut run: its fixed-load trials were saved one by one
        result.capacity = fixed_load_summary(result, session.cfg)
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
