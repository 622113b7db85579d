"""What one load of the capacity search measured, and the judgement of it: within the SLA, sustained, delivered.

A load *passes* when its TTFT p95 (and ITL p95, when limited) is within the SLA, errors stay under their
share, and the engine keeps up: over the probe's steady window (from its first finished request to its
last sent one) it served at least ``min_sustained_ratio`` of the rate it was offered, and neither the
server's waiting queue nor the client's requests in flight grew. A probe with no steady window (its
first requests finished after the last was sent) shows no served rate: the engine fell behind, or the
probe was too short for the requests' latency; either way the load is not shown to be sustained.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import SLA

Axis = Literal["rate", "concurrency"]


class _Record(BaseModel):
    """Base of the capacity records: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")


class SlaLimits(_Record):
    """What a load must meet to pass (the config's ``SLA`` has the same fields and is accepted as well)."""

    ttft_p95_ms: float = Field(gt=0, description="Time to first token, 95th percentile, at most (ms).")
    itl_p95_ms: float | None = Field(default=None, gt=0, description="Inter-token latency p95 at most (ms).")
    max_error_share: float = Field(default=0.01, ge=0, le=1, description="Errored / sent requests at most.")


class Measurement(_Record):
    """What one trial at one load measured (the search sets ``load`` and ``axis``)."""

    load: float = Field(description="Offered request rate (req/s) or concurrency.")
    axis: Axis = "rate"
    ttft_p95_ms: float | None
    itl_p95_ms: float | None = None
    error_share: float = 0.0
    offered_rate: float | None = Field(default=None, description="Requests the client really sent per second.")
    achieved_rate: float | None = Field(default=None, description="Requests served per second.")
    queue_growth: float | None = Field(default=None, description="Queue slope over the trial (requests/s).")
    queue_growing: bool | None = Field(default=None, description="QueueTrend.growing; None: not sampled.")
    requests: int = Field(description="Requests that completed.")
    client_lag_p95_ms: float | None = Field(default=None, description="How late the client sent (p95).")
    steady_window_s: float | None = Field(
        default=None,
        description="First finish to last send (s); the served rate is measured over it. None: not recorded.",
    )


class Probe(Measurement):
    """A judged measurement: sustained, within the SLA, and why."""

    sustained: bool
    meets_sla: bool
    delivered: bool = Field(default=True, description="The client sent on schedule (lag within the limit).")
    why: str

    @property
    def passed(self) -> bool:
        """Within the SLA and sustained: this load counts toward the capacity."""
        return self.sustained and self.meets_sla and self.delivered


class CapacityResult(_Record):
    """The outcome of a search: the capacity, the bracket around it, and every probe."""

    axis: Axis
    capacity: float | None = Field(description="Highest load that met the SLA and was sustained.")
    bracket_low: float | None = Field(description="Highest passing load.")
    bracket_high: float | None = Field(description="Lowest failing load above it.")
    bounded: bool = Field(description="A passing and a failing load bracket the capacity.")
    converged: bool = Field(description="The bracket is within the tolerance.")
    note: str
    probes: list[Probe]
    tolerance: float


POISSON_Z = 2.0
"""How many Poisson standard errors of a probe's counts a served/sent shortfall must exceed to count."""


def sustained_floor(min_sustained_ratio: float, requests: int) -> float:
    """The served/sent ratio below which a load is not sustained: ``min_sustained_ratio`` less the noise.

    Both rates are counts of a Poisson process over a few seconds: with n requests their ratio swings
    by about 1/sqrt(n) (on the H200, probes of 80 requests at one target read from 0.75 to 1.1 served
    per sent, far below the engine's capacity), so a shortfall counts only beyond ``POISSON_Z`` of it.
    """
    return min_sustained_ratio - POISSON_Z / math.sqrt(max(1, requests))


def _check(name: str, value: float | None, limit: float, fmt: str, fails: list[str], oks: list[str]) -> None:
    """Add '<name> <value> ms > <limit> ms' to ``fails``, or its '≤' to ``oks``."""
    if value is None or not math.isfinite(value):
        fails.append(f"{name} not measured")
    else:
        (fails if value > limit else oks).append(
            f"{name} {value:{fmt}} ms {'>' if value > limit else '≤'} {limit:{fmt}} ms"
        )


def judge(
    m: Measurement, limits: SlaLimits | SLA, min_sustained_ratio: float = 0.95, max_client_lag_ms: float | None = None
) -> Probe:
    """Decide whether one measured load meets the SLA and was sustained, with the reasons.

    Sustained: the achieved rate is at least ``min_sustained_ratio`` of the offered one and the queue
    did not grow (either check is skipped, and says so, when its inputs were not measured, as for a
    closed-loop concurrency point). Delivered: the client's p95 lag is within ``max_client_lag_ms``.
    """
    fails: list[str] = []
    oks: list[str] = []
    if m.requests == 0:
        fails.append("no request completed")
    else:
        _check("TTFT p95", m.ttft_p95_ms, limits.ttft_p95_ms, ",.0f", fails, oks)
        if limits.itl_p95_ms is not None and m.itl_p95_ms is not None:  # as sla.meets_sla: unmeasured ITL passes
            _check("ITL p95", m.itl_p95_ms, limits.itl_p95_ms, ",.1f", fails, oks)
    if m.error_share > limits.max_error_share:
        fails.append(f"errors {m.error_share:.1%} > {limits.max_error_share:.1%}")
    unsustained: list[str] = []
    if m.offered_rate and m.achieved_rate is not None:
        ratio, floor = m.achieved_rate / m.offered_rate, sustained_floor(min_sustained_ratio, m.requests)
        rates = f"served {m.achieved_rate:,.2f} of {m.offered_rate:,.2f} req/s offered ({ratio:.0%})"
        (oks if ratio >= floor else unsustained).append(
            rates if ratio >= floor else f"{rates} < {floor:.1%} ({min_sustained_ratio:.0%} less the noise)"
        )
    elif m.requests and m.axis == "rate" and m.offered_rate and m.steady_window_s is not None:
        unsustained.append(
            f"no steady window ({max(0.0, m.steady_window_s):,.1f} s from first finish to last send): no served rate, "
            "the engine fell behind or the probe is too short for the requests' latency"
        )
    elif m.requests:
        oks.append("rates not measured (closed loop)" if m.axis == "concurrency" else "rates not measured")
    if m.queue_growing:
        slope = f" (+{m.queue_growth:,.2f}/s)" if m.queue_growth is not None else ""
        unsustained.append(f"queue grew over the trial{slope}")
    elif m.queue_growing is False:
        oks.append("queue flat")
    late = max_client_lag_ms is not None and (m.client_lag_p95_ms or 0.0) > max_client_lag_ms
    lag = [f"client sent late (p95 {m.client_lag_p95_ms:,.0f} ms > {max_client_lag_ms:,.0f} ms)"] if late else []
    why = "; ".join(fails + unsustained + lag) or "; ".join(oks)
    sustained = m.requests > 0 and not unsustained
    return Probe(**m.model_dump(), sustained=sustained, meets_sla=not fails, delivered=not late, why=why)
