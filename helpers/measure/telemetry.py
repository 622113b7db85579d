"""GPU telemetry through NVML (nvidia-ml-py), sampled in a background thread during a point.

On a machine without an NVIDIA GPU or driver, sampling reports ``available=False`` with the
reason, and nothing else changes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from helpers.model.gpu_specs import gpu_spec
from helpers.run.records import GpuStats


def nvml_handles() -> tuple[list, str | None]:
    """Initialised NVML device handles, or ``([], reason)`` when NVML is not usable here."""
    try:
        # NVML exists only on GPU hosts
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)], (None if n else "NVML found no GPU")
    except Exception as err:  # pynvml raises its own NVMLError subclasses, or ImportError
        return [], f"no NVIDIA GPU telemetry: {type(err).__name__}: {err}"


def local_gpu_spec():
    """The spec-table entry of this machine's first GPU (for the roofline), or None without one."""
    handles, _ = nvml_handles()
    if not handles:
        return None
    # NVML exists only on GPU hosts
    import pynvml

    name = pynvml.nvmlDeviceGetName(handles[0])
    return gpu_spec(name.decode() if isinstance(name, bytes) else str(name))


@dataclass
class GpuSampler:
    """Samples utilisation, memory and power of all GPUs every ``interval_s`` seconds."""

    interval_s: float = 0.5
    util: list[float] = field(default_factory=list)
    mem_used: list[float] = field(default_factory=list)
    power: list[float] = field(default_factory=list)
    mem_total_gib: float | None = None
    reason: str | None = None
    _handles: list = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _sample(self) -> None:
        # NVML exists only on GPU hosts
        import pynvml

        utils, used, watts = [], 0.0, 0.0
        for h in self._handles:
            utils.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
            used += pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**30
            try:
                watts += pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
            except pynvml.NVMLError:
                pass
        self.util.append(sum(utils) / len(utils))
        self.mem_used.append(used)
        self.power.append(watts)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except Exception as err:  # a GPU that falls off the bus must not end the benchmark
                self.reason = f"NVML sampling stopped: {err}"
                return

    def start(self) -> GpuSampler:
        """Open NVML and start sampling (a no-op without a GPU)."""
        self._handles, self.reason = nvml_handles()
        if not self._handles:
            return self
        # NVML exists only on GPU hosts
        import pynvml

        self.mem_total_gib = sum(pynvml.nvmlDeviceGetMemoryInfo(h).total for h in self._handles) / 2**30
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> GpuStats:
        """Stop sampling and summarise."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        if not self.util:
            return GpuStats(available=False, reason=self.reason or "no GPU samples")
        return GpuStats(
            available=True,
            reason=self.reason,
            util_mean=sum(self.util) / len(self.util),
            util_max=max(self.util),
            mem_used_max_gib=max(self.mem_used),
            mem_total_gib=self.mem_total_gib,
            power_mean_w=sum(self.power) / len(self.power) if self.power else None,
            samples=len(self.util),
        )
