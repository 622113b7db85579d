"""Each fault of the reliability benchmark (``benchmarks/bench_reliability.py``), fast, on the fake engine.

The engine is ``tests/fakes/fake_openai_server.py`` started by the real python launcher; guidellm
drives it for real. Faults are injected into the process that the run started (found in its own
process tree) while requests are in flight (the fake engine's ``fake:streamed_requests_total``):
killed by pid, stopped with SIGSTOP, a ``/metrics`` answered late by a proxy, a full disk under the
points folder, ``kill -9`` of the benchmarking process and a resume; plus a trace with 1% garbage.
The lock (two ``playbook run`` on one run id) is tested with real processes in ``tests/run/test_lock.py``.

A point whose requests did not complete because the engine stopped answering (stopped, or a live
process that answers nothing: the fake's ``hang_mid_point``) is not kept; the row names the hang.
"""

import asyncio
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from fakes.fake_engine import FAKE_ENGINE, FakeEngineAdapter, fake_spec
from fakes.fake_process import fake_server
from fakes.faults import (
    busy_engine,
    descendants,
    engine_url,
    find_in_tree,
    kill_all,
    leftovers,
    metric,
    pids_alive,
    wait_for,
)
from fakes.tmpfs import fill, tiny_tmpfs

from helpers.benchmark.run import run_benchmarks
from helpers.core.atomic import AtomicWriteError
from helpers.core.config import parse_config
from helpers.core.paths import REPO_ROOT
from helpers.engines import ENGINES
from helpers.launchers.server import free_port
from helpers.measure import loadgen
from helpers.run.records import point_path
from helpers.workload.traces import load_trace

FAKES = REPO_ROOT / "tests" / "fakes"
STREAMED = "fake:streamed_requests_total"
SLOW = {"FAKE_TOKEN_DELAY_S": "0.4"}  # 8 tokens: 3.2 s per request, so a point has requests in flight for seconds
HEALTH_S = 3.0  # the health probe's wait after a cut load (10 s in the product): the hang is real, the wait shorter


@contextmanager
def short_health_wait():
    """``HEALTH_TIMEOUT_S`` at ``HEALTH_S`` while the block runs (a test's or a module fixture's)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loadgen, "HEALTH_TIMEOUT_S", HEALTH_S)
        yield


@pytest.fixture
def fake_engine():
    with ENGINES.temporarily(FAKE_ENGINE, FakeEngineAdapter()):
        yield FAKE_ENGINE


def config_dict(engines: list[dict], concurrency=(2,), max_seconds: float = 60, requests: int = 4) -> dict:
    return {
        "name": "reliability",
        "model": {"path": "tiny-llama"},
        "engines": engines,
        "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},  # faults, not evidence
        "quality": {"enabled": False},
        "workload": {
            "input_tokens": 16,
            "output_tokens": 8,
            "concurrency": list(concurrency),
            "requests_per_point": requests,
            "max_seconds_per_point": max_seconds,
        },
    }


class Background:
    """``run_benchmarks`` in a thread of this process, so that the test can inject a fault meanwhile."""

    def __init__(self, cfg, run_dir: Path):
        self.said: list[str] = []
        self.results = None
        self.error: BaseException | None = None
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self._go, args=(cfg, run_dir), daemon=True)
        self.thread.start()

    def _go(self, cfg, run_dir) -> None:
        try:
            self.results = asyncio.run(run_benchmarks(cfg, run_dir, progress=self.said.append))
        except BaseException as err:  # noqa: BLE001 - handed to the test
            self.error = err

    def join(self, timeout: float) -> float:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the run did not finish in {timeout} s: {self.said}"
        return time.monotonic() - self.t0


def in_flight_engine(min_streamed: float = 1, timeout: float = 120) -> int:
    """The fake engine this process started, once it has ``min_streamed`` streamed requests."""
    wait_for("fake engine started", lambda: find_in_tree(os.getpid(), "fake_openai_server"), 60)
    return wait_for(
        "requests in flight", lambda: busy_engine(os.getpid(), "fake_openai_server", STREAMED, min_streamed), timeout
    )


def test_an_engine_killed_by_pid_mid_point_is_a_row_and_the_next_engine_runs(fake_engine, tmp_path):
    cfg = parse_config(config_dict([fake_spec("victim", env=SLOW), fake_spec("next")]))
    run = Background(cfg, tmp_path)
    pid = in_flight_engine()
    os.kill(pid, signal.SIGKILL)
    run.join(300)
    assert run.error is None
    victim, nxt = run.results
    assert (victim.status, victim.reason) == (
        "partial",
        "engine process exited with code -9 during the point at concurrency 2",
    )
    assert victim.log_tail and "fake engine (ok)" in victim.log_tail
    assert not point_path(tmp_path, "victim", "sweep", 2).exists()  # the point in flight is not a measurement
    assert nxt.status == "ok" and nxt.points[0].requests == 4
    assert find_in_tree(os.getpid(), "fake_openai_server") is None


@pytest.fixture(scope="module")
def hung_run(tmp_path_factory):
    """One run whose first engine is stopped (SIGSTOP) with requests in flight; the second is healthy."""
    run_dir = tmp_path_factory.mktemp("hung")
    with ENGINES.temporarily(FAKE_ENGINE, FakeEngineAdapter()), short_health_wait():
        cfg = parse_config(
            config_dict([fake_spec("hung", env=SLOW), fake_spec("next")], concurrency=(2, 4), max_seconds=5)
        )
        run = Background(cfg, run_dir)
        pid = in_flight_engine()
        os.kill(pid, signal.SIGSTOP)
        try:
            took = run.join(300)
        finally:
            left = pids_alive([pid])
            kill_all(left)
    return run, run_dir, took, left


def test_a_hung_engine_is_detected_and_the_run_goes_on(hung_run):
    run, _run_dir, took, left = hung_run
    assert run.error is None
    hung, nxt = run.results
    assert nxt.status == "ok" and [p.requests for p in nxt.points] == [4, 4]
    assert left == [], "the stopped engine was not stopped for good"
    assert took < 240


def test_the_point_in_flight_of_a_hung_engine_is_not_a_measurement(hung_run):
    run, run_dir, _took, _left = hung_run
    hung = run.results[0]
    assert not point_path(run_dir, "hung", "sweep", 2).exists() and hung.points == []
    assert hung.status == "partial"
    assert hung.reason.startswith("engine hung during the point at concurrency 2: http://127.0.0.1:")
    assert f"/health gave no answer in {HEALTH_S:g} s; " in hung.reason and " cut" in hung.reason


def test_an_engine_that_stops_answering_mid_point_is_named_and_its_point_not_kept(fake_engine, tmp_path):
    """A live process that answers nothing (deadlocked, not stopped): the same verdict, and a resume re-measures."""
    hang = fake_spec("stuck", mode="hang_mid_point", env={"FAKE_DIE_AFTER": "5", "FAKE_TOKEN_DELAY_S": "0.05"})
    cfg = parse_config(config_dict([hang], concurrency=(2, 4), max_seconds=4))
    with short_health_wait():
        run = Background(cfg, tmp_path)
        run.join(240)
    assert run.error is None
    (r,) = run.results
    assert point_path(tmp_path, "stuck", "sweep", 2).is_file()  # 4 requests, all before the hang
    assert not point_path(tmp_path, "stuck", "sweep", 4).exists()
    assert r.status == "partial" and [p.concurrency for p in r.points] == [2]
    assert r.reason.startswith("engine hung during the point at concurrency 4: http://127.0.0.1:")
    assert re.search(rf"gave no answer in {HEALTH_S:g} s; [01] of 4 requests done, [34] cut$", r.reason), r.reason
    assert "fake engine: hanging after 5 streamed requests" in r.log_tail
    assert find_in_tree(os.getpid(), "fake_openai_server") is None  # stopped, though it answered nothing


def test_a_metrics_endpoint_that_times_out_is_named_in_the_point(fake_engine, tmp_path):
    with fake_server(tmp_path, env=SLOW) as upstream:
        port = free_port()
        proxy = subprocess.Popen(
            [sys.executable, str(FAKES / "slow_metrics_proxy.py"), "--port", str(port), "--upstream", upstream],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stdout.readline().startswith("proxy ready")
            spec = {"label": "slow-metrics", "engine": FAKE_ENGINE}
            spec["launcher"] = {"kind": "endpoint", "url": f"http://127.0.0.1:{port}"}
            run = Background(parse_config(config_dict([spec])), tmp_path / "run")
            run.join(300)
        finally:
            proxy.kill()
            proxy.wait(10)
    assert run.error is None
    (r,) = run.results
    assert r.status == "ok"
    (point,) = r.points
    assert point.requests == 4 and point.errors == 0
    assert point.server.samples == 0
    assert point.server.error == f"http://127.0.0.1:{port}/metrics: timed out"


def test_a_full_disk_while_a_point_is_written_loses_nothing_and_resumes(fake_engine, tmp_path):
    cfg = parse_config(config_dict([fake_spec("e")], concurrency=(2, 4)))
    run_dir = tmp_path / "run"
    first = point_path(run_dir, "e", "sweep", 2)
    with tiny_tmpfs(run_dir / "points", "64k") as points:
        run = Background(cfg, run_dir)
        wait_for("first point", first.is_file, 240)
        before = first.read_bytes()
        filler = fill(points)
        run.join(300)
        assert isinstance(run.error, AtomicWriteError)
        msg = str(run.error)
        assert msg.startswith(str(point_path(run_dir, "e", "sweep", 4))) and "No space left on device" in msg
        assert "\n" not in msg
        assert first.read_bytes() == before and leftovers(run_dir) == []
        assert not point_path(run_dir, "e", "sweep", 4).exists()
        assert find_in_tree(os.getpid(), "fake_openai_server") is None  # the engine was stopped on the way out
        filler.unlink()
        again = Background(cfg, run_dir)
        again.join(300)
        assert again.error is None and again.results[0].status == "ok"
        assert "e: c=2 (sweep) already measured, kept" in again.said
        assert first.read_bytes() == before and point_path(run_dir, "e", "sweep", 4).is_file()


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_kill_9_of_the_benchmarking_process_mid_sweep_then_resume(tmp_path):
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps(config_dict([fake_spec("e", env=SLOW)], concurrency=(2, 4))))
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(FAKES / "bench_once.py"), str(cfg_file), str(run_dir)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    first = point_path(run_dir, "e", "sweep", 2)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tree: list[int] = []
    try:
        wait_for("first point", first.is_file, 240)
        engine = wait_for("engine", lambda: find_in_tree(proc.pid, "fake_openai_server"), 30)
        wait_for("second point in flight", lambda: (metric(engine_url(engine), STREAMED) or 0) >= 6, 120)
        digest = sha(first)
        # bench_once.py has no watchdog (``playbook run`` does: tests/run/test_processes.py): the load
        # generator's workers it started are ended here, by pid, once the kill is checked
        tree = [p.pid for p in descendants(proc.pid) if p.pid != engine]
        proc.kill()
        proc.wait(10)
        # the engine dies with the process that started it (PDEATHSIG), so nothing keeps writing
        wait_for("engine gone", lambda: not pids_alive([engine]), 30)
    finally:
        kill_all(pids_alive([proc.pid, *tree]))
    assert not point_path(run_dir, "e", "sweep", 4).exists() and leftovers(run_dir) == []
    res = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "e: c=2 (sweep) already measured, kept" in res.stdout and "done e=ok" in res.stdout
    assert sha(first) == digest  # the finished point is byte-identical
    assert point_path(run_dir, "e", "sweep", 4).is_file()


def test_a_trace_with_one_percent_garbage_is_read_and_every_bad_line_counted(tmp_path):
    n, bad = 200_000, 0
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    junk = ["#### not a row ####", "abc,def,ghi", "1700000000.5,12", "1700000000.5,\udcff,3", '"open,1,2', "1,-4,2"]
    for i in range(n):
        if i % 100 == 7:
            lines.append(junk[(i // 100) % len(junk)])
            bad += 1
        else:
            lines.append(f"{1_700_000_000 + i * 0.01:.2f},{100 + i % 900},{1 + i % 200}")
    p = tmp_path / "garbage.csv"
    p.write_bytes("\r\n".join(lines).encode("utf-8", "surrogateescape"))  # CRLF, and one byte that is not UTF-8
    t0 = time.monotonic()
    trace = load_trace(p)
    took = time.monotonic() - t0
    assert trace.skipped == bad == n // 100
    assert len(trace) == n - bad
    assert trace.skipped_examples[0] == "line 9: expected 3 fields, got 1"
    assert took < 30
