"""Step 5 in the notebook: ``run`` measures (resuming) and saves every engine result; ``show`` only displays."""

from __future__ import annotations

import pandas as pd

from helpers.benchmark import plots
from helpers.benchmark.claims import claims_table
from helpers.benchmark.run import run_benchmarks, target_concurrency
from helpers.benchmark.sla import representatives, sla_text
from helpers.core.text import knob_text
from helpers.environment.records import EnvironmentRecord, MemoryPlanRecord
from helpers.measure.telemetry import local_gpu_spec
from helpers.model.gpu_specs import GpuSpec, gpu_spec
from helpers.report.notebook import Context, esc, not_yet, progress, say, show_figure, show_html, show_table
from helpers.run.records import EngineResult
from helpers.run.summary import points_table
from helpers.workload.levels import scale_note

POINT_COLUMNS = {
    "label": "engine config",
    "phase": "phase",
    "concurrency": "concurrency",
    "knobs": "knobs",
    "requests": "requests",
    "errors": "errors",
    "incomplete": "cut by time cap",
    "output_tok_s": "output tok/s",
    "total_tok_s": "total tok/s",
    "req_s": "req/s",
    "ttft_ms_p50": "TTFT p50 ms",
    "ttft_ms_p95": "TTFT p95 ms",
    "ttft_ms_p99": "TTFT p99 ms",
    "itl_ms_p50": "ITL p50 ms",
    "itl_ms_p95": "ITL p95 ms",
    "e2e_ms_p50": "e2e p50 ms",
    "goodput_req_s": "goodput req/s",
    "sla_met": "SLA met",
    "server_prefix_cache_hit_rate": "prefix-cache hit rate",
    "server_kv_cache_usage_max": "KV usage max",
    "server_queue_max": "queue max",
    "server_running_max": "running max",
    "gpu_util_mean": "GPU util %",
    "gpu_mem_used_max_gib": "GPU mem GiB",
    "roofline": "measured / bound out tok/s",
}


async def run(ctx: Context) -> list[EngineResult]:
    """Benchmark every engine of the config into the run folder (already-measured points are kept)."""
    return await run_benchmarks(ctx.cfg, ctx.run_dir, progress=progress)


def run_gpu_spec(ctx: Context) -> GpuSpec | None:
    """The GPU the run was measured on: from step 2's inventory in the run folder, else this machine's."""
    env = ctx.folder.load(EnvironmentRecord)
    gpus = env.hardware.gpus if env is not None and env.hardware is not None else []
    return gpu_spec(gpus[0].name) if gpus else local_gpu_spec()


def engines_table(results: list[EngineResult], plan: MemoryPlanRecord | None = None) -> pd.DataFrame:
    """One row per engine configuration: status, reason, version, cold start, KV capacity, tuned config.

    The predicted KV capacity is step 4's (``MemoryPlanRecord``), beside what the engine logged at start.
    """
    rows = []
    for r in results:
        rows.append(
            {
                "engine config": r.label,
                "engine": r.engine,
                "version": r.version,
                "status": r.status,
                "reason": r.reason or "",
                "cold start s": r.cold_start_s,
                "KV tokens predicted (step 4)": plan.predicted(r.label) if plan is not None else None,
                "KV tokens reported (engine log)": r.kv_capacity_tokens,
                "tuned knobs": knob_text(r.tuned_knobs),
            }
        )
    return pd.DataFrame(rows)


def points_frame(results: list[EngineResult]) -> pd.DataFrame:
    """The measured points with readable column names."""
    df = pd.DataFrame(points_table(results))
    if df.empty:
        return df
    cols = [c for c in POINT_COLUMNS if c in df.columns]
    return df[cols].rename(columns=POINT_COLUMNS)


def show(ctx: Context, results: list[EngineResult]) -> None:
    """Display the benchmark section."""
    note = scale_note(ctx.cfg)
    if note:
        say(note, "warn")
    show_table(engines_table(results, ctx.folder.load(MemoryPlanRecord)), "Engine configurations")
    for r in results:
        if r.status != "ok" and r.log_tail:
            say(f"{r.label}: {r.reason}", "warn")

            show_html(f"<details><summary>log tail of {esc(r.label)}</summary><pre>{esc(r.log_tail)}</pre></details>")
    df = points_frame(results)
    if df.empty:
        not_yet("no benchmark point was measured (see the reasons above)")
        return
    show_table(df, "Measured points (client side: guidellm; server side: /metrics; GPU: NVML)")
    rp = ctx.cfg.workload.replay
    for r in results:
        for p in (p for p in r.points if p.phase == "replay"):
            say(
                f"{r.label}: trace replay of {p.requests} requests at their own arrival times (time scale "
                f"{rp.time_scale if rp else 1:g}): {p.output_tok_s:,.0f} output tok/s, TTFT p95 "
                f"{p.ttft_ms_p95 or 0:,.0f} ms, {p.concurrency} request(s) in flight on average.",
                "note",
            )
    cut = [(r.label, p) for r in results for p in r.points if p.incomplete]
    for label, p in cut:
        say(
            f"{label} at concurrency {p.concurrency}: the {ctx.cfg.workload.max_seconds_per_point:g} s time cap "
            f"ended the point with {p.incomplete} request(s) in flight. guidellm counts completed requests only, "
            "so throughput there is understated (TTFT and ITL are unaffected); workload.requests_per_stream "
            "makes every level run whole waves.",
            "warn",
        )
    no_gpu = [p.gpu.reason for r in results for p in r.points if not p.gpu.available and p.gpu.reason]
    if no_gpu:
        say(f"GPU telemetry: {no_gpu[0]}", "note")
    show_figure(plots.throughput_vs_concurrency(results))
    show_figure(plots.ttft_vs_concurrency(results, ctx.cfg.sla.ttft_p95_ms))
    for r in results:
        fig = plots.tuning_curve(r, ctx.cfg.sla.ttft_p95_ms, target_concurrency(ctx.cfg))
        if fig is not None:
            show_figure(fig)
    show_table(claims_table(results), "The seeds' claims beside this run's measurements")
    reps = representatives(results, ctx.cfg)
    rows = [
        {
            "engine config": label,
            "measurement": rep.source,
            "concurrency": rep.concurrency,
            "knobs": knob_text(rep.knobs),
            "output tok/s": rep.output_tok_s.text() if rep.output_tok_s else None,
            "TTFT p95 ms": rep.ttft_ms_p95.text() if rep.ttft_ms_p95 else None,
            "meets SLA": rep.meets_sla,
            "why this one": rep.basis,
        }
        for label, rep in reps.items()
    ]
    show_table(
        pd.DataFrame(rows), f"The measurement that stands for each engine configuration ({sla_text(ctx.cfg.sla)})"
    )
