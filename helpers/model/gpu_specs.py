"""Accelerator specifications: the dated table in ``helpers/data/gpu_specs.yaml`` and name lookup.

``gpu_spec`` accepts the table's own names (``H100-SXM5-80GB``), the names NVML reports
(``NVIDIA H100 80GB HBM3``, ``NVIDIA H200``) and the aliases listed per entry. Names are compared
after lower-casing and dropping everything but letters and digits, and only whole names match: an
``NVIDIA H200 NVL`` is not an ``H200``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.errors import ConfigError
from helpers.core.paths import DATA_DIR

SPECS_FILE = DATA_DIR / "gpu_specs.yaml"


class GpuSpec(BaseModel):
    """One accelerator's datasheet figures (dense TFLOP/s) and the names it goes by."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Name in the table, used in configs (cost.gpu).")
    vendor: Literal["nvidia", "amd"]
    architecture: Literal["ampere", "ada", "hopper", "blackwell", "cdna3"]
    nvml_names: list[str] = Field(default_factory=list, description="NVML/driver names and aliases.")
    memory_gb: float = Field(gt=0, description="Datasheet memory capacity.")
    memory_type: str
    reported_memory_mib: int | None = Field(default=None, gt=0, description="Total memory as NVML reports it.")
    hbm_bandwidth_tbps: float = Field(gt=0, description="Peak memory bandwidth, TB/s.")
    bf16_dense_tflops: float = Field(gt=0)
    fp8_dense_tflops: float | None = Field(default=None, gt=0, description="None: no FP8 tensor cores.")
    interconnect: str
    interconnect_gbps: float = Field(gt=0, description="GPU-to-GPU bandwidth per GPU, GB/s.")
    host_link: str
    source: str = Field(description="Datasheet the figures come from.")

    @property
    def supports_fp8(self) -> bool:
        """True when the chip has FP8 tensor cores (Hopper, Ada, Blackwell, MI300X; not Ampere)."""
        return self.fp8_dense_tflops is not None

    @property
    def memory_gib(self) -> float:
        """Usable total memory in GiB: the NVML-reported total when known, else the datasheet figure.

        HBM capacities are binary-sized, so the datasheet "GB" is read as GiB in the fallback.
        """
        if self.reported_memory_mib:
            return self.reported_memory_mib / 1024
        return float(self.memory_gb)


class GpuSpecTable(BaseModel):
    """The whole data file: a date, a note on units, and the entries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: str = Field(description="Date the figures were last checked (YYYY-MM-DD).")
    note: str = ""
    gpus: list[GpuSpec] = Field(min_length=1)


def _key(name: str) -> str:
    """Normalise a name for matching: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def load_gpu_specs(path: str | Path | None = None) -> GpuSpecTable:
    """Read and validate the GPU spec table (the packaged file unless ``path`` is given)."""
    return _load_default() if path is None else _read(Path(path))


@lru_cache(maxsize=1)
def _load_default() -> GpuSpecTable:
    """Read the packaged table once."""
    return _read(SPECS_FILE)


def _read(p: Path) -> GpuSpecTable:
    """Parse one spec file; ``ConfigError`` naming the file and the field on failure."""
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: GPU spec file not found") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {str(err).splitlines()[0]}") from None
    try:
        table = GpuSpecTable.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(x) for x in e["loc"])
        raise ConfigError(f"{p}: {loc}: {e['msg']}") from None
    seen: dict[str, str] = {}
    for g in table.gpus:
        for alias in [g.name, *g.nvml_names]:
            k = _key(alias)
            if seen.get(k, g.name) != g.name:
                raise ConfigError(f"{p}: name {alias!r} of {g.name} is also a name of {seen[k]}")
            seen[k] = g.name
    return table


def gpu_spec(name_or_nvml_name: str) -> GpuSpec | None:
    """Return the spec whose table name, NVML name or alias is ``name_or_nvml_name``; None if unknown."""
    k = _key(name_or_nvml_name)
    if not k:
        return None
    for g in load_gpu_specs().gpus:
        if k == _key(g.name) or any(k == _key(a) for a in g.nvml_names):
            return g
    return None


def gpu_specs_frame() -> pd.DataFrame:
    """Return the table for display: one row per accelerator, source and date in the last columns."""
    table = load_gpu_specs()
    rows = [
        {
            "gpu": g.name,
            "vendor": g.vendor,
            "architecture": g.architecture,
            "memory GB": g.memory_gb,
            "memory type": g.memory_type,
            "bandwidth TB/s": g.hbm_bandwidth_tbps,
            "BF16 dense TFLOP/s": g.bf16_dense_tflops,
            "FP8 dense TFLOP/s": g.fp8_dense_tflops,
            "interconnect": g.interconnect,
            "interconnect GB/s": g.interconnect_gbps,
            "source": g.source,
            "as of": table.as_of,
        }
        for g in table.gpus
    ]
    return pd.DataFrame(rows)
