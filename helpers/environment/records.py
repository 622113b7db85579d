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

    def version_of(self, label: str) -> str | None:
        """The engine version step 4 found for the configuration ``label`` (None when it found none)."""
        found = next((e.version for e in (self.engines or []) if e.label == label), None)
        return str(found) if found else None


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


class ConfigPrediction(BaseModel):
    """Step 4's predicted capacity of one engine configuration (``helpers.environment.prediction``)."""

    model_config = ConfigDict(extra="forbid")

    label: str
    engine: str
    available: bool = Field(description="False: no prediction; reason says why.")
    reason: str = ""
    gpu: str | None = None
    tensor_parallel: int = 1
    weight_precision: str | None = None
    input_tokens: float | None = Field(default=None, description="Prompt tokens per request the model assumes.")
    output_tokens: float | None = Field(default=None, description="Output tokens per request.")
    cached_share: float = Field(default=0.0, description="Share of the prompt assumed served by the prefix cache.")
    kv_tokens: int | None = Field(default=None, description="KV-cache tokens of one replica (the memory plan).")
    max_batch: int | None = Field(default=None, description="Most sequences running at once.")
    batch_limit: str = Field(default="", description="What bounds max_batch: KV cache, max_num_seqs or the ITL limit.")
    decode_step_ms_batch1: float | None = None
    decode_step_ms_at_peak: float | None = None
    prefill_ms: float | None = Field(default=None, description="Prefill of one request at the dense peak.")
    peak_requests_per_s: float | None = Field(default=None, description="Saturation rate at max_batch.")
    peak_output_tok_s: float | None = None
    sla_requests_per_s: float | None = Field(default=None, description="Raw model: highest rate within the SLA.")
    sla_concurrency: float | None = Field(default=None, description="Requests in flight at that rate.")
    ttft_p95_ms_at_capacity: float | None = None
    calibration_factor: float | None = Field(default=None, description="measured ÷ predicted of this engine.")
    calibration_basis: str = Field(default="", description="Where the factor comes from, or why none applies.")
    capacity_requests_per_s: float | None = Field(
        default=None, description="The prediction to use: sla_requests_per_s × calibration_factor when one applies."
    )
    capacity_concurrency: float | None = Field(default=None, description="sla_concurrency, calibrated the same way.")
    notes: list[str] = Field(default_factory=list)


class PredictionRecord(Artifact):
    """Step 4's capacity prediction of every configuration, made before step 5 starts anything."""

    artifact: ClassVar[str] = "prediction.json"

    gpu: str | None = Field(default=None, description="The GPU predicted for (a spec name).")
    planned_for: str = Field(default="", description="Which GPU, and why that one.")
    ttft_p95_ms: float = Field(description="The SLA's TTFT p95 limit the capacity is for.")
    itl_p95_ms: float | None = None
    batching_model: str = Field(description="The stated model the numbers come from.")
    predictions: list[ConfigPrediction] = Field(default_factory=list)

    def of(self, label: str) -> ConfigPrediction | None:
        """The prediction of configuration ``label``."""
        return next((p for p in self.predictions if p.label == label), None)
