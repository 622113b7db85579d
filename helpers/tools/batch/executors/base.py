"""What every batch executor shares: the executor section of a matrix, one cell's task, its outcome.

An executor takes the cells that still have to run and runs each as a normal ``playbook run`` in its own
run folder (``helpers.tools.batch.cell``); it tells the batch when a cell starts and when it finishes,
and leaves every finished cell's run folder under the batch's ``reports/`` folder. It does not decide what
to run (``helpers.tools.batch.resume`` does) and does not schedule: the local executor runs cells one after
another, the Ray executor hands them to a Ray cluster's own scheduler.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from helpers.core.errors import PlaybookError


class ClusterError(PlaybookError):
    """A cluster that cannot be reached or refuses the batch; the message is one line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resources(_Strict):
    """What one cell asks its executor for. Unset fields are filled from the cell's config."""

    num_cpus: float | None = Field(default=None, gt=0, description="CPUs per cell (default 1).")
    num_gpus: float | None = Field(
        default=None, ge=0, description="GPUs per cell (default: the largest tensor-parallel size of its GPU engines)."
    )
    accelerator_type: str | None = Field(
        default=None, description="Ray accelerator type the cell must run on, e.g. H100 or A10G (a GPU-type axis)."
    )
    custom: dict[str, float] = Field(
        default_factory=dict,
        description="Ray custom resources, e.g. {'node:10.0.0.5': 0.01} to pin a cell to one host (a hosts axis).",
    )

    def over(self, other: Resources | None) -> Resources:
        """These resources with the fields set in ``other`` taking precedence (custom resources merged)."""
        if other is None:
            return self
        data = self.model_dump()
        data.update({k: v for k, v in other.model_dump(exclude={"custom"}).items() if v is not None})
        data["custom"] = {**self.custom, **other.custom}
        return Resources.model_validate(data)


class ExecutorSpec(_Strict):
    """The ``executor`` section of a batch matrix (the command line can override ``kind`` and ``address``)."""

    kind: str = Field(default="local", description="Registered executor: local (one cell after another) or ray.")
    address: str | None = Field(
        default=None,
        description="Ray cluster: ray://HOST:10001 (Ray client, e.g. a KubeRay head service), HOST:6379 or auto; "
        "default: the RAY_ADDRESS environment variable, else a new Ray instance on this machine.",
    )
    runtime_env: dict[str, Any] = Field(
        default_factory=dict,
        description="Ray runtime_env for the workers (working_dir, py_modules, env_vars, ...), passed as given.",
    )
    connect_timeout_s: float = Field(default=10, gt=0, description="Seconds to wait for the cluster to answer.")
    autoscaling: bool = Field(
        default=False,
        description="The cluster adds nodes on demand (KubeRay autoscaler): submit cells no node can hold yet "
        "instead of failing them at once.",
    )


@dataclass(frozen=True)
class CellTask:
    """One cell to run: its run id, its config file, where its log goes, and what it asks for."""

    cell: str
    run_id: str
    config_path: Path
    log_path: Path
    resources: Resources = field(default_factory=Resources)


@dataclass(frozen=True)
class CellOutcome:
    """How a cell's run ended: exit status, the reason in one line when it failed, wall time, where it ran."""

    cell: str
    rc: int
    reason: str | None = None
    seconds: float = 0.0
    where: str = ""


class BatchEvents(Protocol):
    """What an executor tells the batch while it runs."""

    def started(self, cell: str, where: str) -> None:
        """``cell`` began to run on ``where`` (a host name)."""

    def finished(self, outcome: CellOutcome) -> None:
        """A cell ended; its run folder (if any) is already under the batch's reports folder."""


class Executor(ABC):
    """Runs cells; subclasses register under ``kind`` in ``helpers.tools.batch.executors.EXECUTORS``."""

    kind: ClassVar[str] = ""

    def __init__(self, spec: ExecutorSpec) -> None:
        self.spec = spec

    @abstractmethod
    def run(self, tasks: list[CellTask], reports_dir: Path, events: BatchEvents) -> None:
        """Run every task; a cell that fails is reported through ``events.finished`` and the others go on."""
