"""Per-request timing of one guidellm load: the rate really sent, the rate served, the client's send lag.

``request_timing`` reads guidellm's per-request dump (send and finish times of every request) into the
``LoadResult`` fields the capacity search judges: the sent and served rates over the steady window
(first finish to last send; the sent rate over the whole sending span where there is no such window),
the p95 dispatch delay, and the raw times.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    return {
        "sent_rate": sent if sent is not None else _span_rate([row[0] for row in rows]),
        "completed_rate": served,
        "steady_window_s": window,
        "dispatch_delay_p95_ms": float(np.percentile(delays, 95)) if delays else None,
        "request_starts_s": [row[0] - t0 for row in rows],
        "request_ends_s": [None if row[1] is None else row[1] - t0 for row in rows],
    }
