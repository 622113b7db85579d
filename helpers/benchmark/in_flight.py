"""Requests in flight at the measurement that stands for a configuration: what its engine really held.

The probes that passed near a configuration's SLA capacity (or its trials at a fixed load:
``helpers.benchmark.sla.standing_points``) record the engine's own running and waiting request gauges
(``Point.server``, sampled from ``/metrics``). Their mean over those standing measurements is
the concurrency one replica sustained within the SLA. The decision tree reads it as the workload's
concurrency when it exists (seed 003 §3.3: "50+ concurrent requests"), the rollback floor divides the
measured throughput by it (output tok/s per running request), and the autoscaling trigger holds each replica
to it. A closed-loop trial without server samples falls back to its streams, said as such.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from helpers.benchmark.sla import standing_points
from helpers.run.records import EngineResult


@dataclass(frozen=True)
class InFlight:
    """Requests one replica held during its standing measurements: running (in the batch) and waiting, means."""

    label: str
    running: float
    waiting: float
    running_max: float | None
    trials: int
    source: str  # "engine metrics" or "closed-loop streams"

    @property
    def total(self) -> float:
        """Running plus waiting requests (the engine's in-flight count)."""
        return self.running + self.waiting

    def text(self) -> str:
        """In words, e.g. ``62 running + 0 waiting on average over 2 trial(s) (peak 122 running; engine metrics)``."""
        peak = f"peak {self.running_max:,.0f} running; " if self.running_max is not None else ""
        return (
            f"{self.running:,.0f} running + {self.waiting:,.0f} waiting on average over {self.trials} measurement(s) "
            f"of {self.label} ({peak}{self.source})"
        )


def in_flight(result: EngineResult | None) -> InFlight | None:
    """The requests ``result``'s engine held during its standing measurements (``sla.standing_points``), or None."""
    if result is None:
        return None
    trials = standing_points(result)
    if not trials:
        return None
    sampled = [p for p in trials if p.server.running_mean is not None]
    if sampled:
        peaks = [p.server.running_max for p in sampled if p.server.running_max is not None]
        return InFlight(
            label=result.label,
            running=statistics.mean(float(p.server.running_mean or 0.0) for p in sampled),
            waiting=statistics.mean(float(p.server.queue_mean or 0.0) for p in sampled),
            running_max=max(peaks) if peaks else None,
            trials=len(sampled),
            source="engine metrics",
        )
    cap = result.capacity
    if cap is not None and cap.axis == "concurrency":
        streams = statistics.mean(float(p.concurrency) for p in trials)
        return InFlight(result.label, streams, 0.0, None, len(trials), "closed-loop streams")
    return None
