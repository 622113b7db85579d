"""Calibration of the capacity prediction against the archived runs: predicted ÷ measured, by engine and shape.

For every archived run folder (``reports/h200-*``: its ``config.yaml`` and ``engines/*.json``) the raw
prediction (``helpers.environment.prediction``, no calibration) is made again for the GPU the run
measured on, and set against the measured SLA capacity (``prediction_check.measured_capacity``). A run
that copied another's measurement (the same engine, model and capacity) counts once.

Per engine, the factor is the median of measured ÷ predicted; the table also gives, per row, the
calibrated error with the factor of the *other* rows of that engine (leave one out), which is the
error the next prediction can expect. ``scripts/calibrate_predictions.py`` writes the factors to
``helpers/data/prediction_calibration.yaml`` and the table to ``docs/measurements/prediction-vs-measured.md``.
"""

from __future__ import annotations

import hashlib
import statistics
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import PlaybookConfig
from helpers.core.config_engines import EngineSpec, Knobs
from helpers.core.paths import REPORTS_DIR
from helpers.core.text import label_slug
from helpers.environment.prediction import CalibrationFactor, CalibrationTable, predict_config
from helpers.environment.prediction_check import GOAL, measured_capacity, predicted_on_axis
from helpers.environment.records import EnvironmentRecord
from helpers.launchers.config_check import load_config
from helpers.model.gpu_specs import GpuSpec, gpu_spec
from helpers.model.shape import read_model_shape
from helpers.run.folder import ArtifactError, RunFolder
from helpers.run.records import EngineResult


class CalibrationRow(BaseModel):
    """One archived configuration with a measured capacity: its raw prediction and the ratio."""

    model_config = ConfigDict(extra="forbid")

    run: str
    label: str
    engine: str
    shape: str = Field(description="Model, weight precision and request shape, e.g. llama-3.1-8b bf16 512/256.")
    gpu: str
    axis: str
    predicted: float = Field(description="Raw model (no calibration).")
    measured: float
    low: float | None = None
    high: float | None = None
    interval: str = ""
    converged: bool = False
    ratio: float = Field(description="predicted ÷ measured, raw model.")
    duplicate_of: str | None = Field(default=None, description="The run whose measurement this one copies.")
    loo_ratio: float | None = Field(default=None, description="Calibrated ÷ measured, factor of the other rows.")


def archived_runs(reports_dir: Path = REPORTS_DIR, pattern: str = "h200-*") -> list[Path]:
    """Run folders under ``reports_dir`` matching ``pattern`` that have a config and engine results."""
    return sorted(
        p for p in Path(reports_dir).glob(pattern) if (p / "config.yaml").is_file() and (p / "engines").is_dir()
    )


def run_gpu(folder: RunFolder, cfg: PlaybookConfig) -> GpuSpec | None:
    """The GPU a run measured on: its step-2 inventory, else the priced ``cost.gpu``."""
    try:
        env = folder.load(EnvironmentRecord)
    except ArtifactError:
        env = None
    if env is not None and env.hardware is not None and env.hardware.gpus:
        spec = gpu_spec(env.hardware.gpus[0].name)
        if spec is not None:
            return spec
    return gpu_spec(cfg.cost.gpu)


def run_rows(run_dir: Path) -> list[CalibrationRow]:
    """The rows of one archived run: each configuration with a measured capacity and a prediction."""
    folder = RunFolder(run_dir)
    cfg = load_config(run_dir / "config.yaml")
    gpu = run_gpu(folder, cfg)
    specs = {e.label: e for e in cfg.engines}
    shape = read_model_shape(cfg.model.directory)
    rows = []
    for r in folder.engine_results():
        m, spec = measured_capacity(r), specs.get(r.label) or _spec_from_result(r)
        if m is None or spec is None:
            continue
        pred = predict_config(cfg, spec, gpu)
        value = predicted_on_axis(pred, m.axis, calibrated=False)
        if not value or pred.weight_precision is None:
            continue
        rows.append(
            CalibrationRow(
                run=run_dir.name,
                label=r.label,
                engine=r.engine,
                shape=f"{shape.name} {pred.weight_precision} {cfg.workload.input_tokens}/{cfg.workload.output_tokens}",
                gpu=pred.gpu or "",
                axis=m.axis,
                predicted=value,
                measured=m.value,
                low=m.low,
                high=m.high,
                interval=m.interval,
                converged=m.converged,
                ratio=value / m.value,
            )
        )
    return rows


def _spec_from_result(r: EngineResult) -> EngineSpec | None:
    """A configuration the run's config no longer lists (a re-run of some engines), rebuilt from its points' knobs.

    Only its engine and knobs are read (the launcher it ran with is not recorded), so it is not validated as a
    configuration to launch.
    """
    knobs = next((p.knobs for p in r.points if p.knobs), {})
    try:
        k = Knobs.model_validate({n: v for n, v in knobs.items() if n in Knobs.model_fields})
    except ValueError:
        return None
    return EngineSpec.model_construct(label=r.label, engine=r.engine, knobs=k)


def _points_fingerprint(run_dir: Path, label: str) -> str | None:
    """A digest of a configuration's stored points (file names and bytes): equal for a copied measurement."""
    folder = Path(run_dir) / "points" / label_slug(label)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def calibration_rows(run_dirs: list[Path]) -> list[CalibrationRow]:
    """Rows of every run, copies marked, each with its leave-one-out calibrated ratio.

    A copy is a configuration whose stored points are another run's, byte for byte (a run that copied them
    to compare a new engine beside them), or, without points, one with the same measured value.
    """
    rows: list[CalibrationRow] = []
    seen: dict[tuple[str, str, str, object], str] = {}
    for d in run_dirs:
        for row in run_rows(d):
            same = _points_fingerprint(d, row.label) or round(row.measured, 9)
            key = (row.engine, row.shape, row.axis, same)
            row.duplicate_of = seen.get(key)
            seen.setdefault(key, row.run)
            rows.append(row)
    unique = [r for r in rows if r.duplicate_of is None]
    for row in rows:
        others = [1 / o.ratio for o in unique if o.engine == row.engine and not _same(o, row)]
        row.loo_ratio = row.ratio * statistics.median(others) if others else None
    return rows


def _same(a: CalibrationRow, b: CalibrationRow) -> bool:
    """Whether two rows are one measurement (the row itself, or its copy)."""
    if (a.duplicate_of or a.run, a.label) == (b.duplicate_of or b.run, b.label):
        return True
    return (a.engine, a.shape, a.axis, round(a.measured, 9)) == (b.engine, b.shape, b.axis, round(b.measured, 9))


def engine_factors(rows: list[CalibrationRow], as_of: str, source: str) -> CalibrationTable:
    """Per engine: the median of measured ÷ predicted over its distinct measurements."""
    by_engine: dict[str, list[CalibrationRow]] = {}
    for r in rows:
        if r.duplicate_of is None:
            by_engine.setdefault(r.engine, []).append(r)
    factors = {}
    for engine, rs in sorted(by_engine.items()):
        inv = [1 / r.ratio for r in rs]
        factors[engine] = CalibrationFactor(
            factor=round(statistics.median(inv), 4),
            runs=len(rs),
            low=round(min(inv), 4),
            high=round(max(inv), 4),
            shapes=sorted({r.shape for r in rs}),
            gpus=sorted({r.gpu for r in rs}),
        )
    return CalibrationTable(as_of=as_of, source=source, engines=factors)


def calibration_yaml(table: CalibrationTable) -> str:
    """The calibration table as the YAML ``helpers/data/prediction_calibration.yaml`` holds."""
    head = (
        "# Capacity-prediction calibration: per engine, median measured ÷ predicted SLA capacity over the\n"
        "# archived runs. Written by scripts/calibrate_predictions.py; do not edit by hand.\n"
    )
    return head + yaml.safe_dump(table.model_dump(), sort_keys=False, allow_unicode=True)


def _f(v: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if v is None else fmt.format(v)


def _span(values: list[float]) -> str:
    """``1.23`` for one value, ``0.93–1.25`` for several."""
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}"


def markdown(rows: list[CalibrationRow], table: CalibrationTable) -> str:
    """The docs page: the stated model, every row, and the factors; the ±25% goal stated as measured."""
    unique = [r for r in rows if r.duplicate_of is None]
    raw_in = sum(abs(r.ratio - 1) <= GOAL for r in unique)
    loo = [r for r in unique if r.loo_ratio is not None]
    loo_in = sum(abs((r.loo_ratio or 0) - 1) <= GOAL for r in loo)
    lines = [
        "# Predicted vs measured SLA capacity",
        "",
        f"Generated by `scripts/calibrate_predictions.py` ({table.as_of}) from {table.source}. The prediction is",
        "step 4's stated batching model (`helpers/environment/prediction.py`, module docstring) on datasheet",
        "peaks; the measurement is step 5's SLA capacity search (`engines/<label>.json`, `capacity`; interval:",
        "the search's bracket, or the capacity interval where the record has one). Ratios are predicted ÷",
        "measured; leave-one-out applies the median factor of the engine's *other* measurements.",
        "",
        f"**Goal: within ±{GOAL:.0%}. As measured:** raw model {raw_in} of {len(unique)} distinct measurements; "
        f"calibrated (leave one out) {loo_in} of {len(loo)} that have another measurement of the same engine.",
        "",
        "| run | configuration | engine | shape | measured (interval) | predicted raw | raw ÷ measured | "
        "calibrated ÷ measured (leave one out) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = "req/s" if r.axis == "rate" else "streams"
        interval = f"{_f(r.low)}–{_f(r.high)}, {r.interval}{'' if r.converged else ', not converged'}"
        copy = f" (copy of {r.duplicate_of})" if r.duplicate_of else ""
        lines.append(
            f"| {r.run}{copy} | {r.label} | {r.engine} | {r.shape} | {r.measured:.2f} {unit} ({interval}) | "
            f"{r.predicted:.2f} | {r.ratio:.2f} | {_f(r.loo_ratio)} |"
        )
    lines += [
        "",
        "## By engine and model shape (distinct measurements)",
        "",
        "| engine | shape | measurements | raw ÷ measured | calibrated ÷ measured (leave one out) |",
        "|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[CalibrationRow]] = {}
    for r in unique:
        groups.setdefault((r.engine, r.shape), []).append(r)
    for (engine, shape), rs in sorted(groups.items()):
        loo_g = [r.loo_ratio for r in rs if r.loo_ratio is not None]
        lines.append(
            f"| {engine} | {shape} | {len(rs)} | {_span([r.ratio for r in rs])} | {_span(loo_g) if loo_g else '—'} |"
        )
    lines += [
        "",
        "## Calibration factors (measured ÷ predicted, median per engine)",
        "",
        "| engine | factor | distinct measurements | range | shapes | GPUs |",
        "|---|---|---|---|---|---|",
    ]
    for engine, f in table.engines.items():
        lines.append(
            f"| {engine} | {f.factor:.3f} | {f.runs} | {f.low:.3f}–{f.high:.3f} | {', '.join(f.shapes)} | "
            f"{', '.join(f.gpus)} |"
        )
    lines += [
        "",
        "A prediction for an engine listed here is multiplied by its factor and says so (`calibration_basis` in",
        "`prediction.json`, and `playbook predict`); other engines get the raw model.",
        "",
    ]
    return "\n".join(lines)


def calibrate(run_dirs: list[Path]) -> tuple[list[CalibrationRow], CalibrationTable]:
    """Rows and per-engine factors of ``run_dirs``; dated by the newest run id (``h200-YYYYMMDD-...``)."""
    rows = calibration_rows(run_dirs)
    dates = sorted(
        d.name.split("-")[1] for d in run_dirs if len(d.name.split("-")) > 1 and d.name.split("-")[1].isdigit()
    )
    as_of = f"{dates[-1][:4]}-{dates[-1][4:6]}-{dates[-1][6:8]}" if dates else ""
    runs = sorted({r.run for r in rows})
    source = f"{len(runs)} archived runs with a measured capacity ({', '.join(runs)})"
    return rows, engine_factors(rows, as_of, source)
