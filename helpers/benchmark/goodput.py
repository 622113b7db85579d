"""Goodput over the same window and denominator as throughput, so that it can never exceed it.

A point's request throughput (``req_s``) is the load generator's: completed requests over its own
measurement window. Dividing the requests that met the SLA by a different duration (the wall time
of the whole point, say) gives a goodput that can be larger than ``req_s``. Here goodput is the
share of the point's requests that met the TTFT limit times ``req_s``: the same window, the same
denominator.
"""

from __future__ import annotations

from collections.abc import Iterable


def goodput_req_s(
    ttft_values_ms: Iterable[float | None], sla_ms: float, requests: int, req_s: float | None
) -> float | None:
    """Requests/s that met ``sla_ms`` (TTFT), on ``req_s``'s window; None without requests or throughput.

    ``ttft_values_ms`` are the TTFTs of the point's ``requests`` completed requests (a missing value
    counts as not meeting the limit); the result is at most ``req_s``.
    """
    if not requests or req_s is None or req_s <= 0:
        return None
    good = sum(1 for t in ttft_values_ms if t is not None and t <= sla_ms)
    return req_s * (min(good, requests) / requests)  # a share ≤ 1 first: the product cannot round above req_s
