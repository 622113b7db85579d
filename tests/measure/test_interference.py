"""Interference: another program's CPU that competed with a load is seen, and a re-measure waits for quiet.

The other program is a real busy loop started outside this process's tree (a shell that exits at once leaves
it to init), as a build or a second benchmark would be; it is ended by its pid. Our own load is a thread of
this process spinning (the playbook's side of the machine). The loops are sized to the machine's cores, so
that they compete on any machine, as a busy loop beside a CPU engine competes on a 2-core one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import psutil

from helpers.measure.interference import InterferenceWatch, contended, wait_quiet

BUSY = "import time\nt = time.monotonic() + {s}\nwhile time.monotonic() < t: pass\n"
CORES = psutil.cpu_count() or 1


def _detached_busy_loops(seconds: float, n: int) -> list[int]:
    """Start ``n`` one-core busy loops that are not this process's descendants; their pids."""
    pids = []
    for _ in range(n):
        out = subprocess.run(
            ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', BUSY.format(s=seconds)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        pids.append(int(out.stdout.strip()))
    return pids


def _end(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _spin(seconds: float) -> threading.Thread:
    def run() -> None:
        t = time.monotonic() + seconds
        while time.monotonic() < t:
            pass

    th = threading.Thread(target=run)
    th.start()
    return th


def test_other_cpu_counts_only_when_it_competed():
    assert contended(other=0.9, ours=1.5, cores=2, limit=0.5)  # a busy loop beside a CPU engine on 2 cores
    assert not contended(other=2.2, ours=3.0, cores=16, limit=0.5)  # the lent H100 host: cores to spare
    assert not contended(other=0.3, ours=1.9, cores=2, limit=0.5)  # under the limit


def test_a_busy_loop_beside_a_load_is_named():
    pids = _detached_busy_loops(6, CORES)
    try:
        time.sleep(0.5)
        watch = InterferenceWatch(engine_pid=None, max_other_cpu_cores=0.5).start()
        _spin(2.0).join()
        why = watch.stop()
    finally:
        _end(pids)
    assert why is not None and why.startswith("other processes used ") and "CPU cores (limit 0.5)" in why
    assert float(why.split("used ")[1].split(" CPU")[0]) > 0.5, why
    assert watch.ours_cores > 0.3  # our spinning thread


def test_a_remeasure_waits_until_the_busy_loops_end():
    pids = _detached_busy_loops(5, CORES)
    try:
        time.sleep(0.5)
        waited, still = asyncio.run(wait_quiet(None, 0.5, need_cores=1.0, max_wait_s=30, window_s=1.0))
    finally:
        _end(pids)
    assert still is None and 3.0 <= waited < 30, (waited, still)


def test_a_machine_that_stays_busy_is_said_after_the_longest_wait():
    pids = _detached_busy_loops(30, CORES)
    try:
        time.sleep(0.5)
        waited, still = asyncio.run(wait_quiet(None, 0.5, need_cores=1.0, max_wait_s=3, window_s=1.0))
    finally:
        _end(pids)
    assert 3.0 <= waited < 6 and still is not None and "other processes used" in still
