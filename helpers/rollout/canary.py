"""Checklist steps 9-10: the canary plan and the runbook's first page, as markdown.

Traffic moves to the chosen configuration in steps; each step is gated by the seed 003 §5.3 limits
(in the engine's own metric names) and by the throughput this run measured, and any breach is the
rollback trigger. The runbook page lists common failures and what to check first, with this
engine's health and metrics paths, its tuned flags and its measured start-up time.
"""

from __future__ import annotations

from helpers.cost.compute import MAX_ERROR_SHARE
from helpers.rollout.alerts import AlertThresholds
from helpers.rollout.choice import Chosen
from helpers.rollout.k8s import startup_budget_s
from helpers.rollout.launch import LaunchPlan
from helpers.rollout.series import Signals
from helpers.run.records import EngineResult

# (traffic share %, minimum hold) per step; step 0 is a smoke test with no user traffic
STEPS: list[tuple[int, str]] = [(0, "30 min"), (5, "2 h"), (25, "24 h"), (50, "24 h"), (100, "7 days")]
THROUGHPUT_FLOOR = 0.8  # share of the measured per-replica throughput a step must keep at matched load
BREACH_MINUTES = 10


def _num(v: float | None, fmt: str = "{:,.0f}", unit: str = "") -> str:
    return "–" if v is None else fmt.format(v) + unit


def _baseline(chosen: Chosen) -> list[str]:
    r, p = chosen.result, chosen.point
    if p is None:
        return ["No measured point for this configuration: the gates below use the SLA limits only."]
    knobs = ", ".join(f"`{k}={v}`" for k, v in sorted(chosen.tuned_applied.items())) or "the configured knobs"
    return [
        f"- representative point: {p.phase} at concurrency {p.concurrency} with {knobs}",
        f"- output throughput {_num(p.output_tok_s)} tok/s per replica; TTFT p95 {_num(p.ttft_ms_p95)} ms; "
        f"errors {p.errors} of {p.requests + p.errors} requests",
        f"- time to healthy {_num(r.ready_s if r else None, '{:,.0f}', ' s')}; "
        f"KV-cache capacity {_num(r.kv_capacity_tokens if r else None, '{:,}', ' tokens')}",
    ]


def _gates(chosen: Chosen, th: AlertThresholds, sig: Signals) -> list[tuple[str, str, str]]:
    """(signal, PromQL, limit) rows that every step must hold."""
    rows = [
        ("TTFT p95", f"`{sig.ttft_p95_s} * 1000`", f"≤ {th.ttft_p95_ms:,.0f} ms (SLA)"),
        ("Queued requests", f"`{sig.queue}`", f"≤ {th.queue_max:g}"),
        ("Engine metrics present", f"`{sig.liveness}`", "series exists"),
        ("Error share", "5xx ÷ all responses at the gateway", f"≤ {MAX_ERROR_SHARE:.0%} (the benchmark's rule)"),
        ("Pod restarts", "`increase(kube_pod_container_status_restarts_total[1h])`", "0"),
    ]
    if chosen.point is not None:
        floor = THROUGHPUT_FLOOR * chosen.point.output_tok_s
        rows.append(
            (
                "Output throughput per replica",
                f"`{sig.output_tok_s}` ÷ replicas, at about {chosen.point.concurrency} concurrent streams",
                f"≥ {floor:,.0f} tok/s ({THROUGHPUT_FLOOR:.0%} of measured)",
            )
        )
    if sig.gpu_mem_pct:
        rows.append(("GPU memory", f"`{sig.gpu_mem_pct}`", f"≤ {th.gpu_mem_max_pct:g}%"))
    if sig.gpu_util_pct:
        rows.append(("GPU utilisation (100% step)", f"`{sig.gpu_util_pct}`", f"≥ {th.gpu_util_min_pct:g}%"))
    return rows


def _runbook(chosen: Chosen, p: LaunchPlan, th: AlertThresholds, sig: Signals) -> list[tuple[str, str, str]]:
    a, k = chosen.adapter, chosen.spec.knobs
    seqs = f"`max_num_seqs={k.max_num_seqs}`" if k.max_num_seqs else "the batch-size knob (`max_num_seqs`)"
    frac = f"`memory_fraction={k.memory_fraction:g}`" if k.memory_fraction else "`memory_fraction`"
    return [
        (
            "Pod never becomes Ready",
            f"`kubectl logs`; `curl :{p.port}{a.health_path}`; the startup probe allows {startup_budget_s(chosen)} s; "
            "the model volume has `config.json` at its root",
            "out of GPU memory at load: lower " + frac + " or `max_model_len`; raise the probe budget for cold caches",
        ),
        (
            "TTFT p95 above the SLA",
            f"`{sig.queue}` and running requests; prompt lengths at the gateway",
            f"queue growing: add replicas; queue flat: prefill-bound, lower `max_batched_tokens` or {seqs}",
        ),
        (
            f"Queue above {th.queue_max:g}",
            "request rate vs the fleet size of step 6; replicas Ready",
            "scale out (new replicas need the start-up time above), then revisit batching",
        ),
        (
            f"GPU utilisation below {th.gpu_util_min_pct:g}%",
            "traffic per replica; the running-requests gauge",
            f"too few requests per replica (fewer replicas) or batching capped by {seqs}",
        ),
        (
            f"GPU memory above {th.gpu_mem_max_pct:g}%",
            "KV-cache usage panel; whether the engine pre-allocates",
            "pre-allocation is normal; a steady climb is a leak: restart one pod and compare",
        ),
        (
            "Engine metrics missing",
            f"`curl :{p.port}{a.metrics_path}` shows `{sig.liveness.split('{')[0]}`; pod scrape annotations",
            "metrics flags are in the launch args; the scrape path must be " + f"`{a.metrics_path}`",
        ),
        (
            "Prefix-cache hit rate dropped",
            "did the shared system prompt change? `prefix_caching` in the launch config",
            "restore the shared prefix or re-measure: the cost case assumed the measured reuse",
        ),
    ]


def canary_markdown(
    chosen: Chosen,
    p: LaunchPlan,
    th: AlertThresholds,
    sig: Signals,
    backup: EngineResult | None,
    files: dict[str, str],
    warnings: list[str],
) -> str:
    """The canary plan and the runbook's first page for ``chosen``."""
    a = chosen.adapter
    title = f"{chosen.spec.label} — {a.display_name} {chosen.version or ''}".strip()
    out = [f"# Rollout plan: {title}", "", f"Workload `{chosen.workload}`, model `{chosen.served_name}`.", ""]
    out += ["## Measured baseline (this run)", "", *_baseline(chosen), ""]
    if chosen.notes or warnings:
        out += ["## Before you start", "", *[f"- {n}" for n in chosen.notes + warnings], ""]
    out += ["## Files", "", *[f"- {k}: `{v}`" for k, v in files.items()], ""]
    out += ["## Traffic steps", "", "| step | traffic to the new engine | hold at least | move on when |"]
    out.append("|---|---|---|---|")
    for i, (share, hold) in enumerate(STEPS):
        when = "health Ready, metrics scraped, smoke requests answer" if share == 0 else "every gate held all along"
        out.append(f"| {i} | {share}% | {hold} | {when} |")
    out += ["", "## Gates (must hold during every step)", "", "| signal | query | limit |", "|---|---|---|"]
    out += [f"| {s} | {q} | {lim} |" for s, q, lim in _gates(chosen, th, sig)]
    fallback = (
        f"If the engine itself is at fault (not capacity), pilot the backup configuration `{backup.label}` "
        f"({backup.engine} {backup.version or ''}) the same way."
        if backup is not None
        else "No backup configuration was measured."
    )
    out += [
        "",
        "## Rollback trigger",
        "",
        f"Roll back at once when any `page` alert of the rule file fires during a step, when any gate is breached "
        f"for more than {BREACH_MINUTES} minutes, or when a pod restarts: set the new engine's traffic share to 0, "
        "keep the previous deployment serving (it stays scaled up until step 4 has held), then investigate with "
        "the runbook below. " + fallback,
        "",
        "## Runbook — first page",
        "",
        "| symptom | check first | likely fix |",
        "|---|---|---|",
    ]
    out += [f"| {s} | {c} | {f} |" for s, c, f in _runbook(chosen, p, th, sig)]
    return "\n".join(out) + "\n"
