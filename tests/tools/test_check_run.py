"""``playbook run`` checks first: a ✗ of the whole run stops it before any notebook; a configuration's ✗ is
said to be a failed row and the run goes on (step 5 records the row, as it always has); ``--no-check`` skips it.

The real CLI in a subprocess, its run folders in a scratch reports folder (``fakes.faults.CLI``).
"""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from fakes.faults import CLI

from helpers.core.paths import REPO_ROOT
from helpers.run.records import load_engine_result


def run(reports: Path, config: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", CLI, str(reports), "run", str(config), "--run-id", "r", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def write(tmp_path: Path, engines: list[dict], model: str = "tiny-llama") -> Path:
    cfg = {
        "name": "check-run-test",
        "model": {"path": model},
        "engines": engines,
        "workload": {"concurrency": [1], "requests_per_point": 2},
        "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},
        "cost": {"gpu": "cpu-2core"},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def bare_model(tmp_path: Path) -> Path:
    """A model folder with config.json and no tokenizer: it validates, and the run could not use it."""
    d = tmp_path / "bare-model"
    d.mkdir()
    (d / "config.json").write_text((REPO_ROOT / "playbook/models/tiny-llama/config.json").read_text())
    return d


MISSING = {"label": "missing", "engine": "vllm-cpu", "launcher": {"python": "/nonexistent/bin/python"}}


def test_a_whole_run_x_stops_the_run_before_anything_is_written(tmp_path):
    reports = tmp_path / "reports"
    res = run(reports, write(tmp_path, [MISSING], model=str(bare_model(tmp_path))), "--only", "01_workload")
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip().splitlines()
    assert err[0].startswith("✗ model: ") and "has config.json but no tokenizer" in err[0]
    assert err[-1] == (
        "playbook: error: the preflight check failed (✗ above): nothing was started; fix it, or run with --no-check"
    )
    assert "01_workload" not in res.stdout and not reports.exists()


def test_no_check_skips_it(tmp_path):
    reports = tmp_path / "reports"
    res = run(
        reports, write(tmp_path, [MISSING], model=str(bare_model(tmp_path))), "--only", "01_workload", "--no-check"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[playbook] 01_workload.ipynb ..." in res.stdout and "preflight" not in res.stdout
    assert "✗" not in res.stderr and not (reports / "r" / "logs" / "check.txt").exists()


def test_a_configuration_x_is_a_failed_row_and_the_run_goes_on(tmp_path):
    reports = tmp_path / "reports"
    res = run(reports, write(tmp_path, [MISSING]), "--only", "03_benchmark")
    assert res.returncode == 0, res.stdout + res.stderr
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("✗")]
    assert len(said) == 1 and said[0].startswith("✗ engine 'missing': /nonexistent/bin/python (launcher.python)")
    assert "that configuration will be a failed row" in said[0]
    assert "[playbook] preflight: 1 of 5 checks failed; 'missing' will be failed row(s), the others run" in res.stdout
    row = load_engine_result(reports / "r", "missing")
    assert row is not None and row.status == "failed" and "/nonexistent/bin/python" in (row.reason or "")
    archived = (reports / "r" / "logs" / "check.txt").read_text(encoding="utf-8")
    assert archived.startswith("# playbook check before playbook run, ")
    assert said[0] in archived and "✓ config:" not in archived  # run validated it itself: the checks past it
    assert "✓ model: ./playbook/models/tiny-llama" in archived
    assert json.loads((reports / "r" / "run.json").read_text())["failures"] == {}
