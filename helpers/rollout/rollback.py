"""The rollout's one set of rollback criteria, resolved from the config and the measured baseline.

The migration plan (step 8, ``helpers.decision.risk``), the canary plan (``canary.md``) and the alert
rules (``alerts.rules.yaml``) all take their limits and durations from ``rollback_criteria``: the
TTFT limit and error share are the SLA's, durations and the throughput floor come from
``rollout.rollback`` (the TTFT page waits ``alerts.ttft_for`` when a config sets it, and then the
criteria say so too), the queue limit from ``alerts``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import PlaybookConfig
from helpers.rollout.choice import Chosen

_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}


class RollbackCriteria(BaseModel):
    """When to roll a canary step back: one resolved set, shared by every document that states it."""

    model_config = ConfigDict(extra="forbid")

    ttft_p95_ms: float = Field(description="TTFT p95 limit (the SLA).")
    ttft_for: str = Field(description="How long TTFT p95 may stay above the limit (the page alert's `for`).")
    breach_for: str = Field(description="How long any other gate may be breached.")
    max_error_share: float = Field(description="Share of failed requests tolerated (the SLA's).")
    throughput_floor: float = Field(description="Share of the measured per-replica output tok/s to keep.")
    baseline_tok_s: float | None = Field(default=None, description="Measured output tok/s per replica.")
    baseline_concurrency: int | None = Field(default=None, description="Concurrency of that measurement.")
    absent_for: str = Field(description="How long the engine's metrics may be missing.")
    max_restarts: int = Field(description="Pod restarts tolerated during one canary step.")

    @property
    def floor_tok_s(self) -> float | None:
        """The output tok/s per replica below which the step is rolled back, when a baseline was measured."""
        return None if self.baseline_tok_s is None else self.throughput_floor * self.baseline_tok_s

    def triggers(self) -> list[str]:
        """The criteria as sentences ("roll back when ..."), in the same words everywhere."""
        out = [
            f"TTFT p95 above {self.ttft_p95_ms:,.0f} ms (the SLA) for {duration_text(self.ttft_for)}",
            f"more than {self.max_error_share:.0%} of requests failing for {duration_text(self.breach_for)}",
        ]
        if self.floor_tok_s is not None:
            at = f" at about {self.baseline_concurrency} concurrent streams" if self.baseline_concurrency else ""
            out.append(
                f"output throughput per replica below {self.throughput_floor:.0%} of the measured "
                f"{self.baseline_tok_s:,.0f} tok/s (= {self.floor_tok_s:,.0f} tok/s){at} for "
                f"{duration_text(self.breach_for)}"
            )
        out.append(f"the engine exports no metrics for {duration_text(self.absent_for)} (down or not scraped)")
        out.append(f"more than {self.max_restarts} pod restart(s) during a canary step")
        return out


def duration_text(duration: str) -> str:
    """A Prometheus duration in words: ``5m`` → ``5 minutes``; anything else is returned as given."""
    m = re.fullmatch(r"(\d+)([smhd])", duration.strip())
    if not m:
        return duration
    n, unit = int(m.group(1)), _UNITS[m.group(2)]
    return f"{n} {unit}{'' if n == 1 else 's'}"


class Baseline(BaseModel):
    """What this run measured for the chosen configuration, per replica: the numbers the gates compare with."""

    model_config = ConfigDict(extra="forbid")

    output_tok_s: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    ttft_ms_p95: float | None = None
    meets_sla: bool = False
    basis: str = ""


def _mean(figure: object) -> float | None:
    """The mean of a ``helpers.benchmark.sla.Figure`` (None for none)."""
    return getattr(figure, "mean", None)


def measured_baseline(chosen: Chosen) -> Baseline:
    """The chosen configuration's representative measurement as a per-replica baseline (none without trials)."""
    rep = chosen.representative
    if rep is not None and rep.source != "none":
        return Baseline(
            output_tok_s=_mean(rep.output_tok_s),
            concurrency=rep.concurrency,
            request_rate=_mean(rep.request_rate),
            ttft_ms_p95=_mean(rep.ttft_ms_p95),
            meets_sla=rep.meets_sla,
            basis=rep.basis,
        )
    return Baseline(basis=rep.basis if rep is not None else "no measured result")


def criteria_for(cfg: PlaybookConfig, chosen: Chosen) -> RollbackCriteria:
    """The rollback criteria of ``cfg`` with ``chosen``'s measured baseline."""
    b = measured_baseline(chosen)
    return rollback_criteria(cfg, b.output_tok_s, b.concurrency)


def rollback_criteria(
    cfg: PlaybookConfig, baseline_tok_s: float | None = None, baseline_concurrency: int | None = None
) -> RollbackCriteria:
    """The rollback criteria of ``cfg``, with the measured per-replica baseline when one is known."""
    rb = cfg.rollout.rollback
    return RollbackCriteria(
        ttft_p95_ms=cfg.sla.ttft_p95_ms,
        ttft_for=cfg.alerts.ttft_for or rb.breach_for,
        breach_for=rb.breach_for,
        max_error_share=cfg.sla.max_error_share,
        throughput_floor=rb.throughput_floor,
        baseline_tok_s=baseline_tok_s,
        baseline_concurrency=baseline_concurrency,
        absent_for=cfg.alerts.absent_for,
        max_restarts=rb.max_restarts,
    )
