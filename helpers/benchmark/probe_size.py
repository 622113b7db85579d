"""Step 5's probe length: how many requests a capacity probe or trial sends, from the latency seen so far.

A probe offers arrivals for several request latencies, or whether the engine kept up cannot be read
(``measure.timing.keep_up``); the latency comes from the last passing probe, else the grid, grown with the
load above the one it was read at. ``helpers.benchmark.evidence`` sizes its probes here, ``trials`` its
trials and ``crosscheck_phase`` the engine's own client.
"""

from __future__ import annotations

import math

from helpers.benchmark.capacity import Probe
from helpers.benchmark.loads import load_axis
from helpers.benchmark.session import EngineSession
from helpers.run.records import Point
from helpers.run.time_limit import stop_unless_fits

LATENCY_SPANS = 4.0
"""A probe offers arrivals for at least this many request latencies, so that whether the engine kept up can be read.

The served share is the slope of finish times against send times between the first latency (the batch
filling) and the last (the batch draining, ``measure.timing.keep_up``). On a simulated 64-slot server
(``fakes.sim_engine.QueueEngine``, 40 seeds, 2026-12-04) a load 25% over capacity read as not sustained in
80% of probes of 3 latencies, 88% of 4 and 95% of 5; 20% under capacity, as sustained in 100%, 98% and 100%.
Under continuous batching (``BatchEngine``, 20 seeds, 2026-12-05, drain left out) probes of four latencies
passed 17-18 of 20 at 0.5-0.6 of capacity, 10 at 0.7 (the batch still filling: conservative there), none
at 1.1 or more. Four is the length a 70B probe can afford (about 100 s of arrivals for 25-s requests)."""


def arrival_seconds(configured: float, latency_s: float | None) -> float:
    """Seconds of arrivals a load needs: ``configured``, or ``LATENCY_SPANS`` request latencies when longer."""
    return max(configured, LATENCY_SPANS * (latency_s or 0.0))


def probe_requests(session: EngineSession, load: float, latency_s: float | None = None) -> int:
    """Requests of one probe or trial: about ``probe_seconds`` of arrivals, within the configured bounds.

    With the request latency seen so far (``latency_s``: the last passing probe's, else the grid's),
    the arrivals span at least ``LATENCY_SPANS`` latencies: a probe shorter than a few latencies ends
    before its first requests finish and shows no steady window (and so no served rate).
    """
    s = session.cfg.evidence.search
    seconds = arrival_seconds(s.probe_seconds, latency_s)
    want = load * seconds if load_axis(session.cfg) == "rate" else load * max(2, seconds / 5)
    if latency_s and load_axis(session.cfg) == "rate" and want > s.max_requests:
        session.say(
            f"{session.spec.label}: evidence.search.max_requests ({s.max_requests}) holds "
            f"{s.max_requests / load:,.1f} s of arrivals at {load:.4g} req/s, "
            f"{s.max_requests / load / latency_s:,.1f} request latencies of "
            f"{latency_s:,.1f} s: whether the engine kept up may not be readable (it needs {LATENCY_SPANS:g})"
        )
    return int(min(s.max_requests, max(s.min_requests, math.ceil(want))))


def latency_estimate(points: list[Point], load: float | None = None) -> float | None:
    """The median latency (s) of the last passing probe, else the slowest grid point's; × ``load`` ÷ its rate above it.

    ``load`` is a request rate (req/s; None on the concurrency axis: not scaled). Near the edge a request's
    latency grows with the load, as its batch does: from the grid's alone, SGLang's coarse probes on an H100
    (``h100-20261205-chat-8b-late``) were all too short for their 6.2-13.3-s requests.
    """
    passing = [p for p in points if p.phase == "search" and p.probe and Probe.model_validate(p.probe).passed]
    pool = [p for p in passing[-1:] or [p for p in points if p.phase == "sweep"] if p.e2e_ms_p50]
    if not pool:
        return None
    ref = max(pool, key=lambda p: p.e2e_ms_p50 or 0.0)
    at = ref.offered_rate if ref.phase == "search" and ref.offered_rate else ref.req_s
    latency = (ref.e2e_ms_p50 or 0.0) / 1000.0
    return latency * load / at if load and at and load > at else latency


def sized_requests(session: EngineSession, load: float) -> int:
    """``probe_requests`` at ``load`` from the latency seen so far (scaled with the load on the rate axis)."""
    rate = load if load_axis(session.cfg) == "rate" else None
    return probe_requests(session, load, latency_estimate(session.result.points, rate))


PROBE_OVERHEAD_S = 5.0
"""Seconds a probe takes beyond its arrivals and its drain: the client's workers starting and stopping."""


def expected_seconds(session: EngineSession, load: float, requests: int) -> float:
    """About how long a probe of ``requests`` at ``load`` takes: its arrivals, the drain of one latency, the client.

    On the concurrency axis the arrivals are ``requests`` ÷ (``load`` ÷ latency); without a latency seen yet, the
    arrivals alone (rate axis) or nothing but the overhead (concurrency axis).
    """
    rate = load if load_axis(session.cfg) == "rate" else None
    latency = latency_estimate(session.result.points, rate) or 0.0
    arrivals = requests / load if rate else requests * latency / max(load, 1e-9)
    return arrivals + latency + PROBE_OVERHEAD_S


def ensure_time(session: EngineSession, load: float, requests: int, what: str) -> None:
    """Under a time limit, stop before a capacity probe that would not end before the deadline (resumable).

    The engine configuration is already started: this ends it between two measurements, each stored, so that a
    fixed-length GPU slot ends with the run folder complete rather than killed mid-probe (the resume spends a cold
    start either way, not the probe). Raises ``TimeLimitReached``, recorded like a stop before a configuration.
    """

    def need() -> tuple[float, str]:
        return expected_seconds(session, load, requests), f"{what}, {requests:,} requests at {load:.4g}"

    stop_unless_fits(session.run_dir, session.spec.label, need, session.say)
