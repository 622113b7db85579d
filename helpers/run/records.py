"""Result records of a run: one ``Point`` per measured load level, one ``EngineResult`` per engine config.

Points are written to the run folder as soon as they finish (``save_point``) so that nothing is lost when a
later point or engine fails, and a re-run resumes from what is already there.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.core import atomic
from helpers.core.text import knob_text, label_slug


class _Record(BaseModel):
    """Base of result records: unknown keys are rejected so that archives stay readable."""

    model_config = ConfigDict(extra="forbid")


class Artifact(_Record):
    """A record a step writes into the run folder as one JSON file (``artifact``), read back by later steps.

    Subclasses live with the step that computes them and name their file; ``helpers.run.folder.RunFolder``
    saves and loads any of them, so the run folder needs no knowledge of the steps above it.
    """

    artifact: ClassVar[str] = ""


class SpecDecodeStats(_Record):
    """What the engine said about its speculative drafts during one point (``helpers.benchmark.speculative``)."""

    source: str = Field(description="counters (deltas over the point) or gauge (mean of the samples).")
    drafted: float | None = Field(default=None, description="Draft tokens proposed during the point.")
    accepted: float | None = Field(default=None, description="Draft tokens accepted during the point.")
    drafts: float | None = Field(default=None, description="Draft sequences proposed during the point.")
    acceptance_rate: float | None = Field(default=None, description="accepted ÷ drafted.")
    mean_acceptance_length: float | None = Field(default=None, description="Tokens per verify step, bonus included.")


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
    spec_decode: SpecDecodeStats | None = Field(
        default=None, description="Speculative-decoding acceptance over the point (None: no drafts series)."
    )
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


class CacheSplit(_Record):
    """Prompt tokens the engine served from its prefix cache, per its usage reports, and TTFT by hit/miss."""

    requests: int = Field(description="Successful requests.")
    reporting: int = Field(description="Requests whose usage reported cached tokens.")
    prompt_tokens: int = Field(description="Prompt tokens of the reporting requests.")
    cached_tokens: int = Field(description="Of those, tokens served from the prefix cache.")
    hit_rate: float | None = Field(description="cached_tokens / prompt_tokens; None: the engine reported none.")
    hit_requests: int = Field(description="Requests with at least one cached token.")
    ttft_hit_ms_p50: float | None = Field(description="Median TTFT of requests with cached tokens.")
    ttft_hit_ms_p95: float | None = Field(description="95th percentile TTFT of those.")
    ttft_miss_ms_p50: float | None = Field(description="Median TTFT of reporting requests with none cached.")
    ttft_miss_ms_p95: float | None = Field(description="95th percentile TTFT of those.")


class StructuredCheck(_Record):
    """A replay that kept the traffic's structure, its predicted prefix-cache hit rate and what the engine achieved.

    The prediction is ``helpers.workload.cache_sim`` over exactly the requests replayed, at this engine's
    block size and KV capacity; the achieved rate is the point's ``server.prefix_cache_hit_rate`` (the
    engine's counters) and ``usage`` (its per-request ``cached_tokens``).
    """

    workload: Literal["trace", "multi-turn"] = Field(description="The trace's replay or the synthetic sessions.")
    kind: Literal["blocks", "sessions"] = Field(description="Shared token blocks, or sessions with history.")
    description: str = Field(default="", description="What was replayed, in words.")
    requests_planned: int = Field(description="Requests the replay holds.")
    sessions: int = Field(default=0, description="Sessions (conversations) in it; 0 for a block replay.")
    live_reply: bool = Field(default=False, description="Whether each reply was threaded into the next turn.")
    skipped: int = Field(default=0, description="Trace lines or turns left out of the replay.")
    skipped_examples: list[str] = Field(default_factory=list, description="The first few, by line number.")
    notes: list[str] = Field(default_factory=list)
    prefix_caching: bool | None = Field(default=None, description="The prefix_caching knob (None: engine default).")
    block_size: int | None = Field(default=None, description="KV-cache block size simulated (tokens).")
    block_size_source: str = Field(default="", description="Where the block size came from.")
    capacity_tokens: int | None = Field(default=None, description="KV-cache capacity simulated (tokens).")
    capacity_source: str = Field(default="", description="engine log, or the step-4 memory plan.")
    predicted_unbounded: float | None = Field(default=None, description="Hit rate of an unbounded cache.")
    predicted_finite: float | None = Field(default=None, description="Hit rate of an LRU cache of capacity_tokens.")
    evicted_blocks: int | None = Field(default=None, description="Blocks the simulated cache evicted.")
    prediction_note: str = Field(default="", description="The cache model, or why there is no prediction.")
    cache_reset: str = Field(default="", description="Whether the engine's prefix cache was emptied first.")
    usage: CacheSplit | None = Field(default=None, description="Achieved, from per-request cached_tokens.")


class BatchingRun(_Record):
    """How a point of the batching comparison was driven (``helpers.benchmark.batching``)."""

    mode: Literal["static", "continuous"] = Field(
        description="static: waves, the next waits for the slowest; continuous: each stream sends on as it ends."
    )
    waves: int = Field(description="Waves of ``concurrency`` requests (continuous: as many requests in all).")
    output_tokens_min: int
    output_tokens_max: int
    output_tokens: int = Field(description="Output tokens the requests asked for, in all.")
    span_s: float = Field(description="Seconds the requests took: first sent to last done, summed over waves.")


class Point(_Record):
    """One measured load level of one engine configuration."""

    label: str = Field(description="Engine configuration label (from the config).")
    engine: str = Field(description="Engine adapter name.")
    concurrency: int
    phase: Literal["sweep", "tune", "replay", "structured", "search", "trial", "batching"] = Field(
        default="sweep",
        description="Concurrency sweep, SLA tuning, a replay of the trace's arrivals, a replay with the traffic's "
        "structure (shared blocks, sessions), a capacity-search probe, a repeated trial at the capacity, or one "
        "side of the continuous-vs-static batching comparison.",
    )
    offered_rate: float | None = Field(default=None, description="Open-loop arrival rate asked for (req/s).")
    trial: int | None = Field(default=None, description="Trial number at the capacity (phase trial).")
    warmup_requests: int = Field(default=0, description="Requests sent first and left out of the figures.")
    verdict: str | None = Field(default=None, description="The capacity search's verdict on this load.")
    probe: dict[str, Any] | None = Field(default=None, description="The search's judged measurement (resume).")
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
    sla_met: bool | None = Field(default=None, description="Met the SLA (helpers.benchmark.sla.meets_sla).")
    server: ServerStats = Field(default_factory=ServerStats)
    gpu: GpuStats = Field(default_factory=GpuStats)
    roofline: dict[str, Any] = Field(default_factory=dict, description="Bound for this point and measured/bound.")
    structure: StructuredCheck | None = Field(
        default=None, description="Phase structured: predicted vs achieved prefix-cache hit rate."
    )
    batching: BatchingRun | None = Field(default=None, description="Phase batching: static waves or continuous.")
    interference: str | None = Field(
        default=None, description="What else loaded the machine while it ran, over the limit (None: nothing)."
    )
    request_times: list[tuple[float, float | None]] | None = Field(
        default=None,
        description="Open-loop loads: every request's send and finish time (s after the first send, to the "
        "millisecond; None: never finished), so that a re-rendered run judges whether the engine kept up again.",
    )


class Figure(_Record):
    """A measured figure: its mean and, where trials were repeated, the 95% confidence interval."""

    mean: float
    low: float | None = None
    high: float | None = None
    n: int = Field(default=1, description="Trials behind the mean.")

    @property
    def half_width(self) -> float | None:
        """Half the interval's width, when there is one."""
        return None if self.low is None or self.high is None else (self.high - self.low) / 2

    def text(self, fmt: str = "{:,.0f}") -> str:
        """``mean ± half width (n=…)`` where the interval is symmetric about the mean, else its ends written out.

        ``mean [low, high]`` (a bootstrap's), ``≥ low and < high`` (a capacity known from below, whose mean is
        its lower end): never a ``±`` for ends the interval does not have; the mean alone for a single sample.
        """
        if self.n < 2 or self.low is None:
            return fmt.format(self.mean) + (" (1 sample)" if self.n == 1 else "")
        f, n, at_low = fmt.format, f"(n={self.n})", math.isclose(self.mean, self.low, rel_tol=1e-9, abs_tol=1e-12)
        high = "unbounded" if self.high is None else f(self.high)
        if at_low and (self.high is None or self.high > self.low):
            return f"≥ {f(self.low)} {n}" if self.high is None else f"≥ {f(self.low)} and < {high} {n}"
        if self.high is not None and abs(self.high + self.low - 2 * self.mean) <= 0.1 * (self.high - self.low):
            return f"{f(self.mean)} ± {f((self.high - self.low) / 2)} {n}"
        return f"{f(self.mean)} [{f(self.low)}, {high}] {n}"


class Representative(_Record):
    """The measurement that stands for one engine configuration in every comparison (``helpers.benchmark.sla``)."""

    label: str
    engine: str
    source: Literal["capacity", "fixed", "grid", "none"] = Field(
        description="capacity: the SLA capacity estimated from every probe, with its interval; fixed: trials at "
        "a fixed load (search disabled); grid: the point a schema-1 archive compared at; none: nothing measured."
    )
    meets_sla: bool
    phase: str | None = None
    concurrency: int | None = Field(default=None, description="Concurrency of the grid point (closed loop).")
    capacity: Figure | None = Field(
        default=None, description="The SLA capacity on the search's axis (req/s or streams), with its 95% interval."
    )
    conclusive: bool = Field(default=False, description="The capacity's interval is within the half-width asked for.")
    lower_bound: bool = Field(
        default=False, description="The capacity is known from below only: the highest load passed."
    )
    request_rate: Figure | None = Field(
        default=None, description="Sustained request rate (req/s): at the capacity, or the fixed-load trials'."
    )
    output_tok_s: Figure | None = Field(
        default=None, description="At the capacity: request rate × output tokens per request; else the trials'."
    )
    total_tok_s: Figure | None = None
    ttft_ms_p95: Figure | None = None
    itl_ms_p95: Figure | None = None
    requests: int = Field(default=0, description="Requests behind the figures (all trials).")
    knobs: dict[str, Any] = Field(default_factory=dict)
    basis: str = Field(default="", description="How this measurement was chosen, in words.")

    @property
    def key(self) -> str:
        """A short identity used to check that every output names the same measurement."""
        if self.source == "capacity" and self.request_rate is not None:
            return f"{self.label}@{self.request_rate.mean:.3f}req/s"
        if self.source == "fixed":
            return f"{self.label}@fixed:c{self.concurrency}"
        return f"{self.label}@{self.phase}:c{self.concurrency}:{knob_text(self.knobs)}"


def fmt_load(x: float) -> str:
    """A load for people: ``30.1``, ``1,234``."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


class CapacityEstimate(_Record):
    """The capacity of one configuration from its probes: a value, a 95% interval, and how it was found."""

    axis: Literal["rate", "concurrency"] = "rate"
    status: Literal["estimated", "at_least", "below", "not_measured"] = Field(
        description="estimated: the margin crosses 0 among the loads tried; at_least: every sized criterion "
        "passed (high, if set: the lowest load above that failed without a size); below: every valid probe failed; "
        "not_measured: no valid probe."
    )
    value: float | None = Field(default=None, description="Estimated capacity (the load where the margin is 0).")
    low: float | None = Field(default=None, description="95% interval, low end (None: unbounded or none).")
    high: float | None = Field(default=None, description="95% interval, high end (None: unbounded or none).")
    confidence: float = 0.95
    rel_half_width: float | None = Field(default=None, description="(high - low) / 2 / value.")
    conclusive: bool = Field(default=False, description="A bounded interval within the target half-width.")
    target_rel: float = Field(default=0.05, description="The half-width asked for.")
    bracket_low: float | None = Field(default=None, description="Monotone fit: highest load on the passing side.")
    bracket_high: float | None = Field(default=None, description="Monotone fit: lowest load on the failing side.")
    criterion: str | None = Field(default=None, description="The criterion that binds at the edge ('TTFT p95'...).")
    slope: float | None = Field(default=None, description="d margin / d log load of the line at the edge.")
    probes: int = Field(default=0, description="Valid probes of the configuration.")
    window: list[str] = Field(default_factory=list, description="Streams of the probes the line was fitted on.")
    requests: int = Field(default=0, description="Requests behind the window's probes.")
    order_bound: bool = Field(default=False, description="An end is a probe's load (edge_bounds), not the fit's.")
    note: str = ""

    def text(self, unit: str = "req/s") -> str:
        """``"30.1 req/s [29.2, 31.0] (95%, 7 probes)"``, or what is known instead."""
        fmt, lo = fmt_load, fmt_load(self.low) if self.low is not None else ""
        if self.status == "at_least" and self.low is not None and self.high is not None:
            return f"≥ {lo} and < {fmt(self.high)} {unit} (above {lo} it failed only without a size)"
        if self.status == "at_least" and self.low is not None:
            return f"≥ {fmt(self.low)} {unit} (every load tried met the SLA)"
        if self.status == "below" and self.high is not None:
            return f"< {fmt(self.high)} {unit} (no load tried met the SLA)"
        if self.value is None:
            return "not measured"
        if self.low is None or self.high is None:
            return f"{fmt(self.value)} {unit} (no interval: {self.note})"
        how = ", an end from the probes' monotone order" if self.order_bound else ""
        return f"{fmt(self.value)} {unit} [{fmt(self.low)}, {fmt(self.high)}] (95%, {len(self.window)} probes{how})"


class CapacitySummary(_Record):
    """The SLA capacity search of one configuration (``helpers.benchmark.edge_search``), or its fixed-load trials."""

    axis: Literal["rate", "concurrency"] = "rate"
    searched: bool = Field(
        default=True, description="False: the search was disabled and the trials ran at a fixed load (no capacity)."
    )
    capacity: float | None = Field(default=None, description="Highest load that met the SLA and was sustained.")
    bracket_low: float | None = None
    bracket_high: float | None = None
    bounded: bool = False
    converged: bool = False
    tolerance: float = 0.05
    note: str = ""
    probes: list[dict[str, Any]] = Field(default_factory=list, description="Every probe: load, figures, verdict.")
    trial_load: float | None = Field(default=None, description="Load the repeated trials ran at (fixed load).")
    trials_note: str = ""
    estimate: CapacityEstimate | None = Field(
        default=None, description="The capacity from every valid probe, with its 95% interval (benchmark.boundary)."
    )


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
    capacity: CapacitySummary | None = Field(default=None, description="SLA capacity search and trials.")
    gpu_seconds: dict[str, float] = Field(
        default_factory=dict, description="Seconds the engine was up, by phase (cold start, sweep, search, trials)."
    )
    points: list[Point] = Field(default_factory=list)


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
