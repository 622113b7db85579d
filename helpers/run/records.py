"""Result records of a run: one ``Point`` per measured load level, one ``EngineResult`` per engine config.

Points are written to the run folder as soon as they finish (``save_point``) so that nothing is
lost when a later point or engine fails, and a re-run resumes from what is already there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.core import atomic


class _Record(BaseModel):
    """Base of result records: unknown keys are rejected so that archives stay readable."""

    model_config = ConfigDict(extra="forbid")


class ServerStats(_Record):
    """Server-side metrics scraped from ``/metrics`` during a point, normalised across engines."""

    prefix_cache_hit_rate: float | None = Field(default=None, description="Hits / queries over the point (0-1).")
    kv_cache_usage_max: float | None = Field(default=None, description="Max KV-cache usage (0-1).")
    kv_cache_usage_mean: float | None = None
    queue_max: float | None = Field(default=None, description="Max waiting requests.")
    queue_mean: float | None = None
    running_max: float | None = Field(default=None, description="Max running requests.")
    running_mean: float | None = None
    samples: int = Field(default=0, description="Scrapes that parsed.")
    error: str | None = Field(default=None, description="Why the server metrics are missing or partial.")


class GpuStats(_Record):
    """GPU telemetry sampled through NVML during a point (absent without a GPU)."""

    available: bool = False
    reason: str | None = Field(default=None, description="Why there is no GPU telemetry.")
    util_mean: float | None = Field(default=None, description="Mean GPU utilisation (%).")
    util_max: float | None = None
    mem_used_max_gib: float | None = None
    mem_total_gib: float | None = None
    power_mean_w: float | None = None
    samples: int = 0


class Point(_Record):
    """One measured load level of one engine configuration."""

    label: str = Field(description="Engine configuration label (from the config).")
    engine: str = Field(description="Engine adapter name.")
    concurrency: int
    phase: Literal["sweep", "tune", "replay"] = Field(
        default="sweep", description="Concurrency sweep, SLA tuning, or a replay of the trace's arrivals."
    )
    knobs: dict[str, Any] = Field(default_factory=dict, description="Knob values in force for this point.")
    requests: int = Field(description="Requests that completed.")
    errors: int = Field(default=0, description="Requests that failed.")
    incomplete: int = Field(default=0, description="Requests cut off by the point's time cap (not failures).")
    duration_s: float
    input_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    output_tok_s: float
    total_tok_s: float
    req_s: float
    ttft_ms_p50: float | None = None
    ttft_ms_p95: float | None = None
    ttft_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p95: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p95: float | None = None
    goodput_req_s: float | None = Field(default=None, description="Requests/s that met the SLA.")
    sla_met: bool | None = Field(default=None, description="TTFT p95 within the SLA.")
    server: ServerStats = Field(default_factory=ServerStats)
    gpu: GpuStats = Field(default_factory=GpuStats)
    roofline: dict[str, Any] = Field(default_factory=dict, description="Bound for this point and measured/bound.")


class EngineResult(_Record):
    """What happened to one engine configuration: its status, start-up facts and its points."""

    label: str
    engine: str
    status: Literal["ok", "failed", "partial", "skipped"] = "ok"
    reason: str | None = Field(default=None, description="Why it failed or was skipped.")
    log_tail: str | None = Field(default=None, description="Last lines of the engine log when it failed.")
    version: str | None = None
    command: list[str] = Field(default_factory=list, description="Launch command (secrets masked).")
    cold_start_s: float | None = Field(default=None, description="Launch to first completed request.")
    ready_s: float | None = Field(default=None, description="Launch to healthy.")
    kv_capacity_tokens: int | None = Field(default=None, description="KV-cache capacity the engine logged.")
    tuned_knobs: dict[str, Any] | None = Field(default=None, description="Best knobs within the SLA.")
    points: list[Point] = Field(default_factory=list)


def label_slug(text: str) -> str:
    """A filesystem-safe form of an engine label (case kept, so distinct labels stay distinct)."""
    keep = [c if c.isalnum() or c in "-_." else "-" for c in text]
    return "".join(keep).strip("-") or "x"


def point_path(run_dir: Path, label: str, phase: str, concurrency: int, knob_tag: str = "") -> Path:
    """Where one point is stored in the run folder."""
    tag = f"-{label_slug(knob_tag)}" if knob_tag else ""
    return Path(run_dir) / "points" / label_slug(label) / f"{phase}{tag}-c{concurrency:04d}.json"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a fsynced temporary file and rename, so a crash or a full disk never leaves half a file.

    Raises ``helpers.core.atomic.AtomicWriteError`` (a ``PlaybookError``) naming ``path`` when it cannot be written.
    """
    atomic.write_json_atomic(path, data)


def save_point(run_dir: Path, point: Point, knob_tag: str = "") -> Path:
    """Persist one point immediately; returns its path."""
    p = point_path(run_dir, point.label, point.phase, point.concurrency, knob_tag)
    write_json_atomic(p, point.model_dump(mode="json"))
    return p


def load_point(path: Path) -> Point | None:
    """Read a stored point, or None if the file is missing or unreadable (then it is re-measured)."""
    try:
        return Point.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def save_engine_result(run_dir: Path, result: EngineResult) -> Path:
    """Persist an engine's result (status, reason, points) to ``engines/<label>.json``."""
    p = Path(run_dir) / "engines" / f"{label_slug(result.label)}.json"
    write_json_atomic(p, result.model_dump(mode="json"))
    return p


def load_engine_result(run_dir: Path, label: str) -> EngineResult | None:
    """The stored result of one engine configuration, or None if missing or unreadable."""
    p = Path(run_dir) / "engines" / f"{label_slug(label)}.json"
    try:
        return EngineResult.model_validate_json(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_engine_results(run_dir: Path) -> list[EngineResult]:
    """All engine results of a run folder, in file-name order."""
    d = Path(run_dir) / "engines"
    if not d.is_dir():
        return []
    return [EngineResult.model_validate_json(p.read_text(encoding="utf-8")) for p in sorted(d.glob("*.json"))]
