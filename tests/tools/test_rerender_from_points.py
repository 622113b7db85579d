"""``playbook run --from-points`` on a copy of an archived run: a failed re-render leaves a healthy archive
as it was, and a re-render keeps the measuring run's notebook timings (``helpers.run.rerender``).

Real re-renders: the seven notebooks through papermill on a copy of ``reports/h100-20261205-chat-8b-vllm``
(a synthetic workload; about 15 s each on two cores). The failure is a real one: the copied config names a
trace file that is not there, so step 1 fails as the Azure archive's does without its ``data/`` link.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.core.paths import REPO_ROOT, REPORTS_DIR
from helpers.run.rerender import FROM_POINTS_ENV, RERENDER_KEY
from helpers.tools.runner import notebooks, run_playbook

RUN = "h100-20261205-chat-8b-vllm"


def _archive(tmp_path: Path) -> Path:
    """A copy of the archived run in a reports folder of its own, its ``run.json`` as a measuring run writes it.

    The archives' own ``run.json`` files have no ``notebook_seconds`` (their measuring runs' timings were lost
    to re-renders before these kept them), so the copy gets a measuring run's record, timings included.
    """
    run = tmp_path / "reports" / RUN
    shutil.copytree(REPORTS_DIR / RUN, run, symlinks=True)
    measured = {nb.name: 60.0 + i for i, nb in enumerate(notebooks())}  # step 5 measured: minutes, not 2 s
    record = {"run_id": RUN, "failures": {}, "notebook_seconds": measured}
    (run / "run.json").write_text(json.dumps(record), encoding="utf-8")
    return run


def _break_step_1(run: Path) -> None:
    """Point the archived config's workload at a trace file that does not exist (step 1 fails reading it)."""
    path = run / "config.yaml"
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    cfg["workload"]["source"].update(kind="trace", path="data/no-such-trace.csv", format="csv")
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")


def _state(folder: Path) -> dict[str, str]:
    """Every file (its sha256), symlink (its target) and folder under ``folder``, by relative path."""
    out = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if p.is_symlink():
            out[key] = f"-> {os.readlink(p)}"
        elif p.is_dir():
            out[key] = "dir"
        else:
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_a_failed_rerender_of_a_healthy_archive_leaves_every_file_as_it_was(tmp_path):
    run = _archive(tmp_path)
    _break_step_1(run)
    assert json.loads((run / "run.json").read_text(encoding="utf-8"))["failures"] == {}
    before = _state(run)
    scratch = tmp_path / "tmp"  # where the failed re-render's notebooks are kept (TMPDIR of the command)
    scratch.mkdir()
    res = subprocess.run(
        [sys.executable, "-m", "helpers.tools.cli", "run", str(run / "config.yaml"), "--run-id", RUN,
         "--reports-dir", str(run.parent), "--from-points", "--quiet"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, env={**os.environ, "TMPDIR": str(scratch)},
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    error = res.stderr.strip().splitlines()[-1]
    assert error.startswith("playbook: error: the re-render from points of"), error
    assert "failed in 01_workload.ipynb: TraceError:" in error and "no-such-trace.csv" in error, error
    assert "the archive was left as it was" in error, error
    assert _state(run) == before  # byte for byte: no report, run.json, summary or notebook of the failed re-render
    assert sorted(p.name for p in run.parent.iterdir()) == [RUN]  # no copy left beside it, no index written
    kept = Path(re.search(r"notebooks and logs are in (\S+)$", error).group(1))
    assert kept.parent == scratch
    failed = (kept / "notebooks" / "01_workload.ipynb").read_text(encoding="utf-8")
    assert "no-such-trace.csv" in failed and failed != (run / "notebooks" / "01_workload.ipynb").read_text()
    assert {p.name for p in (kept / "notebooks").iterdir()} == {nb.name for nb in notebooks()}
    assert (kept / "logs" / "01_workload.log").is_file()  # the re-render's kernel log (01_workload.rerender.log)


def test_a_rerender_keeps_the_measured_notebook_seconds_and_writes_its_own_beside_them(tmp_path):
    run = _archive(tmp_path)
    earlier = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert earlier["notebook_seconds"]
    logs, progress = _state(run / "logs" / "notebooks"), (run / "logs" / "progress.jsonl").read_bytes()
    report = run_playbook(run / "config.yaml", run_id=RUN, reports_dir=run.parent, log_output=False, from_points=True)
    assert report == run / "report.html" and report.is_file()
    assert FROM_POINTS_ENV not in os.environ  # set for the run's kernels only
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert info["failures"] == {} and info["run_id"] == RUN
    assert info["notebook_seconds"] == earlier["notebook_seconds"]
    assert set(info[RERENDER_KEY]) == {nb.name for nb in notebooks()}
    assert all(isinstance(s, float) and s > 0 for s in info[RERENDER_KEY].values())
    assert list(info) == [*earlier, RERENDER_KEY]  # the other keys kept, in their order
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["notebook_seconds"] == earlier["notebook_seconds"]
    assert sorted(p.name for p in run.parent.iterdir()) == sorted([RUN, "index.html"])  # the copy is gone
    # the measuring attempts' logs and progress as they were; the re-render's kernel lines beside them
    after = _state(run / "logs" / "notebooks")
    measuring = {k: v for k, v in logs.items() if not k.endswith(".rerender.log")}  # an earlier re-render's: replaced
    assert {k: v for k, v in after.items() if not k.endswith(".rerender.log")} == measuring
    assert sorted(k for k in after if k.endswith(".rerender.log")) == [f"{nb.stem}.rerender.log" for nb in notebooks()]
    assert (run / "logs" / "progress.jsonl").read_bytes() == progress


def test_a_rerender_of_an_archive_with_failures_writes_the_failed_notebook_as_before(tmp_path):
    run = _archive(tmp_path)
    _break_step_1(run)
    info = json.loads((run / "run.json").read_text(encoding="utf-8"))
    info["failures"] = {"07_review.ipynb": "07_review.ipynb: KeyError: 'x'"}  # an archive that already failed
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    archived = (run / "notebooks" / "01_workload.ipynb").read_text(encoding="utf-8")
    report = run_playbook(run / "config.yaml", run_id=RUN, reports_dir=run.parent, log_output=False, from_points=True)
    assert report.is_file()
    after = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert list(after["failures"]) == ["01_workload.ipynb"] and "TraceError" in after["failures"]["01_workload.ipynb"]
    assert after["notebook_seconds"] == info["notebook_seconds"]
    written = (run / "notebooks" / "01_workload.ipynb").read_text(encoding="utf-8")
    assert written != archived and "no-such-trace.csv" in written
    assert sorted(p.name for p in run.parent.iterdir()) == sorted([RUN, "index.html"])
