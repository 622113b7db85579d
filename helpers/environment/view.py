"""Steps 2-4 in the notebook: compute and save each record, then show it (showing never computes).

* step 2: ``inventory`` (NVML, topology, CPU) → ``EnvironmentRecord.hardware``; ``show_hardware``.
* step 3: ``show_team`` (the config's answers, as the decision reads them).
* step 4: ``plan_memory`` → ``MemoryPlanRecord`` (per precision, and the KV capacity of every configuration
  that step 5 shows beside the engine's own figure); ``predict`` → ``PredictionRecord`` (every configuration's
  peak throughput and SLA capacity, before step 5 starts anything); ``engine_environments`` →
  ``EnvironmentRecord.engines``.
* for step 5: ``show_prediction_check`` (predicted ÷ measured capacity beside the measurement).
"""

from __future__ import annotations

import pandas as pd

from helpers.core.config import DEFAULT_MEMORY_FRACTION
from helpers.environment.engine_status import engine_status, not_recorded_status
from helpers.environment.hardware import Inventory, hardware_plan_table, inventory, inventory_frame
from helpers.environment.kv_prediction import cpu_kv_plan, predicted_kv_tokens
from helpers.environment.memory_plan import memory_plan, memory_plan_frame, plot_memory_plan
from helpers.environment.prediction import load_calibration, predict_run
from helpers.environment.prediction_check import prediction_check_frame, prediction_vs_measured
from helpers.environment.quantization import quantization_advice
from helpers.environment.records import (
    CpuKvRow,
    EngineEnvironment,
    EnvironmentRecord,
    KvPrediction,
    MemoryPlanRecord,
    PredictionRecord,
)
from helpers.environment.team import team_table
from helpers.model.gpu_specs import GpuSpec, gpu_spec
from helpers.report.notebook import Context, say, show_figure, show_table
from helpers.run.rerender import re_rendering


def _record(ctx: Context) -> EnvironmentRecord:
    return ctx.folder.load(EnvironmentRecord) or EnvironmentRecord()


def hardware(ctx: Context) -> Inventory:
    """Step 2: this machine's inventory, read once per run folder (an archived run keeps its host's)."""
    rec = _record(ctx)
    if rec.hardware is None:
        rec.hardware = inventory()
        ctx.folder.save(rec)
    return rec.hardware


def show_hardware(ctx: Context, inv: Inventory) -> None:
    """Step 2: what the machine is, and the hardware plan from the config."""
    say(inv.statement, "warn" if not inv.gpus else "ok")
    show_table(inventory_frame(inv), "Inventory (NVML, nvidia-smi topo -m, /proc)")
    show_table(hardware_plan_table(ctx.cfg, inv), "Hardware plan (config) and what the decision tree reads from it")


def show_team(ctx: Context) -> None:
    """Step 3: the team answers with the seed's guidance."""
    show_table(team_table(ctx.cfg), "Team answers (config) as the decision uses them")


def _gpu_for_plan(ctx: Context, inv: Inventory) -> tuple[GpuSpec | float | None, str]:
    if inv.gpus:
        gpu = inv.gpus[0]
        return gpu_spec(gpu.name) or (gpu.memory_total_mib / 1024), f"this machine's {gpu.name}"
    spec = gpu_spec(ctx.cfg.cost.gpu)
    return spec, f"the priced GPU ({ctx.cfg.cost.gpu}): no GPU here, this is the hardware you would deploy on"


def plan_memory(ctx: Context, inv: Inventory) -> MemoryPlanRecord:
    """Step 4: the memory plan on the run's GPU and every configuration's predicted KV capacity; saved."""
    cpu = cpu_kv_plan(ctx.cfg)
    gpu, planned_for = _gpu_for_plan(ctx, inv)
    fractions = {e.knobs.memory_fraction for e in ctx.cfg.engines if e.knobs.memory_fraction}
    frac = min(fractions) if fractions else DEFAULT_MEMORY_FRACTION
    wl = ctx.cfg.workload
    plan = None
    if gpu is not None:
        plan = memory_plan(
            ctx.cfg.model.directory,
            gpu,
            memory_fraction=frac,
            context_tokens=wl.input_tokens + wl.output_tokens,
            gpu_count=ctx.cfg.hardware.gpu_count,
        )
    spec_gpu = gpu if isinstance(gpu, GpuSpec) else None
    predictions = [
        KvPrediction(
            label=e.label,
            tokens=predicted_kv_tokens(ctx.cfg, e, spec_gpu if spec_gpu is not None else gpu),
            basis=f"memory fraction {e.knobs.memory_fraction or DEFAULT_MEMORY_FRACTION:g}, "
            f"tensor parallel {e.knobs.tensor_parallel}, KV dtype {e.knobs.kv_cache_dtype}",
        )
        for e in ctx.cfg.engines
    ]
    rec = MemoryPlanRecord(
        gpu_plan=plan,
        memory_fraction=frac if plan is not None else None,
        planned_for=planned_for if gpu is not None else "no GPU here and no GPU specification for cost.gpu",
        cpu=[CpuKvRow.model_validate(r) for r in cpu.to_dict("records")] if cpu is not None else [],
        predictions=predictions,
    )
    ctx.folder.save(rec)
    return rec


def show_memory_plan(ctx: Context, rec: MemoryPlanRecord) -> None:
    """Step 4: the memory plan (only displays the record)."""
    if rec.cpu:
        show_table(
            pd.DataFrame([r.model_dump(by_alias=True) for r in rec.cpu]),
            "KV-cache plan of the CPU engines (KV space set by VLLM_CPU_KVCACHE_SPACE)",
        )
    if rec.gpu_plan is None:
        say(f"No GPU memory plan: {rec.planned_for}.", "missing")
        return
    say(f"The plan below is for {rec.planned_for}.", "note")
    show_table(
        memory_plan_frame(rec.gpu_plan),
        f"Memory plan: {ctx.cfg.model.path} at memory fraction {rec.memory_fraction:g}",
    )
    show_figure(plot_memory_plan(rec.gpu_plan))
    for line in quantization_advice(rec.gpu_plan):
        say(line, "note")
    show_table(
        pd.DataFrame([p.model_dump() for p in rec.predictions]),
        "Predicted KV capacity per configuration (step 5 shows each engine's own figure beside it)",
    )


def predict(ctx: Context, inv: Inventory) -> PredictionRecord:
    """Step 4: every configuration's predicted peak throughput and SLA capacity on the plan's GPU; saved.

    Calibrated by the engine's factor from the archived runs where one is recorded (each row says so), less
    this run's own measurements when it is one of them (an archive rendered again from its points).
    """
    gpu, planned_for = _gpu_for_plan(ctx, inv)
    spec = gpu if isinstance(gpu, GpuSpec) else None
    if spec is None:
        planned_for = f"{planned_for}: no datasheet figures for it in helpers/data/gpu_specs.yaml"
    rec = predict_run(ctx.cfg, spec, planned_for, load_calibration().without(ctx.folder.run_id))
    ctx.folder.save(rec)
    return rec


def prediction_frame(rec: PredictionRecord) -> pd.DataFrame:
    """The prediction as a table: one row per configuration."""

    def num(v: float | None, fmt: str = "{:,.1f}") -> str:
        return "—" if v is None else fmt.format(v)

    return pd.DataFrame(
        [
            {
                "engine config": p.label,
                "GPU": f"{p.tensor_parallel} × {p.gpu}" if p.gpu else "—",
                "max batch": f"{p.max_batch} ({p.batch_limit})" if p.max_batch else "—",
                "decode step ms (1 / max batch)": f"{num(p.decode_step_ms_batch1, '{:.2f}')} / "
                f"{num(p.decode_step_ms_at_peak, '{:.2f}')}",
                "prefill ms": num(p.prefill_ms),
                "peak req/s (raw)": num(p.peak_requests_per_s, "{:,.2f}"),
                "SLA capacity req/s (raw)": num(p.sla_requests_per_s, "{:,.2f}"),
                "predicted capacity req/s": num(p.capacity_requests_per_s, "{:,.2f}"),
                "in flight there": num(p.capacity_concurrency, "{:,.0f}"),
                "basis": p.calibration_basis if p.available else p.reason,
            }
            for p in rec.predictions
        ]
    )


def show_prediction(ctx: Context, rec: PredictionRecord) -> None:
    """Step 4: the capacity prediction (only displays the record)."""
    say(
        f"Predicted for {rec.planned_for}, SLA TTFT p95 ≤ {rec.ttft_p95_ms:,.0f} ms. Model: {rec.batching_model}.",
        "note",
    )
    show_table(
        prediction_frame(rec), "Predicted capacity per configuration (step 5 measures it; its error is shown there)"
    )


def show_prediction_check(ctx: Context) -> None:
    """Step 5: predicted ÷ measured SLA capacity per configuration, with the measurement's interval."""
    checks = prediction_vs_measured(ctx.run_dir)
    if not checks:
        say("No engine results yet: nothing to set the prediction against.", "missing")
        return
    show_table(prediction_check_frame(checks), "Step 4's prediction beside the measured SLA capacity")


def engine_environments(ctx: Context) -> list[EngineEnvironment]:
    """Step 4: which engines are installed and runnable, checked once per configuration on the measuring host.

    A resume that adds configurations (``playbook run --engines``) checks those and keeps the earlier rows; a
    re-render from points checks nothing here (this machine is not the one that measured), and a
    configuration that the measuring host never checked reads "not recorded".
    """
    rec = _record(ctx)
    checked = {e.label: e for e in rec.engines or []}
    missing = [e for e in ctx.cfg.engines if e.label not in checked]
    if missing and not re_rendering():
        checked |= {e.label: EngineEnvironment.model_validate(engine_status(e)) for e in missing}
        rec.engines = list(checked.values())
        ctx.folder.save(rec)
    return [checked.get(e.label) or EngineEnvironment.model_validate(not_recorded_status(e)) for e in ctx.cfg.engines]


def show_engine_environments(ctx: Context, envs: list[EngineEnvironment]) -> None:
    """Step 4: the engine environments table."""
    show_table(pd.DataFrame([e.model_dump(by_alias=True) for e in envs]), "Engine test environments")
