"""The workload config: typed pydantic models that validate a YAML file before anything starts.

Every model forbids unknown keys, so a typo fails with the field's name. ``load_config`` turns
pydantic's errors into one line naming the field and, where there is a fixed set, the allowed
values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from helpers.core.errors import ConfigError
from helpers.core.paths import resolve_model_dir
from helpers.core.secrets import known_secrets, redact_data
from helpers.core.text import unknown_choice
from helpers.engines import ENGINES
from helpers.launchers import LAUNCHERS


class _Strict(BaseModel):
    """Base of every config model: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


PositiveInt = Annotated[int, Field(gt=0)]


class ModelSpec(_Strict):
    """The model under test: a folder with ``config.json`` and a tokenizer (weights optional)."""

    path: str = Field(description="Model folder: absolute, relative to cwd, or a name under playbook/models.")
    served_name: str | None = Field(default=None, description="Name the engine serves it under; defaults to path.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        default="auto", description="Activation/weight dtype the engine is asked for."
    )

    @field_validator("path")
    @classmethod
    def _model_dir_exists(cls, v: str) -> str:
        d = resolve_model_dir(v)
        if not (d / "config.json").is_file():
            raise ValueError(f"model folder {v!r} has no config.json (looked in {d})")
        return v

    @property
    def directory(self) -> Path:
        """The resolved model folder."""
        return resolve_model_dir(self.path)


class Knobs(_Strict):
    """Engine-neutral tuning knobs; each engine adapter maps them onto its own flags."""

    max_num_seqs: PositiveInt | None = Field(default=None, description="Max concurrent sequences (batch size).")
    max_batched_tokens: PositiveInt | None = Field(default=None, description="Max tokens per scheduler step.")
    prefix_caching: bool | None = Field(default=None, description="Prefix caching on/off; None = engine default.")
    kv_cache_dtype: Literal["auto", "fp8"] = Field(default="auto", description="KV-cache dtype.")
    quantization: Literal["none", "fp8"] = Field(default="none", description="Weight quantization.")
    tensor_parallel: PositiveInt = Field(default=1, description="Tensor-parallel size (GPUs).")
    memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="Share of GPU memory the engine may take."
    )
    dummy_weights: bool = Field(default=True, description="Serve random weights from config.json only.")
    max_model_len: PositiveInt | None = Field(default=None, description="Max context length.")


class LauncherSpec(_Strict):
    """How an engine process is started: a Python interpreter, a container image, or an existing endpoint."""

    kind: str = Field(default="python", description="Registered launcher: python, docker or endpoint.")
    python: str | None = Field(
        default=None, description="Interpreter that has the engine (python launcher); relative to the repo."
    )
    pythonpath: list[str] = Field(default_factory=list, description="Folders put first on PYTHONPATH.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    image: str | None = Field(default=None, description="Container image (docker launcher).")
    url: str | None = Field(default=None, description="Base URL of a running server (endpoint launcher).")
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key; never the key itself.",
    )

    @field_validator("kind")
    @classmethod
    def _known_launcher(cls, v: str) -> str:
        if v not in LAUNCHERS:
            raise ValueError(unknown_choice("launcher", v, LAUNCHERS))
        return v


class EngineSpec(_Strict):
    """One engine configuration to benchmark."""

    label: str = Field(description="Name of this configuration in tables and plots.")
    engine: str = Field(description="Registered engine adapter: vllm, vllm-cpu, sglang, trtllm or endpoint.")
    launcher: LauncherSpec = Field(default_factory=LauncherSpec)
    knobs: Knobs = Field(default_factory=Knobs)
    extra_args: list[str] = Field(default_factory=list, description="Extra command-line flags, passed as given.")
    engine_options: dict[str, str] = Field(
        default_factory=dict,
        description="Engine-specific settings the adapter understands (trtllm: backend: pytorch | tensorrt).",
    )
    startup_timeout_s: float = Field(default=600, gt=0, description="Seconds to wait for health after launch.")
    tune_max_num_seqs: list[PositiveInt] = Field(
        default_factory=list,
        description="Batch sizes to try at the target concurrency; the best within the SLA is the tuned config.",
    )

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in ENGINES:
            raise ValueError(unknown_choice("engine", v, ENGINES))
        return v

    @model_validator(mode="after")
    def _launcher_complete(self) -> EngineSpec:
        """The launcher has what its kind needs (checked here so the error names the engine)."""
        LAUNCHERS[self.launcher.kind].check_spec(self.launcher)
        return self


class TraceSource(_Strict):
    """Where the workload comes from: synthetic, or a trace file in a registered format."""

    kind: Literal["synthetic", "trace"] = Field(default="synthetic", description="synthetic or trace.")
    path: str | None = Field(default=None, description="Trace file (kind: trace); relative to the repo root.")
    format: str | None = Field(default=None, description="Trace format name; detected when omitted.")
    per_token_ms: float = Field(
        default=20.0,
        gt=0,
        description="Decode latency model (ms/output token) used when a trace has no end times.",
    )
    prefill_ms_per_1k: float = Field(
        default=50.0,
        ge=0,
        description="Prefill latency model (ms per 1,000 input tokens) for the same estimate.",
    )
    block_size: PositiveInt = Field(default=16, description="KV-cache block size (tokens) for prefix reuse.")

    @model_validator(mode="after")
    def _path_for_trace(self) -> TraceSource:
        if self.kind == "trace" and not self.path:
            raise ValueError("workload.source.path is required when kind is 'trace'")
        return self


class Replay(_Strict):
    """A direct replay of the trace's own arrivals (timestamps), driven by guidellm's replay profile."""

    requests: PositiveInt = Field(default=100, description="Requests of the trace replayed, from start_s on.")
    start_s: float = Field(default=0.0, ge=0, description="Where in the trace the replayed window starts (s).")
    time_scale: float = Field(
        default=1.0, gt=0, description="Scale of the gaps between arrivals: 0.5 replays twice as fast."
    )


class Workload(_Strict):
    """The load to benchmark with."""

    source: TraceSource = Field(default_factory=TraceSource)
    input_tokens: PositiveInt = Field(default=128, description="Prompt length (tokens) of synthetic requests.")
    output_tokens: PositiveInt = Field(default=32, description="Output length (tokens), enforced with ignore_eos.")
    shared_prefix_tokens: int = Field(default=0, ge=0, description="Tokens of a system prompt shared by all requests.")
    concurrency: list[PositiveInt] = Field(default=[1, 4, 16], min_length=1, description="Concurrency levels.")
    profile_concurrency: bool = Field(
        default=False, description="Also measure at the profile's concurrency p50/p95/p99 (step 1)."
    )
    replay: Replay | None = Field(
        default=None, description="Also replay the trace's own arrival times (needs source.kind: trace)."
    )
    requests_per_point: PositiveInt = Field(default=40, description="Requests sent at each concurrency level.")
    requests_per_stream: PositiveInt | None = Field(
        default=None,
        description="If set, a point sends concurrency × this many requests (at most requests_per_point), "
        "so every level runs whole waves instead of being cut by the time cap.",
    )
    max_seconds_per_point: float = Field(
        default=300, gt=0, description="Time cap of one point; requests still in flight then are not counted."
    )
    target_concurrency: PositiveInt | None = Field(
        default=None, description="Concurrency the SLA tuning targets; defaults to the highest level."
    )
    peak_requests_per_s: float | None = Field(default=None, gt=0, description="Peak traffic (req/s), if known.")
    mean_requests_per_s: float | None = Field(default=None, gt=0, description="Mean traffic (req/s), if known.")
    cpu_scale_down: bool = Field(
        default=True,
        description="On a CPU engine, cap profiled lengths to what a CPU can serve (said in report).",
    )

    @field_validator("concurrency")
    @classmethod
    def _sorted_unique(cls, v: list[int]) -> list[int]:
        return sorted(set(v))

    @model_validator(mode="after")
    def _replay_needs_trace(self) -> Workload:
        if self.replay is not None and self.source.kind != "trace":
            raise ValueError("workload.replay needs workload.source.kind: trace (a trace to replay)")
        return self


class SLA(_Strict):
    """The latency budget."""

    ttft_p95_ms: float = Field(default=2000, gt=0, description="TTFT p95 limit (ms); seed 003 §5.3 uses 2000.")
    itl_p95_ms: float | None = Field(default=None, gt=0, description="Optional inter-token latency p95 limit (ms).")


class Cost(_Strict):
    """Prices and operations effort used by the cost step."""

    gpu: str = Field(default="H100-SXM5-80GB", description="Accelerator priced (name in the GPU specs table).")
    gpu_price_per_hour: float | None = Field(
        default=None, ge=0, description="$/hour of one accelerator; defaults from the price table."
    )
    engineer_cost_per_hour: float = Field(default=100.0, ge=0, description="Loaded engineer cost ($/h).")
    ops_hours_per_month: dict[str, float] = Field(
        default_factory=dict,
        description="Engineer hours/month to run each engine (by engine name); seed defaults.",
    )


class HardwarePlan(_Strict):
    """Answers to checklist step 2: the hardware plan."""

    vendors: Literal["nvidia-only", "amd-planned", "mixed"] = Field(
        default="nvidia-only", description="GPU vendors now and in the next 12 months."
    )
    autoscaling: bool = Field(default=False, description="Does the service need autoscaling?")
    gpu_count: PositiveInt = Field(default=1, description="GPUs available per serving replica.")


class Team(_Strict):
    """Answers to checklist step 3: the team."""

    size: PositiveInt = Field(default=3, description="Engineers who will run the serving stack.")
    mlops_maturity: Literal["low", "medium", "high"] = Field(default="low", description="Build/deploy automation.")
    chase_peak: bool = Field(default=False, description="Willing to trade ops effort for the last 10-15%?")


class ModelCadence(_Strict):
    """Answers to checklist step 1: how often the model changes and how many are served."""

    updates_per_month: float = Field(default=1.0, ge=0, description="Model updates per month.")
    concurrent_models: PositiveInt = Field(default=1, description="Models served side by side.")


class Decision(_Strict):
    """Thresholds of the decision step."""

    prefix_reuse_threshold: float = Field(
        default=0.3, ge=0, le=1, description="Measured prefix-reuse share above which reuse counts as heavy."
    )
    high_concurrency: PositiveInt = Field(default=50, description="Concurrency counted as high (seed: 50+).")
    frequent_updates_per_month: float = Field(default=1.0, ge=0, description="Updates/month counted as frequent.")


class Alerts(_Strict):
    """Alert thresholds of the rollout's Prometheus rules; defaults are seed 003 §5.3's (TTFT comes from ``sla``)."""

    ttft_for: str = Field(default="2m", description="How long TTFT p95 must stay above the SLA before firing.")
    gpu_util_min_pct: float = Field(default=60, ge=0, le=100, description="GPU utilisation below this fires.")
    gpu_util_for: str = Field(default="5m", description="How long utilisation must stay low (seed: 5 minutes).")
    gpu_mem_max_pct: float = Field(default=95, gt=0, le=100, description="GPU memory use above this fires.")
    gpu_mem_for: str = Field(default="1m", description="How long memory must stay high.")
    queue_max: float = Field(default=100, gt=0, description="Queued requests above this fires.")
    queue_for: str = Field(default="1m", description="How long the queue must stay long.")
    absent_for: str = Field(default="5m", description="How long the engine's metrics may be missing.")
    window: str = Field(default="5m", description="Rate window of the TTFT histogram.")


class Review(_Strict):
    """Settings of the quarterly review."""

    regression_threshold: float = Field(default=0.10, ge=0, description="Relative drop flagged as a regression.")
    current_versions: dict[str, str] = Field(
        default_factory=dict, description="Engine versions considered current (by engine name)."
    )


class PlaybookConfig(_Strict):
    """A whole workload config: what to compare, under which load, judged by which answers."""

    name: str = Field(description="Workload name; runs of the same name are compared in reviews.")
    description: str = Field(default="", description="Free text shown in the report.")
    model: ModelSpec
    engines: list[EngineSpec] = Field(min_length=1)
    workload: Workload = Field(default_factory=Workload)
    sla: SLA = Field(default_factory=SLA)
    cost: Cost = Field(default_factory=Cost)
    hardware: HardwarePlan = Field(default_factory=HardwarePlan)
    team: Team = Field(default_factory=Team)
    cadence: ModelCadence = Field(default_factory=ModelCadence)
    decision: Decision = Field(default_factory=Decision)
    alerts: Alerts = Field(default_factory=Alerts)
    review: Review = Field(default_factory=Review)

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
    return f"{source}: {loc}: {msg}{more}"


def parse_config(data: dict[str, Any], source: str = "<config>") -> PlaybookConfig:
    """Validate a config mapping; raise ``ConfigError`` with a one-line message on failure."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return PlaybookConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None


def load_config(path: str | Path) -> PlaybookConfig:
    """Read and validate a workload YAML file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {str(err).splitlines()[0]}") from None
    return parse_config(data, str(p))


def public_dict(cfg: PlaybookConfig) -> dict[str, Any]:
    """The config as plain data, safe to archive: secret-looking env values are masked."""
    return redact_data(cfg.model_dump(mode="json"), known_secrets(cfg))
