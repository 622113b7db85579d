"""What a ``playbook run`` starts dies with it, with real processes: ``kill -9`` of the run mid-point.

The run is the real CLI (``tests/fakes/kernel_playbook.py``: the lock, the watchdog) with step 5 in a
kernel-like child in its own session, which starts the fake engine through the real python launcher
and drives it with guidellm (real worker processes). Both the engine's group and the kernel's are
recorded in ``run.pids``; after the ``kill -9`` the watchdog ends them. If the watchdog is killed too,
the next run on the same run id ends them when it takes over the stale lock.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fakes.fake_engine import fake_spec
from fakes.faults import busy_engine, find_in_tree, kill_all, wait_for

from helpers.core.paths import REPO_ROOT
from helpers.run.processes import PIDS_NAME, members, recorded

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups via /proc")

FAKES = REPO_ROOT / "tests" / "fakes"
STREAMED = "fake:streamed_requests_total"


def config(tmp_path: Path) -> Path:
    cfg = {
        "name": "kill-run",
        "model": {"path": "tiny-llama"},
        "engines": [fake_spec("e", env={"FAKE_TOKEN_DELAY_S": "0.5"})],  # 8 tokens: 4 s a request
        "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},  # the kill, not evidence
        "quality": {"enabled": False},
        "workload": {"input_tokens": 16, "output_tokens": 8, "concurrency": [2], "requests_per_point": 4},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def start_run(tmp_path: Path, run_id: str, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, str(FAKES / "kernel_playbook.py"), str(tmp_path / "reports"), str(config(tmp_path)), run_id]
    cmd += extra
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def mid_point(run: subprocess.Popen, run_dir: Path) -> list:
    """Wait until the engine streams and both groups are recorded; return the records."""
    wait_for("engine", lambda: find_in_tree(run.pid, "fake_openai_server"), 120)
    wait_for("requests in flight", lambda: busy_engine(run.pid, "fake_openai_server", STREAMED), 120)
    groups = wait_for("two recorded groups", lambda: len(recorded(run_dir)) >= 2 and recorded(run_dir), 30)
    assert {g.what for g in groups} == {"engine fake-engine", "notebook kernel and its load-generator workers"}
    assert all(g.owner == run.pid for g in groups)
    kernel = next(g.pgid for g in groups if g.what.startswith("notebook"))
    assert len(members(kernel)) >= 2, "the kernel and guidellm's workers share its group"
    return groups


def watchdog_of(run: subprocess.Popen) -> int:
    return wait_for("watchdog", lambda: find_in_tree(run.pid, "helpers.run.processes"), 30)


def test_kill_9_of_playbook_run_ends_its_engine_and_load_generator_workers(tmp_path):
    run = start_run(tmp_path, "r1")
    run_dir = tmp_path / "reports" / "r1"
    try:
        groups = mid_point(run, run_dir)
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        t0 = time.monotonic()
        wait_for("every group of the run gone", lambda: not any(members(g.pgid) for g in groups), 60, 0.1)
        took = time.monotonic() - t0
    finally:
        left = [pid for g in recorded(run_dir) for pid in members(g.pgid)]
        kill_all(left)
    assert took < 30, f"{took:.1f} s"
    wait_for("records forgotten", lambda: not (run_dir / PIDS_NAME).exists(), 10)


def test_a_run_whose_watchdog_died_too_is_cleaned_up_by_the_next_run(tmp_path):
    run = start_run(tmp_path, "r2")
    run_dir = tmp_path / "reports" / "r2"
    try:
        groups = mid_point(run, run_dir)
        os.kill(watchdog_of(run), signal.SIGKILL)
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        time.sleep(2)
        engine = next(g.pgid for g in groups if g.what.startswith("engine"))
        assert members(engine), "nothing else ends the engine's group"
        again = start_run(tmp_path, "r2", "--no-kernel")  # it only has to take the lock over
        _out, err = again.communicate(timeout=300)
    finally:
        kill_all([pid for g in groups for pid in members(g.pgid)])
    assert again.returncode == 0, err[-2000:]
    assert f"taking over the stale run lock {run_dir / 'run.lock'} of pid {run.pid}" in err
    assert f"ended what that run left running: engine fake-engine (group {engine}, 1 process); " in err
    assert not any(members(g.pgid) for g in groups)
