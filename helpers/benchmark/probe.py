"""What one load of the capacity search measured, and the judgement of it: within the SLA, sustained, delivered.

A load *passes* when its TTFT p95 (and ITL p95, when limited) is within the SLA, errors stay under their
share, and the engine keeps up: it served at least ``min_sustained_ratio`` of the rate it was offered,
and neither the server's waiting queue nor the client's requests in flight grew. What was served is read
from the slope of finish times against send times (``helpers.measure.timing.keep_up``), which holds for
requests of one second as of one minute; a probe stored before that existed is read over its steady
window (first finish to last send) instead, and one with no steady window shows no served rate.

Every judged probe also carries a *margin*: how far its binding criterion is past its limit, on a log
scale (log of TTFT p95 over its limit, of ITL p95 over its limit, of the served-share floor over the
share served). A margin ≤ 0 passes, > 0 fails, and its size says by how much: the capacity estimator
(``helpers.benchmark.boundary``) fits the margins of all the probes against load. A failure that has no
size (errors over their share, a growing queue, no request completed) has no margin (None).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.sla_rule import LatencyCheck, errors_within, latency_checks, within_sla
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
    served_ratio: float | None = Field(
        default=None, description="Served ÷ offered from finish against send times (timing.keep_up); None: not read."
    )
    served_ratio_low: float | None = Field(default=None, description="Its 95% interval, low end.")
    served_ratio_high: float | None = Field(default=None, description="Its 95% interval, high end.")
    send_span_s: float | None = Field(default=None, description="First send to last send (s); None: not recorded.")
    latency_p50_s: float | None = Field(default=None, description="Median request latency (s); None: not recorded.")
    stream: str | None = Field(
        default=None, description="The arrival schedule and prompts it ran on (the same for every configuration)."
    )
    interference: str | None = Field(
        default=None, description="What else loaded the machine while it ran (None: nothing over the limit)."
    )


class Probe(Measurement):
    """A judged measurement: sustained, within the SLA, and why."""

    sustained: bool
    meets_sla: bool
    delivered: bool = Field(default=True, description="The client sent on schedule (lag within the limit).")
    why: str
    margin: float | None = Field(
        default=None,
        description="Binding criterion past its limit, log scale (≤ 0 passes); None: a failure without a size, "
        "or not judged with margins.",
    )
    margins: dict[str, float] = Field(
        default_factory=dict, description="Each sized criterion's margin ('TTFT p95', 'ITL p95', 'served')."
    )
    censored: bool = Field(
        default=False, description="Failed on a criterion without a size (errors, a growing queue, nothing done)."
    )
    errors_ok: bool = Field(default=True, description="Failed requests within the SLA's share.")
    superseded: bool = Field(
        default=False, description="Measured again (other load on the machine): left out of the estimate."
    )

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


PLAUSIBLE_SHARE = 1.2
"""A served share read above this is an artefact (a batch finishing at once), not a reading: the steady window's
rate is used instead."""

SERVED = "served"
"""The name of the served-share criterion among a probe's margins."""

POISSON_Z = 2.0
"""How many Poisson standard errors of a probe's counts a served/sent shortfall must exceed to count."""


def sustained_floor(min_sustained_ratio: float, requests: int) -> float:
    """The served/sent ratio below which a load is not sustained: ``min_sustained_ratio`` less the noise.

    Both rates are counts of a Poisson process over a few seconds: with n requests their ratio swings
    by about 1/sqrt(n) (on the H200, probes of 80 requests at one target read from 0.75 to 1.1 served
    per sent, far below the engine's capacity), so a shortfall counts only beyond ``POISSON_Z`` of it.
    """
    return min_sustained_ratio - POISSON_Z / math.sqrt(max(1, requests))


def _check(check: LatencyCheck, fails: list[str], oks: list[str], margins: dict[str, float]) -> None:
    """Add '<name> <value> ms > <limit> ms' to ``fails``, or its '≤' to ``oks``; its log margin to ``margins``."""
    name, value, limit, fmt = check.name, check.value, check.limit, check.fmt
    if not check.measured:
        fails.append(f"{name} not measured")
    else:
        assert value is not None
        (fails if not check.passed else oks).append(
            f"{name} {value:{fmt}} ms {'>' if not check.passed else '≤'} {limit:{fmt}} ms"
        )
        margins[name] = math.log(max(value, 1e-9) / limit)


MAX_NOISE_ALLOWANCE = 0.05
"""The most a served share's noise lowers its floor. Requests that share a batch make a short probe's reading
noisy (its interval spans tens of percent over two or three latencies); an allowance without a cap let
an overloaded engine pass on its noise. On ``fakes.sim_engine.BatchEngine`` (20 seeds, probes of four
latencies, 2026-12-05) a cap of 0.10 passed 10 of 20 probes at 1.25 × capacity, 0.07 passed 5 and 0.05
none, while 17 of 20 at half the capacity passed under each."""


def keep_up_floor(min_sustained_ratio: float, ratio: float, low: float | None) -> float:
    """The served share below which a load is not sustained: ``min_sustained_ratio`` less twice the slope's noise.

    The noise is the standard error of the share read from its 95% interval's lower side (Theil–Sen,
    widened for the correlation of requests that share a batch: ``measure.timing.keep_up``), and lowers
    the floor by ``MAX_NOISE_ALLOWANCE`` at most.
    """
    se = (ratio - low) / 1.96 if low is not None and math.isfinite(low) else 0.0
    return min_sustained_ratio - min(MAX_NOISE_ALLOWANCE, 2.0 * max(0.0, se))


READABLE_LATENCIES = 2.5
"""Arrivals must span this many request latencies for the served share to be read (``measure.timing.keep_up``
leaves out one latency at each end and needs half of one between)."""


def too_long_to_read(m: Measurement) -> bool:
    """Whether the probe's requests took too long, against its sending span, for the served share to be read.

    The search sizes a probe to several latencies of the last load that passed; requests that then take
    longer than that allows have slowed down under this load: the engine fell behind (under continuous
    batching an overloaded engine admits everything, and every request slows, before any queue grows).
    """
    return bool(m.latency_p50_s and m.send_span_s is not None and READABLE_LATENCIES * m.latency_p50_s > m.send_span_s)


def _served(
    m: Measurement, min_sustained_ratio: float, oks: list[str], unsustained: list[str], margins: dict[str, float]
) -> bool:
    """The served-share part of the judgement (rate axis): an ok, or why not sustained, and its margin.

    False when it found the load not sustained without a size (no served rate could be read).
    """
    if m.requests and m.offered_rate and m.steady_window_s is not None and m.steady_window_s <= 0:
        unsustained.append(
            f"no request finished before the last was sent ({max(0.0, m.steady_window_s):,.1f} s from first "
            "finish to last send): the engine held the whole probe, or the probe is shorter than one latency"
        )
        return False
    if m.served_ratio is None and too_long_to_read(m):
        assert m.latency_p50_s is not None and m.send_span_s is not None
        unsustained.append(
            f"requests took {m.latency_p50_s:,.1f} s (median), too long for {m.send_span_s:,.1f} s of arrivals to "
            f"show whether the engine kept up (it needs {READABLE_LATENCIES:g} latencies): it fell behind, "
            "or the probe is too short"
        )
        return False
    if m.served_ratio is not None and m.served_ratio <= PLAUSIBLE_SHARE:
        floor = keep_up_floor(min_sustained_ratio, m.served_ratio, m.served_ratio_low)
        text = f"served {m.served_ratio:.0%} of the offered rate (finish against send times)"
        (oks if m.served_ratio >= floor else unsustained).append(
            text if m.served_ratio >= floor else f"{text} < {floor:.1%} ({min_sustained_ratio:.0%} less the noise)"
        )
        margins[SERVED] = math.log(floor / max(m.served_ratio, 1e-9))
    elif m.offered_rate and m.achieved_rate is not None:
        ratio, floor = m.achieved_rate / m.offered_rate, sustained_floor(min_sustained_ratio, m.requests)
        rates = f"served {m.achieved_rate:,.2f} of {m.offered_rate:,.2f} req/s offered ({ratio:.0%})"
        (oks if ratio >= floor else unsustained).append(
            rates if ratio >= floor else f"{rates} < {floor:.1%} ({min_sustained_ratio:.0%} less the noise)"
        )
        margins[SERVED] = math.log(max(floor, 1e-9) / max(ratio, 1e-9))
    elif m.requests and m.offered_rate and m.steady_window_s is not None:
        unsustained.append(
            f"no steady window ({max(0.0, m.steady_window_s):,.1f} s from first finish to last send): no served rate, "
            "the engine fell behind or the probe is too short for the requests' latency"
        )
        return False
    elif m.requests:
        oks.append("rates not measured")
    return True


def judge(
    m: Measurement, limits: SlaLimits | SLA, min_sustained_ratio: float = 0.95, max_client_lag_ms: float | None = None
) -> Probe:
    """Decide whether one measured load meets the SLA and was sustained, with the reasons.

    Sustained: the share of the offered rate served is at least ``min_sustained_ratio`` less its noise and
    the queue did not grow (either check is skipped, and says so, when its inputs were not measured, as for
    a closed-loop concurrency point). Delivered: the client's p95 lag is within ``max_client_lag_ms``; a
    load the client did not deliver has no margin (it says nothing about the engine).
    """
    fails: list[str] = []
    oks: list[str] = []
    margins: dict[str, float] = {}
    sized = True  # every failure found so far has a size (a margin)
    if m.requests == 0:
        fails.append("no request completed")
        sized = False
    else:
        for check in latency_checks(m.ttft_p95_ms, m.itl_p95_ms, limits):  # the one definition (``sla_rule``)
            _check(check, fails, oks, margins)
        sized = sized and not any(f.endswith("not measured") for f in fails)
    if not errors_within(m.error_share, limits):
        fails.append(f"errors {m.error_share:.1%} > {limits.max_error_share:.1%}")
        sized = False
    unsustained: list[str] = []
    if m.axis == "concurrency":
        if m.requests:
            oks.append("rates not measured (closed loop)")
    else:
        sized = _served(m, min_sustained_ratio, oks, unsustained, margins) and sized
    if m.queue_growing:
        slope = f" (+{m.queue_growth:,.2f}/s)" if m.queue_growth is not None else ""
        unsustained.append(f"queue grew over the trial{slope}")
        sized = False
    elif m.queue_growing is False:
        oks.append("queue flat")
    late = max_client_lag_ms is not None and (m.client_lag_p95_ms or 0.0) > max_client_lag_ms
    lag = [f"client sent late (p95 {m.client_lag_p95_ms:,.0f} ms > {max_client_lag_ms:,.0f} ms)"] if late else []
    why = "; ".join(fails + unsustained + lag) or "; ".join(oks)
    sustained = m.requests > 0 and not unsustained
    return Probe(
        **m.model_dump(),
        sustained=sustained,
        meets_sla=within_sla(m.requests, m.ttft_p95_ms, m.itl_p95_ms, m.error_share, limits),
        delivered=not late,
        why=why,
        margin=max(margins.values()) if margins and sized and not late else None,
        margins={} if late else margins,
        censored=not sized and not late,
        errors_ok=errors_within(m.error_share, limits),
    )
