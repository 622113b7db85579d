"""Interference: another program's CPU during a load is seen, and a re-measure waits for the machine to be quiet.

The other program is a real busy loop started outside this process's tree (a shell that exits at once leaves
it to init), as a build or a second benchmark would be; it is ended by its pid.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

from helpers.measure.interference import InterferenceWatch, wait_quiet

BUSY = "import time\nt = time.monotonic() + {s}\nwhile time.monotonic() < t: pass\n"


def _detached_busy_loop(seconds: float) -> int:
    """Start a one-core busy loop that is not this process's descendant; its pid."""
    out = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', BUSY.format(s=seconds)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(out.stdout.strip())


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_busy_loop_beside_a_load_is_named():
    pid = _detached_busy_loop(6)
    try:
        time.sleep(0.5)
        watch = InterferenceWatch(engine_pid=None, max_other_cpu_cores=0.5).start()
        time.sleep(2.0)
        why = watch.stop()
    finally:
        _end(pid)
    assert why is not None and why.startswith("other processes used ") and "CPU cores (limit 0.5)" in why
    cores = float(why.split("used ")[1].split(" CPU")[0])
    assert cores >= 0.6, why  # one core spinning, less what the machine's own sampling misses


def test_a_remeasure_waits_until_the_busy_loop_ends():
    pid = _detached_busy_loop(5)
    try:
        time.sleep(0.5)
        waited, still = asyncio.run(wait_quiet(None, 0.5, max_wait_s=30, window_s=1.0))
    finally:
        _end(pid)
    assert still is None and 3.0 <= waited < 30, (waited, still)


def test_a_machine_that_stays_busy_is_said_after_the_longest_wait():
    pid = _detached_busy_loop(30)
    try:
        time.sleep(0.5)
        waited, still = asyncio.run(wait_quiet(None, 0.5, max_wait_s=3, window_s=1.0))
    finally:
        _end(pid)
    assert 3.0 <= waited < 6 and still is not None and "other processes used" in still
