"""Sourced reference data the cost, decision and risk steps read: GPU prices and engine-family facts.

Both live as YAML files under ``helpers/data`` that a user may edit; every entry names its source
and date. The loaders validate them (unknown keys are errors) and name the file and key at fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.core.errors import ConfigError
from helpers.core.paths import DATA_DIR

GPU_PRICES_FILE = DATA_DIR / "gpu_prices.yaml"
ENGINE_FACTS_FILE = DATA_DIR / "engine_facts.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuPrice(_Strict):
    """One accelerator's hourly price, with where it comes from."""

    price_per_hour: float = Field(ge=0, description="USD per accelerator-hour.")
    kind: str = Field(description="on-demand, reserved, spot or assumption.")
    provider: str
    date: str = Field(description="When the price was quoted.")
    source: str = Field(description="Where the number comes from.")


class DatedValue(_Strict):
    """A number with what it measures, its date and its source."""

    seconds: float = Field(ge=0)
    what: str
    date: str
    source: str


class OpsHours(_Strict):
    """Default engineer hours per month to run an engine family (an assumption unless sourced)."""

    hours: float = Field(ge=0)
    assumption: bool = True
    basis: str


class Fact(_Strict):
    """One dated fact about an engine family."""

    topic: str
    text: str
    date: str
    source: str


Level = Literal["low", "medium", "high"]


class RiskLevels(_Strict):
    """Baseline likelihood of each risk-register entry for a family, before the config adjusts it."""

    lock_in: Level
    hardware_binding: Level
    community: Level
    model_support_lag: Level
    ops_complexity: Level


class FamilyFacts(_Strict):
    """What the playbook knows about one engine family."""

    display_name: str
    hardware: list[str]
    nvidia_only: bool
    cold_start: DatedValue
    ops_hours_per_month: OpsHours
    risk_levels: RiskLevels
    facts: list[Fact] = Field(default_factory=list)

    def about(self, topic: str) -> list[Fact]:
        """Return the facts filed under ``topic``."""
        return [f for f in self.facts if f.topic == topic]


def _read_yaml(path: Path) -> dict:
    """Read a YAML mapping, or raise ``ConfigError`` naming the file."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def _validate(model: type[_Strict], path: Path, key: str, value: object) -> _Strict:
    try:
        return model.model_validate(value)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(p) for p in (key, *e["loc"]))
        raise ConfigError(f"{path}: {loc}: {e['msg']}") from None


def load_gpu_prices(path: Path | None = None) -> dict[str, GpuPrice]:
    """Load the GPU price table (``helpers/data/gpu_prices.yaml`` unless ``path`` is given), by name."""
    p = Path(path) if path else GPU_PRICES_FILE
    return {str(k): _validate(GpuPrice, p, str(k), v) for k, v in _read_yaml(p).items()}


def load_engine_facts(path: Path | None = None) -> dict[str, FamilyFacts]:
    """Load the engine-family facts (``helpers/data/engine_facts.yaml`` unless ``path``), by family."""
    p = Path(path) if path else ENGINE_FACTS_FILE
    return {str(k): _validate(FamilyFacts, p, str(k), v) for k, v in _read_yaml(p).items()}
