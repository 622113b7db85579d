"""Checklist step 10: the canary plan, as markdown (``canary.md``).

Traffic moves to the chosen configuration in the rollout's one schedule (``rollback.TRAFFIC_STEPS``, which
step 8's migration plan states too); each step is gated by the seed 003 §5.3 limits (in the engine's own
metric names) and by the throughput this run measured, relative to the requests running. The rollback
criteria are ``helpers.rollout.rollback``'s, the same sentences the migration plan states and the same
durations the alert rules wait; each names the ``rollback="true"`` rule that fires on it, read from the rule
file itself, or says that none does and where to watch it. The runbook is ``runbook.md``.
"""

from __future__ import annotations

from helpers.rollout.alerts import UNALERTED, AlertThresholds, throughput_floor_expr
from helpers.rollout.choice import Chosen
from helpers.rollout.launch import LaunchPlan
from helpers.rollout.rollback import TRAFFIC_STEPS, RollbackCriteria, duration_text, measured_baseline
from helpers.rollout.scaling import AutoscalingPolicy, FleetSizing
from helpers.rollout.series import Signals, pod_restarts
from helpers.run.records import EngineResult


def _num(v: float | None, fmt: str = "{:,.0f}", unit: str = "") -> str:
    return "–" if v is None else fmt.format(v) + unit


def title_of(chosen: Chosen) -> str:
    """``label — engine version``, without repeating what the label already says."""
    engine = f"{chosen.adapter.display_name} {chosen.version or ''}".strip()
    return chosen.spec.label if engine.lower() in chosen.spec.label.lower() else f"{chosen.spec.label} — {engine}"


def baseline_lines(chosen: Chosen) -> list[str]:
    """The measured per-replica baseline as markdown bullet lines."""
    b, r = measured_baseline(chosen), chosen.result
    if b.output_tok_s is None:
        return ["- No measured point for this configuration: the gates below use the SLA limits only."]
    knobs = ", ".join(f"`{k}={v}`" for k, v in sorted(chosen.tuned_applied.items())) or "the configured knobs"
    load = f"concurrency {b.concurrency}" if b.concurrency else f"{_num(b.request_rate, '{:,.2f}')} req/s"
    return [
        f"- representative measurement: {load} with {knobs} ({b.basis or 'measured'})",
        f"- output throughput {_num(b.output_tok_s)} tok/s per replica; TTFT p95 {_num(b.ttft_ms_p95)} ms; "
        f"{'meets' if b.meets_sla else 'does not meet'} the SLA",
        f"- time to healthy {_num(r.ready_s if r else None, '{:,.0f}', ' s')}; cold start "
        f"{_num(r.cold_start_s if r else None, '{:,.0f}', ' s')}; KV-cache capacity "
        f"{_num(r.kv_capacity_tokens if r else None, '{:,}', ' tokens')}",
    ]


def gates(
    th: AlertThresholds, sig: Signals, crit: RollbackCriteria, deployment: str = ""
) -> list[tuple[str, str, str]]:
    """(signal, PromQL, limit) rows that every step must hold; the rollback rows are the rollback criteria."""
    ttft_for, breach = duration_text(crit.ttft_for), duration_text(crit.breach_for)
    rows = [
        ("TTFT p95", f"`{sig.ttft_p95_s} * 1000`", f"≤ {crit.ttft_p95_ms:,.0f} ms (SLA); breach ≤ {ttft_for}"),
        ("Error share", "5xx ÷ all responses at the gateway", f"≤ {crit.max_error_share:.0%}; breach ≤ {breach}"),
        ("Engine metrics present", f"`{sig.liveness}`", f"missing ≤ {duration_text(crit.absent_for)}"),
        ("Pod restarts", f"`{pod_restarts(deployment)}`", f"≤ {crit.max_restarts}"),
    ]
    floor = throughput_floor_expr(sig, crit)
    if crit.floor_tok_s is not None and crit.per_request_tok_s is not None:
        query = f"`{floor}` is empty" if floor else f"`{sig.output_tok_s}` ÷ replicas, against the requests running"
        rows.append(
            (
                "Output throughput per replica, for the requests it runs",
                query,
                f"≥ {crit.throughput_floor:.0%} × {crit.per_request_tok_s:,.1f} tok/s × requests running (at most "
                f"{crit.baseline_running:,.0f}): {crit.floor_at(1.0):,.0f} to {crit.floor_tok_s:,.0f} tok/s; "
                f"breach ≤ {breach}",
            )
        )
    rows.append(("Queued requests (scale, not rollback)", f"`{sig.queue}`", f"≤ {th.queue_max:g}"))
    if sig.kv_usage:
        rows.append(("KV-cache usage (scale, not rollback)", f"`{sig.kv_usage}`", f"≤ {th.kv_usage_max_pct:g}%"))
    if sig.gpu_util_pct:
        rows.append(("GPU utilisation (100% step)", f"`{sig.gpu_util_pct}`", f"≥ {th.gpu_util_min_pct:g}%"))
    return rows


def _scaling_lines(sizing: FleetSizing, auto: AutoscalingPolicy | None, autoscaling: bool) -> list[str]:
    out = [f"- replicas at full traffic: {sizing.replicas} ({sizing.basis})"]
    if auto is not None:
        out.append(
            f"- autoscaling (`autoscaling.yaml`, KEDA): {auto.min_replicas} to {auto.max_replicas} replicas "
            f"(min {auto.min_replicas}: {auto.min_basis}; max {auto.max_replicas}: {auto.max_basis})"
        )
        out += [f"  - scale out when {t.meaning}: `{t.query}` ÷ replicas > {t.threshold:g}" for t in auto.triggers]
    elif autoscaling:
        out.append("- autoscaling was asked for, but no engine signal can drive it (no running/KV-cache metric)")
    else:
        out.append("- no autoscaling (`hardware.autoscaling: false`): the replica count is fixed")
    return out


def _alert_text(key: str, alerted: dict[str, list[str]]) -> str:
    names = alerted.get(key)
    if names:
        return "alert " + ", ".join(f"`{n}`" for n in names)
    return UNALERTED.get(key, "no alert rule: watch it on the dashboard")


def canary_markdown(
    chosen: Chosen,
    p: LaunchPlan,
    th: AlertThresholds,
    sig: Signals,
    crit: RollbackCriteria,
    scaling: tuple[FleetSizing, AutoscalingPolicy | None, bool],
    backup: EngineResult | None,
    files: dict[str, str],
    warnings: list[str],
    alerted: dict[str, list[str]] | None = None,
) -> str:
    """The canary plan for ``chosen``; ``scaling`` is (fleet sizing, autoscaling policy, autoscaling asked).

    ``alerted`` maps each rollback criterion's key to the ``rollback="true"`` rules of ``alerts.rules.yaml``
    that fire on it (``alerts.rollback_alerts``); a criterion without one says so.
    """
    alerted = alerted or {}
    out = [
        f"# Rollout plan: {title_of(chosen)}",
        "",
        f"Workload `{chosen.workload}`, model `{chosen.served_name}`.",
        "",
    ]
    out += ["## Measured baseline (this run)", "", *baseline_lines(chosen), ""]
    out += ["## Replicas and scaling", "", *_scaling_lines(*scaling), ""]
    if chosen.notes or warnings or p.notes:
        out += ["## Before you start", "", *[f"- {n}" for n in chosen.notes + p.notes + warnings], ""]
    out += ["## Files", "", *[f"- {k}: `{v}`" for k, v in files.items()], ""]
    out += ["## Traffic steps", "", "| step | traffic to the new engine | hold at least | move on when |"]
    out.append("|---|---|---|---|")
    for i, (share, hold) in enumerate(TRAFFIC_STEPS):
        when = "health Ready, metrics scraped, smoke requests answer" if share == 0 else "every gate held all along"
        out.append(f"| {i} | {share}% | {hold} | {when} |")
    out += ["", "## Gates (must hold during every step)", "", "| signal | query | limit |", "|---|---|---|"]
    out += [f"| {s} | {q} | {lim} |" for s, q, lim in gates(th, sig, crit, chosen.name)]
    fallback = (
        f"If the engine itself is at fault (not capacity), pilot the backup configuration `{backup.label}` "
        f"({backup.engine} {backup.version or '(version not recorded)'}) the same way."
        if backup is not None
        else "No backup configuration was measured."
    )
    out += [
        "",
        "## Rollback criteria",
        "",
        "Roll back when any of these holds (the same criteria as the migration plan of step 8). Each names the "
        '`alerts.rules.yaml` rule labelled `rollback="true"` that fires on it, or says that none does:',
        "",
        *[f"- {c.text} — {_alert_text(c.key, alerted)}" for c in crit.criteria()],
        "",
        "Rolling back: set the new engine's traffic share to 0, keep the previous deployment serving (it stays "
        f"scaled up until step {len(TRAFFIC_STEPS) - 1} has held), then investigate with `runbook.md`. {fallback}",
        "",
        f"Queue and KV-cache alerts mean capacity, not a broken engine: scale out (a new replica needs about "
        f"{_num(chosen.result.ready_s if chosen.result else None, '{:,.0f}', ' s')} to become Ready) and hold "
        f"the step; roll back only if they persist at the fleet's full size for {duration_text(crit.breach_for)}.",
    ]
    return "\n".join(out) + "\n"
