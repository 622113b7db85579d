"""What "meets the SLA" means: the one definition, on a load's figures.

A load meets the SLA when requests completed, at most ``max_error_share`` of those attempted failed, its TTFT
p95 was measured and is within ``ttft_p95_ms``, and, when ``itl_p95_ms`` is set and the ITL was measured, its
ITL p95 is within that (an ITL not measured does not fail; a figure that is not a finite number was not
measured). ``helpers.benchmark.sla.meets_sla`` applies it to a stored point, ``helpers.benchmark.probe.judge``
to a probe or trial (with the words and the margin of each check), and ``helpers.benchmark.sla`` to the means
of fixed-load trials. It imports only the config, so that every module that judges a load can call it.
"""

from __future__ import annotations

import math
from typing import Protocol

from pydantic import BaseModel, ConfigDict


class Limits(Protocol):
    """The SLA's limits: the config's ``SLA`` or ``probe.SlaLimits``."""

    ttft_p95_ms: float
    itl_p95_ms: float | None
    max_error_share: float


class LatencyCheck(BaseModel):
    """One latency figure against its limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    value: float | None
    limit: float
    fmt: str

    @property
    def measured(self) -> bool:
        """The figure is a finite number."""
        return self.value is not None and math.isfinite(self.value)

    @property
    def passed(self) -> bool:
        """Measured and within its limit."""
        return self.measured and self.value <= self.limit  # type: ignore[operator]


def latency_checks(ttft_p95_ms: float | None, itl_p95_ms: float | None, limits: Limits) -> list[LatencyCheck]:
    """The latency checks that apply: TTFT p95 always, ITL p95 when limited and measured."""
    checks = [LatencyCheck(name="TTFT p95", value=ttft_p95_ms, limit=limits.ttft_p95_ms, fmt=",.0f")]
    if limits.itl_p95_ms is not None and itl_p95_ms is not None and math.isfinite(itl_p95_ms):
        checks.append(LatencyCheck(name="ITL p95", value=itl_p95_ms, limit=limits.itl_p95_ms, fmt=",.1f"))
    return checks


def errors_within(error_share: float, limits: Limits) -> bool:
    """Failed requests within their share."""
    return error_share <= limits.max_error_share


def within_sla(
    requests: int, ttft_p95_ms: float | None, itl_p95_ms: float | None, error_share: float, limits: Limits
) -> bool:
    """Whether a load with these figures meets the SLA (the module docstring: the one definition)."""
    if requests <= 0 or not errors_within(error_share, limits):
        return False
    return all(c.passed for c in latency_checks(ttft_p95_ms, itl_p95_ms, limits))
