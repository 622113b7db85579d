"""Checklist step 10: how many replicas to run, and the autoscaling policy when the service needs one.

The Deployment's replicas are step 6's fleet sizing of the primary (``cost.json``'s ``fleet`` row:
replicas to serve the profiled peak within the SLA), not a constant. When ``hardware.autoscaling`` is
true, ``autoscaling.yaml`` holds a KEDA ``ScaledObject`` that scales the Deployment on the engine's
own metrics, queried from Prometheus: in-flight requests per replica (running + waiting) against what
one replica held in flight at its SLA capacity in this run (``benchmark.in_flight``), and KV-cache usage against
``rollout.autoscaling.kv_usage_target``. KEDA's Prometheus trigger divides the query's value by the
threshold, so both queries are sums over the deployment and the thresholds are per replica.
kubernetes-validate has no schema for KEDA's custom resources: ``validate_autoscaling`` says so, and
checks what it can (structure, the target Deployment, the queries with promtool).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from helpers.benchmark.in_flight import in_flight
from helpers.core.config import PlaybookConfig
from helpers.cost.records import CostAnalysis, Demand
from helpers.rollout.alerts import check_expressions
from helpers.rollout.choice import Chosen
from helpers.rollout.k8s import NoAliases, labels_of
from helpers.rollout.series import Signals

KEDA_API = "keda.sh/v1alpha1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FleetSizing(_Model):
    """Replicas of the primary and where the number comes from."""

    replicas: int = Field(ge=1)
    gpus_per_replica: int | None = None
    basis: str = Field(description="How the number was reached, in words.")
    from_fleet: bool = Field(description="True when it is step 6's sizing, False for the fallback of 1.")


class Trigger(_Model):
    """One scaling signal: a PromQL sum over the deployment and the per-replica value it is held to."""

    name: str
    query: str
    threshold: float
    meaning: str


class AutoscalingPolicy(_Model):
    """What the ScaledObject does, in numbers and words."""

    min_replicas: int = Field(ge=1)
    max_replicas: int = Field(ge=1)
    min_basis: str
    max_basis: str
    cooldown_s: int
    prometheus_url: str
    triggers: list[Trigger]


def fleet_sizing(cost: CostAnalysis | None, label: str) -> FleetSizing:
    """The primary's replicas from step 6's record (its ``fleet`` row for ``label``), else 1 with the reason."""
    row = cost.fleet_row(label) if cost is not None else None
    if row is None:
        return FleetSizing(replicas=1, basis="step 6 wrote no fleet sizing for this configuration: 1 replica",
                           from_fleet=False)  # fmt: skip
    n = row.replicas
    if n is None or n < 1:
        return FleetSizing(
            replicas=1,
            basis="step 6 could not size a fleet (no measured point met the SLA): 1 replica to pilot with",
            from_fleet=False,
        )
    basis = f"step 6 fleet sizing: {int(n)} replica(s) for {row.sizing_basis or 'the profiled peak'}"
    return FleetSizing(replicas=int(n), gpus_per_replica=row.gpus_per_replica, basis=basis,
                       from_fleet=True)  # fmt: skip


def _baseline_in_flight(chosen: Chosen) -> tuple[int, str] | None:
    """Requests one replica held in flight (running + waiting) at its standing measurement, and how known."""
    held = in_flight(chosen.result) if chosen.representative is not None else None
    if held is None or held.total < 1:
        return None
    return round(held.total), held.text()


def policy(
    cfg: PlaybookConfig, chosen: Chosen, sig: Signals, sizing: FleetSizing, demand: Demand | None = None
) -> AutoscalingPolicy | None:
    """The autoscaling policy for ``chosen``; None when no engine signal can drive it."""
    a = cfg.rollout.autoscaling
    triggers = []
    held = _baseline_in_flight(chosen)
    if held and sig.running:
        c, how = held
        triggers.append(
            Trigger(
                name="in-flight-requests",
                query=f"{sig.running} + {sig.queue}",
                threshold=float(c),
                meaning=f"running + waiting requests per replica above {c}, what one replica held in flight at "
                f"the load that stands for it in this run ({how})",
            )
        )
    if sig.kv_usage_sum:
        triggers.append(
            Trigger(
                name="kv-cache-usage",
                query=sig.kv_usage_sum,
                threshold=a.kv_usage_target,
                meaning=f"average KV-cache usage per replica above {a.kv_usage_target:.0%}",
            )
        )
    if not triggers:
        return None
    peak = (demand.requests_per_s if demand is not None else None) or cfg.workload.peak_requests_per_s
    mean = cfg.workload.mean_requests_per_s
    if a.min_replicas:
        lo, lo_basis = a.min_replicas, "rollout.autoscaling.min_replicas"
    elif mean and peak and sizing.from_fleet:
        lo = max(1, math.ceil(sizing.replicas * mean / peak))
        lo_basis = (
            f"⌈{sizing.replicas} × {mean:g}/{peak:g}⌉, the {sizing.replicas} replica(s) sized at the peak scaled to "
            f"mean traffic ({mean:g} of {peak:g} req/s)"
        )
    else:
        lo, lo_basis = 1, "no mean traffic given (workload.mean_requests_per_s)"
    hi = max(lo, math.ceil(sizing.replicas * a.headroom))
    hi_basis = f"⌈{sizing.replicas} × {a.headroom:g}⌉, the {sizing.replicas} replica(s) sized at the peak × headroom"
    if hi == lo and hi != math.ceil(sizing.replicas * a.headroom):
        hi_basis += f" (raised to the minimum, {lo})"
    return AutoscalingPolicy(
        min_replicas=lo,
        max_replicas=hi,
        min_basis=lo_basis,
        max_basis=hi_basis,
        cooldown_s=a.cooldown_s,
        prometheus_url=a.prometheus_url,
        triggers=triggers,
    )


def scaled_object(chosen: Chosen, p: AutoscalingPolicy) -> dict[str, Any]:
    """The KEDA ScaledObject of the policy, targeting the Deployment of ``k8s.yaml``."""
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": chosen.name, "labels": labels_of(chosen)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": chosen.name},
            "minReplicaCount": p.min_replicas,
            "maxReplicaCount": p.max_replicas,
            "pollingInterval": 15,
            "cooldownPeriod": p.cooldown_s,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": p.cooldown_s,
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
                        }
                    }
                }
            },
            "triggers": [
                {
                    "type": "prometheus",
                    "name": t.name,
                    "metadata": {"serverAddress": p.prometheus_url, "query": t.query, "threshold": f"{t.threshold:g}"},
                }
                for t in p.triggers
            ],
        },
    }


def write_autoscaling(path: Path, chosen: Chosen, p: AutoscalingPolicy) -> Path:
    """Write the ScaledObject as YAML; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = (
        f"# Autoscaling policy for {chosen.spec.label} ({chosen.workload}): a KEDA ScaledObject (needs KEDA in the\n"
        f"# cluster and Prometheus at {p.prometheus_url}). Apply after k8s.yaml: kubectl apply -f {path.name}\n"
    )
    path.write_text(head + yaml.dump(scaled_object(chosen, p), Dumper=NoAliases, sort_keys=False, width=200),
                    encoding="utf-8")  # fmt: skip
    return path


def validate_autoscaling(path: Path, k8s_path: Path | None = None) -> tuple[bool | None, str]:
    """Check the ScaledObject: (True/False, message) where fully decided; (None, message) where only partly.

    KEDA's CRD schema is not in kubernetes-validate, so the result is at best partial: the structure, the
    target Deployment (named in ``k8s_path``) and the trigger queries (promtool) are checked, the schema is not.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        return False, f"{path.name}: not readable YAML: {err}"
    problems = []
    if not isinstance(doc, dict) or doc.get("apiVersion") != KEDA_API or doc.get("kind") != "ScaledObject":
        return False, f"{path.name}: not a {KEDA_API} ScaledObject"
    spec = doc.get("spec") or {}
    lo, hi = spec.get("minReplicaCount"), spec.get("maxReplicaCount")
    if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi):
        problems.append(f"replica bounds {lo}..{hi} are not 0 ≤ min ≤ max")
    target = (spec.get("scaleTargetRef") or {}).get("name")
    if k8s_path is not None:
        names = {d["metadata"]["name"] for d in yaml.safe_load_all(Path(k8s_path).read_text(encoding="utf-8"))
                 if d and d.get("kind") == "Deployment"}  # fmt: skip
        if target not in names:
            problems.append(f"scaleTargetRef {target!r} is no Deployment of {Path(k8s_path).name}")
    queries = []
    for t in spec.get("triggers") or []:
        meta = t.get("metadata") or {}
        if t.get("type") != "prometheus" or not {"serverAddress", "query", "threshold"} <= set(meta):
            problems.append(f"trigger {t.get('name')!r} lacks serverAddress/query/threshold")
            continue
        try:
            float(meta["threshold"])
        except ValueError:
            problems.append(f"trigger {t.get('name')!r}: threshold {meta['threshold']!r} is not a number")
        queries.append(meta["query"])
    if not queries:
        problems.append("no Prometheus trigger")
    ok_q, msg_q = check_expressions(queries, path.parent) if queries else (False, "")
    if problems or not ok_q:
        return False, f"{path.name}: " + "; ".join(problems + ([f"queries: {msg_q}"] if queries and not ok_q else []))
    return None, (
        f"{path.name}: KEDA ScaledObject — not schema-checked (kubernetes-validate has no schema for KEDA's "
        f"custom resources); checked: structure, target deployment/{target}, replicas {lo}..{hi}, "
        f"{len(queries)} trigger queries with promtool"
    )
