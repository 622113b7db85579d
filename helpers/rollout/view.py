"""Steps 9-10 view: the pilot plan with its launch command, and the rollout artifacts, validated.

Both steps look files up by the keys of ``helpers.rollout.artifacts.ARTIFACTS``, the keys the writer
returns, so every file written is shown.
"""

from __future__ import annotations

import pandas as pd

from helpers.core.errors import PlaybookError
from helpers.report.notebook import Context, esc, not_yet, say, show_html, show_markdown, show_table
from helpers.rollout import validate_rollout, write_rollout
from helpers.rollout.artifacts import ARTIFACTS, describe
from helpers.run.records import load_engine_results

RESULT_TEXT = {True: "valid", False: "INVALID", None: "partly checked"}


def _files(ctx: Context) -> dict | None:
    decision = ctx.load_json("decision.json")
    if not decision or not decision.get("primary"):
        return None
    try:
        return write_rollout(
            ctx.run_dir,
            ctx.cfg,
            decision,
            load_engine_results(ctx.run_dir),
            cost=ctx.load_json("cost.json"),
            profile=ctx.load_json("profile.json"),
        )
    except PlaybookError as err:
        say(f"Rollout artifacts could not be written: {err}", "warn")
        return None


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


def pilot(ctx: Context) -> None:
    """Step 9: where to pilot, the tuned launch command, what to collect and what to retune."""
    files = _files(ctx)
    if not files:
        not_yet("no primary engine was chosen in step 7, so there is nothing to pilot")
        return
    rel = {k: v.relative_to(ctx.run_dir).as_posix() for k, v in files.items()}
    ctx.save_json("rollout.json", rel)
    if "pilot" in rel:
        show_markdown((ctx.run_dir / rel["pilot"]).read_text(encoding="utf-8"))
    for key, open_ in (("launch_shell", True), ("launch_docker", False)):
        if key in rel:
            _show_file(ctx, rel[key], key, open_)


def rollout(ctx: Context) -> None:
    """Step 10: replicas and autoscaling, rollback criteria, canary plan, runbook, and their validation."""
    files = ctx.load_json("rollout.json")
    if not files:
        not_yet("no rollout artifacts (no primary engine)")
        return
    paths = {k: ctx.run_dir / v for k, v in files.items()}
    links = "".join(f"<li><a href='{esc(v)}'>{esc(v)}</a> — {esc(describe(k))}</li>" for k, v in files.items())
    show_html(f"<p class='pb-caption'>Artifacts in the run folder</p><ul>{links}</ul>")
    if "canary" in paths and paths["canary"].is_file():
        show_markdown(paths["canary"].read_text(encoding="utf-8"))
    checks = validate_rollout(paths)
    show_table(
        pd.DataFrame(
            [
                {"artifact": k, "result": RESULT_TEXT[ok], "checked by": "; ".join(x.strip() for x in msg.splitlines())}
                for k, (ok, msg) in checks.items()
            ]
        ),
        "Validation with the ecosystem's own tools",
    )
    ctx.save_json("rollout_validation.json", {k: {"ok": ok, "message": m} for k, (ok, m) in checks.items()})
    if "runbook" in paths and paths["runbook"].is_file():
        show_markdown(paths["runbook"].read_text(encoding="utf-8"), "runbook.md — common problems, recovery, scaling")
    for key in ("autoscaling", "k8s", "alerts"):
        if key in files:
            _show_file(ctx, files[key], key, open_=False)
