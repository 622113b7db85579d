"""Step 5 view: run the benchmarks (resuming), then show points, failures, tuning and plots."""

from __future__ import annotations

import pandas as pd

from helpers.benchmark import plots
from helpers.benchmark.claims import claims_table
from helpers.benchmark.run import points_table, run_benchmarks, target_concurrency, tuned_point
from helpers.core.config import PlaybookConfig
from helpers.environment.kv_prediction import predicted_kv_tokens
from helpers.measure.telemetry import local_gpu_spec
from helpers.model.gpu_specs import GpuSpec, gpu_spec
from helpers.report.notebook import Context, esc, not_yet, progress, say, show_figure, show_html, show_table
from helpers.run.records import EngineResult
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
    gpus = ((ctx.load_json("environment.json") or {}).get("hardware") or {}).get("gpus") or []
    return gpu_spec(gpus[0]["name"]) if gpus else local_gpu_spec()


def engines_table(
    results: list[EngineResult], cfg: PlaybookConfig | None = None, gpu: GpuSpec | None = None
) -> pd.DataFrame:
    """One row per engine configuration: status, reason, version, cold start, KV capacity, tuned config."""
    specs = {e.label: e for e in cfg.engines} if cfg else {}
    rows = []
    for r in results:
        spec = specs.get(r.label)
        rows.append(
            {
                "engine config": r.label,
                "engine": r.engine,
                "version": r.version,
                "status": r.status,
                "reason": r.reason or "",
                "cold start s": r.cold_start_s,
                "KV tokens predicted (step 4)": predicted_kv_tokens(cfg, spec, gpu) if spec and cfg else None,
                "KV tokens reported (engine log)": r.kv_capacity_tokens,
                "tuned knobs": ", ".join(f"{k}={v}" for k, v in (r.tuned_knobs or {}).items()),
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
    show_table(engines_table(results, ctx.cfg, run_gpu_spec(ctx)), "Engine configurations")
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
    target = target_concurrency(ctx.cfg)
    rep = [(r.label, tuned_point(r, target)) for r in results]
    rows = [
        {
            "engine config": label,
            "concurrency": p.concurrency,
            "knobs": ", ".join(f"{k}={v}" for k, v in p.knobs.items()),
            "output tok/s": p.output_tok_s,
            "TTFT p95 ms": p.ttft_ms_p95,
            "SLA met": p.sla_met,
        }
        for label, p in rep
        if p is not None
    ]
    show_table(pd.DataFrame(rows), "The point each engine configuration is compared at (tuned where tuning ran)")
