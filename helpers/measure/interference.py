"""What else loaded the machine while a load ran: other processes' CPU, other GPU processes, GPU clock slowdowns.

A probe measured while another program used the CPU (a build, a busy loop, a second benchmark) or the GPU
measures the two together. ``InterferenceWatch`` is started with a load and stopped after it:

* **CPU** (psutil): the machine's busy CPU time over the load, less the CPU time of the playbook's own
  processes (this process and its children, such as guidellm's workers; its parent, the runner) and the
  engine's (the process we started and its children); what is left, in cores, is other programs'. It is
  interference when it is over the limit **and** it competed: other programs' cores and ours together came
  within half a core of the machine's (``contended``). A busy loop on a 2-core machine beside a CPU engine
  competes; two cores of other work on a 16-core GPU host, where the engine and the client use a few, do not
  (on the lent H100 of 2026-12-05 every probe was flagged at 1.4-2.2 other cores and measured twice).
* **GPU** (NVML, where there is one), read when the load starts and when it ends: compute processes on the
  GPUs that are neither ours nor the engine's, and clock-slowdown reasons other than the engine's own load
  (thermal or hardware slowdown, a power brake; a software power cap is the engine working hard, not
  interference).

``stop()`` returns a sentence naming what was over the limit, or None.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import psutil

from helpers.measure.telemetry import nvml_handles

SLOWDOWN_REASONS = {
    "HwSlowdown": "hardware slowdown",
    "HwThermalSlowdown": "hardware thermal slowdown",
    "HwPowerBrakeSlowdown": "power brake",
    "SwThermalSlowdown": "software thermal slowdown",
}
"""NVML clock-event reasons that mean something outside the engine slowed the GPU (``nvmlClocksEventReason*``)."""


def _tree(pids: Iterable[int]) -> set[int]:
    """The processes ``pids`` and all their living descendants."""
    out: set[int] = set()
    for pid in pids:
        try:
            p = psutil.Process(pid)
            out.add(pid)
            out.update(c.pid for c in p.children(recursive=True))
        except psutil.Error:
            continue
    return out


def _cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """User + system CPU seconds used so far by each of ``pids`` that still lives."""
    got: dict[int, float] = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            got[pid] = t.user + t.system
        except psutil.Error:
            continue
    return got


def _busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (not idle, not waiting for I/O), all cores together."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def contended(other: float, ours: float, cores: int, limit: float) -> bool:
    """Whether other programs' CPU (``other`` cores) interfered with a load whose processes used ``ours``."""
    return other > limit and other + ours > cores - 0.5


class InterferenceWatch:
    """Watch one load for other programs' use of the machine (module docstring)."""

    def __init__(self, engine_pid: int | None, max_other_cpu_cores: float = 0.5):
        self.engine_pid, self.limit = engine_pid, max_other_cpu_cores
        self._t0 = 0.0
        self._busy0 = 0.0
        self._ours0: dict[int, float] = {}
        self._gpu0: list[str] = []
        self.ours_cores = 0.0  # the cores the playbook and the engine used over the last watch
        self._other = 0.0
        self._gpu_found: list[str] = []

    def _ours(self) -> set[int]:
        me = psutil.Process()
        roots = [me.pid] + ([self.engine_pid] if self.engine_pid else [])
        parent = me.ppid()
        return _tree(roots) | ({parent} if parent > 1 else set())

    def start(self) -> InterferenceWatch:
        """Take the starting counts."""
        self._t0, self._busy0 = time.monotonic(), _busy_seconds()
        ours = self._ours()
        self._ours0 = _cpu_seconds(ours)
        self._gpu0 = _gpu_interference(ours)
        return self

    def stop(self) -> str | None:
        """What else loaded the machine since ``start()`` beyond the limits, in words; None when nothing did."""
        wall = max(1e-6, time.monotonic() - self._t0)
        busy = _busy_seconds() - self._busy0
        ours_now = _cpu_seconds(self._ours())
        ours = sum(v - self._ours0.get(pid, 0.0) for pid, v in ours_now.items())
        other = max(0.0, busy - ours) / wall
        self.ours_cores = max(0.0, ours) / wall
        self._other = other
        self._gpu_found = list(dict.fromkeys(self._gpu0 + _gpu_interference(set(ours_now))))
        return self.other_text(self.ours_cores)

    def other_text(self, need_cores: float) -> str | None:
        """After ``stop()``: the interference a load needing ``need_cores`` would have met in this window, or None."""
        found = []
        if contended(self._other, max(need_cores, self.ours_cores), psutil.cpu_count() or 1, self.limit):
            found.append(f"other processes used {self._other:.1f} CPU cores (limit {self.limit:g})")
        return "; ".join(found + self._gpu_found) or None


async def wait_quiet(
    engine_pid: int | None,
    max_other_cpu_cores: float,
    need_cores: float = 0.0,
    max_wait_s: float = 90.0,
    window_s: float = 2.0,
) -> tuple[float, str | None]:
    """Wait until a ``window_s`` window sees no interference with a load needing ``need_cores``, at most ``max_wait_s``.

    ``need_cores``: what the playbook and the engine used during the probe that was interfered with (the load
    is not running while we wait). Returns (seconds waited, what still loaded the machine in the last window,
    or None once it was quiet). A probe measured under interference is measured again after this wait, so that
    a busy minute of another program costs the search a pause rather than a second spoiled probe.
    """
    t0, why = time.monotonic(), None
    while True:
        watch = InterferenceWatch(engine_pid, max_other_cpu_cores).start()
        await asyncio.sleep(window_s)
        watch.stop()
        why = watch.other_text(need_cores)
        waited = time.monotonic() - t0
        if why is None or waited >= max_wait_s:
            return waited, why


def _gpu_interference(ours: set[int]) -> list[str]:
    """Other compute processes on the GPUs and clock slowdowns from outside the engine (empty without NVML)."""
    handles, _why = nvml_handles()
    if not handles:
        return []
    # NVML exists only on GPU hosts
    import pynvml

    found: list[str] = []
    for i, h in enumerate(handles):
        try:
            others = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid not in ours]
            if others:
                found.append(f"GPU {i}: {len(others)} other compute process(es) (pid {', '.join(map(str, others))})")
            mask = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
            for name, words in SLOWDOWN_REASONS.items():
                bit = getattr(pynvml, f"nvmlClocksEventReason{name}", 0)
                if bit and mask & bit:
                    found.append(f"GPU {i}: {words}")
        except pynvml.NVMLError:
            continue
    return found
