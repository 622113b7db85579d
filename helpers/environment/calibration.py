"""Calibration of the capacity prediction against the archived runs: predicted ÷ measured, by engine and shape.

For every archived run folder (``reports/<gpu>-<date>-*``: its ``config.yaml`` and ``engines/*.json``) the
raw prediction (``helpers.environment.prediction``, no calibration) is made again for the GPU the run
measured on, and set against the measured SLA capacity (``prediction_check.measured_capacity``). A run
that copied another's measurement (the same engine, model and capacity) counts once.

Per engine, the factor is the median of measured ÷ predicted over the measurements judged by the current
sustained test where the engine has any (``CalibrationRow.current_test``: the probes kept their requests'
send and finish times, so a re-rendered run judged them again), else over all of them. The older
sustained test read capacities low: on the H200, 26-30 req/s for the 8B shape on vLLM and SGLang, below
what an H100 (less memory bandwidth, the same compute) sustained under the current test, 33.9-38.5 req/s
(``h100-20261205-chat-8b-paired`` and ``-late``). The table gives, per row, the calibrated error with the factor the
other rows give by the same rule (leave one out), which is the error the next prediction can expect.
``scripts/calibrate_predictions.py`` writes the factors to ``helpers/data/prediction_calibration.yaml`` and
the table to ``docs/measurements/prediction-vs-measured.md``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import PlaybookConfig
from helpers.core.config_engines import EngineSpec, Knobs
from helpers.core.paths import REPORTS_DIR
from helpers.core.text import label_slug
from helpers.engines import get_engine
from helpers.environment.prediction import CalibrationMeasurement, CalibrationTable, factor_from, predict_config
from helpers.environment.prediction_check import EVERY_LOAD_PASSED, GOAL, measured_capacity, predicted_on_axis
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
    current_test: bool = Field(
        default=False,
        description="Every search probe kept its requests' send and finish times: the current sustained test "
        "judged them (older archives keep the verdict of the test they were measured with).",
    )
    ratio: float = Field(description="predicted ÷ measured, raw model.")
    duplicate_of: str | None = Field(default=None, description="The run whose measurement this one copies.")
    loo_ratio: float | None = Field(default=None, description="Calibrated ÷ measured, factor of the other rows.")

    @property
    def calibrates(self) -> bool:
        """False for a lower bound where every load passed: no edge reached, nothing to hold a prediction against."""
        return self.interval != EVERY_LOAD_PASSED


def archived_runs(reports_dir: Path = REPORTS_DIR, pattern: str = "*") -> list[Path]:
    """Run folders under ``reports_dir`` matching ``pattern`` that have a config and engine results.

    A run on a machine without a GPU spec (a CPU run) gives no rows: its prediction is not available.
    """
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
                engine=get_engine(spec.engine).calibration_key(spec),
                shape=f"{shape.name} {pred.weight_precision} {cfg.workload.input_tokens}/{cfg.workload.output_tokens}",
                gpu=pred.gpu or "",
                axis=m.axis,
                predicted=value,
                measured=m.value,
                low=m.low,
                high=m.high,
                interval=m.interval,
                converged=m.converged,
                current_test=_judged_now(r),
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


def _judged_now(r: EngineResult) -> bool:
    """Whether every search probe of ``r`` kept its requests' times (what the current sustained test reads)."""
    probes = [p for p in r.points if p.phase == "search"]
    return bool(probes) and all(p.request_times for p in probes)


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
    table = engine_factors(rows, "", "")
    for row in rows:
        f = table.without(row.duplicate_of or row.run).engines.get(row.engine)
        f = f.for_gpu(row.gpu) if f is not None else None
        row.loo_ratio = row.ratio * f.factor if f is not None and row.calibrates else None
    return rows


def _same(a: CalibrationRow, b: CalibrationRow) -> bool:
    """Whether two rows are one measurement (the row itself, or its copy)."""
    if (a.duplicate_of or a.run, a.label) == (b.duplicate_of or b.run, b.label):
        return True
    return (a.engine, a.shape, a.axis, round(a.measured, 9)) == (b.engine, b.shape, b.axis, round(b.measured, 9))


def engine_factors(rows: list[CalibrationRow], as_of: str, source: str) -> CalibrationTable:
    """Per engine: its factor by ``prediction.factor_from``'s rule over its distinct measurements.

    Each measurement lists the runs that hold it, so that a run rendered again leaves its own out.
    """
    by_engine: dict[str, list[CalibrationMeasurement]] = {}
    for r in rows:
        if r.duplicate_of is None and r.calibrates:
            copies = [c.run for c in rows if c.duplicate_of == r.run and _same(c, r) and c.run != r.run]
            by_engine.setdefault(r.engine, []).append(
                CalibrationMeasurement(
                    runs=[r.run, *copies],
                    label=r.label,
                    shape=r.shape,
                    gpu=r.gpu,
                    ratio=round(1 / r.ratio, 4),
                    current_test=r.current_test,
                )
            )
    factors = {engine: factor_from(ms) for engine, ms in sorted(by_engine.items())}
    return CalibrationTable(as_of=as_of, source=source, engines={k: f for k, f in factors.items() if f is not None})


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
    unique = [r for r in rows if r.duplicate_of is None and r.calibrates]
    raw_in = sum(abs(r.ratio - 1) <= GOAL for r in unique)
    loo = [r for r in unique if r.loo_ratio is not None]
    loo_in = sum(abs((r.loo_ratio or 0) - 1) <= GOAL for r in loo)
    lines = [
        "# Predicted vs measured SLA capacity",
        "",
        f"Generated by `scripts/calibrate_predictions.py` ({table.as_of}) from {table.source}. The prediction is",
        "step 4's stated batching model (`helpers/environment/prediction.py`, module docstring) on datasheet",
        "peaks; the measurement is step 5's SLA capacity search (`engines/<label>.json`, `capacity`; interval:",
        'the search\'s bracket, or the capacity interval where the record has one; "at least": a lower bound, its',
        "value the highest load that passed). Ratios are predicted ÷ measured.",
        "",
        "**Which measurements calibrate.** Per engine, the factor is the median measured ÷ predicted over the",
        'measurements the current sustained test judged ("sustained test: current": every probe kept its',
        "requests' send and finish times), where the engine has any; else over all of them. The older test read",
        "capacities low: on the H200 it put the 8B shape at 26-30 req/s on vLLM and SGLang, below the 33.9-38.5",
        "req/s an H100 sustained under the current test (`h100-20261205-chat-8b-paired`, `-late`), though the H100 has",
        "less memory bandwidth (3.35 against 4.8 TB/s) and the same compute. Leave-one-out applies the factor the",
        "engine's *other* measurements give by the same rule: the error the next prediction can expect.",
        f'A lower bound where every load passed ("{EVERY_LOAD_PASSED}") is listed but calibrates nothing: the',
        "search never reached a failing load, and its value is a load it chose (the first probe is the calibrated",
        "prediction itself).",
        "",
        f"**Goal: within ±{GOAL:.0%}. As measured:** raw model {raw_in} of {len(unique)} distinct measurements; "
        f"calibrated (leave one out) {loo_in} of {len(loo)} that have another measurement of the same engine"
        f"{_h200_goal(unique)}.",
        "",
        "| run | configuration | engine | shape | GPU | sustained test | measured (interval) | predicted raw | "
        "raw ÷ measured | calibrated ÷ measured (leave one out) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = "req/s" if r.axis == "rate" else "streams"
        interval = f"{_f(r.low)}–{_f(r.high)}, {r.interval}{'' if r.converged else ', not converged'}"
        copy = f" (copy of {r.duplicate_of})" if r.duplicate_of else ""
        test = "current" if r.current_test else "older"
        lines.append(
            f"| {r.run}{copy} | {r.label} | {r.engine} | {r.shape} | {r.gpu} | {test} | {r.measured:.2f} {unit} "
            f"({interval}) | {r.predicted:.2f} | {r.ratio:.2f} | {_f(r.loo_ratio)} |"
        )
    lines += [
        "",
        "## By engine and model shape (distinct measurements)",
        "",
        "| engine | shape | GPU | sustained test | measurements | raw ÷ measured | "
        "calibrated ÷ measured (leave one out) |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, str, str], list[CalibrationRow]] = {}
    for r in unique:
        groups.setdefault((r.engine, r.shape, r.gpu, "current" if r.current_test else "older"), []).append(r)
    for (engine, shape, gpu, test), rs in sorted(groups.items()):
        loo_g = [r.loo_ratio for r in rs if r.loo_ratio is not None]
        lines.append(
            f"| {engine} | {shape} | {gpu} | {test} | {len(rs)} | {_span([r.ratio for r in rs])} | "
            f"{_span(loo_g) if loo_g else '—'} |"
        )
    lines += _factor_lines(table)
    return "\n".join(lines)


def _factor_lines(table: CalibrationTable) -> list[str]:
    """The docs page's factor tables: per engine, then the factor each GPU's predictions get."""
    lines = [
        "",
        "## Calibration factors (measured ÷ predicted, median per engine)",
        "",
        "| engine | factor | distinct measurements | range | shapes | GPUs | basis |",
        "|---|---|---|---|---|---|---|",
    ]
    for engine, f in table.engines.items():
        lines.append(
            f"| {engine} | {f.factor:.3f} | {f.runs} | {f.low:.3f}–{f.high:.3f} | {', '.join(f.shapes)} | "
            f"{', '.join(f.gpus)} | {f.basis} |"
        )
    lines += [
        "",
        "A prediction for an engine listed here is multiplied by its factor and says so (`calibration_basis` in",
        "`prediction.json`, and `playbook predict`); other engines get the raw model. On a GPU where the engine",
        "has measurements judged by the current sustained test, the factor is the median of those alone (the",
        "raw model's error differs by GPU):",
        "",
        "| engine | GPU | factor used there | measurements |",
        "|---|---|---|---|",
    ]
    for engine, f in table.engines.items():
        for gpu in sorted({m.gpu for m in f.measurements}):
            g = f.for_gpu(gpu)
            own = "this GPU's own" if g is not f or f.gpus == [gpu] else "every GPU's (the rule above)"
            lines.append(f"| {engine} | {gpu} | {g.factor:.3f} | {g.runs}, {own} |")
    lines.append("")
    return lines


def _h200_goal(unique: list[CalibrationRow]) -> str:
    """The goal on the H200 rows alone (the issue's table), when there are other GPUs' rows too."""
    h200 = [r for r in unique if r.gpu.startswith("H200") and r.loo_ratio is not None]
    if not h200 or len(h200) == len([r for r in unique if r.loo_ratio is not None]):
        return ""
    n = sum(abs((r.loo_ratio or 0) - 1) <= GOAL for r in h200)
    return f" (on the H200: {n} of {len(h200)})"


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
