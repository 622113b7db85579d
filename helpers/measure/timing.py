"""Per-request timing of one guidellm load: the rate really sent, the rate served, the client's send lag.

``request_timing`` reads guidellm's per-request dump (send and finish times of every request) into the
``LoadResult`` fields the capacity search judges: the sent and served rates over the steady window
(first finish to last send; the sent rate over the whole sending span where there is no such window),
whether the engine kept up (``keep_up``: finish times against send times), the p95 dispatch delay, and
the raw times.

``keep_up`` holds for requests of any length, from one second to a minute. An engine that keeps up
finishes each request a latency after it was sent, whatever the latency: finish times rise one second
per second of send time. An engine that falls behind finishes at its own rate, slower than requests
arrive, so finish times rise faster than send times. The slope of finish time against send time
therefore estimates offered ÷ served, and its inverse is the share of the offered rate that was served.
It is fitted by Theil–Sen (``scipy.stats.theilslopes``, robust to a few slow requests, with its 95%
interval) over the requests sent while the batch was steady: not in the first median latency (the
batch still filling) nor in the last (the drain). Under continuous batching a request's latency
depends on the batch it shares, and the requests sent in the last latency share a batch that empties
once arrivals stop: they finish early, and with them in the fit an engine that kept up read as serving
109-458% of its offer (H100, 2026-12-05, vLLM and SGLang at 25-39 req/s of 4-8 s requests). The test
therefore needs a probe of about three latencies of arrivals or more; the search sizes its probes so
(``benchmark.probe_size.LATENCY_SPANS``), and a shorter one is not read (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as st

MAX_PLAUSIBLE_DELAY_S = 600.0
"""A dispatch delay longer than this is a request whose target time guidellm left unset, not a late send."""


def _span_rate(times: list[float]) -> float | None:
    """Events per second over their own span: (n - 1) intervals over last - first; None below two events."""
    if len(times) < 2 or max(times) <= min(times):
        return None
    return (len(times) - 1) / (max(times) - min(times))


STEADY_MIN_COMPLETIONS = 10
STEADY_MIN_SHARE = 0.25
"""A steady window shorter than this share of the sending span (or with fewer completions) gives no served rate."""


def _steady_rates(rows: list[tuple[float, float | None, bool]]) -> tuple[float | None, float | None, float | None]:
    """Completions and sends per second between the first finish and the last send, and that window's length (s).

    While load is offered and the engine keeps up, completions there arrive at the offered rate; past
    its capacity they arrive at the engine's own rate. Counting over the completions' own span instead
    reads an overloaded engine that finishes a whole batch at once as serving several times the offer.
    The sends are counted over the same window, so that a client whose first sends left late (its
    workers starting) does not read as offering more than it did while the engine was being judged.
    None (rates) when the window is under ``STEADY_MIN_SHARE`` of the sending span or holds fewer than
    ``STEADY_MIN_COMPLETIONS`` completions.
    """
    sends = [row[0] for row in rows]
    done = sorted(row[1] for row in rows if row[2] and row[1] is not None)
    if len(sends) < 2:
        return None, None, None
    lo = done[0] if done else max(sends)
    hi = max(sends)
    window = hi - lo
    inside = sum(1 for t in done if t <= hi)
    if window < STEADY_MIN_SHARE * (hi - min(sends)) or inside < STEADY_MIN_COMPLETIONS or window <= 0:
        return None, None, window
    sent = sum(1 for t in sends if lo <= t <= hi)
    return (inside - 1) / window, (sent - 1) / window, window


KEEP_UP_MIN_REQUESTS = 8
"""Finished requests after the fill needed to read whether the engine kept up."""


@dataclass(frozen=True)
class KeepUp:
    """The share of the offered rate an engine served: the inverse of finish time's slope against send time."""

    ratio: float  # served ÷ offered (1.0: kept up)
    low: float  # 95% interval of the ratio
    high: float
    requests: int  # finished requests the slope was fitted on
    fill_s: float  # sends before this (s after the first) were left out: the batch was filling
    drain_s: float = 0.0  # sends in this many seconds before the last were left out: the batch was draining


STEADY_MIN_LATENCIES = 0.5
"""The sends fitted (after the fill, before the drain) must span at least this many latencies."""


def _autocorrelation_factor(residuals: np.ndarray) -> float:
    """How much wider a slope's interval is when its residuals, in send order, are correlated (AR(1) model).

    Requests that share a batch share its speed: a burst of arrivals slows every request then in flight,
    so neighbouring residuals move together and the interval Theil–Sen gives (which assumes independent
    residuals) is too narrow, by ``sqrt((1 + ρ) / (1 - ρ))`` for a lag-one correlation ρ.
    """
    if len(residuals) < 3 or float(np.std(residuals)) == 0.0:
        return 1.0
    rho = float(np.corrcoef(residuals[:-1], residuals[1:])[0, 1])
    rho = min(max(rho, 0.0), 0.99) if math.isfinite(rho) else 0.0
    return math.sqrt((1 + rho) / (1 - rho))


def keep_up(starts: list[float], ends: list[float | None], confidence: float = 0.95) -> KeepUp | None:
    """Served ÷ offered from send and finish times (module docstring); None when the probe cannot tell.

    None with too few finished requests, or when the sends between the fill and the drain (one median
    latency each) span less than ``STEADY_MIN_LATENCIES`` latencies: a probe shorter than about two and a
    half latencies. A request still in flight at the end (``None`` finish) counts as finishing at the
    last finish seen: an optimistic bound, so a probe cut with requests in flight is judged no worse than
    it was.
    """
    pairs = sorted((float(s), e) for s, e in zip(starts, ends, strict=True))
    done = [(s, e) for s, e in pairs if e is not None]
    if len(done) < KEEP_UP_MIN_REQUESTS:
        return None
    last = max(e for _, e in done)
    t0, t1 = pairs[0][0], pairs[-1][0]
    latency = float(np.median([e - s for s, e in done]))
    lo, hi = t0 + latency, t1 - latency
    if hi - lo < STEADY_MIN_LATENCIES * latency:
        return None
    kept = [(s, e if e is not None else last) for s, e in pairs if lo <= s <= hi]
    if len(kept) < KEEP_UP_MIN_REQUESTS or np.ptp([s for s, _ in kept]) <= 0:
        return None
    x = np.array([s for s, _ in kept])
    y = np.array([e for _, e in kept])
    slope, intercept, slope_lo, slope_hi = st.theilslopes(y, x, alpha=confidence)
    if slope <= 0:
        return None
    widen = _autocorrelation_factor(y - (intercept + slope * x))
    slope_lo, slope_hi = slope - widen * (slope - slope_lo), slope + widen * (slope_hi - slope)
    ratio = 1.0 / float(slope)
    low = 1.0 / float(slope_hi) if slope_hi > 0 else 0.0
    high = 1.0 / float(slope_lo) if slope_lo > 0 else float("inf")
    return KeepUp(ratio=ratio, low=low, high=high, requests=len(kept), fill_s=latency, drain_s=latency)


def sending_and_latency(starts: list[float], ends: list[float | None]) -> tuple[float | None, float | None]:
    """The sending span (first to last send, s) and the median latency of the finished requests (s)."""
    lat = [e - s for s, e in zip(starts, ends, strict=False) if e is not None]
    span = max(starts) - min(starts) if len(starts) > 1 else None
    return span, (float(np.median(lat)) if lat else None)


def request_times(starts: list[float], ends: list[float | None]) -> list[tuple[float, float | None]]:
    """Send and finish times, in send order, to the millisecond: what a stored point keeps to be judged again."""
    return [
        (round(float(st_), 3), None if e is None else round(float(e), 3)) for st_, e in zip(starts, ends, strict=True)
    ]


def sustained_fields(times: list[tuple[float, float | None]]) -> dict[str, float | None]:
    """The ``probe.Measurement`` fields that say whether the engine kept up, read from stored send/finish times."""
    starts, ends = [t[0] for t in times], [t[1] for t in times]
    kept = keep_up(starts, ends) if times else None
    span, latency = sending_and_latency(starts, ends) if times else (None, None)
    return {
        "served_ratio": kept.ratio if kept else None,
        "served_ratio_low": kept.low if kept else None,
        "served_ratio_high": kept.high if kept else None,
        "send_span_s": span,
        "latency_p50_s": latency,
    }


def request_timing(requests: dict[str, Any]) -> dict[str, Any]:
    """Send/finish times of every request of a benchmark dump, and the rates and client lag they give."""
    rows = []  # (start, end or None, succeeded)
    delays = []
    for status in ("successful", "errored", "incomplete"):
        for r in requests.get(status) or []:
            start = r.get("request_start_time")
            if start is None:
                continue
            end = r.get("request_end_time") if status != "incomplete" else None
            rows.append((float(start), None if end is None else float(end), status == "successful"))
            delay = r.get("request_dispatch_delay")
            if delay is not None and 0 <= float(delay) < MAX_PLAUSIBLE_DELAY_S:  # an unset target time reads as epoch
                delays.append(1000.0 * float(delay))
    rows.sort(key=lambda row: row[0])
    t0 = rows[0][0] if rows else 0.0
    served, sent, window = _steady_rates(rows)
    starts = [row[0] - t0 for row in rows]
    ends = [None if row[1] is None else row[1] - t0 for row in rows]
    kept = keep_up(starts, ends)
    return {
        "served_ratio": kept.ratio if kept else None,
        "served_ratio_low": kept.low if kept else None,
        "served_ratio_high": kept.high if kept else None,
        "sent_rate": sent if sent is not None else _span_rate([row[0] for row in rows]),
        "completed_rate": served,
        "steady_window_s": window,
        "dispatch_delay_p95_ms": float(np.percentile(delays, 95)) if delays else None,
        "request_starts_s": starts,
        "request_ends_s": ends,
    }
