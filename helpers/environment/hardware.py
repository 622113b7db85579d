"""Checklist step 2: what hardware this machine has, and the hardware plan from the config.

``inventory()`` reads GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``) and the
GPU-to-GPU topology through ``nvidia-smi topo -m`` when that tool exists; CPU and RAM through
``psutil``. Without NVML or without a GPU it says so plainly and still reports the CPU side — it
never raises for missing hardware. AMD GPUs are not probed (NVML is NVIDIA-only).
"""

from __future__ import annotations

import datetime as dt
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import psutil
from pydantic import BaseModel, ConfigDict, Field

from helpers.model.gpu_specs import gpu_spec

if TYPE_CHECKING:
    from helpers.core.config import HardwarePlan, PlaybookConfig

GIB = 1024**3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuDevice(_Strict):
    """One GPU as NVML reports it."""

    index: int
    name: str
    memory_total_mib: int = Field(description="memory.total as NVML reports it, MiB.")
    uuid: str | None = None
    compute_capability: str | None = None
    nvlink_active_links: int | None = Field(default=None, description="None: NVLink not queryable.")
    spec: str | None = Field(default=None, description="Matching entry of the GPU spec table.")


class Inventory(_Strict):
    """The machine's hardware, JSON-serialisable (``model_dump(mode='json')``)."""

    collected_at: str
    hostname: str
    os: str
    cpu_model: str
    cpu_physical_cores: int | None
    cpu_logical_cores: int
    ram_gib: float
    gpu_count: int
    gpus: list[GpuDevice] = Field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_error: str | None = Field(default=None, description="Why NVML could not be read, if it could not.")
    interconnect: str
    topology: str | None = Field(default=None, description="Output of `nvidia-smi topo -m`, if available.")
    statement: str = Field(description="One plain sentence on what was found.")


def _cpu_model() -> str:
    """Return the CPU's model name from /proc/cpuinfo, else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def _text(v: Any) -> str:
    """NVML strings arrive as str or bytes depending on the binding's version."""
    return v.decode() if isinstance(v, bytes) else str(v)


def _nvlink_links(nvml: Any, handle: Any) -> int | None:
    """Active NVLink links of one GPU; None when the GPU or driver cannot say."""
    active, answered = 0, False
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError:
            continue
        answered = True
        active += int(state == getattr(nvml, "NVML_FEATURE_ENABLED", 1))
    return active if answered else None


def _read_nvml() -> dict[str, Any]:
    """GPUs, driver and CUDA versions through NVML; ``error`` set (and no GPUs) when NVML fails."""
    try:
        # NVML exists only on GPU hosts
        import pynvml as nvml
    except ImportError as err:
        return {"gpus": [], "error": f"nvidia-ml-py is not installed ({err})"}
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return {"gpus": [], "error": f"NVML unavailable: {err}"}
    try:
        out: dict[str, Any] = {"gpus": [], "error": None}
        out["driver"] = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            v = nvml.nvmlSystemGetCudaDriverVersion()
            out["cuda"] = f"{v // 1000}.{(v % 1000) // 10}"
        except nvml.NVMLError:
            out["cuda"] = None
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(nvml.nvmlDeviceGetName(h))
            try:
                cc = ".".join(str(x) for x in nvml.nvmlDeviceGetCudaComputeCapability(h))
            except nvml.NVMLError:
                cc = None
            spec = gpu_spec(name)
            out["gpus"].append(
                GpuDevice(
                    index=i,
                    name=name,
                    memory_total_mib=int(nvml.nvmlDeviceGetMemoryInfo(h).total // 2**20),
                    uuid=_text(nvml.nvmlDeviceGetUUID(h)),
                    compute_capability=cc,
                    nvlink_active_links=_nvlink_links(nvml, h),
                    spec=spec.name if spec else None,
                )
            )
        return out
    except nvml.NVMLError as err:
        return {"gpus": [], "error": f"NVML query failed: {err}"}
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _topology() -> str | None:
    """``nvidia-smi topo -m`` output, or None when the tool is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout).rstrip()  # the header comes underlined (ANSI codes)
    return text if r.returncode == 0 and text.strip() else None


def _interconnect(gpus: list[GpuDevice]) -> str:
    """One phrase on how the GPUs talk to each other."""
    if not gpus:
        return "none (no GPU)"
    links = [g.nvlink_active_links or 0 for g in gpus]
    if len(gpus) == 1:
        extra = f"; {links[0]} NVLink links active" if links[0] else ""
        return f"single GPU (no GPU-to-GPU traffic){extra}"
    if all(n > 0 for n in links):
        span = str(links[0]) if min(links) == max(links) else f"{min(links)}-{max(links)}"
        return f"NVLink ({span} active links per GPU)"
    if any(n > 0 for n in links):
        return "mixed: NVLink on some GPUs only (see the topology matrix)"
    return "PCIe (no active NVLink)"


def inventory(*, topology: bool = True) -> Inventory:
    """Collect this machine's hardware; never raises for a missing GPU, NVML or nvidia-smi."""
    nv = _read_nvml()
    gpus: list[GpuDevice] = nv["gpus"]
    topo = _topology() if topology and gpus else None
    logical = psutil.cpu_count(logical=True) or 1
    physical = psutil.cpu_count(logical=False)
    ram = psutil.virtual_memory().total / GIB
    cpu = _cpu_model()
    if gpus:
        names = sorted({g.name for g in gpus})
        mem = ", ".join(f"{g.memory_total_mib / 1024:.1f} GiB" for g in gpus[:1])
        statement = (
            f"{len(gpus)} GPU(s): {', '.join(names)} ({mem} each), driver {nv.get('driver')}, "
            f"CUDA {nv.get('cuda')}; {logical} CPU threads, {ram:.0f} GiB RAM."
        )
    else:
        why = nv["error"] or "NVML found no GPU"
        statement = (
            f"This machine has no usable GPU ({why}). CPU: {cpu}, {logical} threads, {ram:.0f} GiB RAM; "
            "only CPU engines can run here."
        )
    return Inventory(
        collected_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        cpu_model=cpu,
        cpu_physical_cores=physical,
        cpu_logical_cores=logical,
        ram_gib=round(ram, 1),
        gpu_count=len(gpus),
        gpus=gpus,
        driver_version=nv.get("driver"),
        cuda_driver_version=nv.get("cuda"),
        nvml_error=nv["error"],
        interconnect=_interconnect(gpus),
        topology=topo,
        statement=statement,
    )


def inventory_frame(inv: Inventory) -> pd.DataFrame:
    """Return the inventory as an item/value table (one row per GPU)."""
    cores = f"{inv.cpu_physical_cores} physical / {inv.cpu_logical_cores} logical"
    rows = [
        ("host", f"{inv.hostname} ({inv.os})"),
        ("CPU", inv.cpu_model),
        ("CPU cores", cores if inv.cpu_physical_cores else f"{inv.cpu_logical_cores} logical"),
        ("RAM", f"{inv.ram_gib:.1f} GiB"),
        ("GPUs", str(inv.gpu_count) if inv.gpus else f"none ({inv.nvml_error or 'NVML found no GPU'})"),
    ]
    for g in inv.gpus:
        cc = f", compute capability {g.compute_capability}" if g.compute_capability else ""
        spec = f", spec {g.spec}" if g.spec else ", not in the spec table"
        rows.append((f"GPU {g.index}", f"{g.name}, {g.memory_total_mib:,} MiB{cc}{spec}"))
    if inv.gpus:
        rows += [("driver", inv.driver_version or "?"), ("CUDA (driver)", inv.cuda_driver_version or "?")]
    rows.append(("interconnect", inv.interconnect))
    return pd.DataFrame(rows, columns=["item", "value"])


# Seed 003 guidance per answer of the hardware plan (§3.1, §3.5 step 1, §4.3, §5.2).
_VENDOR_GUIDANCE = {
    "nvidia-only": "All three engines stay candidates (seed 003 §3.1).",
    "amd-planned": "Only vLLM: TensorRT-LLM is NVIDIA-only with no ROCm path, SGLang's AMD support is less "
    "mature (§3.1). The decision tree stops at step 1 (§3.5).",
    "mixed": "Only vLLM: mixed hardware rules out TensorRT-LLM and makes SGLang a risk (§3.1). The decision "
    "tree stops at step 1 (§3.5).",
}
_AUTOSCALING_GUIDANCE = {
    True: "Cold start matters: vLLM ~62 s; TensorRT-LLM's compiled engine ~28 min first build, ~90 s from a "
    "prebuilt engine image or with its PyTorch backend (§4.3, §5.2).",
    False: "Steady traffic: TensorRT-LLM's compile cost is paid once; a prebuilt engine image hides it (§5.2).",
}


def hardware_plan_table(cfg: PlaybookConfig | HardwarePlan, inv: Inventory | None = None) -> pd.DataFrame:
    """Return the hardware-plan answers with the seed's guidance, beside what ``inv`` found here."""
    hw = getattr(cfg, "hardware", cfg)
    found = "" if inv is None else f"this machine: {inv.gpu_count} GPU(s)"
    if inv is not None and inv.gpus:
        found += f" ({inv.gpus[0].name})"
    gpu_note = f"Plan for {hw.gpu_count} GPU(s) per replica; the memory plan says whether the model fits."
    return pd.DataFrame(
        [
            ("GPU vendors, now and next 12 months", hw.vendors, _VENDOR_GUIDANCE[hw.vendors], ""),
            (
                "needs autoscaling",
                "yes" if hw.autoscaling else "no",
                _AUTOSCALING_GUIDANCE[hw.autoscaling],
                "",
            ),
            ("GPUs per replica", str(hw.gpu_count), gpu_note, found),
        ],
        columns=["question", "answer", "guidance", "found"],
    )
