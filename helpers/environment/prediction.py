"""Checklist step 4: a capacity prediction for every engine configuration, before any GPU time is spent.

The batching model (stated; every figure in ``prediction.json`` comes from it):

1. **Requests** are the workload's synthetic shape: ``I`` prompt and ``O`` output tokens each (the
   config's means; step 5 sends exactly these). Prompt tokens of a shared prefix are served from the
   prefix cache when prefix caching is not switched off: share ``h = shared_prefix_tokens ÷ I``.
2. **Continuous batching**: ``B`` sequences run together; each decode step reads all weights once and
   the KV cache of every running sequence at its mean context ``I + O/2``, and costs the linear layers'
   FLOPs for ``B`` tokens: ``t(B) = max(bytes ÷ bandwidth, FLOPs ÷ peak)`` (``helpers.model.serving``,
   the roofline's arithmetic). Each admitted request adds its prefill ``t_p`` (its new tokens' FLOPs
   at the dense peak), served in turn. Requests per second at ``B`` in flight:
   ``λ(B) = B ÷ (B·t_p + O·t(B))``.
3. **B is bounded** by the KV cache (the memory plan's sequences of ``I + O`` tokens that fit), by
   ``max_num_seqs`` (the knob, else the memory plan's engine default) and, with an ITL limit, by
   ``t(B) ≤ itl_p95_ms``. **Peak throughput** is ``μ = λ(B_max)``.
4. **Queueing**: at an arrival rate ``λ < μ`` the engine runs ``B(λ)`` sequences (``λ(B) = λ`` solved
   for ``B``); arrivals wait as in an M/D/1 queue of utilisation ``ρ = λ/μ`` served at ``μ``: mean wait
   ``W = ρ ÷ (2μ(1−ρ))``, and the p95 is taken as an exponential tail's, ``3·W`` (ln 20 ≈ 3).
   ``TTFT p95(λ) = t_p + t(B(λ)) + 3·W``. **SLA capacity** is the highest ``λ`` whose TTFT p95 is
   within the limit; the requests in flight there are ``B(λ) + λ·W`` (Little's law).
5. **Calibration**: datasheet peaks are not reached. ``helpers/data/prediction_calibration.yaml``
   holds, per engine, the median of measured ÷ predicted SLA capacity over the archived GPU runs that
   the current sustained test judged, where the engine has any, else over all of its archived runs
   (``helpers.environment.calibration``, ``docs/measurements/prediction-vs-measured.md``); a
   prediction for that engine is multiplied by it and says so, basis and all. On a GPU where the engine
   has measurements of its own that the current test judged, the median of those alone is used
   (``CalibrationFactor.for_gpu``: the raw model's error differs by GPU). Engines without archived runs
   get the raw figure.

CPU engines get no prediction: there is no GPU model for a CPU engine (no datasheet bandwidth and
FLOP/s of its cores here), and the record says so; step 5 measures them.
"""

from __future__ import annotations

import statistics
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import PlaybookConfig
from helpers.core.config_engines import EngineSpec
from helpers.core.errors import ConfigError, PlaybookError
from helpers.core.paths import DATA_DIR
from helpers.engines import get_engine
from helpers.environment.kv_prediction import gpu_kv_tokens, kv_dtype_of, weight_precision
from helpers.environment.memory_plan import OverheadModel
from helpers.environment.records import ConfigPrediction, PredictionRecord
from helpers.model.gpu_specs import GpuSpec
from helpers.model.serving import StepCost, combined_rate, decode_step_seconds, prefill_seconds, step_cost
from helpers.model.shape import read_model_shape

CALIBRATION_FILE = DATA_DIR / "prediction_calibration.yaml"
CALIBRATION_DOCS = "docs/measurements/prediction-vs-measured.md"
WAIT_P95_OVER_MEAN = 3.0  # ln 20: the p95 of an exponential tail over its mean
BATCHING_MODEL = (
    "continuous batching: decode step t(B) = max((weights + B × KV bytes at context I + O/2) ÷ bandwidth, "
    "B × linear FLOPs ÷ peak); each admitted request adds its prefill t_p (FLOPs ÷ peak) in turn; "
    "rate at B in flight λ(B) = B ÷ (B·t_p + O·t(B)); B ≤ min(KV sequences of I + O tokens, max_num_seqs); "
    "peak μ = λ(B_max); TTFT p95 = t_p + t(B) + 3 × M/D/1 mean wait ρ ÷ (2μ(1−ρ)); SLA capacity = highest λ "
    "within the TTFT limit; datasheet peaks; × the engine's calibration factor when one is recorded "
    "(helpers/environment/prediction.py)"
)


class CalibrationMeasurement(BaseModel):
    """One archived measured capacity behind a factor: measured ÷ predicted, and the runs that hold it."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str] = Field(min_length=1, description="The run that measured it, then any run that copied it.")
    label: str
    shape: str
    gpu: str
    ratio: float = Field(gt=0, description="Measured ÷ predicted (raw model).")
    current_test: bool = Field(default=False, description="The current sustained test judged its probes.")


class CalibrationFactor(BaseModel):
    """Measured ÷ predicted SLA capacity of one engine over the archived runs."""

    model_config = ConfigDict(extra="forbid")

    factor: float = Field(gt=0, description="Median of measured ÷ predicted (raw model).")
    runs: int = Field(gt=0, description="Measured capacities behind it.")
    low: float = Field(description="Smallest measured ÷ predicted among them.")
    high: float = Field(description="Largest.")
    shapes: list[str] = Field(default_factory=list, description="Model shapes measured.")
    gpus: list[str] = Field(default_factory=list, description="GPUs measured on.")
    basis: str = Field(default="", description="Which archived measurements the factor is the median of, and why.")
    measurements: list[CalibrationMeasurement] = Field(
        default_factory=list, description="Every distinct measurement of the engine, those left out by the rule too."
    )

    def for_gpu(self, gpu: str) -> CalibrationFactor:
        """The factor a prediction on ``gpu`` uses: that GPU's own current-test measurements alone, where any.

        The raw model's error differs by GPU (on the seed's 8B workload measured ÷ predicted was 0.60-0.64 on
        the H100 and 0.50-0.53 on the H200, 2026-12-07): a GPU that has measurements judged by the current
        sustained test is calibrated on those; any other GPU gets the engine's factor over every GPU.
        """
        own = [m for m in self.measurements if m.gpu == gpu and m.current_test]
        if not own or self.gpus == [gpu]:
            return self
        g = factor_from(own)
        if g is None:
            return self
        others = sorted({m.gpu for m in self.measurements if m.current_test and m.gpu != gpu})
        left_out = self.basis[self.basis.rfind("; ") :] if "own measurement left out" in self.basis else ""
        g.basis = (
            f"measured on {gpu} only ({len(own)} measurement(s) judged by the current sustained test; "
            f"{', '.join(others)} left out: the raw model's error differs by GPU){left_out}"
        )
        g.measurements = self.measurements
        return g


def factor_from(measurements: list[CalibrationMeasurement]) -> CalibrationFactor | None:
    """One engine's factor, the median of measured ÷ predicted; None without a measurement.

    The median runs over the measurements the current sustained test judged, where there are any, else over
    all of them (the older test read capacities low: ``helpers.environment.calibration``).
    """
    if not measurements:
        return None
    used = [m for m in measurements if m.current_test] or measurements
    inv = [m.ratio for m in used]
    left = len(measurements) - len(used)
    if left:
        basis = (
            f"measurements judged by the current sustained test only ({left} older one(s) left out: the older "
            "test read capacities low)"
        )
    else:
        basis = "all judged by the current sustained test" if used[0].current_test else "all judged by older tests"
    return CalibrationFactor(
        factor=round(statistics.median(inv), 4),
        runs=len(used),
        low=round(min(inv), 4),
        high=round(max(inv), 4),
        shapes=sorted({m.shape for m in used}),
        gpus=sorted({m.gpu for m in used}),
        basis=basis,
        measurements=measurements,
    )


class CalibrationTable(BaseModel):
    """The committed calibration: per engine adapter name, its factor (``scripts/calibrate_predictions.py``)."""

    model_config = ConfigDict(extra="forbid")

    as_of: str
    source: str
    engines: dict[str, CalibrationFactor] = Field(default_factory=dict)

    def without(self, run: str) -> CalibrationTable:
        """The table with the measurements ``run`` holds (its own or copied) left out.

        A run rendered again from its points is then not predicted from its own measurement; the table is
        unchanged for a run it does not hold.
        """
        engines = {}
        for name, f in self.engines.items():
            left = [m for m in f.measurements if run not in m.runs]
            g = f if len(left) == len(f.measurements) else factor_from(left)
            if g is not None and g is not f:
                g.basis += f"; {run}'s own measurement left out"
            if g is not None:
                engines[name] = g
        return self.model_copy(update={"engines": engines})


def load_calibration(path: str | Path | None = None) -> CalibrationTable:
    """Read the calibration table (the packaged file unless ``path``); an empty table when the file is absent."""
    return _load_default() if path is None else _read_calibration(Path(path))


@lru_cache(maxsize=1)
def _load_default() -> CalibrationTable:
    return _read_calibration(CALIBRATION_FILE)


def _read_calibration(p: Path) -> CalibrationTable:
    if not p.is_file():
        return CalibrationTable(as_of="", source=f"{p.name}: not written yet")
    try:
        return CalibrationTable.model_validate(yaml.safe_load(p.read_text(encoding="utf-8")))
    except (yaml.YAMLError, ValueError) as err:
        raise ConfigError(f"{p}: {str(err).splitlines()[0]}") from None


def _max_num_seqs(spec: EngineSpec, gpu: GpuSpec) -> tuple[int, str]:
    if spec.knobs.max_num_seqs:
        return spec.knobs.max_num_seqs, "knob max_num_seqs"
    return OverheadModel().batch_limits(gpu.memory_gib, gpu.name)[1], "max_num_seqs default"


def _ttft_p95(c: StepCost, lam: float, mu: float, t_p: float, out: float, ctx: float, b_max: float):
    """(TTFT p95 s, B, mean wait s) at arrival rate ``lam`` below the peak ``mu``."""
    lo, hi = 0.0, b_max  # λ(B) rises with B: bisect for λ(B) = lam
    for _ in range(60):
        mid = (lo + hi) / 2
        if mid > 0 and combined_rate(mid, t_p, decode_step_seconds(c, mid, ctx), out) < lam:
            lo = mid
        else:
            hi = mid
    b = max(hi, 1.0)
    rho = lam / mu
    wait = rho / (2 * mu * (1 - rho))
    return t_p + decode_step_seconds(c, b, ctx) + WAIT_P95_OVER_MEAN * wait, b, wait


def _sla_rate(c, mu, t_p, out, ctx, b_max, limit_s) -> float:
    """The highest rate below ``mu`` whose modelled TTFT p95 is within ``limit_s`` (0 when none is)."""
    lo, hi = 0.0, mu
    for _ in range(60):
        mid = (lo + hi) / 2
        if mid > 0 and _ttft_p95(c, mid, mu, t_p, out, ctx, b_max)[0] <= limit_s:
            lo = mid
        else:
            hi = mid
    return lo


def _unavailable(spec: EngineSpec, reason: str, **kw) -> ConfigPrediction:
    return ConfigPrediction(label=spec.label, engine=spec.engine, available=False, reason=reason, **kw)


def _calibrate(pred: ConfigPrediction, table: CalibrationTable | None, key: str) -> None:
    """Apply the factor of ``key`` (``EngineAdapter.calibration_key``) in ``table`` (None: raw); say which."""
    f = table.engines.get(key) if table is not None else None
    if f is not None and pred.gpu:
        f = f.for_gpu(pred.gpu)
    if f is None:
        pred.calibration_basis = (
            "raw model (calibration not applied)"
            if table is None
            else f"raw model: no archived measurement of {key} in {CALIBRATION_FILE.name}"
        )
        pred.capacity_requests_per_s, pred.capacity_concurrency = pred.sla_requests_per_s, pred.sla_concurrency
        return
    pred.calibration_factor = f.factor
    basis = f"; {f.basis}" if f.basis else ""
    pred.calibration_basis = (
        f"× {f.factor:.2f}: median measured ÷ predicted of {f.runs} archived {key} capacities "
        f"({', '.join(f.shapes)} on {', '.join(f.gpus)}; range {f.low:.2f}-{f.high:.2f}{basis}; as of "
        f"{table.as_of}, {CALIBRATION_DOCS})"
    )
    if pred.gpu not in f.gpus:
        pred.notes.append(f"the factor was measured on {', '.join(f.gpus)}, not on {pred.gpu}: applied as it is")
    pred.capacity_requests_per_s = (pred.sla_requests_per_s or 0.0) * f.factor
    pred.capacity_concurrency = (pred.sla_concurrency or 0.0) * f.factor


def predict_config(
    cfg: PlaybookConfig, spec: EngineSpec, gpu: GpuSpec | None, calibration: CalibrationTable | None = None
) -> ConfigPrediction:
    """Predict one configuration's peak throughput and SLA capacity on ``gpu`` (module doc's model).

    ``calibration`` None gives the raw model; pass ``load_calibration()`` to apply the engine's factor.
    """
    if get_engine(spec.engine).runs_on_cpu:
        return _unavailable(spec, "no GPU model for a CPU engine (no bandwidth and FLOP/s to predict from)")
    if gpu is None:
        return _unavailable(spec, "no GPU specification to predict from (helpers/data/gpu_specs.yaml)")
    wl, tp = cfg.workload, spec.knobs.tensor_parallel
    shape = read_model_shape(cfg.model.directory)
    precision = weight_precision(spec, shape)
    try:
        _, plan = gpu_kv_tokens(cfg, spec, gpu)
    except (PlaybookError, KeyError) as err:
        return _unavailable(spec, f"no memory plan: {err}", gpu=gpu.name, tensor_parallel=tp)
    row = plan.row(precision) if plan is not None else None
    base = {"gpu": gpu.name, "tensor_parallel": tp, "weight_precision": precision}
    if row is None or not row.fits:
        room = f"room for one sequence of {wl.input_tokens + wl.output_tokens} tokens"
        return _unavailable(spec, f"{shape.name} {precision} does not fit {tp} × {gpu.name} with {room}", **base)
    c = step_cost(shape, gpu, precision, kv_dtype_of(spec), tp)
    n_in, n_out = float(wl.input_tokens), float(wl.output_tokens)
    cached = wl.shared_prefix_tokens / n_in if spec.knobs.prefix_caching is not False else 0.0
    ctx = n_in + n_out / 2
    seqs, seqs_basis = _max_num_seqs(spec, gpu)
    b_max, limit = (row.max_concurrent_sequences, "KV cache")
    if seqs < b_max:
        b_max, limit = seqs, seqs_basis
    notes = []
    if cfg.sla.itl_p95_ms is not None:
        while b_max > 1 and decode_step_seconds(c, b_max, ctx) * 1e3 > cfg.sla.itl_p95_ms:
            b_max, limit = b_max - 1, "ITL p95 limit"
    if precision == "fp8" and not c.fp8_tensor_cores:
        notes.append(f"{gpu.name} has no FP8 tensor cores: FP8 weights computed at the BF16 peak")
    t_p = prefill_seconds(c, n_in, cached)
    mu = combined_rate(b_max, t_p, decode_step_seconds(c, b_max, ctx), n_out)
    lam = _sla_rate(c, mu, t_p, n_out, ctx, b_max, cfg.sla.ttft_p95_ms / 1e3)
    ttft, b, wait = _ttft_p95(c, lam, mu, t_p, n_out, ctx, b_max) if lam > 0 else (None, 0.0, 0.0)
    if lam <= 0:
        notes.append("even one request's prefill and first step exceed the TTFT limit")
    pred = ConfigPrediction(
        label=spec.label,
        engine=spec.engine,
        available=True,
        **base,
        input_tokens=n_in,
        output_tokens=n_out,
        cached_share=round(cached, 4),
        kv_tokens=row.kv_tokens,
        max_batch=b_max,
        batch_limit=limit,
        decode_step_ms_batch1=decode_step_seconds(c, 1, ctx) * 1e3,
        decode_step_ms_at_peak=decode_step_seconds(c, b_max, ctx) * 1e3,
        prefill_ms=t_p * 1e3,
        peak_requests_per_s=mu,
        peak_output_tok_s=mu * n_out,
        sla_requests_per_s=lam,
        sla_concurrency=b + lam * wait if lam > 0 else 0.0,
        ttft_p95_ms_at_capacity=ttft * 1e3 if ttft is not None else None,
        notes=notes,
    )
    _calibrate(pred, calibration, get_engine(spec.engine).calibration_key(spec))
    return pred


def predict_run(
    cfg: PlaybookConfig, gpu: GpuSpec | None, planned_for: str = "", calibration: CalibrationTable | None = None
) -> PredictionRecord:
    """The prediction of every configuration of ``cfg`` on ``gpu`` (saved by the step-4 view)."""
    return PredictionRecord(
        gpu=gpu.name if gpu is not None else None,
        planned_for=planned_for,
        ttft_p95_ms=cfg.sla.ttft_p95_ms,
        itl_p95_ms=cfg.sla.itl_p95_ms,
        batching_model=BATCHING_MODEL,
        predictions=[predict_config(cfg, e, gpu, calibration) for e in cfg.engines],
    )
