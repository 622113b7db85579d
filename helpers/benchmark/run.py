"""Checklist step 5: benchmark every engine configuration of a config, on equal terms.

For each engine: launch it with its launcher, wait for health, time the first completed request
(cold start), drive each concurrency level with guidellm while scraping ``/metrics`` and NVML,
replay the trace or multi-turn sessions (``structured_phase``), search the SLA capacity
(``evidence``), optionally run the engine's own client around it (``crosscheck``), optionally compare
continuous with static batching (``batching``), then optionally tune its batch size to the SLA, and stop
it. Every point is written to the run folder as soon as it finishes; a re-run with the same run folder
resumes. A failing engine becomes a result row with the reason and its log tail, and the next engine still
runs.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from helpers.benchmark.batching import measure_batching
from helpers.benchmark.crosscheck_phase import measure_crosscheck
from helpers.benchmark.crosscheck_phase import pending as crosscheck_pending
from helpers.benchmark.evidence import load_axis, rebuild_from_points
from helpers.benchmark.plan import StepProgress, planned_points
from helpers.benchmark.points import first_request, point_from, prepare_dataset
from helpers.benchmark.quality_phase import measure_quality, quality_pending
from helpers.benchmark.roofline import point_bound
from helpers.benchmark.speculative import spec_decode_stats
from helpers.benchmark.structured_phase import (
    evidence_workload,
    lengths_replay,
    measure_replay,
    measure_structured,
    structured_probe,
)
from helpers.benchmark.trials import measure_evidence
from helpers.benchmark.tuning import tune
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import EngineError
from helpers.core.paths import repo_relative
from helpers.core.secrets import known_secrets, redact
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.server import ServerHandle, start_on_a_free_port
from helpers.measure.guidellm_setup import prewarm
from helpers.measure.interference import InterferenceWatch
from helpers.measure.loadgen import LoadResult, run_point, run_rate
from helpers.measure.metrics import PAGE_FORMATS, MetricsSampler
from helpers.measure.telemetry import GpuSampler, local_gpu_spec
from helpers.run.records import (
    EngineResult,
    GpuStats,
    Point,
    ServerStats,
    label_slug,
    load_engine_result,
    load_point,
    point_path,
    save_engine_result,
    save_point,
)
from helpers.workload.levels import point_requests, sweep_levels
from helpers.workload.structured import ReplayDataset

LOG_TAIL_LINES = 30
FROM_POINTS_ENV = "PLAYBOOK_FROM_POINTS"
"""Set (by ``playbook run --from-points``) to re-render a run from its stored points without launching."""
Progress = Callable[[str], None]


class EngineRun:
    """One engine configuration's life: launch, measure, stop; every step leaves a record."""

    def __init__(
        self,
        spec: EngineSpec,
        cfg: PlaybookConfig,
        run_dir: Path,
        progress: Progress | None = None,
        steps: StepProgress | None = None,
    ):
        self.spec, self.cfg, self.run_dir = spec, cfg, Path(run_dir)
        self.steps: StepProgress = steps or StepProgress(cfg)  # the progress events (``benchmark.plan``)
        self.adapter = get_engine(spec.engine)
        self.launcher = LAUNCHERS[spec.launcher.kind]
        self.secrets = known_secrets(cfg)
        self.say = progress or (lambda _msg: None)
        self.result = EngineResult(label=spec.label, engine=spec.engine)
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
        self.adapter.prepare(spec, self.cfg.model)
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
            self.result.kv_capacity_tokens = self.adapter.kv_capacity_from_log(self.whole_log())
        self.say(f"{spec.label}: healthy after {ready:.0f} s, first request done at {cold:.0f} s")
        return self.handle

    def whole_log(self) -> str:
        """The engine's whole log so far (start-up lines such as the KV capacity come first).

        The running engine's log, else this configuration's log in the run folder (a run re-rendered from
        its points); "" when there is none.
        """
        path = self.handle.log_path if self.handle is not None else self.log_path()
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""

    def account(self, phase: str, since: float) -> None:
        """Add the seconds since ``since`` to the time the engine was held for ``phase`` (GPU-minutes)."""
        secs = self.result.gpu_seconds
        secs[phase] = round(secs.get(phase, 0.0) + time.monotonic() - since, 1)

    def stored_point(self, phase: str, tag: str, concurrency: int = 0) -> Point | None:
        """A point of this configuration measured earlier in this run folder (resume), if any.

        ``concurrency``: the point's own (its file is named by it; 0 for an open-loop load).
        """
        return load_point(point_path(self.run_dir, self.spec.label, phase, concurrency, tag))

    def stored_points(self, phase: str) -> list[Point]:
        """Every stored point of ``phase`` (e.g. the probes of an interrupted capacity search)."""
        folder = self.run_dir / "points" / label_slug(self.spec.label)
        found = (load_point(p) for p in sorted(folder.glob(f"{phase}-*.json")))
        return [p for p in found if p is not None]

    def save(self, point: Point, tag: str) -> None:
        """Write ``point`` now (before the next load starts)."""
        save_point(self.run_dir, point, tag)

    async def measure_load(
        self, phase: str, load: float, tag: str, requests: int, warmup: int = 0, stream: str | None = None
    ) -> tuple[Point, LoadResult, list[tuple[float, float]]] | None:
        """One load of the capacity search or a trial: open-loop rate or closed-loop concurrency, per config.

        ``stream`` names the traffic: its arrival schedule (unit-rate Poisson gaps, scaled to the load) and
        its prompts are seeded by the name alone, so every configuration measured on the same stream gets the
        same traffic (``helpers.benchmark.edge_search``); the prompts are written for the most requests a probe
        may have, and a probe takes the first ones. Without a stream, the load gets traffic of its own.
        Returns the point (not yet saved), the raw figures and the queue samples (time, waiting) from
        ``/metrics``; None if the engine died. A structured workload (``structured_phase.evidence_workload``)
        replays its structure instead of plain prompts (``structured_phase.structured_probe``).
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
        if evidence_workload(self.cfg) is not None:  # a structured workload is decided on its structure
            job = structured_probe(self, load, axis, self.cfg.workload.max_seconds_per_point)
        elif axis == "rate":
            job = run_rate(rate=load, seed=seed, **common)
        else:
            job = run_point(concurrency=int(load), **common)
        sampled = await self.sampled(job, f"the {phase} at {load:.4g}")
        self.account("search" if phase == "search" else "trials", t0)
        if sampled is None:
            return None
        res, server_stats, gpu_stats, queue = sampled
        knobs = self.spec.knobs.model_dump(exclude_defaults=True)
        point = point_from(self.spec, self.cfg, int(load) if axis == "concurrency" else 0, phase, res, knobs)
        point.offered_rate = load if axis == "rate" else None
        point.warmup_requests = warmup
        self.complete(self.spec, point, res, server_stats, gpu_stats)
        return point, res, queue

    def stop(self) -> None:
        """Stop the engine if we started it; processes of its group that outlived it are ended and said."""
        left = self.handle.stop() if self.handle is not None else 0
        if left:
            self.say(f"{self.spec.label}: ended {left} process(es) of the engine's group left running")
            self.result.reason = self.result.reason and f"{self.result.reason} (ended {left} left-over processes)"

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

    def _stored(self) -> EngineResult | None:
        """The stored result of an earlier, complete attempt in this run folder (resume), if any."""
        prev = load_engine_result(self.run_dir, self.spec.label)
        evidence = self.cfg.evidence.search.enabled or self.cfg.evidence.trials.enabled
        if prev is None or prev.status != "ok" or (evidence and prev.capacity is None):
            return None
        return (
            prev
            if all(p.is_file() for p in planned_points(self.spec, self.cfg, self.run_dir))
            and not quality_pending(self)
            and not crosscheck_pending(self)
            else None
        )

    async def run(self) -> EngineResult:
        """Quality set, sweep, replays (lengths or structure), search, tuning; never raises for engine trouble."""
        if os.environ.get(FROM_POINTS_ENV):
            self.steps.kept(self.spec.label)
            return rebuild_from_points(self)
        stored = self._stored()
        if stored is not None:
            self.say(f"{self.spec.label}: every point already measured in this run folder, kept")
            self.steps.kept(self.spec.label)
            return stored
        self.result.version = self.launcher.version(self.adapter, self.spec)
        try:
            self.launch(self.spec)
            await measure_quality(self)
            for c in sweep_levels(self.cfg, self.run_dir):
                p = await self.measure(self.spec, c, "sweep")
                if p is None:
                    return self.result
                self.result.points.append(p)
            if lengths_replay(self.cfg):
                p = await measure_replay(self)
                if p is None:
                    return self.result
                self.result.points.append(p)
            if not await measure_structured(self):
                return self.result
            if not await measure_evidence(self) or not await measure_crosscheck(self):
                return self.result
            if not await measure_batching(self):
                return self.result
        except (EngineError, ValueError, OSError) as err:
            self.fail(str(err))
            return self.result
        except httpx.HTTPError as err:
            self.fail(f"request to the engine failed: {err}")
            return self.result
        finally:
            self.stop()
        if self.spec.tune_max_num_seqs:
            await tune(self)
        return self.result


async def run_benchmarks(cfg: PlaybookConfig, run_dir: Path, progress: Progress | None = None) -> list[EngineResult]:
    """Benchmark every engine of ``cfg`` into ``run_dir``; returns one result per engine, in config order."""
    run_dir, results = Path(run_dir), []
    steps = StepProgress(cfg, run_dir)  # the plan, and every unit's events, for the console's progress bar
    for spec in cfg.engines:
        result = await EngineRun(spec, cfg, run_dir, steps.telling(progress), steps).run()
        save_engine_result(run_dir, result)
        results.append(result)
    steps.finish()
    return results
