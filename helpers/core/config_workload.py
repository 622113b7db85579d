"""Config sections of the load: the workload (synthetic, trace, replay, multi-turn) and the SLA."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from helpers.core.config_base import PositiveInt, _Strict


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
    structure: Literal["lengths", "blocks", "sessions"] = Field(
        default="lengths",
        description="What the replay keeps of the trace: lengths only; blocks (equal hash ids get equal "
        "token blocks, as Mooncake traces mean them); or sessions (turns of a conversation/session id replayed "
        "in order, each prompt its history plus the new turn, with the recorded think time).",
    )
    live_reply: bool = Field(
        default=False,
        description="sessions: thread the engine's live reply into the next turn's history "
        "(else a stand-in of the recorded reply length).",
    )
    max_input_tokens: PositiveInt | None = Field(
        default=None,
        description="blocks/sessions: longest prompt replayed; longer prompts keep their leading blocks "
        "(blocks) or end the session there (sessions). None: as traced.",
    )


class MultiTurn(_Strict):
    """A synthetic multi-turn workload: sessions whose turns carry their history (chat, or an agent loop).

    An agent loop is a long shared ``system_prompt_tokens`` (the tool definitions), many ``turns`` (calls),
    short ``user_turn_tokens`` (tool results) and a short ``think_time_s`` (the tool's run time).
    """

    sessions: PositiveInt = Field(default=8, description="Sessions (conversations) in all.")
    turns: PositiveInt = Field(default=4, description="Turns (requests) per session.")
    system_prompt_tokens: int = Field(default=256, ge=0, description="System/tool prompt at the start of each session.")
    shared_system_prompt: bool = Field(
        default=True, description="Whether every session has the same system prompt (else one each)."
    )
    user_turn_tokens: PositiveInt = Field(default=64, description="New tokens each turn adds (user message).")
    output_tokens: PositiveInt = Field(default=32, description="Reply tokens per turn (ignore_eos).")
    think_time_s: float = Field(default=1.0, ge=0, description="Pause between a reply and the next turn (s).")
    sessions_in_flight: PositiveInt = Field(
        default=4, description="Sessions running at once; the next starts when one ends."
    )
    live_reply: bool = Field(
        default=True, description="Thread the engine's reply into the next turn (else a stand-in of its length)."
    )


class Workload(_Strict):
    """The load to benchmark with."""

    source: TraceSource = Field(default_factory=TraceSource)
    input_tokens: PositiveInt = Field(default=128, description="Prompt length (tokens) of synthetic requests.")
    output_tokens: PositiveInt = Field(default=32, description="Output length (tokens), enforced with ignore_eos.")
    shared_prefix_tokens: int = Field(default=0, ge=0, description="Tokens of a system prompt shared by all requests.")
    prompts: Literal["random-words", "edit-text"] = Field(
        default="random-words",
        description="What the prompts say: random-words (nothing to copy: the default, fine for speed), or "
        "edit-text (an instruction to rewrite an English passage that follows it, so a real model's output "
        "repeats its prompt: the condition n-gram speculative decoding is for; needs a real model's tokenizer).",
    )
    concurrency: list[PositiveInt] = Field(default=[1, 4, 16], min_length=1, description="Concurrency levels.")
    profile_concurrency: bool = Field(
        default=False, description="Also measure at the profile's concurrency p50/p95/p99 (step 1)."
    )
    replay: Replay | None = Field(
        default=None, description="Also replay the trace's own arrival times (needs source.kind: trace)."
    )
    multi_turn: MultiTurn | None = Field(
        default=None, description="Also run a synthetic multi-turn workload (sessions with history)."
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


class BatchingTest(_Strict):
    """Continuous against static batching on one engine, same concurrency and requests (seed 000: 3-10×).

    Optional: static waves need one load per wave (guidellm has no barrier), about ten seconds of start-up
    each on two CPU cores. Static: ``concurrency`` requests are sent together and the next wave waits for
    the slowest; continuous: the same number of requests at ``concurrency`` streams, each stream sending its
    next request when its last one is done. Output lengths are drawn log-uniformly between the bounds
    (many short replies, a few long ones), the same lengths in both, so the wait for the slowest shows.
    """

    enabled: bool = Field(default=False, description="Measure continuous vs static batching after the sweep.")
    configurations: list[str] = Field(
        default_factory=list, description="Engine labels to measure it on; empty: the first configuration only."
    )
    concurrency: PositiveInt | None = Field(default=None, description="Streams / wave size; default: top sweep level.")
    waves: PositiveInt = Field(default=3, description="Static waves (continuous sends as many requests).")
    output_tokens_min: PositiveInt = Field(default=8, description="Shortest output (tokens).")
    output_tokens_max: PositiveInt = Field(default=128, description="Longest output (tokens).")

    @model_validator(mode="after")
    def _ordered(self) -> BatchingTest:
        if self.output_tokens_max < self.output_tokens_min:
            raise ValueError(f"output_tokens_max ({self.output_tokens_max}) is below output_tokens_min")
        return self


class SLA(_Strict):
    """The latency budget."""

    ttft_p95_ms: float = Field(default=2000, gt=0, description="TTFT p95 limit (ms); seed 003 §5.3 uses 2000.")
    itl_p95_ms: float | None = Field(default=None, gt=0, description="Optional inter-token latency p95 limit (ms).")
    max_error_share: float = Field(
        default=0.01, ge=0, lt=1, description="Share of failed requests a load may have and still meet the SLA."
    )


class CapacitySearch(_Strict):
    """The SLA capacity search: the highest sustained load at which the SLA holds (decision evidence)."""

    enabled: bool = Field(default=True, description="Search each configuration's SLA capacity after the sweep.")
    axis: Literal["rate", "concurrency"] = Field(
        default="rate",
        description="rate: open-loop Poisson arrivals (how production traffic arrives); concurrency: closed loop.",
    )
    start: float | None = Field(default=None, gt=0, description="First load tried; default: see start_from.")
    start_from: Literal["prediction", "grid"] = Field(
        default="prediction",
        description="Without start: step 4's predicted capacity where it has one (a GPU engine), else where "
        "the grid puts the SLA edge; grid: always the grid.",
    )
    growth: float = Field(default=2.0, gt=1, description="Factor between loads of the coarse sweep.")
    tolerance: float = Field(default=0.05, gt=0, lt=1, description="Stop when (high - low) / low is within this.")
    max_probes: PositiveInt = Field(default=10, description="Most loads tried (coarse sweep and bisection).")
    probe_seconds: float = Field(default=20.0, gt=0, description="Arrivals per probe span about this long.")
    min_requests: PositiveInt = Field(default=20, description="Fewest requests in one probe or trial.")
    max_requests: PositiveInt = Field(default=2000, description="Most requests in one probe or trial.")
    min_sustained_ratio: float = Field(
        default=0.95, gt=0, le=1, description="Served / sent rate below this: the load is not sustained."
    )
    max_client_lag_ms: float | None = Field(
        default=100.0, gt=0, description="The client's p95 send lag above this: the load was not delivered."
    )
    retries: int = Field(default=1, ge=0, description="Times a load the client delivered late is measured again.")
    edge_rounds_min: int = Field(
        default=2,
        ge=0,
        description="Rounds of two probes straddling the estimated edge, at least (pairs to compare).",
    )
    edge_rounds_max: int = Field(default=4, ge=0, description="Edge rounds at most.")
    edge_step: float | None = Field(
        default=None, gt=0, lt=0.5, description="Edge probes at the estimate × (1 ± this); default: the tolerance."
    )
    target_rel_ci: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Edge rounds stop once the capacity's 95% interval is within ±this.",
    )
    trial_margin: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="No longer used (the capacity's trials became edge rounds); accepted so older configs load.",
    )

    @model_validator(mode="after")
    def _rounds(self) -> CapacitySearch:
        if self.edge_rounds_max < self.edge_rounds_min:
            raise ValueError(
                f"edge_rounds_max ({self.edge_rounds_max}) is below edge_rounds_min ({self.edge_rounds_min})"
            )
        return self


class Trials(_Strict):
    """Repeated trials at a fixed load (search disabled): every figure that enters a comparison carries an interval.

    With the search enabled the capacity is estimated from all its probes and its edge rounds instead
    (``helpers.benchmark.edge_search``); these settings then apply to nothing but ``enabled``.
    """

    enabled: bool = Field(
        default=True,
        description="Run the trials; false (tests of other phases only): no configuration has a measurement "
        "that stands for it, and nothing is decided by measurement.",
    )
    min_trials: int = Field(default=3, ge=1, description="Trials at least (3 for an interval worth the name).")
    max_trials: PositiveInt = Field(default=6, description="Trials at most.")
    target_rel_ci: float = Field(
        default=0.03, gt=0, lt=1, description="Stop once the throughput interval is within ± this share."
    )
    warmup_requests: int = Field(default=4, ge=0, description="Requests sent first in each trial, left out.")
    reset_prefix_cache: bool | None = Field(
        default=None,
        description="Reset the engine's prefix cache before each trial; None: unless the workload shares prefixes.",
    )
    fixed_concurrency: PositiveInt | None = Field(
        default=None,
        description="Streams of the trials when the search is disabled (a fixed load, not a capacity); "
        "default: workload.target_concurrency, else the highest sweep level.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Trials:
        if self.max_trials < self.min_trials:
            raise ValueError(f"max_trials ({self.max_trials}) is below min_trials ({self.min_trials})")
        return self


class CrossCheck(_Strict):
    """The engine's own benchmark client (``vllm bench serve``) at Poisson rates around the playbook's capacity.

    Optional: after a configuration's capacity search, while its engine is up, vLLM's client is run at each
    of ``rates`` × the capacity estimate for about ``seconds`` of arrivals, with the evidence workload's
    prompt and output lengths; each rate is judged with the playbook's SLA, and the own-client capacity
    is set beside the playbook's (``helpers.benchmark.crosscheck``).
    """

    enabled: bool = Field(default=False, description="Run vLLM's own client after each capacity search.")
    rates: list[float] = Field(
        default=[0.9, 1.0, 1.1],
        min_length=1,
        description="Request rates as multiples of the capacity estimate (each > 0), one client run each.",
    )
    seconds: float = Field(default=30.0, gt=0, description="Arrivals per rate span about this long (s).")
    python: str | None = Field(
        default=None,
        description="Interpreter that has vllm (for vllm bench serve): a path (relative to the repo root) or a name "
        "on PATH; None: the engine launcher's own interpreter (and its pythonpath).",
    )
    pythonpath: list[str] = Field(
        default_factory=list, description="Folders put first on PYTHONPATH for the client (with python)."
    )

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, v: list[float]) -> list[float]:
        bad = [r for r in v if not (r > 0 and math.isfinite(r))]
        if bad:
            raise ValueError(
                f"evidence.crosscheck.rates must all be finite and > 0 (multiples of the capacity); got {bad}"
            )
        return sorted(set(v))

    @model_validator(mode="after")
    def _pythonpath_needs_python(self) -> CrossCheck:
        if self.pythonpath and self.python is None:
            raise ValueError("evidence.crosscheck.pythonpath needs evidence.crosscheck.python (the interpreter)")
        return self


class Evidence(_Strict):
    """How the measurements that decide are taken: the capacity search, its edge rounds, and how they compare."""

    search: CapacitySearch = Field(default_factory=CapacitySearch)
    trials: Trials = Field(default_factory=Trials)
    crosscheck: CrossCheck = Field(
        default_factory=CrossCheck,
        description="vLLM's own client at rates around each capacity, beside the playbook's (optional).",
    )
    equivalence_margin: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="Two capacities whose difference's 95% interval lies within ± this share are equivalent.",
    )
    max_other_cpu_cores: float = Field(
        default=0.5,
        gt=0,
        description="Other processes' CPU (in cores) while a probe ran above which it is measured again, once.",
    )
