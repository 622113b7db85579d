"""Checklist step 5: benchmark every engine configuration of a config, on equal terms.

For each engine: launch it with its launcher, wait for health, time the first completed request
(cold start), drive each concurrency level with guidellm while scraping ``/metrics`` and NVML,
then optionally tune its batch size to the SLA, and stop it. Every point is written to the run
folder as soon as it finishes; a re-run with the same run folder resumes. A failing engine becomes
a result row with the reason and its log tail, and the next engine still runs.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from helpers.benchmark.roofline import point_bound, ratio_text
from helpers.core.config import EngineSpec, PlaybookConfig
from helpers.core.errors import EngineError
from helpers.core.secrets import known_secrets, redact
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.server import ServerHandle, free_port
from helpers.measure.loadgen import LoadResult, run_point, run_replay
from helpers.measure.metrics import PAGE_FORMATS, MetricsSampler
from helpers.measure.prompts import RequestShape, write_dataset
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
    write_json_atomic,
)
from helpers.workload.levels import point_requests, sweep_levels, workload_shapes, write_replay_trace

LOG_TAIL_LINES = 30
Progress = Callable[[str], None]


def prepare_dataset(cfg: PlaybookConfig, run_dir: Path, key: str) -> Path:
    """The prompts of one load level, written once per run and replayed by every engine.

    Each level gets its own prompts (seeded by ``key``) so that a later level never hits the
    prefix cache on an earlier level's prompts; a shared system prompt stays shared.
    """
    path = Path(run_dir) / "data" / f"prompts-{key}.jsonl"
    if not path.is_file():
        shapes: list[RequestShape] = workload_shapes(cfg, run_dir)
        seed = sum(ord(ch) * (i + 1) for i, ch in enumerate(key))
        write_dataset(shapes, cfg.model.directory, path, seed=seed)
    return path


def first_request(handle: ServerHandle, served_model: str, timeout_s: float) -> float:
    """Send one short completion and return seconds since launch when it completed."""
    body = {"model": served_model, "prompt": "w3 w4 w5 w6", "max_tokens": 1}
    r = httpx.post(handle.base_url + "/v1/completions", json=body, headers=handle.headers, timeout=timeout_s)
    r.raise_for_status()
    return time.monotonic() - handle.started_at


def _point_from(spec: EngineSpec, cfg: PlaybookConfig, c: int, phase: str, res: LoadResult, knobs: dict) -> Point:
    sla = cfg.sla.ttft_p95_ms
    good = sum(1 for t in res.ttft_values_ms if t <= sla)
    p95 = res.ttft_ms.get("p95")
    return Point(
        label=spec.label,
        engine=spec.engine,
        concurrency=c,
        phase=phase,  # type: ignore[arg-type]
        knobs=knobs,
        requests=res.requests,
        errors=res.errors,
        incomplete=res.incomplete,
        duration_s=res.duration_s,
        input_tokens_mean=res.input_tokens_mean,
        output_tokens_mean=res.output_tokens_mean,
        output_tok_s=res.output_tok_s,
        total_tok_s=res.total_tok_s,
        req_s=res.req_s,
        ttft_ms_p50=res.ttft_ms.get("p50"),
        ttft_ms_p95=p95,
        ttft_ms_p99=res.ttft_ms.get("p99"),
        itl_ms_p50=res.itl_ms.get("p50"),
        itl_ms_p95=res.itl_ms.get("p95"),
        e2e_ms_p50=res.e2e_ms.get("p50"),
        e2e_ms_p95=res.e2e_ms.get("p95"),
        goodput_req_s=(good / res.duration_s) if res.duration_s > 0 else None,
        sla_met=(p95 is not None and p95 <= sla and res.errors == 0),
    )


class EngineRun:
    """One engine configuration's life: launch, measure, stop; every step leaves a record."""

    def __init__(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path, progress: Progress | None = None):
        self.spec, self.cfg, self.run_dir = spec, cfg, Path(run_dir)
        self.adapter = get_engine(spec.engine)
        self.launcher = LAUNCHERS[spec.launcher.kind]
        self.secrets = known_secrets(cfg)
        self.say = progress or (lambda _msg: None)
        self.result = EngineResult(label=spec.label, engine=spec.engine)
        self.handle: ServerHandle | None = None
        self.gpu_spec = None if self.adapter.runs_on_cpu else local_gpu_spec()

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

    def launch(self, spec: EngineSpec, tag: str = "") -> ServerHandle:
        """Start the engine for ``spec`` and wait until it serves a first request."""
        port = free_port()
        cmd, _env = self.launcher.build(self.adapter, spec, self.cfg.model, port, self.run_dir)
        if not tag:
            self.result.command = [redact(x, self.secrets) for x in cmd]
        self.say(f"{spec.label}: launching ({self.launcher.kind})")
        self.handle = self.launcher.start(self.adapter, spec, self.cfg.model, port, self.run_dir, self.log_path(tag))
        ready = self.handle.wait_healthy(spec.startup_timeout_s)
        served = self.adapter.served_model_name(self.cfg.model)
        cold = first_request(self.handle, served, timeout_s=max(30.0, spec.startup_timeout_s - ready))
        if not tag:
            self.result.ready_s, self.result.cold_start_s = ready, cold
            self.result.kv_capacity_tokens = self.adapter.kv_capacity_from_log(self.handle.log_tail(100000))
        self.say(f"{spec.label}: healthy after {ready:.0f} s, first request done at {cold:.0f} s")
        return self.handle

    def stop(self) -> None:
        """Stop the engine if we started it."""
        if self.handle is not None:
            self.handle.stop()

    async def _sampled(self, load: Awaitable[LoadResult], what: str) -> tuple[LoadResult, ServerStats, GpuStats] | None:
        """Await one load while scraping ``/metrics`` and NVML; None (and a row) if the engine died."""
        assert self.handle is not None
        path, page_format, names = self.adapter.sampling()
        server = MetricsSampler(
            self.handle.base_url + path, names, parse=PAGE_FORMATS[page_format], headers=self.handle.headers
        ).start()
        gpu = GpuSampler().start()
        try:
            res = await load
        finally:
            server_stats, gpu_stats = server.stop(), gpu.stop()
        if not self.handle.alive():
            self.fail(f"{self.handle.exit_reason()} during {what}", "partial")
            return None
        return res, server_stats, gpu_stats

    def _complete(
        self, spec: EngineSpec, point: Point, res: LoadResult, server_stats: ServerStats, gpu_stats: GpuStats
    ) -> None:
        """Attach server and GPU samples, the roofline bound and the first request error to ``point``."""
        point.server, point.gpu = server_stats, gpu_stats
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
            return stored
        wl = self.cfg.workload
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
        sampled = await self._sampled(load, f"the point at concurrency {c}")
        if sampled is None:
            return None
        res, server_stats, gpu_stats = sampled
        point = _point_from(spec, self.cfg, c, phase, res, knobs)
        self._complete(spec, point, res, server_stats, gpu_stats)
        save_point(self.run_dir, point, tag)
        self.say(
            f"{spec.label}: c={c} ({phase}) {point.output_tok_s:,.0f} out tok/s, "
            f"TTFT p95 {point.ttft_ms_p95 or 0:,.0f} ms, {point.errors} errors"
        )
        return point

    async def measure_replay(self) -> Point | None:
        """Replay the trace's own arrivals (guidellm's replay profile); None if the engine died."""
        assert self.handle is not None and self.cfg.workload.replay is not None
        path = point_path(self.run_dir, self.spec.label, "replay", 0)
        stored = load_point(path)
        if stored is not None:
            return stored
        rows = Path(self.run_dir) / "data" / "replay-trace.jsonl"
        if not rows.is_file():
            write_replay_trace(self.cfg, rows)
        load = run_replay(
            self.handle.base_url,
            self.adapter.served_model_name(self.cfg.model),
            self.cfg.model.directory,
            rows,
            time_scale=self.cfg.workload.replay.time_scale,
            max_seconds=self.cfg.workload.max_seconds_per_point,
            api_key=self.handle.api_key,
        )
        sampled = await self._sampled(load, "the trace replay")
        if sampled is None:
            return None
        res, server_stats, gpu_stats = sampled
        knobs = self.spec.knobs.model_dump(exclude_defaults=True)
        point = _point_from(self.spec, self.cfg, 0, "replay", res, knobs)
        point.concurrency = max(1, round(res.concurrency_mean or 0))  # what the replay put in flight, on average
        self._complete(self.spec, point, res, server_stats, gpu_stats)
        write_json_atomic(path, point.model_dump(mode="json"))
        self.say(
            f"{self.spec.label}: trace replay {point.output_tok_s:,.0f} out tok/s, "
            f"TTFT p95 {point.ttft_ms_p95 or 0:,.0f} ms"
        )
        return point

    def _stored(self) -> EngineResult | None:
        """The stored result of an earlier, complete attempt in this run folder (resume), if any."""
        prev = load_engine_result(self.run_dir, self.spec.label)
        if prev is None or prev.status != "ok":
            return None
        target = target_concurrency(self.cfg)
        wanted = [point_path(self.run_dir, self.spec.label, "sweep", c) for c in sweep_levels(self.cfg, self.run_dir)]
        if self.cfg.workload.replay is not None:
            wanted.append(point_path(self.run_dir, self.spec.label, "replay", 0))
        wanted += [
            point_path(self.run_dir, self.spec.label, "tune", target, f"seqs{s}")
            for s in self.spec.tune_max_num_seqs
            if s != self.spec.knobs.max_num_seqs  # that one is the sweep's own point
        ]
        return prev if all(p.is_file() for p in wanted) else None

    async def run(self) -> EngineResult:
        """Sweep the concurrency levels, then tune; never raises for engine trouble."""
        stored = self._stored()
        if stored is not None:
            self.say(f"{self.spec.label}: every point already measured in this run folder, kept")
            return stored
        self.result.version = self.launcher.version(self.adapter, self.spec)
        try:
            self.launch(self.spec)
            for c in sweep_levels(self.cfg, self.run_dir):
                p = await self.measure(self.spec, c, "sweep")
                if p is None:
                    return self.result
                self.result.points.append(p)
            if self.cfg.workload.replay is not None:
                p = await self.measure_replay()
                if p is None:
                    return self.result
                self.result.points.append(p)
        except (EngineError, ValueError, OSError) as err:
            self.fail(str(err))
            return self.result
        except httpx.HTTPError as err:
            self.fail(f"request to the engine failed: {err}")
            return self.result
        finally:
            self.stop()
        if self.spec.tune_max_num_seqs:
            await self.tune()
        return self.result

    async def tune(self) -> None:
        """Try each batch size at the target concurrency; keep the best throughput within the SLA.

        The sweep's point at the target concurrency (the configured batch size) is a candidate too,
        so a value already measured there is not launched again.
        """
        target = target_concurrency(self.cfg)
        base = next((p for p in self.result.points if p.phase == "sweep" and p.concurrency == target), None)
        tried: list[Point] = [base] if base is not None else []
        for seqs in self.spec.tune_max_num_seqs:
            if base is not None and seqs == self.spec.knobs.max_num_seqs:
                continue
            spec = self.spec.model_copy(deep=True)
            spec.knobs.max_num_seqs = seqs
            try:
                self.launch(spec, tag=f"tune-seqs{seqs}")
                p = await self.measure(spec, target, "tune")
            except (EngineError, httpx.HTTPError, ValueError, OSError) as err:
                self.say(f"{self.spec.label}: tuning max_num_seqs={seqs} failed: {err}")
                p = None
            finally:
                self.stop()
            if p is not None:
                tried.append(p)
                self.result.points.append(p)
        within = [p for p in tried if p.sla_met]
        if within:
            best = max(within, key=lambda p: p.output_tok_s)
            self.result.tuned_knobs = dict(best.knobs)


def target_concurrency(cfg: PlaybookConfig) -> int:
    """The concurrency the SLA tuning and the comparison target."""
    return cfg.workload.target_concurrency or max(cfg.workload.concurrency)


def tuning_candidates(result: EngineResult, target: int) -> list[Point]:
    """The points tuning chose among: the tune points and the sweep point at the target concurrency."""
    return [p for p in result.points if p.phase == "tune" or (p.phase == "sweep" and p.concurrency == target)]


def tuned_point(result: EngineResult, target: int | None = None) -> Point | None:
    """The point that represents an engine in comparisons.

    When tuning ran and found a configuration within the SLA, its point at the target concurrency;
    else the sweep point at the target concurrency, else the best SLA-meeting sweep point.
    """
    if result.tuned_knobs is not None and target is not None:
        chosen = [p for p in tuning_candidates(result, target) if p.knobs == result.tuned_knobs]
        if chosen:
            return max(chosen, key=lambda p: p.output_tok_s)
    sweep = [p for p in result.points if p.phase == "sweep"]
    if target is not None:
        at = [p for p in sweep if p.concurrency == target]
        if at:
            return at[0]
    ok = [p for p in sweep if p.sla_met] or sweep
    return max(ok, key=lambda p: p.output_tok_s) if ok else None


async def run_benchmarks(cfg: PlaybookConfig, run_dir: Path, progress: Progress | None = None) -> list[EngineResult]:
    """Benchmark every engine of ``cfg`` into ``run_dir``; returns one result per engine, in config order."""
    run_dir = Path(run_dir)
    results = []
    for spec in cfg.engines:
        result = await EngineRun(spec, cfg, run_dir, progress).run()
        save_engine_result(run_dir, result)
        results.append(result)
    return results


def points_table(results: list[EngineResult]) -> list[dict[str, Any]]:
    """Flat rows of every measured point, for tables and ``summary.json``."""
    rows = []
    for r in results:
        for p in r.points:
            row = p.model_dump(mode="json", exclude={"server", "gpu", "roofline", "knobs"})
            row.update({f"server_{k}": v for k, v in p.server.model_dump().items()})
            row.update({f"gpu_{k}": v for k, v in p.gpu.model_dump().items()})
            row["knobs"] = ", ".join(f"{k}={v}" for k, v in p.knobs.items())
            row["roofline"] = ratio_text(p.roofline) if p.roofline else ""
            rows.append(row)
    return rows
