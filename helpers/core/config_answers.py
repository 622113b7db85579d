"""Config sections the later steps read: cost, hardware, team, cadence, decision, alerts, rollout, review, quality."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from helpers.core.config_base import PositiveInt, _Strict
from helpers.core.paths import resolve_repo_path


class Cost(_Strict):
    """Prices and operations effort used by the cost step."""

    gpu: str = Field(default="H100-SXM5-80GB", description="Accelerator priced (name in the GPU specs table).")
    gpu_price_per_hour: float | None = Field(
        default=None, ge=0, description="$/hour of one accelerator; defaults from the price table."
    )
    engineer_cost_per_hour: float = Field(default=100.0, ge=0, description="Loaded engineer cost ($/h).")
    ops_hours_per_month: dict[str, float] = Field(
        default_factory=dict,
        description="Engineer hours/month to run each engine (by engine name); seed defaults.",
    )


class HardwarePlan(_Strict):
    """Answers to checklist step 2: the hardware plan."""

    vendors: Literal["nvidia-only", "amd-planned", "mixed"] = Field(
        default="nvidia-only", description="GPU vendors now and in the next 12 months."
    )
    autoscaling: bool = Field(default=False, description="Does the service need autoscaling?")
    gpu_count: PositiveInt = Field(default=1, description="GPUs available per serving replica.")


class Team(_Strict):
    """Answers to checklist step 3: the team."""

    size: PositiveInt = Field(default=3, description="Engineers who will run the serving stack.")
    mlops_maturity: Literal["low", "medium", "high"] = Field(default="low", description="Build/deploy automation.")
    chase_peak: bool = Field(default=False, description="Willing to trade ops effort for the last 10-15%?")


class ModelCadence(_Strict):
    """Answers to checklist step 1: how often the model changes and how many are served."""

    updates_per_month: float = Field(default=1.0, ge=0, description="Model updates per month.")
    concurrent_models: PositiveInt = Field(default=1, description="Models served side by side.")


class Decision(_Strict):
    """Thresholds of the decision step."""

    prefix_reuse_threshold: float = Field(
        default=0.3, ge=0, le=1, description="Measured prefix-reuse share above which reuse counts as heavy."
    )
    high_concurrency: PositiveInt = Field(default=50, description="Concurrency counted as high (seed: 50+).")
    frequent_updates_per_month: float = Field(default=1.0, ge=0, description="Updates/month counted as frequent.")


class Alerts(_Strict):
    """Alert thresholds of the rollout's Prometheus rules; defaults are seed 003 §5.3's (TTFT comes from ``sla``)."""

    ttft_for: str | None = Field(
        default=None,
        description="How long TTFT p95 must stay above the SLA before the page fires; default: "
        "rollout.rollback.breach_for, so the alert and the rollback criteria agree.",
    )
    gpu_util_min_pct: float = Field(default=60, ge=0, le=100, description="GPU utilisation below this fires.")
    gpu_util_for: str = Field(default="5m", description="How long utilisation must stay low (seed: 5 minutes).")
    gpu_mem_max_pct: float = Field(default=95, gt=0, le=100, description="GPU memory use above this fires.")
    gpu_mem_for: str = Field(default="1m", description="How long memory must stay high.")
    queue_max: float = Field(default=100, gt=0, description="Queued requests above this fires.")
    queue_for: str = Field(default="1m", description="How long the queue must stay long.")
    absent_for: str = Field(default="5m", description="How long the engine's metrics may be missing.")
    window: str = Field(default="5m", description="Rate window of the TTFT histogram.")
    kv_usage_max_pct: float = Field(
        default=95, gt=0, le=100, description="KV-cache usage above this pages (the engine is about to preempt)."
    )
    kv_usage_for: str = Field(default="5m", description="How long KV-cache usage must stay high.")


class Rollback(_Strict):
    """The rollout's one set of rollback criteria.

    The migration plan (step 8), the canary plan and the alert rules (step 10) all read it; the TTFT and
    error-share limits are the SLA's.
    """

    breach_for: str = Field(
        default="5m", description="How long any gate may be breached before rolling back (Prometheus duration)."
    )
    throughput_floor: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="Roll back below this share of the output tok/s the requests running should get "
        "(measured tok/s per running request × requests running, capped at the measured count).",
    )
    max_restarts: int = Field(default=0, ge=0, description="Pod restarts tolerated during one canary step.")


class Autoscaling(_Strict):
    """The autoscaling policy written when ``hardware.autoscaling`` is true (a KEDA ScaledObject)."""

    min_replicas: PositiveInt | None = Field(
        default=None, description="Fewest replicas; default: the fleet at mean traffic when known, else 1."
    )
    headroom: float = Field(default=1.5, ge=1, description="Most replicas = fleet sized at the peak × this.")
    kv_usage_target: float = Field(
        default=0.8, gt=0, le=1, description="Average KV-cache usage per replica the autoscaler keeps below."
    )
    cooldown_s: PositiveInt = Field(default=300, description="Seconds after the last trigger before scaling in.")
    prometheus_url: str = Field(
        default="http://prometheus-operated.monitoring.svc:9090", description="Prometheus the scaler queries."
    )


class Rollout(_Strict):
    """Settings of the pilot and rollout (steps 9-10)."""

    pilot_services: list[str] = Field(
        default_factory=list, max_length=2, description="One or two non-critical services to pilot on (step 9)."
    )
    rollback: Rollback = Field(default_factory=Rollback)
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)


class Review(_Strict):
    """Settings of the quarterly review."""

    regression_threshold: float = Field(
        default=0.10,
        ge=0,
        description="Relative change for the worse flagged as a regression, when the two runs' 95% intervals "
        "also show it (the change's interval excludes zero); otherwise it is 'within noise'.",
    )
    current_versions: dict[str, str] = Field(
        default_factory=dict,
        description="Engine versions considered current (by engine name); overrides "
        "helpers/data/engine_versions.yaml, and the report says which source it used.",
    )


class Quality(_Strict):
    """The quality gate: each configuration answers an evaluation set greedily; see helpers.benchmark.quality."""

    enabled: bool = Field(default=True, description="Run the gate (dummy weights: recorded as not measurable).")
    eval_set: str = Field(default="helpers/data/eval/quality-v1.jsonl", description="JSONL set, repo-relative.")
    reference: str | None = Field(default=None, description="Label of the reference configuration (default: first).")
    threshold_points: float = Field(
        default=2.0, ge=0, description="Fail a configuration whose accuracy is more points under the reference's."
    )
    min_agreement: float | None = Field(
        default=None, ge=0, le=1, description="Also fail below this share of outputs equal to the reference's."
    )
    max_items: PositiveInt | None = Field(default=None, description="Ask only the first N items of the set.")
    concurrency: PositiveInt = Field(default=4, description="Requests in flight while the set is asked.")
    max_tokens: PositiveInt = Field(default=16, description="Output tokens per answer.")
    timeout_s: float = Field(default=60, gt=0, description="Seconds one request may take.")

    @field_validator("eval_set")
    @classmethod
    def _eval_set_exists(cls, v: str) -> str:
        if not resolve_repo_path(v).is_file():
            raise ValueError(f"evaluation set {v!r} not found (looked in {resolve_repo_path(v)})")
        return v
