"""Stored probes and grid points read again as the measurements they were: judged with today's rules, as readings.

The capacity estimate (``helpers.benchmark.boundary``), a run re-rendered from its points, and the
measurement that stands for a configuration (``helpers.benchmark.sla``) all read stored points through
here: ``measurement_of`` rebuilds what a probe measured (with the overload tests that hold on every
engine, ``sustained_view``), ``point_readings`` gives the estimator every valid probe of a configuration,
and ``grid_readings`` the grid's closed-loop points on the concurrency axis.
"""

from __future__ import annotations

from helpers.benchmark.boundary import Reading, readings_of
from helpers.benchmark.probe import Measurement, Probe, judge
from helpers.core.config import PlaybookConfig
from helpers.measure.timing import sustained_fields
from helpers.run.records import EngineResult, Point

EVIDENCE_PHASES = ("search", "trial")
"""Phases whose points are probes of the capacity (a trial of a run made before edge rounds was one more probe)."""


def load_of(point: Point, axis: str) -> float:
    """The load a stored probe or trial ran at: its offered rate (rate axis), else its concurrency."""
    return point.offered_rate if axis == "rate" and point.offered_rate else float(point.concurrency)


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

    The server's in-flight count (running + waiting requests, ``/metrics``) that reached ``DRAIN_SHARE`` of
    the requests sent marks the load as not sustained (queue grew), unless a closed loop held no more than its
    streams; a served rate the client computed above ``PLAUSIBLE_SERVED`` × the sent rate is dropped (not
    measured).
    """
    data = m.model_dump()
    inflight = (point.server.running_max or 0) + (point.server.queue_max or 0)
    # a closed loop holds its streams in flight by design (a grid point of 4 requests at 4 streams sends them all
    # at once): only in-flight beyond the streams is a queue
    bounded = m.axis == "concurrency" and point.concurrency > 0 and inflight <= point.concurrency
    if sent and inflight >= DRAIN_SHARE * sent and not bounded:
        data["queue_growing"] = True
        data["queue_growth"] = None
    if m.offered_rate and m.achieved_rate and m.achieved_rate > PLAUSIBLE_SERVED * m.offered_rate:
        data["offered_rate"] = data["achieved_rate"] = None
    return Measurement.model_validate(data)


def measurement_of(point: Point, axis: str) -> Measurement:
    """The measurement a stored probe or trial stands for (to judge it again, e.g. with a corrected rule).

    A point that kept its judged probe is re-judged from everything the live judgement saw (sent and
    served rates, steady window, queue trend, client lag); an older one from its figures alone. A point
    that kept its requests' send and finish times has whether the engine kept up read from them again
    (``measure.timing.sustained_fields``), with today's rules.
    """
    attempted = point.requests + point.errors
    if point.probe:
        fields = Measurement.model_fields
        m = Measurement.model_validate({k: v for k, v in point.probe.items() if k in fields})
        if point.request_times:
            m = m.model_copy(update=sustained_fields(point.request_times))
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


def grid_readings(result: EngineResult, cfg: PlaybookConfig) -> list[Reading]:
    """The grid's closed-loop points as readings of the concurrency axis (none on the rate axis: not its loads)."""
    s = cfg.evidence.search
    if s.axis != "concurrency":
        return []
    probes = []
    for p in result.points:
        if p.phase == "sweep" and p.requests > 0:
            probe = judge(measurement_of(p, "concurrency"), cfg.sla, s.min_sustained_ratio, s.max_client_lag_ms)
            probes.append(probe.model_copy(update={"stream": f"sweep-c{p.concurrency}"}))
    return readings_of(probes)


def kept_up(point: Point) -> bool:
    """Whether one trial or probe kept up with its load (sustained, failed requests within their share).

    Read from its stored judgement; a point without one (a grid point) counts as having kept up.
    """
    if not point.probe:
        return True
    probe = Probe.model_validate(point.probe)
    return probe.sustained and probe.errors_ok


def rejudged(point: Point, cfg: PlaybookConfig) -> Probe:
    """A stored probe or trial judged again from its figures with today's rules, keeping its stream and mark.

    Its stream is the one it ran on (a trial of an older run: ``trial-<k>``); ``superseded`` is kept.
    """
    s = cfg.evidence.search
    old = point.probe or {}
    probe = judge(measurement_of(point, s.axis), cfg.sla, s.min_sustained_ratio, s.max_client_lag_ms)
    stream = old.get("stream") or (f"trial-{point.trial}" if point.phase == "trial" else None)
    return probe.model_copy(update={"stream": stream, "superseded": bool(old.get("superseded"))})


def stored_probe(point: Point, cfg: PlaybookConfig) -> Probe:
    """A stored probe as judged when it ran (with its margins), or judged again from its figures when it has none."""
    if point.probe and "margins" in point.probe:
        return Probe.model_validate(point.probe)
    return rejudged(point, cfg)


def point_readings(result: EngineResult, cfg: PlaybookConfig) -> list[Reading]:
    """Every valid reading of a configuration's capacity: its stored probes, and its grid on the concurrency axis."""
    probes = [stored_probe(p, cfg) for p in result.points if p.phase in EVIDENCE_PHASES and p.requests + p.errors > 0]
    return readings_of(probes) + grid_readings(result, cfg)
