"""Checklist step 10: the operations runbook (``runbook.md``): common problems, recovery, scaling.

Seed 003 §7.4 step 10 asks for 运维手册（常见问题、故障恢复、扩缩容策略）. Every entry is written for
the chosen configuration: its health and metrics paths and port, its tuned flags, its measured
start-up time and KV-cache capacity, the alert rule names, the fleet size and the autoscaling policy.
"""

from __future__ import annotations

from helpers.rollout.alerts import AlertThresholds, preallocates
from helpers.rollout.canary import baseline_lines, title_of
from helpers.rollout.choice import Chosen
from helpers.rollout.k8s import startup_budget_s
from helpers.rollout.launch import LaunchPlan
from helpers.rollout.rollback import RollbackCriteria
from helpers.rollout.scaling import AutoscalingPolicy, FleetSizing
from helpers.rollout.series import Signals


def problems(chosen: Chosen, p: LaunchPlan, th: AlertThresholds, sig: Signals) -> list[tuple[str, str, str]]:
    """(symptom, check first, likely fix) rows for the chosen engine."""
    a, k = chosen.adapter, chosen.spec.knobs
    seqs = f"`max_num_seqs={k.max_num_seqs}`" if k.max_num_seqs else "the batch-size knob (`max_num_seqs`)"
    frac = f"`memory_fraction={k.memory_fraction:g}`" if k.memory_fraction else "`memory_fraction`"
    rows = [
        (
            "Pod never becomes Ready",
            f"`kubectl logs`; `curl :{p.port}{a.health_path}`; the startup probe allows {startup_budget_s(chosen)} s; "
            "the model volume has `config.json` at its root",
            "out of GPU memory at load: lower " + frac + " or `max_model_len`; raise the probe budget for cold caches",
        ),
        (
            "EngineTTFTP95High: TTFT p95 above the SLA",
            f"`{sig.queue}` and running requests; prompt lengths at the gateway",
            f"queue growing: add replicas; queue flat: prefill-bound, lower `max_batched_tokens` or {seqs}",
        ),
        (
            f"EngineQueueLong: queue above {th.queue_max:g}",
            "request rate vs the fleet size of step 6; replicas Ready",
            "scale out (new replicas need the start-up time above), then revisit batching",
        ),
    ]
    if sig.kv_usage:
        rows.append(
            (
                f"EngineKVCacheFull: KV-cache usage above {th.kv_usage_max_pct:g}%",
                f"`{sig.kv_usage}`; running requests × their context lengths",
                f"scale out; or fewer concurrent sequences ({seqs}) or a shorter `max_model_len`",
            )
        )
    if sig.gpu_util_pct:
        rows.append(
            (
                f"EngineGPUUtilLow: GPU utilisation below {th.gpu_util_min_pct:g}%",
                "traffic per replica; the running-requests gauge",
                f"too few requests per replica (fewer replicas) or batching capped by {seqs}",
            )
        )
    if sig.gpu_mem_pct:
        mem_fix = (
            "the engine reserves its memory at start: high use is normal (a warning, not a page); a climb beyond "
            "the reserved share is a leak or another process: restart one pod and compare"
            if preallocates(chosen)
            else "close to out-of-memory: fewer concurrent sequences or a smaller `max_model_len`"
        )
        rows.append((f"EngineGPUMemoryHigh: GPU memory above {th.gpu_mem_max_pct:g}%", "KV-cache usage panel", mem_fix))
    rows += [
        (
            "EngineMetricsAbsent: engine metrics missing",
            f"`curl :{p.port}{a.metrics_path}` shows `{sig.liveness.split('{')[0]}`; pod scrape annotations",
            f"metrics flags are in the launch args; the scrape path must be `{a.metrics_path}`",
        ),
        (
            "Prefix-cache hit rate dropped",
            "did the shared system prompt change? `prefix_caching` in the launch config",
            "restore the shared prefix or re-measure: the cost case assumed the measured reuse",
        ),
        (
            "Answers look wrong after the switch",
            "the same prompts against the previous deployment; the checkpoint on the model volume",
            "the benchmark served random weights: compare quality on real traffic before moving past the 5% step",
        ),
    ]
    return rows


def _recovery(chosen: Chosen, crit: RollbackCriteria, backup: str | None) -> list[str]:
    ready = chosen.result.ready_s if chosen.result else None
    wait = f"about {ready:,.0f} s" if ready else "its start-up time"
    out = [
        "1. Roll back first, diagnose second: when a rollback criterion holds, set the new engine's traffic share "
        "to 0 (the previous deployment keeps serving).",
        f"2. One pod failing: `kubectl delete pod` it; the Deployment replaces it in {wait} "
        f"(the startup probe allows {startup_budget_s(chosen)} s).",
        "3. Every pod failing after a change: `kubectl rollout undo deployment/" + chosen.name + "` to the last "
        "good ReplicaSet; the launch args are in `launch.json` for comparison.",
        "4. Engine at fault (a bug, a model it does not support): "
        + (
            f"pilot the backup configuration `{backup}` the same way (step 8's migration plan)."
            if backup
            else "no backup was measured: measure one before you need it."
        ),  # fmt: skip
        "5. After recovery, re-run the playbook with the same workload to confirm the numbers before retrying.",
    ]
    out.append("")
    out.append("Rollback criteria (the same as `canary.md` and step 8):")
    out += [f"- {t}" for t in crit.triggers()]
    return out


def _scaling(chosen: Chosen, sizing: FleetSizing, auto: AutoscalingPolicy | None) -> list[str]:
    ready = chosen.result.ready_s if chosen.result else None
    out = [f"- Fleet: {sizing.replicas} replica(s) — {sizing.basis}."]
    if auto is not None:
        out.append(f"- Autoscaling (`autoscaling.yaml`, KEDA): {auto.min_replicas}-{auto.max_replicas} replicas; "
                   f"scale-in waits {auto.cooldown_s} s after the last trigger.")  # fmt: skip
        out += [f"  - {t.name}: {t.meaning}." for t in auto.triggers]
    else:
        out.append(f"- Manual: `kubectl scale deployment/{chosen.name} --replicas=N`; N from step 6 at the new peak.")
    if ready:
        out.append(
            f"- A new replica takes about {ready:,.0f} s to become Ready: scale out ahead of known peaks, keep "
            "the headroom of the policy above, and never scale in during a canary step."
        )
    out.append("- More load per replica than measured: re-run step 5 at the new concurrency before relying on it.")
    return out


def runbook_markdown(
    chosen: Chosen,
    p: LaunchPlan,
    th: AlertThresholds,
    sig: Signals,
    crit: RollbackCriteria,
    sizing: FleetSizing,
    auto: AutoscalingPolicy | None,
) -> str:
    """The runbook of the chosen configuration as markdown."""
    out = [f"# Runbook: {title_of(chosen)}", "", f"Workload `{chosen.workload}`, deployment `{chosen.name}`.", ""]
    out += ["## Measured baseline", "", *baseline_lines(chosen), ""]
    out += ["## Common problems", "", "| symptom (alert) | check first | likely fix |", "|---|---|---|"]
    out += [f"| {s} | {c} | {f} |" for s, c, f in problems(chosen, p, th, sig)]
    out += ["", "## Recovery", "", *_recovery(chosen, crit, chosen.backup), ""]
    out += ["## Scaling", "", *_scaling(chosen, sizing, auto)]
    return "\n".join(out) + "\n"
