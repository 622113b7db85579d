"""Prometheus alert rules for the chosen engine: seed 003 §5.3's thresholds in the engine's metric names.

The four seed alerts: TTFT p95 above the SLA, GPU utilisation below 60% for 5 minutes, GPU memory
above 95%, more than 100 queued requests; plus one that fires when the engine's metrics vanish
(the rollback trigger needs to know the engine is down, not just quiet) and one on KV-cache usage in
the engine's own metric. GPU engines reserve their KV cache up front (vLLM ``--gpu-memory-utilization``,
SGLang ``--mem-fraction-static``, TensorRT-LLM ``kv_cache_free_gpu_memory_fraction``), so GPU memory
sits near that share all the time: there the GPU-memory rule is a warning and KV-cache usage is the
page that means "about to run out". Every rule carries a ``rollback`` label: ``"true"`` for the rules
that fire on a rollback criterion (``helpers.rollout.rollback``), which they name in their
``rollback_criterion`` annotation: TTFT p95 (waiting the criteria's duration), metrics absent, the
throughput floor relative to the requests running (when the engine exports a running gauge and a baseline
was measured) and pod restarts (kube-state-metrics). The failed-request share has no rule: no engine
exports a failed-request counter, so it is watched at the gateway (``UNALERTED``). A CPU engine gets no
GPU rules. ``check_rules`` runs ``promtool check rules`` on the written file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from helpers.core.config import Alerts, Rollback
from helpers.rollout.choice import Chosen
from helpers.rollout.rollback import RollbackCriteria, duration_text
from helpers.rollout.series import Signals, engine_selector, gpu_selector, pod_restarts, signals

PROMTOOL_INSTALL = "apt-get update && apt-get install -y prometheus"
PREALLOC_MARGIN_PCT = 5  # reserved share this close to the memory threshold: the rule may fire at idle
UNALERTED = {
    "errors": "no alert rule: the engines export no failed-request counter; watch the 5xx share at your gateway",
    "throughput": "no alert rule: this engine exports no running-request gauge to scale the floor by",
}
"""Why a rollback criterion has no rule, by its key (``RollbackCriteria.criteria``)."""


class AlertThresholds(Alerts):
    """The config's ``alerts`` section plus the TTFT limit, which is the SLA's."""

    ttft_p95_ms: float = Field(default=2000, gt=0, description="TTFT p95 above this fires (the SLA).")
    ttft_for: str = Field(default=Rollback().breach_for, description="How long TTFT p95 stays high before paging.")
    max_error_share: float = Field(default=0.01, ge=0, lt=1, description="The SLA's failed-request share.")


def thresholds_from(cfg: Any) -> AlertThresholds:
    """Thresholds for a config: its ``alerts`` section, the SLA's TTFT limit, the rollback criteria's duration."""
    ttft_for = cfg.alerts.ttft_for or cfg.rollout.rollback.breach_for
    data = {
        **cfg.alerts.model_dump(),
        "ttft_p95_ms": cfg.sla.ttft_p95_ms,
        "ttft_for": ttft_for,
        "max_error_share": cfg.sla.max_error_share,
    }
    return AlertThresholds.model_validate(data)


def preallocates(chosen: Chosen) -> bool:
    """Whether the engine reserves its GPU memory at start (every GPU engine the playbook knows does).

    An adapter that grows its memory with load can say so with ``preallocates_gpu_memory = False``.
    """
    return not chosen.adapter.runs_on_cpu and getattr(chosen.adapter, "preallocates_gpu_memory", True)


def _rule(
    name: str,
    expr: str,
    duration: str,
    severity: str,
    summary: str,
    description: str,
    labels: dict,
    criterion: str | None,
) -> dict:
    """One alerting rule; ``criterion`` is the key of the rollback criterion it fires on (None: not a criterion)."""
    annotations = {"summary": summary, "description": description}
    if criterion:
        annotations["rollback_criterion"] = criterion
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, "rollback": "true" if criterion else "false", **labels},
        "annotations": annotations,
    }  # fmt: skip


def rollback_alerts(doc: dict[str, Any]) -> dict[str, list[str]]:
    """Criterion key → names of the ``rollback="true"`` rules of a rule file (as data) that fire on it."""
    out: dict[str, list[str]] = {}
    for group in doc.get("groups") or []:
        for r in group.get("rules") or []:
            key = (r.get("annotations") or {}).get("rollback_criterion")
            if key and (r.get("labels") or {}).get("rollback") == "true":
                out.setdefault(key, []).append(r["alert"])
    return out


def throughput_floor_expr(sig: Signals, crit: RollbackCriteria) -> str | None:
    """PromQL that is non-empty where a replica serves below the floor for the requests it runs; None: no floor."""
    per, cap = crit.per_request_tok_s, crit.baseline_running
    if per is None or cap is None or not (sig.output_tok_s_by_instance and sig.running_by_instance):
        return None
    return (
        f"{sig.output_tok_s_by_instance} < {crit.throughput_floor * per:.6g} * "
        f"clamp_max({sig.running_by_instance}, {cap:.6g})"
    )


def _rollback_rules(chosen: Chosen, sig: Signals, crit: RollbackCriteria, who: str, labels: dict) -> list[dict]:
    """The rules of the throughput floor (when it can be expressed) and of pod restarts."""
    out = []
    floor = throughput_floor_expr(sig, crit)
    if floor is not None and crit.per_request_tok_s is not None:
        out.append(
            _rule(
                "EngineThroughputBelowFloor",
                floor,
                crit.breach_for,
                "page",
                "output throughput below the floor for the requests running",
                f'{who}: replica {{{{ $labels.instance }}}} serves {{{{ $value | printf "%.0f" }}}} output tok/s, '
                f"below {crit.throughput_floor:.0%} of {crit.per_request_tok_s:,.1f} tok/s per running request "
                f"(measured at the load that stands for it) for {duration_text(crit.breach_for)}. A rollback "
                "criterion during a canary step.",
                labels,
                "throughput",
            )
        )
    out.append(
        _rule(
            "EnginePodRestarts",
            f"{pod_restarts(chosen.name)} > {crit.max_restarts}",
            "1m",
            "page",
            f"more than {crit.max_restarts} pod restart(s) within an hour",
            f"{who}: {{{{ $value }}}} container restart(s) of deployment {chosen.name} in the last hour. A "
            "rollback criterion during a canary step.",
            labels,
            "restarts",
        )
    )
    return out


def _serving_rules(sig: Signals, th: AlertThresholds, who: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The rules every engine gets: TTFT p95 over the SLA, a long queue, metrics gone."""
    return [
        _rule(
            "EngineTTFTP95High",
            f"{sig.ttft_p95_s} * 1000 > {th.ttft_p95_ms:g}",
            th.ttft_for,
            "page",
            f"TTFT p95 above {th.ttft_p95_ms:g} ms",
            f'{who}: TTFT p95 is {{{{ $value | printf "%.0f" }}}} ms (SLA {th.ttft_p95_ms:g} ms) for '
            f"{duration_text(th.ttft_for)}; users feel it. A rollback criterion during a canary step.",
            labels,
            "ttft",
        ),
        _rule(
            "EngineQueueLong",
            f"{sig.queue} > {th.queue_max:g}",
            th.queue_for,
            "page",
            f"more than {th.queue_max:g} requests queued",
            f"{who}: {{{{ $value }}}} requests waiting; throughput is short, scale out or revisit batching.",
            labels,
            None,
        ),
        _rule(
            "EngineMetricsAbsent",
            f"absent({sig.liveness})",
            th.absent_for,
            "page",
            "engine exports no metrics",
            f"{who}: no `{sig.liveness}` series for {th.absent_for}; the engine is down or not scraped.",
            labels,
            "absent",
        ),
    ]


def _resource_rules(
    chosen: Chosen, sig: Signals, th: AlertThresholds, who: str, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """The rules on what the engine's series and the GPU exporter show: KV cache, GPU utilisation and memory."""
    out: list[dict[str, Any]] = []
    if sig.kv_usage:
        out.append(
            _rule(
                "EngineKVCacheFull",
                f"{sig.kv_usage} * 100 > {th.kv_usage_max_pct:g}",
                th.kv_usage_for,
                "page",
                f"KV-cache usage above {th.kv_usage_max_pct:g}%",
                f'{who}: KV cache {{{{ $value | printf "%.0f" }}}}% used; the engine is about to queue or preempt '
                "requests: scale out, or lower max_num_seqs / max_model_len.",
                labels,
                None,
            )
        )
    if sig.gpu_util_pct:
        out.append(
            _rule(
                "EngineGPUUtilLow",
                f"{sig.gpu_util_pct} < {th.gpu_util_min_pct:g}",
                th.gpu_util_for,
                "warning",
                f"GPU utilisation below {th.gpu_util_min_pct:g}% for {th.gpu_util_for}",
                f'{who}: pod {{{{ $labels.pod }}}} GPUs average {{{{ $value | printf "%.0f" }}}}% busy; '
                "batching is probably misconfigured or the pod is over-provisioned.",
                labels,
                None,
            )
        )
    if sig.gpu_mem_pct:
        pre = preallocates(chosen)
        why = (
            "the engine reserves its KV cache up front, so high use is normal: watch EngineKVCacheFull; a climb "
            "beyond the reserved share is a leak or another process on the GPU."
            if pre
            else "close to out-of-memory."
        )
        out.append(
            _rule(
                "EngineGPUMemoryHigh",
                f"{sig.gpu_mem_pct} > {th.gpu_mem_max_pct:g}",
                th.gpu_mem_for,
                "warning" if pre else "page",
                f"GPU memory above {th.gpu_mem_max_pct:g}%",
                f'{who}: GPU {{{{ $labels.gpu }}}} of {{{{ $labels.pod }}}} is {{{{ $value | printf "%.1f" }}}}% '
                "full; " + why,
                labels,
                None,
            )
        )
    return out


def rules(
    chosen: Chosen, th: AlertThresholds, sig: Signals | None = None, crit: RollbackCriteria | None = None
) -> dict[str, Any]:
    """The rule file as data: one group named after the workload and configuration.

    With ``crit`` (the rollout's rollback criteria) the throughput-floor and pod-restart rules are added.
    """
    gpus = None if chosen.adapter.runs_on_cpu else gpu_selector(chosen.name)
    sig = sig or signals(chosen.adapter, engine_selector(chosen.served_name), gpus, th.window)
    who = f"{chosen.adapter.display_name} {chosen.version or ''} serving {chosen.served_name}".replace("  ", " ")
    labels = {"workload": chosen.workload, "engine": chosen.adapter.name, "deployment": chosen.name}
    out = [*_serving_rules(sig, th, who, labels), *_resource_rules(chosen, sig, th, who, labels)]
    if crit is not None:
        out += _rollback_rules(chosen, sig, crit, who, labels)
    return {"groups": [{"name": f"engine-playbook-{chosen.name}", "rules": out}]}


def memory_alert_warning(chosen: Chosen, th: AlertThresholds) -> str | None:
    """A note when the engine's reserved GPU memory reaches, or comes within a few points of, the memory alert.

    The reserved share excludes the CUDA context, graphs and activations (SGLang keeps them outside
    ``--mem-fraction-static``), so within ``PREALLOC_MARGIN_PCT`` of the threshold the GPU-memory rule can
    fire at idle; that is why it is a warning for such engines and KV-cache usage is the page.
    """
    frac = chosen.spec.knobs.memory_fraction
    if not preallocates(chosen) or frac is None or frac * 100 < th.gpu_mem_max_pct - PREALLOC_MARGIN_PCT:
        return None
    if frac * 100 >= th.gpu_mem_max_pct:
        return (
            f"memory_fraction {frac:g} reserves ≥ {th.gpu_mem_max_pct:g}% of GPU memory up front, so the GPU-memory "
            "warning will fire all the time; lower memory_fraction or raise alerts.gpu_mem_max_pct. KV-cache usage "
            "(EngineKVCacheFull) is the page that means the engine is running out."
        )
    return (
        f"memory_fraction {frac:g} reserves {frac:.0%} of GPU memory up front; with the CUDA context, graphs and "
        f"activations on top, GPU memory can sit above the {th.gpu_mem_max_pct:g}% rule at idle. That rule is a "
        "warning for this engine; KV-cache usage (EngineKVCacheFull) is the page."
    )


def write_rules(
    path: Path, chosen: Chosen, th: AlertThresholds, crit: RollbackCriteria | None = None, doc: dict | None = None
) -> Path:
    """Write the rule file as YAML (``doc``, else ``rules(chosen, th, crit=crit)``); returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Prometheus alert rules for {chosen.spec.label} ({chosen.workload}); seed 003 §5.3 thresholds.\n"
    doc = doc if doc is not None else rules(chosen, th, crit=crit)
    path.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=200), encoding="utf-8")
    return path


def promtool() -> str | None:
    """Path of ``promtool``, or None when it is not installed."""
    return shutil.which("promtool")


def check_rules(path: Path) -> tuple[bool, str]:
    """``promtool check rules FILE``: (passed, promtool's output or why it could not run).

    promtool runs in the file's folder on the bare file name, and any path left in its output is cut to
    the file name, so the message (shown in the report) names no machine path.
    """
    tool = promtool()
    if tool is None:
        return False, f"promtool not found; install it with: {PROMTOOL_INSTALL}"
    path = Path(path).resolve()
    out = subprocess.run(
        [tool, "check", "rules", path.name], capture_output=True, text=True, timeout=60, check=False, cwd=path.parent
    )
    text = (out.stdout + out.stderr).strip().replace(str(path.parent) + "/", "")
    return out.returncode == 0, text


def check_expressions(exprs: list[str], workdir: Path) -> tuple[bool, str]:
    """Check PromQL expressions (e.g. a dashboard's) with promtool, as recording rules in a scratch file."""
    group = {"groups": [{"name": "expressions", "rules": [{"record": f"check:expr{i}", "expr": e}
                                                          for i, e in enumerate(exprs)]}]}  # fmt: skip
    path = Path(workdir) / "expressions-check.rules.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(group, sort_keys=False, width=200), encoding="utf-8")
    try:
        return check_rules(path)
    finally:
        path.unlink(missing_ok=True)
