"""The workload config: typed pydantic models that validate a YAML file before anything starts.

Every model forbids unknown keys, so a typo fails with the field's name. ``load_config`` turns
pydantic's errors into one line naming the field and, where there is a fixed set, the allowed
values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from helpers.core.config_answers import (  # noqa: F401  (re-exported: the config's sections)
    Alerts,
    Autoscaling,
    Cost,
    Decision,
    HardwarePlan,
    ModelCadence,
    Quality,
    Review,
    Rollback,
    Rollout,
    Team,
)
from helpers.core.config_base import PositiveInt, _Strict  # noqa: F401
from helpers.core.config_engines import (  # noqa: F401
    DEFAULT_MEMORY_FRACTION,
    EngineSpec,
    Knobs,
    LauncherSpec,
    ModelSpec,
    Speculative,
)
from helpers.core.config_overrides import apply_overrides
from helpers.core.config_workload import (  # noqa: F401
    SLA,
    BatchingTest,
    CapacitySearch,
    CrossCheck,
    Evidence,
    MultiTurn,
    Replay,
    TraceSource,
    Trials,
    Workload,
)
from helpers.core.errors import ConfigError
from helpers.core.secrets import known_secrets, redact_data


class PlaybookConfig(_Strict):
    """A whole workload config: what to compare, under which load, judged by which answers."""

    name: str = Field(description="Workload name; runs of the same name are compared in reviews.")
    description: str = Field(default="", description="Free text shown in the report.")
    model: ModelSpec
    engines: list[EngineSpec] = Field(min_length=1)
    workload: Workload = Field(default_factory=Workload)
    sla: SLA = Field(default_factory=SLA)
    evidence: Evidence = Field(default_factory=Evidence)
    batching: BatchingTest = Field(default_factory=BatchingTest)
    cost: Cost = Field(default_factory=Cost)
    hardware: HardwarePlan = Field(default_factory=HardwarePlan)
    team: Team = Field(default_factory=Team)
    cadence: ModelCadence = Field(default_factory=ModelCadence)
    decision: Decision = Field(default_factory=Decision)
    alerts: Alerts = Field(default_factory=Alerts)
    rollout: Rollout = Field(default_factory=Rollout)
    review: Review = Field(default_factory=Review)
    quality: Quality = Field(default_factory=Quality)

    @model_validator(mode="after")
    def _quality_reference_known(self) -> PlaybookConfig:
        labels = [e.label for e in self.engines]
        if self.quality.reference is not None and self.quality.reference not in labels:
            raise ValueError(f"quality.reference {self.quality.reference!r} is not an engine label; have: {labels}")
        return self

    @model_validator(mode="after")
    def _batching_labels_known(self) -> PlaybookConfig:
        labels = [e.label for e in self.engines]
        unknown = [x for x in self.batching.configurations if x not in labels]
        if unknown:
            raise ValueError(f"batching.configurations {unknown} are not engine labels; have: {labels}")
        return self

    @model_validator(mode="after")
    def _unique_labels(self) -> PlaybookConfig:
        labels = [e.label for e in self.engines]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise ValueError(f"engine labels must be unique; repeated: {', '.join(dup)}")
        return self


def _format_error(err: ValidationError, source: str) -> str:
    """Render the first pydantic error as one line: file, dotted field path, what is wrong."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "<root>"
    msg = e["msg"]
    if e["type"] == "extra_forbidden":
        msg = "unknown key (typo?)"
    elif e["type"] == "literal_error":
        allowed = e.get("ctx", {}).get("expected", "")
        msg = f"got {e.get('input')!r}; allowed: {allowed}"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    more = f" (+{len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return one_line(f"{source}: {loc}: {msg}{more}")


def one_line(text: str) -> str:
    r"""``text`` with line breaks written as ``\n`` / ``\r``: a key, label or path from the YAML may hold one."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def parse_config(data: dict[str, Any], source: str = "<config>") -> PlaybookConfig:
    """Validate a config mapping; raise ``ConfigError`` with a one-line message on failure."""
    if not isinstance(data, dict):
        raise ConfigError(one_line(f"{source}: the top level must be a mapping, got {type(data).__name__}"))
    try:
        return PlaybookConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None
    except RecursionError:
        raise ConfigError(one_line(f"{source}: nested too deeply to validate")) from None


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> PlaybookConfig:
    """Read and validate a workload YAML file, with ``overrides`` (``KEY=VALUE``, ``helpers.core.config_overrides``)."""
    p = Path(path)
    try:
        if not p.is_file():
            raise ConfigError(one_line(f"{p}: config file not found"))
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(one_line(f"{p}: not valid YAML: {str(err).splitlines()[0]}")) from None
    except UnicodeDecodeError as err:
        raise ConfigError(one_line(f"{p}: not UTF-8 text (byte {err.start})")) from None
    except RecursionError:
        raise ConfigError(one_line(f"{p}: nested too deeply to read")) from None
    except OSError as err:
        raise ConfigError(one_line(f"{p}: cannot read the config file ({err.strerror or err})")) from None
    if overrides and isinstance(data, dict):
        data = apply_overrides(data, overrides)
    return parse_config(data, f"{p} with --set {', '.join(overrides)}" if overrides else str(p))


def public_dict(cfg: PlaybookConfig) -> dict[str, Any]:
    """The config as plain data, safe to archive: secret-looking env values are masked."""
    return redact_data(cfg.model_dump(mode="json"), known_secrets(cfg))
