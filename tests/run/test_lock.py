"""The run lock with real processes: a second run refuses at once naming the holder; a dead run's lock is taken over."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from helpers.core.errors import PlaybookError
from helpers.core.paths import REPO_ROOT
from helpers.run.lock import LOCK_NAME, RunLock, RunLockedError, read_holder

FAKES = REPO_ROOT / "tests" / "fakes"
HOLD = (
    "import sys, time\n"
    "from helpers.run.lock import RunLock\n"
    "lock = RunLock(sys.argv[1]).acquire()\n"
    "print('locked', flush=True)\n"
    "time.sleep(600)\n"
)


def holder(run_dir: Path) -> subprocess.Popen:
    """A second process that takes the lock and keeps it."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "locked", p.stderr.read()
    return p


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait(timeout=10)


def test_a_held_lock_refuses_at_once_naming_pid_host_and_start(tmp_path):
    p = holder(tmp_path)
    try:
        t0 = time.monotonic()
        with pytest.raises(RunLockedError) as err:
            RunLock(tmp_path).acquire()
        assert time.monotonic() - t0 < 1.0
        msg = str(err.value)
        assert isinstance(err.value, PlaybookError) and "\n" not in msg
        assert msg.startswith(f"{tmp_path / LOCK_NAME}: run folder in use by another playbook run")
        assert f"pid {p.pid} on host {socket.gethostname()}, started 20" in msg
    finally:
        stop(p)


def test_a_killed_holder_is_taken_over_and_said_on_stderr(tmp_path, capsys):
    p = holder(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=10)
    assert read_holder(tmp_path / LOCK_NAME).pid == p.pid  # the dead run's file is still there
    lock = RunLock(tmp_path).acquire()
    try:
        assert lock.took_over is not None and lock.took_over.pid == p.pid
        err = capsys.readouterr().err
        assert f"taking over the stale run lock {tmp_path / LOCK_NAME} of pid {p.pid}" in err
        assert "(that process is gone)" in err
        assert read_holder(tmp_path / LOCK_NAME).pid == os.getpid()
    finally:
        lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_release_lets_the_next_run_in_quietly(tmp_path, capsys):
    with RunLock(tmp_path) as lock:
        assert lock.held
        with pytest.raises(RunLockedError):  # even from the same process, a second lock on the folder refuses
            RunLock(tmp_path).acquire()
    assert not lock.held and not (tmp_path / LOCK_NAME).exists()
    with RunLock(tmp_path) as again:
        assert again.took_over is None
    assert capsys.readouterr().err == ""


def test_a_lock_left_on_another_host_is_not_taken_over(tmp_path):
    record = {"pid": 1234, "host": "some-other-host", "started": "2026-12-01T00:00:00+00:00"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(record))
    with pytest.raises(RunLockedError, match="locked by a run on another host .*some-other-host.*delete the file"):
        RunLock(tmp_path).acquire()
    assert json.loads((tmp_path / LOCK_NAME).read_text()) == record


def test_an_unreadable_record_of_a_dead_run_is_taken_over(tmp_path):
    (tmp_path / LOCK_NAME).write_text("{half a rec")
    with RunLock(tmp_path) as lock:
        assert lock.held and read_holder(tmp_path / LOCK_NAME).pid == os.getpid()


# Through the real CLI: two `playbook run` processes on one run id (notebooks that only sleep).


@pytest.fixture
def cli_config(tmp_path) -> Path:
    cfg = {
        "name": "lock-probe",
        "model": {"path": "tiny-llama"},
        "engines": [
            {"label": "e", "engine": "endpoint", "launcher": {"kind": "endpoint", "url": "http://127.0.0.1:9"}}
        ],
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _terminal_signals() -> None:
    """In the child: Ctrl-C as in a terminal. A shell starts background jobs with SIGINT ignored, and Python
    keeps an inherited SIG_IGN, so a suite started in the background would otherwise see SIGINT do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def slow_run(reports: Path, cfg: Path, run_id: str, seconds: float = 60) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, str(FAKES / "slow_playbook.py"), str(reports), str(cfg), run_id, str(seconds)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        preexec_fn=_terminal_signals,
    )
    for line in p.stdout:
        if line.startswith("executing"):
            return p
    raise AssertionError(f"the run never started a notebook: {p.stderr.read()}")


def test_a_second_playbook_run_on_the_same_run_id_refuses_at_once(tmp_path, cli_config):
    first = slow_run(tmp_path / "reports", cli_config, "r1")
    try:
        t0 = time.monotonic()
        second = subprocess.run(
            [sys.executable, str(FAKES / "slow_playbook.py"), str(tmp_path / "reports"), str(cli_config), "r1", "0"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        took = time.monotonic() - t0
        assert second.returncode == 2, second.stderr
        assert "executing" not in second.stdout
        err = second.stderr.strip()
        assert err.startswith("playbook: error: ") and len(err.splitlines()) == 1
        assert f"run folder in use by another playbook run (pid {first.pid} on host {socket.gethostname()}" in err
        assert took < 20  # interpreter start and imports; the lock itself answers at once
        assert first.poll() is None  # the first run goes on
    finally:
        stop(first)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_run_releases_its_lock(tmp_path, cli_config, sig):
    run = slow_run(tmp_path / "reports", cli_config, "r2")
    lock_file = tmp_path / "reports" / "r2" / LOCK_NAME
    assert read_holder(lock_file).pid == run.pid
    run.send_signal(sig)
    assert run.wait(timeout=90) == 130  # a loaded 2-core CI machine took over 30 s once
    assert "points measured so far are kept" in run.stderr.read()
    assert not lock_file.exists()
    with RunLock(lock_file.parent) as lock:
        assert lock.took_over is None


def test_a_run_killed_with_sigkill_leaves_a_lock_the_next_run_takes_over(tmp_path, cli_config):
    run = slow_run(tmp_path / "reports", cli_config, "r3")
    run.kill()
    run.wait(timeout=10)
    again = slow_run(tmp_path / "reports", cli_config, "r3", seconds=0)
    try:
        assert again.wait(timeout=120) == 0
        err = again.stderr.read()
        assert f"taking over the stale run lock {tmp_path / 'reports' / 'r3' / LOCK_NAME} of pid {run.pid}" in err
    finally:
        stop(again)
