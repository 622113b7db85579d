"""Steps 9-10 in the notebook: compute and save each record, then show it.

``pilot`` writes the artifacts (``RolloutManifest``), ``validate`` checks them (``RolloutValidation``);
``show_pilot`` and ``show_rollout`` only display.

Both steps look files up by the keys of ``helpers.rollout.artifacts.ARTIFACTS``, the keys the writer
returns, so every file written is shown.
"""

from __future__ import annotations

import pandas as pd

from helpers.core.errors import PlaybookError
from helpers.cost.records import CostAnalysis
from helpers.decision.tree import DecisionResult
from helpers.report.notebook import Context, esc, not_yet, say, show_html, show_markdown, show_table
from helpers.rollout import validate_rollout, write_rollout
from helpers.rollout.artifacts import ARTIFACTS, describe
from helpers.rollout.records import Check, RolloutManifest, RolloutValidation
from helpers.workload.profile import Profile

RESULT_TEXT = {True: "valid", False: "INVALID", None: "partly checked"}


def pilot(ctx: Context) -> RolloutManifest | None:
    """Step 9: write the primary's rollout artifacts; saved as ``rollout.json``. None without a primary."""
    decision = ctx.folder.load(DecisionResult)
    if decision is None or not decision.primary:
        return None
    cost, profile = ctx.folder.load(CostAnalysis), ctx.folder.load(Profile)
    try:
        files = write_rollout(
            ctx.run_dir,
            ctx.cfg,
            decision,
            ctx.folder.engine_results(),
            cost=cost,
            profile=profile,
        )
    except PlaybookError as err:
        say(f"Rollout artifacts could not be written: {err}", "warn")
        return None
    manifest = RolloutManifest(files={k: v.relative_to(ctx.run_dir).as_posix() for k, v in files.items()})
    ctx.folder.save(manifest)
    return manifest


def _show_file(ctx: Context, rel: str, key: str, open_: bool = True) -> None:
    """A text artifact in a <details> element under its description."""
    path = ctx.run_dir / rel
    if not path.is_file():
        return
    summary = f"{ARTIFACTS[key].filename} — {describe(key)}" if key in ARTIFACTS else rel
    show_html(
        f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>"
        f"<pre>{esc(path.read_text(encoding='utf-8'))}</pre></details>"
    )


def show_pilot(ctx: Context, manifest: RolloutManifest | None) -> None:
    """Step 9: where to pilot, the tuned launch command, what to collect and what to retune."""
    if manifest is None:
        not_yet("no primary engine was chosen in step 7, so there is nothing to pilot")
        return
    rel = manifest.files
    if "pilot" in rel:
        show_markdown((ctx.run_dir / rel["pilot"]).read_text(encoding="utf-8"))
    for key, open_ in (("launch_shell", True), ("launch_docker", False)):
        if key in rel:
            _show_file(ctx, rel[key], key, open_)


def validate(ctx: Context, manifest: RolloutManifest | None) -> RolloutValidation | None:
    """Step 10: check every artifact with the ecosystem's own tool; saved as ``rollout_validation.json``."""
    if manifest is None:
        return None
    checks = validate_rollout({k: ctx.run_dir / v for k, v in manifest.files.items()})
    rec = RolloutValidation(checks={k: Check(ok=ok, message=m) for k, (ok, m) in checks.items()})
    ctx.folder.save(rec)
    return rec


def show_rollout(ctx: Context, manifest: RolloutManifest | None, validation: RolloutValidation | None) -> None:
    """Step 10: replicas and autoscaling, rollback criteria, canary plan, runbook, and their validation."""
    if manifest is None or validation is None:
        not_yet("no rollout artifacts (no primary engine)")
        return
    files = manifest.files
    paths = {k: ctx.run_dir / v for k, v in files.items()}
    links = "".join(f"<li><a href='{esc(v)}'>{esc(v)}</a> — {esc(describe(k))}</li>" for k, v in files.items())
    show_html(f"<p class='pb-caption'>Artifacts in the run folder</p><ul>{links}</ul>")
    if "canary" in paths and paths["canary"].is_file():
        show_markdown(paths["canary"].read_text(encoding="utf-8"))
    show_table(
        pd.DataFrame(
            [
                {
                    "artifact": k,
                    "result": RESULT_TEXT[c.ok],
                    "checked by": "; ".join(x.strip() for x in c.message.splitlines()),
                }
                for k, c in validation.checks.items()
            ]
        ),
        "Validation with the ecosystem's own tools",
    )
    if "runbook" in paths and paths["runbook"].is_file():
        show_markdown(paths["runbook"].read_text(encoding="utf-8"), "runbook.md — common problems, recovery, scaling")
    for key in ("autoscaling", "k8s", "alerts"):
        if key in files:
            _show_file(ctx, files[key], key, open_=False)
