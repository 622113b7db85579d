"""Step 5's engine session: one engine configuration's lifetime and the primitives every phase measures with.

The session starts the engine with its launcher and waits until it answers a first request (the cold start),
stops it (its whole process group), measures one load while it scrapes ``/metrics`` and NVML and watches for
other programs loading the machine (``sampled``), turns a load into a ``Point`` and saves it, resets the
engine's prefix cache, and records the engine-seconds of each phase. It imports no phase: each phase
(``Phase``: the quality set, the sweep, the replays, the capacity search or trials, the cross-check, the
batching comparison, the tuning) runs on a session, and ``helpers.benchmark.run`` runs them in their order
(``helpers.benchmark.phases.PHASES``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

import httpx

from helpers.benchmark.loads import load_axis
from helpers.benchmark.points import first_request, point_from, prepare_dataset
from helpers.benchmark.roofline import point_bound
from helpers.benchmark.speculative import spec_decode_stats
from helpers.benchmark.steps import StepProgress
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import EngineError
from helpers.core.paths import repo_relative
from helpers.core.secrets import known_secrets, redact
from helpers.engines import get_engine
from helpers.environment.kv_prediction import kv_token_bytes
from helpers.launchers import LAUNCHERS
from helpers.launchers.server import ServerHandle, start_on_a_free_port
from helpers.measure.guidellm_setup import prewarm
from helpers.measure.interference import InterferenceWatch
from helpers.measure.loadgen import LoadResult, run_point, run_rate
from helpers.measure.metrics import PAGE_FORMATS, MetricsSampler
from helpers.measure.telemetry import GpuSampler, local_gpu_spec
from helpers.measure.timing import request_times
from helpers.run.folder import RunFolder
from helpers.run.progress import Unit, started_note
from helpers.run.records import (
    EngineResult,
    GpuStats,
    Point,
    ServerStats,
    label_slug,
    load_point,
    point_path,
    save_engine_result,
    save_point,
    write_json_atomic,
)
from helpers.workload.levels import point_requests
from helpers.workload.structured import ReplayDataset

LOG_TAIL_LINES = 30
Progress = Callable[[str], None]


CUT = "the run was stopped mid-way: rebuilt from its stored points"
"""The reason of a configuration whose run was cut before its result was saved whole (status ``partial``)."""


class EngineSession:
    """One engine configuration's life on this machine: launch, measure, stop; every step leaves a record."""

    def __init__(
        self,
        spec: EngineSpec,
        cfg: PlaybookConfig,
        run_dir: Path,
        progress: Progress | None = None,
        steps: StepProgress | None = None,
    ):
        self.spec, self.cfg, self.run_dir = spec, cfg, Path(run_dir)
        self.steps: StepProgress = steps or StepProgress(cfg)  # the progress events (``benchmark.steps``)
        self.adapter = get_engine(spec.engine)
        self.launcher = LAUNCHERS[spec.launcher.kind]
        self.secrets = known_secrets(cfg)
        self.say = progress or (lambda _msg: None)
        self.result = EngineResult(label=spec.label, engine=spec.engine, gpu_seconds=self._held_before())
        self.handle: ServerHandle | None = None
        self.evidence_replay: ReplayDataset | None = None  # the structured replay the evidence probes drive
        self.load_cores = 0.0  # CPU cores the playbook and the engine used during the last load (interference)
        self.gpu_spec = None if self.adapter.runs_on_cpu else local_gpu_spec()

    @property
    def engine_pid(self) -> int | None:
        """The pid of the engine process this run started (None before a launch, or for an endpoint)."""
        if self.handle is None or self.handle.process is None:
            return None
        return self.handle.process.pid

    def log_path(self, tag: str = "") -> Path:
        """The engine's log file in the run folder."""
        return self.run_dir / "logs" / f"{label_slug(self.spec.label)}{('-' + label_slug(tag)) if tag else ''}.log"

    def fail(self, reason: str, status: str = "failed") -> None:
        """Record why this engine stopped, with its log tail (secrets redacted)."""
        self.result.status = status  # type: ignore[assignment]
        self.result.reason = redact(reason, self.secrets)
        if self.handle is not None:
            self.result.log_tail = redact(self.handle.log_tail(LOG_TAIL_LINES), self.secrets)
        self.say(f"{self.spec.label}: {self.result.status}: {self.result.reason}")
        self.steps.drop(self.spec.label)  # its planned units will not run (a later tuning launch revives its own)

    def launch(self, spec: EngineSpec, tag: str = "") -> ServerHandle:
        """Start the engine for ``spec`` and wait until it serves a first request.

        The adapter prepares what the engine needs first (e.g. random weights); benchmark-only settings
        (``adapter.benchmark_spec``: the prefix-cache reset endpoint, per-request cached-token reports) are
        added to this launch only, never to the rollout's commands. A start the adapter recognises as
        wrong (a silent fallback) fails.
        """
        self.steps.begin(spec.label, "cold", unit := tag.removeprefix("tune-") or "main")
        self.adapter.prepare(spec, self.cfg.model, self.say)
        spec = self.adapter.benchmark_spec(spec)
        t0 = time.monotonic()

        def start(port: int) -> ServerHandle:
            cmd, _env = self.launcher.build(self.adapter, spec, self.cfg.model, port, self.run_dir)
            if not tag:
                self.result.command = [repo_relative(redact(x, self.secrets)) for x in cmd]
            self.say(f"{spec.label}: launching ({self.launcher.kind})")
            prewarm()  # the load generator's imports, while the engine starts
            log = self.log_path(tag)
            self.handle = self.launcher.start(self.adapter, spec, self.cfg.model, port, self.run_dir, log)
            return self.handle

        ready = start_on_a_free_port(start, self.whole_log, spec.startup_timeout_s, self.say)
        log_text = self.whole_log()
        problem = self.adapter.startup_problem(log_text)
        if problem:
            raise EngineError(problem)
        served = self.adapter.served_model_name(self.cfg.model)
        cold = first_request(self.handle, served, timeout_s=max(30.0, spec.startup_timeout_s - ready))
        self.account("cold start", t0)
        self.steps.end(spec.label, "cold", unit)
        if not tag:
            self.result.ready_s, self.result.cold_start_s = ready, cold
            self.result.kv_capacity_tokens = self.logged_kv_tokens()
            # what the start found outlives a run cut before the end (the finished result replaces it)
            save_engine_result(self.run_dir, self.result.model_copy(update={"status": "partial", "reason": CUT}))
        self.say(started_note(spec.label, ready, cold))
        return self.handle

    def logged_kv_tokens(self) -> int | None:
        """The KV capacity (tokens) the engine logged at start; a logged byte budget is turned into tokens."""
        return self.adapter.kv_capacity_from_log(self.whole_log(), kv_token_bytes(self.cfg, self.spec))

    def whole_log(self) -> str:
        """The engine's whole log so far (start-up lines such as the KV capacity come first).

        The running engine's log, else this configuration's log in the run folder (a run re-rendered from
        its points); "" when there is none.
        """
        path = self.handle.log_path if self.handle is not None else self.log_path()
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""

    @property
    def _held_file(self) -> Path:
        """Where the engine-seconds by phase are kept between the attempts of a resumed run."""
        return self.run_dir / "logs" / "engine-seconds" / f"{label_slug(self.spec.label)}.json"

    def _held_before(self) -> dict[str, float]:
        """The engine-seconds by phase of this run's earlier attempts (a resumed run), else none."""
        try:
            held = json.loads(self._held_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): float(v) for k, v in held.items()} if isinstance(held, dict) else {}

    def account(self, phase: str, since: float) -> None:
        """Add the seconds since ``since`` to the time the engine was held for ``phase`` (GPU-minutes).

        Kept in the run folder as they add up, so that a run stopped and resumed counts every attempt's
        engine time, its repeated cold starts included, not only the last attempt's.
        """
        secs = self.result.gpu_seconds
        secs[phase] = round(secs.get(phase, 0.0) + time.monotonic() - since, 1)
        write_json_atomic(self._held_file, secs)

    def stored_point(self, phase: str, tag: str, concurrency: int = 0) -> Point | None:
        """A point of this configuration measured earlier in this run folder (resume), if any.

        ``concurrency``: the point's own (its file is named by it; 0 for an open-loop load).
        """
        return load_point(point_path(self.run_dir, self.spec.label, phase, concurrency, tag))

    def stored_points(self, phase: str) -> list[Point]:
        """Every stored point of ``phase`` (e.g. the probes of an interrupted capacity search)."""
        return RunFolder(self.run_dir).points(self.spec.label, phase)

    def save(self, point: Point, tag: str) -> None:
        """Write ``point`` now (before the next load starts)."""
        save_point(self.run_dir, point, tag)

    async def measure_load(
        self,
        phase: str,
        load: float,
        tag: str,
        requests: int,
        warmup: int = 0,
        stream: str | None = None,
        job: Awaitable[LoadResult] | None = None,
    ) -> tuple[Point, LoadResult, list[tuple[float, float]]] | None:
        """One load of the capacity search or a trial: open-loop rate or closed-loop concurrency, per config.

        ``stream`` names the traffic: its arrival schedule (unit-rate Poisson gaps, scaled to the load) and
        its prompts are seeded by the name alone, so every configuration measured on the same stream gets the
        same traffic (``helpers.benchmark.edge_search``); the prompts are written for the most requests a probe
        may have, and a probe takes the first ones. Without a stream, the load gets traffic of its own.
        Returns the point (not yet saved), the raw figures and the queue samples (time, waiting) from
        ``/metrics``; None if the engine died. ``job``: the load to drive instead of plain prompts (a structured
        workload replays its structure: ``structured_phase.structured_probe``, which the evidence phase builds).
        """
        assert self.handle is not None
        axis, t0 = load_axis(self.cfg), time.monotonic()
        if stream is not None:
            key, rows = f"stream-{stream}", self.cfg.evidence.search.max_requests + warmup
            seed = int(hashlib.sha256(f"stream|{stream}".encode()).hexdigest()[:8], 16)
        else:
            key, rows = f"{phase}-{tag}", requests + warmup
            seed = int(hashlib.sha256(f"{self.spec.label}|{phase}|{tag}".encode()).hexdigest()[:8], 16)
        dataset = prepare_dataset(self.cfg, self.run_dir, key, n=rows)
        common = dict(
            base_url=self.handle.base_url,
            served_model=self.adapter.served_model_name(self.cfg.model),
            tokenizer_dir=self.cfg.model.directory,
            dataset=dataset,
            max_requests=requests + warmup,
            max_seconds=self.cfg.workload.max_seconds_per_point,
            api_key=self.handle.api_key,
            warmup_requests=warmup,
        )
        if job is None:  # plain prompts (a structured workload is decided on its structure: the caller's job)
            job = (
                run_rate(rate=load, seed=seed, **common)
                if axis == "rate"
                else run_point(concurrency=int(load), **common)
            )
        sampled = await self.sampled(job, f"the {phase} at {load:.4g}")
        self.account("search" if phase == "search" else "trials", t0)
        if sampled is None:
            return None
        res, server_stats, gpu_stats, queue = sampled
        knobs = self.spec.knobs.model_dump(exclude_defaults=True)
        point = point_from(self.spec, self.cfg, int(load) if axis == "concurrency" else 0, phase, res, knobs)
        point.offered_rate = load if axis == "rate" else None
        if axis == "rate" and res.request_starts_s:
            point.request_times = request_times(res.request_starts_s, res.request_ends_s)
        point.warmup_requests = warmup
        self.complete(self.spec, point, res, server_stats, gpu_stats)
        return point, res, queue

    def stop(self) -> None:
        """Stop the engine if we started it; processes of its group that outlived it are ended and said."""
        left = self.handle.stop() if self.handle is not None else 0
        if left:
            self.say(f"{self.spec.label}: ended {left} process(es) of the engine's group left running")
            self.result.reason = self.result.reason and f"{self.result.reason} (ended {left} left-over processes)"

    def reset_prefix_cache(self) -> str | None:
        """Ask the engine to drop its prefix cache; None when done, else why not."""
        path = self.adapter.cache_reset_path
        if not path or self.handle is None:
            return "the engine has no prefix-cache reset endpoint"
        try:
            r = httpx.post(self.handle.base_url + path, headers=self.handle.headers, timeout=30.0)
            r.raise_for_status()
        except httpx.HTTPError as err:
            return f"prefix-cache reset failed ({err})"
        return None

    async def sampled(
        self, load: Awaitable[LoadResult], what: str
    ) -> tuple[LoadResult, ServerStats, GpuStats, list[tuple[float, float]]] | None:
        """Await one load while scraping ``/metrics`` and NVML; None (and a row) if the engine died.

        Also returns the waiting-request samples (seconds from the first scrape, waiting) for the
        capacity search's queue test.
        """
        assert self.handle is not None
        path, page_format, names = self.adapter.sampling()
        server = MetricsSampler(
            self.handle.base_url + path, names, parse=PAGE_FORMATS[page_format], headers=self.handle.headers
        ).start()
        gpu = GpuSampler().start()
        watch = InterferenceWatch(self.engine_pid, self.cfg.evidence.max_other_cpu_cores).start()
        try:
            res = await load
        finally:
            server_stats, gpu_stats = server.stop(), gpu.stop()
            other = watch.stop()
            self.load_cores = watch.ours_cores
        res.interference = other
        server_stats.spec_decode = spec_decode_stats([s.spec for s in server.snaps], names)
        if not self.handle.alive() or res.hung:  # the point in flight is not a measurement
            died = f"{self.handle.exit_reason()} during {what}"
            self.fail(died if not self.handle.alive() else f"engine hung during {what}: {res.hung}", "partial")
            return None
        t0 = server.snaps[0].t if server.snaps else 0.0
        # waiting requests only: in flight ramps up and drains within any probe; an engine that admits every
        # request into its batch (no queue) is caught by the drain test of ``benchmark.evidence``
        queue = [(s.t - t0, s.waiting) for s in server.snaps if s.waiting is not None]
        return res, server_stats, gpu_stats, queue

    def complete(
        self, spec: EngineSpec, point: Point, res: LoadResult, server_stats: ServerStats, gpu_stats: GpuStats
    ) -> None:
        """Attach server and GPU samples, the roofline bound and the first request error to ``point``."""
        point.server, point.gpu, point.interference = server_stats, gpu_stats, res.interference
        point.roofline = point_bound(
            self.cfg.model.directory,
            self.gpu_spec,
            point,
            kv_dtype_bytes=1 if spec.knobs.kv_cache_dtype == "fp8" else 2,
            weight_bytes_per_param=1.0 if spec.knobs.quantization == "fp8" else None,
            tensor_parallel=spec.knobs.tensor_parallel,
        )
        if res.first_error:
            point.server.error = (
                point.server.error or ""
            ) + f" first request error: {redact(res.first_error, self.secrets)}"

    async def measure(self, spec: EngineSpec, c: int, phase: str) -> Point | None:
        """One point at concurrency ``c``: guidellm load plus server and GPU sampling. None if the engine died."""
        assert self.handle is not None
        knobs = spec.knobs.model_dump(exclude_defaults=True)
        tag = f"seqs{spec.knobs.max_num_seqs}" if phase == "tune" else ""
        stored = load_point(point_path(self.run_dir, spec.label, phase, c, tag))
        if stored is not None:
            self.say(f"{spec.label}: c={c} ({phase}) already measured, kept")
            self.steps.kept(spec.label, phase, tag or c)
            return stored
        wl, t0 = self.cfg.workload, time.monotonic()
        self.steps.begin(spec.label, phase, tag or c)
        dataset = prepare_dataset(self.cfg, self.run_dir, f"{phase}{('-' + tag) if tag else ''}-c{c}")
        load = run_point(
            self.handle.base_url,
            self.adapter.served_model_name(self.cfg.model),
            self.cfg.model.directory,
            dataset,
            concurrency=c,
            max_requests=point_requests(self.cfg, c),
            max_seconds=wl.max_seconds_per_point,
            api_key=self.handle.api_key,
        )
        sampled = await self.sampled(load, f"the point at concurrency {c}")
        self.account("sweep" if phase == "sweep" else "tuning", t0)
        if sampled is None:
            return None
        res, server_stats, gpu_stats, _queue = sampled
        point = point_from(spec, self.cfg, c, phase, res, knobs)
        self.complete(spec, point, res, server_stats, gpu_stats)
        save_point(self.run_dir, point, tag)
        self.steps.end(spec.label, phase, tag or c)
        self.say(
            f"{spec.label}: c={c} ({phase}) {point.output_tok_s:,.0f} out tok/s, "
            f"TTFT p95 {point.ttft_ms_p95 or 0:,.0f} ms, {point.errors} errors"
        )
        return point


class Phase:
    """One phase of step 5 on a session: what it plans before the step starts, what it leaves, how it runs.

    Each phase module holds one instance (e.g. ``sweep_phase.SWEEP``); ``helpers.benchmark.plan`` asks every
    phase for its units (``planned``) and, for resume, the record files a complete configuration has
    (``records``); ``helpers.benchmark.run`` calls ``run`` in the order of ``helpers.benchmark.phases.PHASES``.
    A phase that runs ``on_engine`` runs while the configuration's own engine is up; the others after it
    stopped (tuning launches engines of its own).
    """

    name: ClassVar[str] = ""
    on_engine: ClassVar[bool] = True

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """The units this phase will (or may) run for ``spec``, in order, with their expected seconds."""
        return []

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """The files this phase leaves for ``spec`` in a complete run folder (probes and trials vary: none)."""
        return []

    async def run(self, session: EngineSession) -> bool:
        """Run on ``session``; False when the engine died (the result row says why) and the rest must not run."""
        raise NotImplementedError
