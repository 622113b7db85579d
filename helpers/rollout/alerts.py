"""Prometheus alert rules for the chosen engine: seed 003 §5.3's thresholds in the engine's metric names.

The four seed alerts: TTFT p95 above the SLA, GPU utilisation below 60% for 5 minutes, GPU memory
above 95%, more than 100 queued requests; plus one that fires when the engine's metrics vanish
(the rollback trigger needs to know the engine is down, not just quiet). A CPU engine gets no GPU
rules. ``check_rules`` runs ``promtool check rules`` on the written file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from helpers.core.config import Alerts
from helpers.rollout.choice import Chosen
from helpers.rollout.series import Signals, engine_selector, gpu_selector, signals

PROMTOOL_INSTALL = "apt-get update && apt-get install -y prometheus"


class AlertThresholds(Alerts):
    """The config's ``alerts`` section plus the TTFT limit, which is the SLA's."""

    ttft_p95_ms: float = Field(default=2000, gt=0, description="TTFT p95 above this fires (the SLA).")


def thresholds_from(cfg: Any) -> AlertThresholds:
    """Thresholds for a config: its ``alerts`` section when it has one, the SLA's TTFT limit always."""
    return AlertThresholds.model_validate({**cfg.alerts.model_dump(), "ttft_p95_ms": cfg.sla.ttft_p95_ms})


def _rule(name: str, expr: str, duration: str, severity: str, summary: str, description: str, labels: dict) -> dict:
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity, **labels},
        "annotations": {"summary": summary, "description": description},
    }


def rules(chosen: Chosen, th: AlertThresholds, sig: Signals | None = None) -> dict[str, Any]:
    """The rule file as data: one group named after the workload and configuration."""
    gpus = None if chosen.adapter.runs_on_cpu else gpu_selector(chosen.name)
    sig = sig or signals(chosen.adapter, engine_selector(chosen.served_name), gpus, th.window)
    who = f"{chosen.adapter.display_name} {chosen.version or ''} serving {chosen.served_name}".replace("  ", " ")
    labels = {"workload": chosen.workload, "engine": chosen.adapter.name, "deployment": chosen.name}
    out = [
        _rule(
            "EngineTTFTP95High",
            f"{sig.ttft_p95_s} * 1000 > {th.ttft_p95_ms:g}",
            th.ttft_for,
            "page",
            f"TTFT p95 above {th.ttft_p95_ms:g} ms",
            f'{who}: TTFT p95 is {{{{ $value | printf "%.0f" }}}} ms (SLA {th.ttft_p95_ms:g} ms); users feel it.',
            labels,
        ),
        _rule(
            "EngineQueueLong",
            f"{sig.queue} > {th.queue_max:g}",
            th.queue_for,
            "page",
            f"more than {th.queue_max:g} requests queued",
            f"{who}: {{{{ $value }}}} requests waiting; throughput is short, scale out or revisit batching.",
            labels,
        ),
        _rule(
            "EngineMetricsAbsent",
            f"absent({sig.liveness})",
            th.absent_for,
            "page",
            "engine exports no metrics",
            f"{who}: no `{sig.liveness}` series for {th.absent_for}; the engine is down or not scraped.",
            labels,
        ),
    ]
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
            )
        )
    if sig.gpu_mem_pct:
        out.append(
            _rule(
                "EngineGPUMemoryHigh",
                f"{sig.gpu_mem_pct} > {th.gpu_mem_max_pct:g}",
                th.gpu_mem_for,
                "page",
                f"GPU memory above {th.gpu_mem_max_pct:g}%",
                f'{who}: GPU {{{{ $labels.gpu }}}} of {{{{ $labels.pod }}}} is {{{{ $value | printf "%.1f" }}}}% '
                "full; close to out-of-memory.",
                labels,
            )
        )
    return {"groups": [{"name": f"engine-playbook-{chosen.name}", "rules": out}]}


def memory_alert_warning(chosen: Chosen, th: AlertThresholds) -> str | None:
    """A warning when the engine pre-allocates more GPU memory than the memory alert allows."""
    frac = chosen.spec.knobs.memory_fraction
    if chosen.adapter.runs_on_cpu or frac is None or frac * 100 < th.gpu_mem_max_pct:
        return None
    return (
        f"memory_fraction {frac:g} reserves ≥ {th.gpu_mem_max_pct:g}% of GPU memory up front, so the GPU-memory "
        "alert will fire all the time; lower memory_fraction or raise the alert threshold."
    )


def write_rules(path: Path, chosen: Chosen, th: AlertThresholds) -> Path:
    """Write the rule file as YAML; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# Prometheus alert rules for {chosen.spec.label} ({chosen.workload}); seed 003 §5.3 thresholds.\n"
    path.write_text(header + yaml.safe_dump(rules(chosen, th), sort_keys=False, width=200), encoding="utf-8")
    return path


def promtool() -> str | None:
    """Path of ``promtool``, or None when it is not installed."""
    return shutil.which("promtool")


def check_rules(path: Path) -> tuple[bool, str]:
    """``promtool check rules PATH``: (passed, promtool's output or why it could not run)."""
    tool = promtool()
    if tool is None:
        return False, f"promtool not found; install it with: {PROMTOOL_INSTALL}"
    out = subprocess.run([tool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False)
    return out.returncode == 0, (out.stdout + out.stderr).strip()


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
