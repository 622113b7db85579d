"""The rollout artifacts: one definition of every file's key, name and description.

The writer (``helpers.rollout.write_rollout``) returns ``{key: path}`` with these keys, ``rollout.json``
stores them, and the step 9-10 views look files up by the same keys, so a renamed file cannot silently
drop out of the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROLLOUT_DIR = "rollout"


@dataclass(frozen=True)
class ArtifactFile:
    """One file of the rollout folder."""

    key: str
    filename: str
    text: str


ARTIFACTS: dict[str, ArtifactFile] = {
    a.key: a
    for a in (
        ArtifactFile("launch_shell", "launch.sh", "shell command with the tuned flags"),
        ArtifactFile("launch_docker", "launch-docker.sh", "the equivalent container command"),
        ArtifactFile("launch_json", "launch.json", "launch configuration as data"),
        ArtifactFile("pilot", "pilot.md", "pilot plan: where to pilot, what to collect, what to retune"),
        ArtifactFile("alerts", "alerts.rules.yaml", "Prometheus alert rules (seed 003 §5.3 thresholds)"),
        ArtifactFile("dashboard", "dashboard.json", "Grafana dashboard (grafana-foundation-sdk)"),
        ArtifactFile("k8s", "k8s.yaml", "Kubernetes Deployment + Service, replicas from the fleet sizing"),
        ArtifactFile("autoscaling", "autoscaling.yaml", "KEDA ScaledObject: the autoscaling policy"),
        ArtifactFile("canary", "canary.md", "canary plan with the rollback criteria"),
        ArtifactFile("runbook", "runbook.md", "runbook: common problems, recovery, scaling"),
    )
}


def artifact_path(out_dir: Path, key: str) -> Path:
    """Where the artifact ``key`` lives inside the rollout folder ``out_dir``."""
    return Path(out_dir) / ARTIFACTS[key].filename


def describe(key: str) -> str:
    """The artifact's description (the key itself for an unknown key, e.g. from an older run)."""
    a = ARTIFACTS.get(key)
    return a.text if a else key
