"""Checklist step 10: a Kubernetes Deployment and Service for the chosen engine, and their validation.

The container runs the image with the same ``command``/``args`` as the Docker launch (tuned flags
included), requests ``nvidia.com/gpu`` per tensor-parallel rank (a CPU engine requests CPU and
memory instead), probes the engine's health endpoint (a startup probe sized from the measured time
to healthy), mounts the model volume read-only at the launcher's model path, and is annotated for
Prometheus scraping of the engine's metrics path. An engine with an extra-options file (TensorRT-LLM)
gets it from a ConfigMap mounted where the Docker launch mounts it. Secret-looking environment
values come from a Secret, never from the manifest. ``validate_manifests`` checks every document
against the Kubernetes JSON schema (``kubernetes-validate``, strict) and the wiring between them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from helpers.core.secrets import is_secret_name
from helpers.launchers.docker import MODEL_MOUNT, OPTIONS_MOUNT
from helpers.rollout.choice import Chosen
from helpers.rollout.launch import LaunchPlan

PROBE_PERIOD_S = 10
MIN_STARTUP_S = 300


class NoAliases(yaml.SafeDumper):
    """A YAML dumper that writes repeated mappings out in full (no ``&id``/``*id`` anchors)."""

    def ignore_aliases(self, data: Any) -> bool:
        """Never alias: every mapping is written where it is used."""
        return True


def labels_of(chosen: Chosen) -> dict[str, str]:
    """The labels every object of the chosen configuration carries (the Deployment selects on the name)."""
    return {
        "app.kubernetes.io/name": chosen.name,
        "app.kubernetes.io/component": "llm-engine",
        "app.kubernetes.io/part-of": "engine-playbook",
    }


def _env(chosen: Chosen, env: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in sorted(env):
        if is_secret_name(k):
            out.append({"name": k, "valueFrom": {"secretKeyRef": {"name": f"{chosen.name}-secrets", "key": k}}})
        else:
            out.append({"name": k, "value": env[k]})
    return out


def startup_budget_s(chosen: Chosen) -> int:
    """Seconds the startup probe allows: twice the measured time to healthy (at least 5 minutes)."""
    measured = chosen.result.ready_s if chosen.result else None
    if measured:
        return int(max(MIN_STARTUP_S, 2 * measured))
    return int(max(MIN_STARTUP_S, chosen.spec.startup_timeout_s))


def _resources(chosen: Chosen, cpu: str, memory: str) -> dict[str, Any]:
    if chosen.adapter.runs_on_cpu:
        return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}
    gpus = str(chosen.spec.knobs.tensor_parallel)
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"nvidia.com/gpu": gpus}}


def _container(chosen: Chosen, p: LaunchPlan, mounts: list[dict[str, Any]], cpu: str, memory: str) -> dict[str, Any]:
    """The engine's container: image, arguments, port, resources, the three probes on its health path."""
    adapter = chosen.adapter
    probe = {"httpGet": {"path": adapter.health_path, "port": "http"}, "periodSeconds": PROBE_PERIOD_S}
    container: dict[str, Any] = {
        "name": "engine",
        "image": p.image,
        "args": p.container_args,
        "ports": [{"name": "http", "containerPort": p.port, "protocol": "TCP"}],
        "resources": _resources(chosen, cpu, memory),
        "startupProbe": {**probe, "failureThreshold": math.ceil(startup_budget_s(chosen) / PROBE_PERIOD_S)},
        "readinessProbe": {**probe, "failureThreshold": 3},
        "livenessProbe": {**probe, "periodSeconds": 20, "failureThreshold": 3},
        "volumeMounts": mounts,
    }
    if p.container_command:
        container["command"] = p.container_command
    if p.container_env:
        container["env"] = _env(chosen, p.container_env)
    return container


def _annotations(chosen: Chosen, p: LaunchPlan) -> dict[str, str]:
    """The pod's annotations: where Prometheus scrapes it, and which engine, version and tuned knobs it runs."""
    adapter = chosen.adapter
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(p.port),
        "prometheus.io/path": adapter.metrics_path,
        "engine-playbook/engine": adapter.name,
        "engine-playbook/version": chosen.version or "unknown",
        "engine-playbook/tuned-knobs": ",".join(f"{k}={v}" for k, v in sorted(chosen.tuned_applied.items())) or "none",
    }


def manifests(
    chosen: Chosen,
    p: LaunchPlan,
    replicas: int = 1,
    model_claim: str | None = None,
    cpu: str = "8",
    memory: str = "64Gi",
) -> list[dict[str, Any]]:
    """Deployment, Service and (when needed) the extra-options ConfigMap, as data.

    ``replicas`` is the fleet size of step 6 (``helpers.rollout.scaling.fleet_sizing``).
    """
    name, labels = chosen.name, labels_of(chosen)
    mounts: list[dict[str, Any]] = [
        {"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "model", "persistentVolumeClaim": {"claimName": model_claim or f"{name}-model", "readOnly": True}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
    ]
    docs: list[dict[str, Any]] = []
    if p.options_file is not None:
        cm = f"{name}-options"
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": cm, "labels": labels},
                "data": {p.options_file.name: Path(p.options_file).read_text(encoding="utf-8")},
            }
        )
        mounts.append({"name": "options", "mountPath": OPTIONS_MOUNT, "readOnly": True})
        volumes.append({"name": "options", "configMap": {"name": cm}})
    container = _container(chosen, p, mounts, cpu, memory)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": labels, "annotations": _annotations(chosen, p)},
                "spec": {"terminationGracePeriodSeconds": 60, "containers": [container], "volumes": volumes},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": name},
            "ports": [{"name": "http", "port": p.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    return [*docs, deployment, service]


def write_manifests(path: Path, chosen: Chosen, p: LaunchPlan, **kwargs: Any) -> Path:
    """Write the manifests as one multi-document YAML file; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = (
        f"# Kubernetes manifests for {chosen.spec.label} ({chosen.workload}). The PersistentVolumeClaim named in\n"
        f"# volumes.model must hold the model checkpoint at its root; apply with: kubectl apply -f {path.name}\n"
    )
    body = yaml.dump_all(manifests(chosen, p, **kwargs), Dumper=NoAliases, sort_keys=False, width=200)
    path.write_text(head + body, encoding="utf-8")
    return path


def _wiring(docs: list[dict[str, Any]]) -> list[str]:
    """Problems the schema cannot see: selectors that match nothing, ports and volumes not declared."""
    problems = []
    deployments = [d for d in docs if d.get("kind") == "Deployment"]
    pod_labels = [d["spec"]["template"]["metadata"].get("labels", {}) for d in deployments]
    for d in deployments:
        sel = d["spec"]["selector"].get("matchLabels", {})
        pod = d["spec"]["template"]["metadata"].get("labels", {})
        if not sel.items() <= pod.items():
            problems.append(f"deployment/{d['metadata']['name']}: selector {sel} does not match its pod labels")
        spec = d["spec"]["template"]["spec"]
        vols = {v["name"] for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            ports = {p.get("name") for p in c.get("ports", [])}
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols:
                    problems.append(f"deployment/{d['metadata']['name']}: mount {m['name']!r} has no volume")
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                port = c.get(kind, {}).get("httpGet", {}).get("port")
                if isinstance(port, str) and port not in ports:
                    problems.append(f"deployment/{d['metadata']['name']}: {kind} port {port!r} is not declared")
    for s in (d for d in docs if d.get("kind") == "Service"):
        sel = s["spec"].get("selector", {})
        if not any(sel.items() <= labels.items() for labels in pod_labels):
            problems.append(f"service/{s['metadata']['name']}: selector {sel} matches no pod of this file")
    return problems


def validate_manifests(path: Path, k8s_version: str | None = None) -> tuple[bool | None, str]:
    """Strict schema check of every document (``kubernetes-validate``) plus the wiring between them.

    Returns (True, lines) when every document passed, (False, lines) when one failed, and (None, lines)
    when none failed but one had no schema to check against (a custom resource); the lines say which.
    """
    try:
        # kubernetes_validate loads its schemas on import; only step 10 validates manifests
        import kubernetes_validate
    except ImportError:
        return False, "kubernetes-validate is not installed (pip install kubernetes-validate==1.37.0)"
    path = Path(path)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except yaml.YAMLError as err:
        return False, f"{path.name}: not valid YAML: {err}"
    version = k8s_version or kubernetes_validate.latest_version()
    lines, ok, unchecked = [], True, False
    for d in docs:
        kn = f"{d.get('kind', '?').lower()}/{(d.get('metadata') or {}).get('name', '?')}"
        try:
            checked = kubernetes_validate.validate(d, version, strict=True)
            lines.append(f"{kn}: valid against Kubernetes {checked} (strict)")
        except kubernetes_validate.ValidationError as err:
            ok = False
            where = ".".join(str(x) for x in err.path)
            lines.append(f"{kn}: INVALID at {where or '<root>'}: {err.message}")
        except kubernetes_validate.SchemaNotFoundError:
            unchecked = True
            lines.append(f"{kn}: NOT schema-checked: kubernetes-validate has no schema for {d.get('apiVersion')}")
    problems = _wiring(docs)
    lines += problems
    if not docs:
        return False, f"{path.name}: no documents"
    if not ok or problems:
        return False, "\n".join(lines)
    return (None if unchecked else True), "\n".join(lines)
