"""Records of steps 2-4: the machine's inventory with the engine environments, and the memory plan."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from helpers.environment.hardware import Inventory
from helpers.environment.memory_plan import MemoryPlan
from helpers.run.records import Artifact


class EngineEnvironment(BaseModel):
    """Whether one engine configuration can run here, with its launcher (step 4)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    label: str = Field(alias="engine config")
    engine: str
    launcher: str
    status: str
    version: str | None = None
    detail: str = ""
    install: str = Field(default="", alias="how to install")


class EnvironmentRecord(Artifact):
    """What step 2 found on the machine that measured the run, and step 4's engine environments.

    Both are read once per run folder on the machine that measured it: re-rendering an archived run
    elsewhere keeps the measuring host's inventory.
    """

    artifact: ClassVar[str] = "environment.json"

    hardware: Inventory | None = None
    engines: list[EngineEnvironment] | None = None


class KvPrediction(BaseModel):
    """The KV-cache capacity the memory plan predicts for one engine configuration."""

    model_config = ConfigDict(extra="forbid")

    label: str
    tokens: int | None = Field(description="Predicted KV-cache tokens (None: cannot be planned).")
    basis: str


class CpuKvRow(BaseModel):
    """A CPU engine's KV cache: the space it is given and the tokens that fit."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    label: str = Field(alias="engine config")
    space_gib: float = Field(alias="KV space GiB")
    bytes_per_token: int = Field(alias="KV bytes/token")
    tokens: int = Field(alias="KV tokens predicted")
    max_sequences: int = Field(alias="max sequences at this workload's context")


class MemoryPlanRecord(Artifact):
    """Step 4's memory plan: per precision for the model on the GPU, and per configuration its KV capacity."""

    artifact: ClassVar[str] = "memory_plan.json"

    gpu_plan: MemoryPlan | None = None
    memory_fraction: float | None = Field(default=None, description="Memory fraction the GPU plan assumes.")
    planned_for: str = Field(default="", description="Which GPU the plan is for, and why that one.")
    cpu: list[CpuKvRow] = Field(default_factory=list)
    predictions: list[KvPrediction] = Field(default_factory=list)

    def predicted(self, label: str) -> int | None:
        """The predicted KV tokens of configuration ``label``."""
        return next((p.tokens for p in self.predictions if p.label == label), None)
