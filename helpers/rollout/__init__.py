"""Checklist steps 9-10, pilot and rollout: the files an engineer takes from the run to production.

``write_rollout`` writes into ``<run>/rollout/`` the files of ``helpers.rollout.artifacts.ARTIFACTS``:
the launch configuration with the tuned flags (``launch.sh``, ``launch-docker.sh``, ``launch.json``),
the pilot plan (``pilot.md``), Prometheus alert rules (``alerts.rules.yaml``), a Grafana dashboard
(``dashboard.json``), Kubernetes manifests with the fleet's replicas (``k8s.yaml``), the autoscaling
policy when the service needs one (``autoscaling.yaml``), the canary plan with the rollback criteria
(``canary.md``) and the runbook (``runbook.md``). ``validate_rollout`` checks them with the
ecosystem's own tools: promtool, kubernetes-validate and grafana-foundation-sdk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.cost.records import CostAnalysis
from helpers.decision.tree import DecisionResult
from helpers.rollout import alerts, canary, dashboard, k8s, launch, pilot, runbook, scaling
from helpers.rollout.alerts import AlertThresholds, check_expressions, check_rules, thresholds_from
from helpers.rollout.artifacts import ARTIFACTS, ROLLOUT_DIR, artifact_path
from helpers.rollout.choice import Chosen, RolloutError, choose
from helpers.rollout.dashboard import expressions, validate_dashboard
from helpers.rollout.k8s import validate_manifests
from helpers.rollout.rollback import criteria_for
from helpers.rollout.series import engine_selector, gpu_selector, signals
from helpers.workload.profile import Profile

__all__ = [
    "ARTIFACTS",
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


def write_rollout(
    run_dir: Path,
    cfg: Any,
    decision: Any,
    results: list,
    thresholds: AlertThresholds | None = None,
    replicas: int | None = None,
    model_claim: str | None = None,
    cost: CostAnalysis | None = None,
    profile: Profile | None = None,
) -> dict[str, Path]:
    """Write the rollout artifacts of the decision's primary configuration; artifact key → path.

    ``decision`` is a ``DecisionResult`` (or its JSON dump), ``results`` the run's ``EngineResult``
    list, ``cost`` step 6's record (its fleet row sizes the Deployment; ``replicas`` overrides
    it) and ``profile`` step 1's record (the pilot plan compares with it). ``thresholds``
    defaults to the config's ``alerts`` with its SLA. Raises ``RolloutError`` when the primary cannot
    be deployed.
    """
    if isinstance(decision, dict):
        decision = DecisionResult.model_validate(decision)
    run_dir = Path(run_dir)
    out = run_dir / ROLLOUT_DIR
    chosen = choose(cfg, decision, results)
    th = thresholds or thresholds_from(cfg)
    crit = criteria_for(cfg, chosen)
    plan, files = launch.write_launch(out, chosen, cfg.model, run_dir)
    gpus = None if chosen.adapter.runs_on_cpu else gpu_selector(chosen.name)
    sig = signals(chosen.adapter, engine_selector(chosen.served_name), gpus, th.window)
    sizing = scaling.fleet_sizing(cost, chosen.spec.label)
    if replicas is not None:
        sizing = sizing.model_copy(update={"replicas": replicas, "basis": f"{replicas} replica(s), set by the caller"})
    demand = cost.demand if cost is not None else None
    auto = scaling.policy(cfg, chosen, sig, sizing, demand) if cfg.hardware.autoscaling else None
    rule_doc = alerts.rules(chosen, th, sig, crit)
    files["alerts"] = alerts.write_rules(artifact_path(out, "alerts"), chosen, th, doc=rule_doc)
    files["dashboard"] = dashboard.write_dashboard(artifact_path(out, "dashboard"), chosen, th)
    files["k8s"] = k8s.write_manifests(
        artifact_path(out, "k8s"), chosen, plan, replicas=sizing.replicas, model_claim=model_claim
    )
    if auto is not None:
        files["autoscaling"] = scaling.write_autoscaling(artifact_path(out, "autoscaling"), chosen, auto)
    warnings = [w for w in (alerts.memory_alert_warning(chosen, th),) if w]
    launch_names = {files[k].name: ARTIFACTS[k].text for k in ("launch_shell", "launch_docker", "launch_json")}
    texts = {
        "pilot": pilot.pilot_markdown(cfg, chosen, sig, profile, launch_names),
        "runbook": runbook.runbook_markdown(chosen, plan, th, sig, crit, sizing, auto),
    }
    backup = next((r for r in results if r.label == decision.backup), None)
    names = {k: p.name for k, p in files.items()} | {k: ARTIFACTS[k].filename for k in ("pilot", "runbook")}
    texts["canary"] = canary.canary_markdown(
        chosen,
        plan,
        th,
        sig,
        crit,
        (sizing, auto, cfg.hardware.autoscaling),
        backup,
        names,
        warnings,
        alerts.rollback_alerts(rule_doc),
    )
    for key, text in texts.items():
        files[key] = artifact_path(out, key)
        files[key].write_text(text, encoding="utf-8")
    return files


def validate_rollout(files: dict[str, Path]) -> dict[str, tuple[bool | None, str]]:
    """Run every validator on the artifacts of ``write_rollout``: name → (passed, message).

    ``passed`` is None where a file could be checked only in part (the KEDA ScaledObject has no schema in
    kubernetes-validate); the message says what was and was not checked. Messages name files, not paths.
    """
    out: dict[str, tuple[bool | None, str]] = {}
    if "alerts" in files:
        out["alerts"] = check_rules(files["alerts"])
    if "dashboard" in files:
        out["dashboard"] = validate_dashboard(files["dashboard"])
        out["dashboard_promql"] = check_expressions(expressions(files["dashboard"]), Path(files["dashboard"]).parent)
    if "k8s" in files:
        out["k8s"] = validate_manifests(files["k8s"])
    if "autoscaling" in files:
        out["autoscaling"] = scaling.validate_autoscaling(files["autoscaling"], files.get("k8s"))
    return out
