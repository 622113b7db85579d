"""Step 5 in the notebook: ``run`` measures (resuming) and saves every engine result; ``show`` only displays."""

from __future__ import annotations

import pandas as pd

from helpers.benchmark import plots
from helpers.benchmark.batching import batching_table
from helpers.benchmark.claims import claims_table
from helpers.benchmark.crosscheck import show_crosscheck
from helpers.benchmark.engine_table import TITLE as ENGINE_TABLE_TITLE
from helpers.benchmark.engine_table import engine_table
from helpers.benchmark.loads import target_concurrency
from helpers.benchmark.points import time_cap_notes
from helpers.benchmark.quality_phase import QualityGate, judge_gate
from helpers.benchmark.run import run_benchmarks
from helpers.benchmark.sla import representative, representatives, sla_text
from helpers.benchmark.speculative import SpecComparison, compare_speculative
from helpers.benchmark.stats import min_requests_for_percentile, percentile_bounded
from helpers.benchmark.structured_phase import structured_notes, structured_table
from helpers.core.config import PlaybookConfig
from helpers.core.text import knob_text
from helpers.environment.records import EnvironmentRecord, MemoryPlanRecord
from helpers.measure.telemetry import local_gpu_spec
from helpers.model.gpu_specs import GpuSpec, gpu_spec
from helpers.report.notebook import Context, esc, not_yet, progress, say, show_figure, show_html, show_table
from helpers.report.points import points_table
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
    """Benchmark every engine of the config into the run folder (already-measured points are kept).

    Also judges the quality gate (``quality.json``) and compares speculative configurations with their
    baselines (``speculative.json``) from what was measured.
    """
    results = await run_benchmarks(ctx.cfg, ctx.run_dir, progress=progress)
    ctx.folder.save(judge_gate(ctx.cfg, ctx.run_dir, results))
    ctx.folder.save(compare_speculative(results, ctx.cfg))
    return results


def _pct(x: float | None, low: float | None = None, high: float | None = None) -> str:
    if x is None:
        return "–"
    return f"{x:.1%}" + (f" [{low:.1%}, {high:.1%}]" if low is not None and high is not None else "")


def quality_table(gate: QualityGate) -> pd.DataFrame:
    """One row per configuration: answers right with the 95% interval, loss against the reference, the verdict."""
    rows = []
    for r in gate.rows:
        verdict = "not measured" if r.gate_passed is None else ("passed" if r.gate_passed else "FAILED")
        delta = "–" if r.delta_points is None else f"{r.delta_points:+.1f}"
        if r.delta_low is not None and r.delta_high is not None:
            delta += f" [{r.delta_low:+.1f}, {r.delta_high:+.1f}]"
        rows.append(
            {
                "engine config": r.label,
                "precision": r.precision,
                "speculative": r.speculative or "off",
                "right / items": "–" if r.n is None else f"{r.correct}/{r.n}",
                "accuracy (95% CI)": _pct(r.accuracy, r.accuracy_low, r.accuracy_high),
                "Δ points vs reference (95% CI)": delta,
                "same output as reference": "–" if r.compared is None else f"{r.agreed}/{r.compared}",
                "seed expects": r.expected,
                "gate": verdict,
                "why": "; ".join(x for x in (r.reason or "", r.note) if x),
            }
        )
    return pd.DataFrame(rows)


def show_quality(gate: QualityGate | None) -> None:
    """The quality gate: a table with real numbers, or why nothing was measured (never silently empty)."""
    if gate is None:
        not_yet("the quality gate has not been judged (step 5 has not run)")
        return
    if gate.reason and not gate.measured:
        say(f"Quality gate: {gate.reason}.", "warn")
    if not gate.rows:
        return
    if gate.measured:
        caption = (
            f"Quality gate: {gate.items} items of {gate.eval_set} answered greedily, each configuration against "
            f"`{gate.reference}`; fails below −{gate.threshold_points:g} points (seed 003 §5.4: loss < 2% on your "
            "own test set)"
        )
    else:  # no reference was measured: naming one would read as a comparison that did not happen
        caption = "Quality gate: not measured; why, per configuration"
    show_table(quality_table(gate), caption)
    for label, why in gate.failed().items():
        say(f"{label} {why}: it is excluded from the recommendation.", "warn")


def spec_table(cmp: SpecComparison) -> pd.DataFrame:
    """Speculative configurations per concurrency: acceptance from the engine, speed-up over the baseline."""
    return pd.DataFrame(
        [
            {
                "engine config": r.label,
                "without speculation": r.baseline or "–",
                "method": f"{r.method}, {r.num_tokens} drafted",
                "concurrency": r.concurrency,
                "drafted / accepted tokens": "–" if r.drafted is None else f"{r.drafted:,.0f} / {r.accepted or 0:,.0f}",
                "acceptance rate": _pct(r.acceptance_rate),
                "tokens per step": "–" if r.mean_acceptance_length is None else f"{r.mean_acceptance_length:.2f}",
                "output tok/s": f"{r.output_tok_s:,.1f}",
                "output tok/s without": "–" if r.baseline_output_tok_s is None else f"{r.baseline_output_tok_s:,.1f}",
                "speed-up": "–" if r.speedup is None else f"{r.speedup:.2f}×",
                "ITL p50 ms (without)": f"{r.itl_ms_p50 or 0:,.0f} ({r.baseline_itl_ms_p50 or 0:,.0f})",
            }
            for r in cmp.rows
        ]
    )


def show_speculative(cmp: SpecComparison | None, cfg: PlaybookConfig | None = None) -> None:
    """Speculative decoding beside the same configuration without it (nothing shown when none enables it).

    With ``cfg`` the caption says what the prompts were (n-gram drafting gains only where the output repeats them).
    """
    if cmp is None or (not cmp.rows and not cmp.note.startswith("No configuration with")):
        return
    if cmp.note:
        say(cmp.note, "note")
    if cmp.rows:
        prompts = f"; prompts: {cfg.workload.prompts}" if cfg is not None else ""
        show_table(spec_table(cmp), "Speculative decoding: acceptance from the engine's own counters, speed-up over "
                   f"the same configuration without speculation (same workload and concurrency{prompts})")  # fmt: skip


def run_gpu_spec(ctx: Context) -> GpuSpec | None:
    """The GPU the run was measured on: from step 2's inventory in the run folder, else this machine's."""
    env = ctx.folder.load(EnvironmentRecord)
    gpus = env.hardware.gpus if env is not None and env.hardware is not None else []
    return gpu_spec(gpus[0].name) if gpus else local_gpu_spec()


def engines_table(
    results: list[EngineResult],
    plan: MemoryPlanRecord | None = None,
    notes: dict[str, str] | None = None,
    env: EnvironmentRecord | None = None,
) -> pd.DataFrame:
    """One row per engine configuration: status, reason, version, cold start, KV capacity, tuned config.

    The predicted KV capacity is step 4's (``MemoryPlanRecord``), beside what the engine logged at start;
    ``notes`` are the configurations' own ``note`` (why they are set up as they are), by label. A result
    without a version (rebuilt from its points after a cut run) shows the one step 4 found (``env``), said so.
    """
    rows = []
    notes = notes or {}
    for r in results:
        found = env.version_of(r.label) if env is not None and not r.version else None
        rows.append(
            {
                "engine config": r.label,
                "engine": r.engine,
                "version": r.version or (f"{found} (step 4)" if found else None),
                "status": r.status,
                "reason": r.reason or "",
                "cold start s": r.cold_start_s,
                "KV tokens predicted (step 4)": plan.predicted(r.label) if plan is not None else None,
                "KV tokens reported (engine log)": r.kv_capacity_tokens,
                "tuned knobs": knob_text(r.tuned_knobs),
                "note": notes.get(r.label, ""),
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
    notes = {e.label: e.note for e in ctx.cfg.engines if e.note}
    plan, env = ctx.folder.load(MemoryPlanRecord), ctx.folder.load(EnvironmentRecord)
    show_table(engines_table(results, plan, notes, env), "Engine configurations")
    for r in results:
        if r.status != "ok" and r.log_tail:
            say(f"{r.label}: {r.reason}", "warn")

            show_html(f"<details><summary>log tail of {esc(r.label)}</summary><pre>{esc(r.log_tail)}</pre></details>")
    show_quality(ctx.folder.load(QualityGate))
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
    show_structured(results)
    for text in time_cap_notes(results, ctx.cfg.workload.max_seconds_per_point):
        say(text, "warn")
    no_gpu = [p.gpu.reason for r in results for p in r.points if not p.gpu.available and p.gpu.reason]
    if no_gpu:
        say(f"GPU telemetry: {no_gpu[0]}", "note")
    show_figure(plots.throughput_vs_concurrency(results))
    show_figure(plots.ttft_vs_concurrency(results, ctx.cfg.sla.ttft_p95_ms))
    for r in results:
        fig = plots.tuning_curve(r, ctx.cfg.sla.ttft_p95_ms, target_concurrency(ctx.cfg))
        if fig is not None:
            show_figure(fig)
    show_speculative(ctx.folder.load(SpecComparison), ctx.cfg)
    show_evidence(ctx, results)
    show_crosscheck(ctx.run_dir, ctx.cfg)
    show_batching(results)
    gpu = run_gpu_spec(ctx)
    claims = claims_table(results, ctx.cfg, gpu.name if gpu else None)
    show_table(claims, "The seeds' claims beside this run's measurements (under the seed's conditions, or why not)")
    show_table(engine_table(results, ctx.cfg, gpu.name if gpu else None), ENGINE_TABLE_TITLE)
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


def show_batching(results: list[EngineResult]) -> None:
    """Continuous against static batching where the run measured it (nothing shown otherwise)."""
    df = batching_table(results)
    if not df.empty:
        show_table(df, "Continuous vs static batching: the same requests at the same concurrency, static waves "
                   "waiting for their slowest request against continuous admission (output tok/s over the requests' "
                   "own time)")  # fmt: skip


def show_structured(results: list[EngineResult]) -> None:
    """Replays with the traffic's structure: predicted vs achieved prefix-cache hit rate per configuration."""
    df = structured_table(results)
    if df.empty:
        return
    show_table(
        df,
        "Replays with the traffic's structure (shared prefixes, sessions): prefix-cache hit rate predicted at each "
        "engine's KV capacity and block size vs achieved, and TTFT of requests with and without a cache hit",
    )
    for line in structured_notes(results):
        say(line, "note")


def _bounded(n: int, q: float) -> str:
    """Whether ``n`` requests bound the ``q`` percentile (MLPerf LoadGen's early-stopping count)."""
    return "yes" if n and percentile_bounded(n, q) else f"no (< {min_requests_for_percentile(q)} requests)"


def _capacity_text(cap) -> str:
    """The capacity with its interval, or what the search knows instead."""
    if cap is None or not cap.searched:
        return "–"
    if cap.estimate is None:
        return "–" if cap.capacity is None else f"{cap.capacity:.3g}"
    return cap.estimate.text("req/s" if cap.axis == "rate" else "streams")


def evidence_table(results: list[EngineResult], cfg: PlaybookConfig) -> pd.DataFrame:
    """Per configuration: its SLA capacity with its 95% interval (or its fixed load), what binds, what stands."""
    rows = []
    for r in results:
        cap, rep = r.capacity, representative(r, cfg)
        n, est = rep.requests, cap.estimate if cap is not None else None
        probes = [p for p in (cap.probes if cap else [])]
        again = sum(1 for p in probes if p.get("superseded"))
        rows.append(
            {
                "engine config": r.label,
                "SLA capacity (95% CI)": _capacity_text(cap),
                "binds": est.criterion if est is not None and est.criterion else "–",
                "fixed load": f"{cap.trial_load:g} streams" if cap and not cap.searched and cap.trial_load else "–",
                "probes": f"{est.probes} valid, {len(est.window)} near the edge" if est is not None else "–",
                "measured again (interference)": again,
                "req/s (95% CI)": rep.request_rate.text("{:,.2f}") if rep.request_rate else "–",
                "output tok/s (95% CI)": rep.output_tok_s.text() if rep.output_tok_s else "–",
                "TTFT p95 ms near the capacity": rep.ttft_ms_p95.text() if rep.ttft_ms_p95 else "–",
                "requests": n,
                "p95 bounded": _bounded(n, 0.95),
                "p99 bounded": _bounded(n, 0.99),
                "search": cap.note if cap else "not searched",
                "trials": cap.trials_note if cap and not cap.searched else "",
                "engine minutes": round(sum(r.gpu_seconds.values()) / 60, 1) if r.gpu_seconds else None,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def interference_table(results: list[EngineResult]) -> pd.DataFrame:
    """Every probe measured while other programs loaded the machine, and what was done about it."""
    rows = []
    for r in results:
        for p in r.points:
            if p.interference:
                superseded = bool(p.probe and p.probe.get("superseded"))
                rows.append(
                    {
                        "engine config": r.label,
                        "phase": p.phase,
                        "stream": (p.probe or {}).get("stream") or "–",
                        "load": p.offered_rate or p.concurrency,
                        "what else ran": p.interference,
                        "done": "measured again; this one left out" if superseded else "kept (measured once already)",
                    }
                )
    return pd.DataFrame(rows)


def show_evidence(ctx: Context, results: list[EngineResult]) -> None:
    """The decision evidence: capacity search curves, the capacities with intervals, engine time by phase."""
    if not any(r.capacity for r in results):
        say("No capacity search or repeated trials ran (the evidence phase is disabled, or no engine got that far): "
            "nothing stands for any configuration, so no measurement decides. Grid points are single samples and "
            "never do.", "warn")  # fmt: skip
        return
    if not ctx.cfg.evidence.search.enabled:
        say("The capacity search is disabled (evidence.search.enabled is false): each configuration is measured "
            "by repeated trials at one fixed load, so the comparison is of throughput at that load, not of SLA "
            "capacity, and the fleet sized from it is an upper bound.", "note")  # fmt: skip
    show_table(
        evidence_table(results, ctx.cfg),
        f"Decision evidence: the SLA capacity ({sla_text(ctx.cfg.sla)}), "
        "estimated from every valid probe with its 95% interval, or a fixed load's trials; percentiles from "
        "too few requests to bound them are marked (MLPerf LoadGen early-stopping counts, 99% confidence)",
    )
    others = interference_table(results)
    if not others.empty:
        show_table(others, "Probes measured while other programs loaded the machine (measure.interference)")
    for r in results:
        fig = plots.capacity_curve(r, ctx.cfg.sla.ttft_p95_ms)
        if fig is not None:
            show_figure(fig)
    reps = [(r.label, representative(r, ctx.cfg)) for r in results]
    bars = [(label, rep.output_tok_s.mean, rep.output_tok_s.low, rep.output_tok_s.high)
            for label, rep in reps if rep.source in ("capacity", "fixed") and rep.output_tok_s]  # fmt: skip
    if bars:
        where = "the SLA capacity (rate × tokens)" if ctx.cfg.evidence.search.enabled else "the fixed load"
        show_figure(plots.capacity_bars(bars, f"output tok/s at {where}, 95% CI"))
    minutes = pd.DataFrame(
        [{"engine config": r.label, **{k: round(v / 60, 2) for k, v in r.gpu_seconds.items()}} for r in results]
    )
    show_table(minutes, "Engine-minutes (GPU-minutes on a GPU) by phase: time to decision")
