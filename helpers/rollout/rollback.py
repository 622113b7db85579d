"""The rollout's rollback criteria for the chosen configuration, and its measured baseline per replica.

The criteria themselves and the traffic schedule are defined once, with step 8 that states them first
(``helpers.decision.rollback``: ``TRAFFIC_STEPS``, ``RollbackCriteria``, ``rollback_criteria``); the canary
plan (``canary.md``) and the alert rules (``alerts.rules.yaml``) take them from there through this module.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from helpers.core.config import PlaybookConfig
from helpers.decision.rollback import (
    TRAFFIC_STEPS,
    Criterion,
    RollbackCriteria,
    criteria_of_result,
    duration_text,
    figure_mean,
    rollback_criteria,
    schedule_text,
)
from helpers.rollout.choice import Chosen

__all__ = [
    "TRAFFIC_STEPS", "Baseline", "Criterion", "RollbackCriteria", "criteria_for", "criteria_of_result",
    "duration_text", "measured_baseline", "rollback_criteria", "schedule_text",
]  # fmt: skip


class Baseline(BaseModel):
    """What this run measured for the chosen configuration, per replica: the numbers the gates compare with."""

    model_config = ConfigDict(extra="forbid")

    output_tok_s: float | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    ttft_ms_p95: float | None = None
    meets_sla: bool = False
    basis: str = ""


def measured_baseline(chosen: Chosen) -> Baseline:
    """The chosen configuration's representative measurement as a per-replica baseline (none without trials)."""
    rep = chosen.representative
    if rep is not None and rep.source != "none":
        return Baseline(
            output_tok_s=figure_mean(rep.output_tok_s),
            concurrency=rep.concurrency,
            request_rate=figure_mean(rep.request_rate),
            ttft_ms_p95=figure_mean(rep.ttft_ms_p95),
            meets_sla=rep.meets_sla,
            basis=rep.basis,
        )
    return Baseline(basis=rep.basis if rep is not None else "no measured result")


def criteria_for(cfg: PlaybookConfig, chosen: Chosen) -> RollbackCriteria:
    """The rollback criteria of ``cfg`` with ``chosen``'s measured baseline."""
    return criteria_of_result(cfg, chosen.result)
