"""Steps 9-10 view: the pilot's launch configuration and the rollout artifacts, validated."""

from __future__ import annotations

import pandas as pd

from helpers.core.errors import PlaybookError
from helpers.report.notebook import Context, esc, not_yet, say, show_html, show_table
from helpers.rollout import validate_rollout, write_rollout
from helpers.run.records import load_engine_results

ARTIFACT_TEXT = {
    "launch.sh": "shell command with the tuned flags",
    "launch-docker.sh": "the equivalent container command",
    "launch.json": "launch configuration as data",
    "alerts.rules.yaml": "Prometheus alert rules (seed 003 §5.3 thresholds)",
    "dashboard.json": "Grafana dashboard (grafana-foundation-sdk)",
    "k8s.yaml": "Kubernetes Deployment + Service",
    "canary.md": "canary plan and runbook first page",
}


def _files(ctx: Context) -> dict | None:
    decision = ctx.load_json("decision.json")
    if not decision or not decision.get("primary"):
        return None
    try:
        return write_rollout(ctx.run_dir, ctx.cfg, decision, load_engine_results(ctx.run_dir))
    except PlaybookError as err:
        say(f"Rollout artifacts could not be written: {err}", "warn")
        return None


def pilot(ctx: Context) -> None:
    """Step 9: the chosen engine's launch command for a pilot."""
    files = _files(ctx)
    if not files:
        not_yet("no primary engine was chosen in step 7, so there is nothing to pilot")
        return
    ctx.save_json("rollout.json", {k: str(v.relative_to(ctx.run_dir)) for k, v in files.items()})
    for name in ("launch.sh", "launch-docker.sh"):
        if name in files:
            text = files[name].read_text(encoding="utf-8")
            show_html(
                f"<p class='pb-caption'>{esc(ARTIFACT_TEXT[name])} (<code>rollout/{esc(name)}</code>)</p>"
                f"<pre>{esc(text)}</pre>"
            )


def rollout(ctx: Context) -> None:
    """Step 10: the alert rules, dashboard, manifests and canary plan, with their validation."""
    files = ctx.load_json("rollout.json")
    if not files:
        not_yet("no rollout artifacts (no primary engine)")
        return
    paths = {k: ctx.run_dir / v for k, v in files.items()}
    links = "".join(
        f"<li><a href='{esc(v)}'>{esc(v)}</a> — {esc(ARTIFACT_TEXT.get(k, k))}</li>" for k, v in files.items()
    )
    show_html(f"<p class='pb-caption'>Artifacts in the run folder</p><ul>{links}</ul>")
    checks = validate_rollout(paths)
    show_table(
        pd.DataFrame([{"artifact": k, "valid": ok, "checked by": msg} for k, (ok, msg) in checks.items()]),
        "Validation with the ecosystem's own tools",
    )
    ctx.save_json("rollout_validation.json", {k: {"ok": ok, "message": m} for k, (ok, m) in checks.items()})
    if "canary.md" in paths:
        show_html(
            f"<details open><summary>canary.md</summary><pre>{esc(paths['canary.md'].read_text())}</pre></details>"
        )
