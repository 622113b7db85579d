"""The rollout's one set of rollback criteria and its traffic schedule, resolved from the config and a baseline.

Step 8's migration plan (``helpers.decision.risk``) states them first; step 10's canary plan (``canary.md``)
and alert rules (``alerts.rules.yaml``) take the same ones through ``helpers.rollout.rollback``. The TTFT
limit and error share are the SLA's, durations and the throughput floor come from ``rollout.rollback`` (the
TTFT page waits ``alerts.ttft_for`` when a config sets it, and then the criteria say so too), the queue
limit from ``alerts``. The throughput floor is relative to the load at the time (``RollbackCriteria``);
each criterion has a key by which the alert rules that fire on it name it (``helpers.rollout.alerts``).
``TRAFFIC_STEPS`` is the one traffic schedule both plans state. They live with step 8, the first step that
states them, so that no step imports a later one.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.in_flight import in_flight
from helpers.benchmark.sla import representative
from helpers.core.config import PlaybookConfig
from helpers.run.records import EngineResult

_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}


TRAFFIC_STEPS: list[tuple[int, str]] = [(0, "30 min"), (5, "2 h"), (25, "24 h"), (50, "24 h"), (100, "7 days")]
"""The one traffic schedule of a rollout: (share of traffic to the new engine %, minimum hold); step 0 is a smoke
test with no user traffic. ``canary.md`` (step 10) tabulates it and step 8's migration plan states it."""


def schedule_text() -> str:
    """The traffic schedule in one line, e.g. ``0% (smoke test, 30 min) → 5% (2 h) → … → 100% (7 days)``."""
    return " → ".join(f"{share}% ({'smoke test, ' if share == 0 else ''}{hold})" for share, hold in TRAFFIC_STEPS)


class Criterion(BaseModel):
    """One rollback criterion: a key the alert rules name it by, and its sentence."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="ttft, errors, throughput, absent or restarts.")
    text: str


class RollbackCriteria(BaseModel):
    """When to roll a canary step back: one resolved set, shared by every document that states it.

    The throughput floor is relative to the load offered at the time: the measured output tok/s per running
    request at the representative measurement (its SLA capacity) times the requests running now, capped at the
    running count measured there. Below capacity an engine serves what it is sent (each running request at
    least as fast as at capacity), so the floor follows the traffic: it does not fire at a 5% canary step or at
    a peak below the measured one, only when each running request is served more slowly than measured.
    """

    model_config = ConfigDict(extra="forbid")

    ttft_p95_ms: float = Field(description="TTFT p95 limit (the SLA).")
    ttft_for: str = Field(description="How long TTFT p95 may stay above the limit (the page alert's `for`).")
    breach_for: str = Field(description="How long any other gate may be breached.")
    max_error_share: float = Field(description="Share of failed requests tolerated (the SLA's).")
    throughput_floor: float = Field(description="Share of the expected output tok/s (per running request) to keep.")
    baseline_tok_s: float | None = Field(default=None, description="Measured output tok/s per replica.")
    baseline_running: float | None = Field(
        default=None, description="Mean requests running in the engine during that measurement."
    )
    baseline_source: str = Field(default="", description="Where the running count comes from, in words.")
    absent_for: str = Field(description="How long the engine's metrics may be missing.")
    max_restarts: int = Field(description="Pod restarts tolerated within an hour of a canary step.")

    @property
    def per_request_tok_s(self) -> float | None:
        """Measured output tok/s per running request (None without a baseline and its running count)."""
        if self.baseline_tok_s is None or not self.baseline_running:
            return None
        return self.baseline_tok_s / self.baseline_running

    @property
    def floor_tok_s(self) -> float | None:
        """The floor at the measured load itself (its running count): the highest the floor ever reaches."""
        return None if self.per_request_tok_s is None else self.throughput_floor * self.baseline_tok_s

    def floor_at(self, running: float) -> float | None:
        """The floor in output tok/s per replica with ``running`` requests running (capped at the measured count)."""
        per = self.per_request_tok_s
        if per is None or self.baseline_running is None:
            return None
        return self.throughput_floor * per * min(running, self.baseline_running)

    def criteria(self) -> list[Criterion]:
        """The criteria with their keys, in the same words everywhere."""
        out = [
            Criterion(key="ttft", text=f"TTFT p95 above {self.ttft_p95_ms:,.0f} ms (the SLA) for "
                      f"{duration_text(self.ttft_for)}"),
            Criterion(key="errors", text=f"more than {self.max_error_share:.0%} of requests failing for "
                      f"{duration_text(self.breach_for)}"),
        ]  # fmt: skip
        per = self.per_request_tok_s
        if per is not None and self.baseline_tok_s is not None and self.baseline_running is not None:
            out.append(
                Criterion(
                    key="throughput",
                    text=f"output tok/s per replica below {self.throughput_floor:.0%} of ({per:,.1f} tok/s per "
                    f"running request × the requests running, at most {self.baseline_running:,.0f}) for "
                    f"{duration_text(self.breach_for)}: {self.floor_at(1.0):,.0f} tok/s with 1 running up to "
                    f"{self.floor_tok_s:,.0f} tok/s with {self.baseline_running:,.0f} or more (measured: "
                    f"{self.baseline_tok_s:,.0f} tok/s with {self.baseline_source})",
                )
            )
        out.append(
            Criterion(key="absent", text=f"the engine exports no metrics for {duration_text(self.absent_for)} "
                      "(down or not scraped)")
        )  # fmt: skip
        out.append(
            Criterion(key="restarts", text=f"more than {self.max_restarts} pod restart(s) within an hour during a "
                      "canary step")
        )  # fmt: skip
        return out

    def triggers(self) -> list[str]:
        """The criteria as sentences ("roll back when ...")."""
        return [c.text for c in self.criteria()]


def duration_text(duration: str) -> str:
    """A Prometheus duration in words: ``5m`` → ``5 minutes``; anything else is returned as given."""
    m = re.fullmatch(r"(\d+)([smhd])", duration.strip())
    if not m:
        return duration
    n, unit = int(m.group(1)), _UNITS[m.group(2)]
    return f"{n} {unit}{'' if n == 1 else 's'}"


def figure_mean(figure: object) -> float | None:
    """The mean of a ``helpers.benchmark.sla.Figure`` (None for none)."""
    return getattr(figure, "mean", None)


def criteria_of_result(cfg: PlaybookConfig, result: EngineResult | None) -> RollbackCriteria:
    """The rollback criteria of ``cfg`` with the baseline of ``result``: its representative and its in-flight count."""
    rep = representative(result, cfg) if result is not None else None
    tok_s = figure_mean(rep.output_tok_s) if rep is not None and rep.source != "none" else None
    held = in_flight(result) if tok_s is not None else None
    return rollback_criteria(cfg, tok_s, held.running if held else None, held.text() if held else "")


def rollback_criteria(
    cfg: PlaybookConfig,
    baseline_tok_s: float | None = None,
    baseline_running: float | None = None,
    baseline_source: str = "",
) -> RollbackCriteria:
    """The rollback criteria of ``cfg``, with the measured per-replica baseline and its running count when known."""
    rb = cfg.rollout.rollback
    return RollbackCriteria(
        ttft_p95_ms=cfg.sla.ttft_p95_ms,
        ttft_for=cfg.alerts.ttft_for or rb.breach_for,
        breach_for=rb.breach_for,
        max_error_share=cfg.sla.max_error_share,
        throughput_floor=rb.throughput_floor,
        baseline_tok_s=baseline_tok_s,
        baseline_running=baseline_running,
        baseline_source=baseline_source,
        absent_for=cfg.alerts.absent_for,
        max_restarts=rb.max_restarts,
    )
