"""Step 4's prediction beside step 5's measurement: predicted ÷ measured SLA capacity per configuration.

What step 5 measured is ``EngineResult.capacity`` (``engines/<label>.json``): ``capacity`` is the
highest load that met the SLA. Its interval is ``capacity_low``/``capacity_high`` where the record has
them, else the search's bracket (the edge lies between the last load that passed and the first that
failed). On the rate axis the prediction compared is req/s; on the concurrency axis, the requests in
flight at the predicted capacity.

``predicted_capacity(run_dir, label, axis)`` is what the capacity search starts from.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.environment.records import ConfigPrediction, PredictionRecord
from helpers.run.folder import RunFolder
from helpers.run.records import EngineResult

GOAL = 0.25  # the goal: predictions within ±25% of the measured capacity

EVERY_LOAD_PASSED = "at least (every load passed)"
"""A capacity known from below only: no load failed, so the edge was never reached (calibrates nothing)."""


class MeasuredCapacity(BaseModel):
    """One configuration's measured SLA capacity, with its interval."""

    model_config = ConfigDict(extra="forbid")

    axis: str
    value: float = Field(gt=0)
    low: float | None = None
    high: float | None = None
    interval: str = Field(
        description="capacity interval (95%), at least (a lower bound, bracketed or not), search bracket, or none."
    )
    converged: bool = False


class PredictionCheck(BaseModel):
    """Predicted against measured capacity of one configuration."""

    model_config = ConfigDict(extra="forbid")

    label: str
    engine: str
    axis: str | None = None
    predicted_raw: float | None = None
    predicted: float | None = Field(default=None, description="The prediction used (calibrated when applied).")
    calibration: str = ""
    measured: MeasuredCapacity | None = None
    ratio: float | None = Field(default=None, description="predicted ÷ measured.")
    ratio_raw: float | None = None
    within_goal: bool | None = Field(default=None, description=f"ratio within 1 ± {GOAL:g}.")
    note: str = ""


def measured_capacity(result: EngineResult) -> MeasuredCapacity | None:
    """The measured SLA capacity of an engine result, or None when the search found none."""
    cap = result.capacity
    if cap is None or not cap.searched or not cap.capacity or cap.capacity <= 0:
        return None
    est = cap.estimate
    low, high = (est.low, est.high) if est is not None else (None, None)
    if est is not None and est.status == "at_least":
        interval = "at least (failures above without a size)" if high is not None else EVERY_LOAD_PASSED
    elif low is not None or high is not None:
        interval = "capacity interval (95%)"
    else:
        low, high = cap.bracket_low, cap.bracket_high
        interval = "search bracket" if low is not None or high is not None else "none"
    return MeasuredCapacity(
        axis=cap.axis, value=cap.capacity, low=low, high=high, interval=interval, converged=cap.converged
    )


def predicted_on_axis(pred: ConfigPrediction, axis: str, calibrated: bool = True) -> float | None:
    """The prediction in the search's units: req/s on the rate axis, requests in flight on the concurrency axis."""
    if not pred.available:
        return None
    if axis == "concurrency":
        return pred.capacity_concurrency if calibrated else pred.sla_concurrency
    return pred.capacity_requests_per_s if calibrated else pred.sla_requests_per_s


def predicted_capacity(run_dir: str | Path, label: str, axis: str = "rate") -> float | None:
    """Step 4's predicted SLA capacity of ``label`` in ``axis`` units (calibrated when a factor applied); None if none.

    None when step 4 has not run, the configuration has no prediction (a CPU engine, no GPU spec) or
    the predicted capacity is zero.
    """
    rec = RunFolder(run_dir).load(PredictionRecord)
    pred = rec.of(label) if rec is not None else None
    value = predicted_on_axis(pred, axis) if pred is not None else None
    return value if value else None


def check(pred: ConfigPrediction | None, result: EngineResult) -> PredictionCheck:
    """Compare one configuration's prediction with its measured capacity."""
    m = measured_capacity(result)
    out = PredictionCheck(label=result.label, engine=result.engine, measured=m)
    if pred is None:
        out.note = "no prediction (step 4 did not run)"
    elif not pred.available:
        out.note = f"no prediction: {pred.reason}"
    if m is None:
        out.note = out.note or "no measured capacity (the search found none, or did not run)"
    if pred is None or not pred.available:
        return out
    axis = m.axis if m is not None else "rate"
    out.axis = axis
    out.predicted_raw = predicted_on_axis(pred, axis, calibrated=False)
    out.predicted = predicted_on_axis(pred, axis)
    out.calibration = pred.calibration_basis
    if m is not None and out.predicted is not None:
        out.ratio = out.predicted / m.value
        out.ratio_raw = (out.predicted_raw or 0.0) / m.value
        out.within_goal = abs(out.ratio - 1) <= GOAL
    return out


def prediction_vs_measured(run_dir: str | Path) -> list[PredictionCheck]:
    """Per configuration of a run folder: predicted vs measured capacity with the measurement's interval."""
    folder = RunFolder(run_dir)
    rec = folder.load(PredictionRecord)
    return [check(rec.of(r.label) if rec is not None else None, r) for r in folder.engine_results()]


def _num(v: float | None, fmt: str = "{:,.2f}") -> str:
    return "—" if v is None else fmt.format(v)


def prediction_check_frame(checks: list[PredictionCheck]) -> pd.DataFrame:
    """The checks as a table for step 5's display: prediction, measurement with its interval, ratio."""
    rows = []
    for c in checks:
        m = c.measured
        unit = "streams" if c.axis == "concurrency" else "req/s"
        rows.append(
            {
                "engine config": c.label,
                f"predicted ({unit})": _num(c.predicted),
                "raw model": _num(c.predicted_raw),
                "measured": _num(m.value if m else None),
                "measured interval": f"{_num(m.low)} – {_num(m.high)} ({m.interval})" if m else "—",
                "predicted ÷ measured": _num(c.ratio),
                f"within ±{GOAL:.0%}": "—" if c.within_goal is None else ("yes" if c.within_goal else "no"),
                "note": c.note or c.calibration,
            }
        )
    return pd.DataFrame(rows)
