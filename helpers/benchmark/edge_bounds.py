"""An end of a capacity's interval from the margins' monotone order, where the edge fit leaves it unbounded.

The edge fit (``helpers.benchmark.boundary``) reads only the probes within ``WINDOW_RATIO`` of the edge. When
the margin is nearly flat there (a CPU engine's TTFT p95 hovered within 10% of its limit from 12 to 16
streams), the fit's 95% set for the crossing runs out of the window on one side, although a probe further
out passed (or failed) by far more than the probes' noise: prefix caching on, TTFT p95 1.1 s at 8 streams
against a 2-s limit, while the window's probes scattered by 3%.

The margin rises with load. A probe whose margin is below 0 by more than Student t times the noise of one
probe met the SLA at its load; if no probe failed at or below that load, the capacity is above it. The
highest such load is a lower bound, the lowest failure past the noise with no pass at or above it an upper
bound. One probe's noise is the edge fit's residual variance, scaled by the requests behind each probe (a
percentile of fewer requests scatters more); t is taken at 95% over all the probes tried (Bonferroni), as
any of them could have been the one picked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats as st


def monotone_bounds(
    loads: Sequence[float],
    margins: Sequence[float],
    requests: Sequence[int],
    s2: float,
    dof: int,
    reference_requests: float,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """(log low, log high): the loads the probes' monotone order bounds the capacity by (module docstring).

    ``s2`` and ``dof``: the edge fit's residual variance and degrees of freedom, from probes of
    ``reference_requests`` requests on average. None for an end no probe bounds.
    """
    if dof < 1 or s2 <= 0 or not loads:
        return None, None
    t = float(st.t.ppf(1 - (1 - confidence) / 2 / len(loads), df=dof))

    def noise(n: int) -> float:
        return t * math.sqrt(s2 * (reference_requests / n if n > 0 and reference_requests > 0 else 1.0))

    z = [math.log(x) for x in loads]
    first_fail = min((zi for zi, m in zip(z, margins, strict=True) if m > 0), default=math.inf)
    last_pass = max((zi for zi, m in zip(z, margins, strict=True) if m <= 0), default=-math.inf)
    lows = [zi for zi, m, n in zip(z, margins, requests, strict=True) if m < -noise(n) and zi < first_fail]
    highs = [zi for zi, m, n in zip(z, margins, requests, strict=True) if m > noise(n) and zi > last_pass]
    return (max(lows) if lows else None), (min(highs) if highs else None)
