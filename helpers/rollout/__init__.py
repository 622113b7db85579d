"""Checklist steps 9-10, pilot and rollout: the files an engineer takes from the run to production.

``write_rollout`` writes into ``<run>/rollout/``: the launch configuration with the tuned flags
(``launch.sh``, ``launch-docker.sh``, ``launch.json``), Prometheus alert rules
(``alerts.rules.yaml``), a Grafana dashboard (``dashboard.json``), Kubernetes manifests
(``k8s.yaml``) and the canary plan with the runbook's first page (``canary.md``).
``validate_rollout`` checks them with the ecosystem's own tools: promtool, kubernetes-validate and
grafana-foundation-sdk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.decision.tree import DecisionResult
from helpers.rollout import alerts, canary, dashboard, k8s, launch
from helpers.rollout.alerts import AlertThresholds, check_expressions, check_rules, thresholds_from
from helpers.rollout.choice import Chosen, RolloutError, choose
from helpers.rollout.dashboard import expressions, validate_dashboard
from helpers.rollout.k8s import validate_manifests
from helpers.rollout.series import engine_selector, gpu_selector, signals

__all__ = [
    "AlertThresholds",
    "Chosen",
    "RolloutError",
    "check_rules",
    "choose",
    "validate_dashboard",
    "validate_manifests",
    "validate_rollout",
    "write_rollout",
]

ROLLOUT_DIR = "rollout"


def write_rollout(
    run_dir: Path,
    cfg: Any,
    decision: Any,
    results: list,
    thresholds: AlertThresholds | None = None,
    replicas: int = 1,
    model_claim: str | None = None,
) -> dict[str, Path]:
    """Write the rollout artifacts of the decision's primary configuration; artifact name → path.

    ``decision`` is a ``DecisionResult`` (or its JSON dump), ``results`` the run's ``EngineResult``
    list. ``thresholds`` defaults to seed 003 §5.3 with the config's SLA (and its ``alerts`` section,
    once the config has one). Raises ``RolloutError`` when the primary cannot be deployed.
    """
    if isinstance(decision, dict):
        decision = DecisionResult.model_validate(decision)
    run_dir = Path(run_dir)
    out = run_dir / ROLLOUT_DIR
    chosen = choose(cfg, decision, results)
    th = thresholds or thresholds_from(cfg)
    plan, files = launch.write_launch(out, chosen, cfg.model, run_dir)
    gpus = None if chosen.adapter.runs_on_cpu else gpu_selector(chosen.name)
    sig = signals(chosen.adapter, engine_selector(chosen.served_name), gpus, th.window)
    files["alerts"] = alerts.write_rules(out / "alerts.rules.yaml", chosen, th)
    files["dashboard"] = dashboard.write_dashboard(out / "dashboard.json", chosen, th)
    files["k8s"] = k8s.write_manifests(out / "k8s.yaml", chosen, plan, replicas=replicas, model_claim=model_claim)
    warnings = [w for w in (alerts.memory_alert_warning(chosen, th),) if w]
    backup = next((r for r in results if r.label == decision.backup), None)
    names = {k: p.name for k, p in files.items()}
    files["canary"] = out / "canary.md"
    md = canary.canary_markdown(chosen, plan, th, sig, backup, names, warnings)
    files["canary"].write_text(md, encoding="utf-8")
    return files


def validate_rollout(files: dict[str, Path]) -> dict[str, tuple[bool, str]]:
    """Run every validator on the artifacts of ``write_rollout``: name → (passed, message)."""
    out: dict[str, tuple[bool, str]] = {}
    if "alerts" in files:
        out["alerts"] = check_rules(files["alerts"])
    if "dashboard" in files:
        out["dashboard"] = validate_dashboard(files["dashboard"])
        out["dashboard_promql"] = check_expressions(expressions(files["dashboard"]), Path(files["dashboard"]).parent)
    if "k8s" in files:
        out["k8s"] = validate_manifests(files["k8s"])
    return out
