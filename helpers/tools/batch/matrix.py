"""Batch matrices, expanded into cells: a base workload config and axes, or a plain list of configs.

The axes are models, engine sets, workloads, GPU types and hosts. Each axis value has a ``name`` and
a ``set``: part of a workload config merged onto the base (mappings merge, lists and values replace), and
optionally the ``resources`` the cell asks its executor for. The cells are the cartesian product of the
axes, in the order models × engines × workloads × gpus × hosts; a cell's slug joins its value names with
``_`` and its run id is ``<batch id>-<slug>``, so a re-run finds its folders. ``load_batch`` validates the
matrix and every cell's config (``helpers.core.config.parse_config``) before anything starts; an error is
one line naming the file, the cell and the field.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from helpers.core.config import PlaybookConfig
from helpers.core.errors import ConfigError
from helpers.core.paths import resolve_repo_path
from helpers.core.text import slug, unknown_choice
from helpers.engines import ENGINES
from helpers.launchers.config_check import parse_config
from helpers.tools.batch.executors import EXECUTORS
from helpers.tools.batch.executors.base import ExecutorSpec, Resources

AXES = ("models", "engines", "workloads", "gpus", "hosts")
"""The axes a matrix may have, in the order their values are combined."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AxisValue(_Strict):
    """One value of an axis: a name for tables and run ids, and what it changes in the base config."""

    name: str = Field(min_length=1, description="Name of this value in the cell's slug and the batch index.")
    set: dict[str, Any] = Field(
        default_factory=dict, description="Part of a workload config merged onto the base (lists replace)."
    )
    resources: Resources | None = Field(default=None, description="What cells with this value ask the executor for.")


class Axes(_Strict):
    """The axes of a matrix; every one is optional, at least one has values."""

    models: list[AxisValue] = Field(default_factory=list, description="Model folders (usually set: {model: ...}).")
    engines: list[AxisValue] = Field(default_factory=list, description="Engine sets (usually set: {engines: [...]}).")
    workloads: list[AxisValue] = Field(default_factory=list, description="Workloads (set: {workload: ..., sla: ...}).")
    gpus: list[AxisValue] = Field(
        default_factory=list, description="GPU types (set: {cost: {gpu: ...}}, resources: {accelerator_type: ...})."
    )
    hosts: list[AxisValue] = Field(
        default_factory=list, description="Hosts (resources: {custom: {'node:IP': 0.01}}) or launcher endpoints."
    )

    @model_validator(mode="before")
    @classmethod
    def _known_axes(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key not in AXES:
                    raise ValueError(unknown_choice("axis", key, AXES))
        return data

    @field_validator(*AXES)
    @classmethod
    def _unique_names(cls, values: list[AxisValue]) -> list[AxisValue]:
        names = [slug(v.name) for v in values]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"value names must be unique (as slugs); repeated: {', '.join(dup)}")
        return values


class CellEntry(_Strict):
    """One cell of a plain list: a config (a path, or the config inline) and optional changes to it."""

    name: str = Field(min_length=1, description="Name of the cell in its slug and the batch index.")
    config: str | dict[str, Any] = Field(description="Workload config: a YAML path (relative to the matrix) or inline.")
    set: dict[str, Any] = Field(default_factory=dict, description="Part of a workload config merged onto it.")
    resources: Resources | None = None


class BatchMatrix(_Strict):
    """A whole batch: its name, the cells (axes over a base, or a list), resources and the executor."""

    name: str = Field(min_length=1, description="Batch name; its slug is the batch id (reports/batch-<id>/).")
    description: str = Field(default="", description="Free text shown on the batch index.")
    base: str | dict[str, Any] | None = Field(
        default=None, description="Base workload config for the axes: a YAML path (relative to the matrix) or inline."
    )
    set: dict[str, Any] = Field(default_factory=dict, description="Changes applied to every cell before the axes'.")
    axes: Axes | None = None
    cells: list[CellEntry] | None = None
    resources: Resources = Field(default_factory=Resources, description="What every cell asks for (axes refine it).")
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, v: ExecutorSpec) -> ExecutorSpec:
        if v.kind not in EXECUTORS:
            raise ValueError(unknown_choice("executor", v.kind, EXECUTORS))
        return v

    @model_validator(mode="after")
    def _one_shape(self) -> BatchMatrix:
        if (self.axes is None) == (self.cells is None):
            raise ValueError("give either axes (with a base config) or cells (a list of configs), not both or neither")
        if self.axes is not None:
            if self.base is None:
                raise ValueError("axes need a base config (base: PATH or an inline config)")
            if not any(getattr(self.axes, a) for a in AXES):
                raise ValueError(f"axes has no values; give at least one of {', '.join(AXES)}")
        if self.cells is not None:
            names = [slug(c.name) for c in self.cells]
            dup = sorted({n for n in names if names.count(n) > 1})
            if not names or dup:
                raise ValueError(f"cells need unique names; repeated: {', '.join(dup)}" if dup else "cells is empty")
        return self


@dataclass(frozen=True)
class Cell:
    """One expanded, validated cell."""

    cell: str
    run_id: str
    values: dict[str, str]
    data: dict[str, Any]
    config: PlaybookConfig
    resources: Resources


@dataclass(frozen=True)
class Batch:
    """A loaded matrix: its id, source file, and cells in order."""

    batch_id: str
    source: Path
    matrix: BatchMatrix
    cells: list[Cell]

    def folder(self, reports_dir: Path) -> Path:
        """The batch's own folder under ``reports_dir``: ``batch-<id>``."""
        return Path(reports_dir) / f"batch-{self.batch_id}"


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged onto a copy of ``base``: mappings merge key by key; lists and values replace."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def gpus_needed(cfg: PlaybookConfig) -> int:
    """GPUs a cell needs: the largest tensor-parallel size among engines that start a GPU process (else 0).

    Engines that run on CPU, and adapters with no server module (an endpoint started elsewhere), need none.
    """
    sizes = [
        e.knobs.tensor_parallel
        for e in cfg.engines
        if not ENGINES[e.engine].runs_on_cpu and ENGINES[e.engine].module is not None
    ]
    return max(sizes, default=0)


def _format_error(err: ValidationError, source: str) -> str:
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "<root>"
    msg = "unknown key (typo?)" if e["type"] == "extra_forbidden" else e["msg"].removeprefix("Value error, ")
    more = f" (+{len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{source}: {loc}: {msg}{more}"


def _read_yaml(path: Path, what: str) -> Any:
    if not path.is_file():
        raise ConfigError(f"{what}: file not found: {path}")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{what}: not valid YAML: {str(err).splitlines()[0]}") from None


def _config_data(ref: str | dict[str, Any], matrix_dir: Path, what: str) -> dict[str, Any]:
    """A workload config from a path (the matrix's folder first, then the repository root) or inline."""
    if isinstance(ref, dict):
        return copy.deepcopy(ref)
    p = Path(ref).expanduser()
    path = p if p.is_absolute() else matrix_dir / p if (matrix_dir / p).is_file() else resolve_repo_path(p)
    data = _read_yaml(path, what)
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: {path}: the top level must be a mapping")
    return data


def _axis_cells(matrix: BatchMatrix, base: dict[str, Any]) -> list[tuple[str, dict[str, str], dict, Resources]]:
    """(slug, value name by axis, merged config, resources) of every cell of the axes, before validation."""
    assert matrix.axes is not None
    axes = [(a, getattr(matrix.axes, a)) for a in AXES if getattr(matrix.axes, a)]
    out = []
    for combo in itertools.product(*(values for _, values in axes)):
        data, res = merge(base, matrix.set), matrix.resources
        for v in combo:
            data, res = merge(data, v.set), res.over(v.resources)
        values = {a: v.name for (a, _), v in zip(axes, combo, strict=True)}
        out.append(("_".join(slug(v.name) for v in combo), values, data, res))
    return out


def expand(matrix: BatchMatrix, source: str, matrix_dir: Path, batch_id: str | None = None) -> Batch:
    """Expand and validate every cell of ``matrix`` (read from ``source``); ``ConfigError`` names the cell."""
    bid = slug(batch_id or matrix.name)
    if matrix.axes is not None:
        combos = _axis_cells(matrix, _config_data(matrix.base, matrix_dir, f"{source}: base"))
    else:
        combos = []
        for i, entry in enumerate(matrix.cells or []):
            data = _config_data(entry.config, matrix_dir, f"{source}: cells.{i}.config")
            res = matrix.resources.over(entry.resources)
            combos.append((slug(entry.name), {"cell": entry.name}, merge(merge(data, matrix.set), entry.set), res))
    names = [str(data.get("name")) for _, _, data, _ in combos]
    cells = []
    for (cell, values, data, res), name in zip(combos, names, strict=True):
        if names.count(name) > 1:  # cells sharing a workload name get their own, so reviews keep them apart
            data = {**data, "name": f"{name} {cell}"}
        cfg = parse_config(data, f"{source}: cell {cell}")
        gpus = gpus_needed(cfg) if res.num_gpus is None else res.num_gpus
        res = res.model_copy(update={"num_cpus": res.num_cpus or 1, "num_gpus": gpus})
        cells.append(Cell(cell, f"{bid}-{cell}", values, data, cfg, res))
    return Batch(bid, Path(source), matrix, cells)


def load_batch(path: str | Path, batch_id: str | None = None) -> Batch:
    """Read, validate and expand a matrix file; nothing is started."""
    p = Path(path)
    data = _read_yaml(p, str(p))
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping, got {type(data).__name__}")
    try:
        matrix = BatchMatrix.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, str(p))) from None
    return expand(matrix, str(p), p.resolve().parent, batch_id)
