"""Step 5's cross-check while the engine is up: vLLM's own client at each rate, judged, stored (``crosscheck``).

``CROSSCHECK`` (``CrossCheckPhase``) runs on the session after the capacity search: the client's interpreter is
``evidence.crosscheck.python`` (with its ``pythonpath``), else the engine launcher's own; each rate is one
``vllm bench serve`` run (``helpers.measure.vllm_bench``) on prompts of the workload's lengths, while the
server's ``/metrics`` are sampled for its waiting queue. A rate whose raw result was saved before an
interruption is judged from it, not run again; a stored record is kept whole. Under a time limit a rate that
would not end before the deadline is not begun (``TimeLimitReached``, like a probe: the rates done are kept).
The client's failure ends the cross-check with a record that says why; only an engine that died fails the
configuration.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import math
import time
from pathlib import Path

from helpers.benchmark.crosscheck import (
    CLIENT,
    CROSSCHECK_DIR,
    CrossCheckRecord,
    RateRun,
    conclude,
    judge_rate,
    load_record,
    prompts_of,
    rate_ident,
    record_path,
    wanted,
)
from helpers.benchmark.points import prepare_dataset
from helpers.benchmark.priors import crosscheck_seconds
from helpers.benchmark.probe_size import LATENCY_SPANS, arrival_seconds, latency_estimate
from helpers.benchmark.session import EngineSession, Phase
from helpers.benchmark.sla import from_capacity
from helpers.benchmark.steps import unit
from helpers.core.config import EngineSpec, LauncherSpec, PlaybookConfig
from helpers.core.paths import repo_relative, resolve_repo_path
from helpers.launchers.python import interpreter
from helpers.measure.metrics import PAGE_FORMATS, MetricsSampler
from helpers.measure.vllm_bench import BenchRun, bench_args, client_env, run_vllm_bench, version_of
from helpers.run.progress import Unit
from helpers.run.records import Point, fmt_load, write_json_atomic
from helpers.run.time_limit import stop_unless_fits

CLIENT_START_S = 20.0
"""Seconds the client takes to start and end beyond its arrivals and drain (vLLM's import: 12-18 s on the H200)."""


def _client(session: EngineSession) -> tuple[Path | None, list[str], str | None]:
    """The client's interpreter and its PYTHONPATH folders: configured, else the engine launcher's; or why none."""
    cc, launcher = session.cfg.evidence.crosscheck, session.spec.launcher
    if cc.python is not None:
        spec = LauncherSpec(python=cc.python, pythonpath=cc.pythonpath)
    elif launcher.kind == "python":
        spec = launcher
    else:
        why = f"the engine's launcher is {launcher.kind}, not python: name evidence.crosscheck.python"
        return None, [], why
    return interpreter(spec), [str(resolve_repo_path(p)) for p in spec.pythonpath], None


def _archive(path: Path) -> Path:
    """Keep the client's raw result gzipped (per-request figures are large); returns the archive.

    The client records the tokenizer's path: written relative to the repository, as every record is.
    """
    gz = path.with_name(path.name + ".gz")
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write(repo_relative(path.read_text(encoding="utf-8")))
    path.unlink()
    return gz


def _stored_raw(gz: Path, rate: float) -> dict | None:
    """A raw result saved before an interruption, if it ran at ``rate``."""
    try:
        with gzip.open(gz, "rt", encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return None
    asked = raw.get("request_rate")
    return raw if isinstance(asked, (int, float)) and math.isclose(asked, rate, rel_tol=1e-4) else None


def _queue(session: EngineSession) -> MetricsSampler | None:
    """A sampler of the server's ``/metrics`` (its waiting queue), started; None when it cannot start."""
    if session.handle is None:
        return None
    path, page_format, names = session.adapter.sampling()
    url = session.handle.base_url + path
    return MetricsSampler(url, names, parse=PAGE_FORMATS[page_format], headers=session.handle.headers).start()


async def _one_rate(
    session: EngineSession, rr: RateRun, python: Path, env: dict, folder: Path
) -> tuple[RateRun, BenchRun]:
    """One client run at ``rr.rate`` (or its raw result stored earlier), judged."""
    tag = rate_ident(rr.multiple)
    name = f"vllm-bench-{tag}.json"
    gz, log = folder / (name + ".gz"), folder / f"vllm-bench-{tag}.log"
    rel = {
        "raw_file": f"{CROSSCHECK_DIR}/{folder.name}/{gz.name}",
        "log_file": f"{CROSSCHECK_DIR}/{folder.name}/{log.name}",
    }
    raw, queue_file = _stored_raw(gz, rr.rate), folder / f"vllm-bench-{tag}.queue.json"
    if raw is not None:  # measured before an interruption: judged again from what it saved
        session.steps.kept(session.spec.label, "crosscheck", tag)
        queue = json.loads(queue_file.read_text()) if queue_file.is_file() else None
        version = version_of(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else None
        judged = judge_rate(raw, rr.model_copy(update=rel), session.cfg, [tuple(q) for q in queue or []])
        return judged, BenchRun(raw, version, None, "")

    def need() -> tuple[float, str]:  # asked only under a time limit
        what = f"{CLIENT} at {rr.multiple:g}× capacity, {rr.prompts:,} prompts at {fmt_load(rr.rate)} req/s"
        return rr.prompts / rr.rate + (latency_estimate(session.result.points) or 0.0) + CLIENT_START_S, what

    stop_unless_fits(session.run_dir, session.spec.label, need, session.say)
    session.steps.begin(session.spec.label, "crosscheck", tag, f"{CLIENT} at {rr.multiple:g}× capacity")
    wl = session.cfg.workload
    dataset = prepare_dataset(session.cfg, session.run_dir, f"crosscheck-{tag}-n{rr.prompts}", n=rr.prompts)
    seed = int(hashlib.sha256(f"crosscheck|{tag}".encode()).hexdigest()[:8], 16)
    args = bench_args(
        session.handle.base_url,
        session.adapter.served_model_name(session.cfg.model),
        session.cfg.model.directory,
        dataset,
        wl.output_tokens,
        rr.prompts,
        folder,
        name,
        rate=rr.rate,
        seed=seed,
        detailed=True,
    )
    timeout = 3 * session.cfg.evidence.crosscheck.seconds + 300
    sampler, t0 = _queue(session), time.monotonic()
    try:
        bench = await asyncio.to_thread(run_vllm_bench, python, args, env, timeout)
    finally:
        if sampler is not None:
            sampler.stop()
    snaps = sampler.snaps if sampler is not None else []
    session.account("crosscheck", t0)
    log.write_text(bench.log, encoding="utf-8")
    session.steps.end(session.spec.label, "crosscheck", tag)
    if bench.result is None:
        return rr.model_copy(update={"log_file": rel["log_file"], "why": bench.error or ""}), bench
    _archive(folder / name)
    first = snaps[0].t if snaps else 0.0
    queue = [(s.t - first, s.waiting) for s in snaps if s.waiting is not None]
    write_json_atomic(queue_file, queue)  # the server's waiting queue, for judging it again on a resume
    return judge_rate(bench.result, rr.model_copy(update=rel), session.cfg, queue), bench


def client_seconds(configured: float, points: list[Point]) -> tuple[float, str]:
    """Seconds of arrivals at each rate (``probe_size.arrival_seconds``, as a probe has), and why if longer ('' if not).

    Whether the engine kept up is read between the batch filling and its drain (``measure.timing.keep_up``),
    one latency each; the latency is the last passing probe's.
    """
    latency = latency_estimate(points)
    seconds = arrival_seconds(configured, latency)
    if seconds <= configured or latency is None:
        return configured, ""
    why = (f"sends for {seconds:,.0f} s at each rate ({LATENCY_SPANS:g} request latencies of {latency:,.1f} s), "
           f"longer than the {configured:g} s configured")  # fmt: skip
    return seconds, why


async def cross_check(session: EngineSession) -> CrossCheckRecord:
    """The cross-check of the running configuration (module docstring); never raises for the client's trouble."""
    cc, label = session.cfg.evidence.crosscheck, session.spec.label
    record = CrossCheckRecord(label=label, engine=session.spec.engine, status="done", seconds=cc.seconds)
    rep = from_capacity(session.result, session.cfg)
    if rep is None or rep.request_rate is None or not rep.request_rate.mean > 0:
        record.status, record.reason = "skipped", f"no capacity estimate to check ({rep.basis if rep else 'none'})"
        return record
    record.playbook_capacity, record.playbook_text = rep.request_rate.mean, rep.basis
    python, folders, why = _client(session)
    if python is None:
        record.status, record.reason = "failed", why
        return record
    record.python = repo_relative(str(python))
    env = client_env(folders, session.handle.api_key if session.handle is not None else None)
    folder = record_path(session.run_dir, label).with_suffix("")
    folder.mkdir(parents=True, exist_ok=True)
    seconds, why = client_seconds(cc.seconds, session.result.points)
    record.seconds = seconds
    if why:
        session.say(f"{label}: {CLIENT} {why}")
    for multiple in cc.rates:
        rate = float(f"{multiple * record.playbook_capacity:.6g}")  # as the client is asked for it
        rr = RateRun(multiple=multiple, rate=rate, prompts=prompts_of(rate, seconds))
        rr, bench = await _one_rate(session, rr, python, env, folder)
        record.client_version = record.client_version or bench.version
        record.rates.append(rr)
        if bench.result is None:
            record.status, record.reason = "failed", bench.error
            break
        session.say(f"{label}: {CLIENT} at {multiple:g}× capacity ({fmt_load(rate)} req/s): {rr.why}")
    if record.status == "done":
        conclude(record, session.cfg)
        est = session.result.capacity.estimate if session.result.capacity is not None else None
        bound = ""
        if est is not None and est.status == "at_least":
            bound = " (a lower bound: " + (
                f"it failed above only without a size, at {fmt_load(est.high)})" if est.high else "every probe passed)"
            )
        record.note = f"{CLIENT}: {record.own_text}; playbook: {fmt_load(record.playbook_capacity)} req/s{bound}"
    return record


async def measure_crosscheck(session: EngineSession) -> bool:
    """The cross-check of the running configuration, stored (a finished one is kept); False if the engine died."""
    if not wanted(session.cfg):
        return True
    label, path = session.spec.label, record_path(session.run_dir, session.spec.label)
    idents = [rate_ident(m) for m in session.cfg.evidence.crosscheck.rates]
    if load_record(path) is not None:
        for ident in idents:
            session.steps.kept(label, "crosscheck", ident)
        session.say(f"{label}: cross-check with {CLIENT} already done, kept")
        return True
    record = await cross_check(session)
    if record.status == "failed":
        session.say(f"{label}: cross-check with {CLIENT} failed: {record.reason}")
    session.steps.drop(label, "crosscheck")  # rates not run (a failure, or no capacity to check)
    write_json_atomic(path, record.model_dump(mode="json"))
    if session.handle is not None and not session.handle.alive():
        session.fail(f"{session.handle.exit_reason()} during the cross-check with {CLIENT}", "partial")
        return False
    return True


class CrossCheckPhase(Phase):
    """The engine's own client at each rate around the capacity (``evidence.crosscheck``), where asked."""

    name = "crosscheck"

    def planned(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path | None = None) -> list[Unit]:
        """One unit per rate, or nothing."""
        if not wanted(cfg):
            return []
        seconds = crosscheck_seconds(cfg)
        return [unit(spec.label, "crosscheck", rate_ident(m), f"{CLIENT} at {m:g}× capacity", seconds)
                for m in cfg.evidence.crosscheck.rates]  # fmt: skip

    def records(self, spec: EngineSpec, cfg: PlaybookConfig, run_dir: Path) -> list[Path]:
        """Its record (``crosscheck/<label>.json``), or nothing: a stored result is not complete without it."""
        return [record_path(run_dir, spec.label)] if wanted(cfg) else []

    async def run(self, session: EngineSession) -> bool:
        """The cross-check (``measure_crosscheck``); False if the engine died."""
        return await measure_crosscheck(session)


CROSSCHECK = CrossCheckPhase()
