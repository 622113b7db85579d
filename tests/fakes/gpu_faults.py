"""The reliability faults for the H200 host (``bench_reliability.py --gpu``): configs, commands and a killer.

Nothing here runs an engine on this machine. ``write_gpu_configs`` writes, on the GPU host, the
configs of two faults: out of memory at start (Llama-3.3-70B in BF16 at TP=1 on one 141 GB GPU:
140 GB of weights alone) and an engine killed mid-point (the 8B reference workload, vLLM and
SGLang). ``kill_engine_in`` watches a running ``playbook run`` (its pid from the run lock), finds its
engine in that process tree, waits for the next point's requests to be in flight and kills it.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import time
from pathlib import Path

import psutil
import yaml
from fakes.faults import descendants, engine_url, metric, wait_for

from helpers.core.paths import MODELS_DIR, WORKLOADS_DIR
from helpers.engines import ENGINES
from helpers.run.lock import LOCK_NAME, read_holder

NO_EXTRAS = {"evidence": {"search": {"enabled": False}}, "quality": {"enabled": False}}


def _workload(name: str) -> dict:
    return yaml.safe_load((WORKLOADS_DIR / name).read_text(encoding="utf-8"))


def write_gpu_configs(out: Path) -> str:
    """Write the GPU fault configs (and the BF16 70B model folder) into ``out``; return what was written."""
    out = out.resolve()
    model = out / "llama-3.3-70b-bf16"
    model.mkdir(parents=True, exist_ok=True)
    for f in (MODELS_DIR / "llama-3.3-70b-fp8").iterdir():
        if f.name != "config.json":
            shutil.copy2(f, model / f.name)
    shape = json.loads((MODELS_DIR / "llama-3.3-70b-fp8" / "config.json").read_text())
    shape.pop("quantization_config", None)  # BF16 weights: 2 bytes per parameter, ~141 GB for 70.6 B
    (model / "config.json").write_text(json.dumps(shape, indent=2) + "\n")

    oom = _workload("chat-70b-fp8.yaml")
    oom.update(name="reliability-oom-70b-bf16", **copy.deepcopy(NO_EXTRAS))
    oom["model"] = {"path": str(model), "served_name": "llama-3.3-70b-bf16"}
    for e in oom["engines"]:
        e["knobs"].update(quantization="none", tensor_parallel=1)
        e["startup_timeout_s"] = 900
    oom["workload"].update(concurrency=[1], requests_per_point=2, max_seconds_per_point=60)
    oom["workload"].pop("requests_per_stream", None)
    oom["workload"].pop("target_concurrency", None)

    kill = _workload("chat-8b.yaml")
    kill.update(name="reliability-kill-8b", **copy.deepcopy(NO_EXTRAS))
    kill["workload"].update(concurrency=[1, 32], requests_per_point=64, requests_per_stream=2)
    paths = []
    for name, cfg in (("oom-70b-bf16.yaml", oom), ("kill-8b.yaml", kill)):
        (out / name).write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        paths.append(str(out / name))
    return "\n".join([*paths, str(model)])


def gpu_commands(out: str = "/tmp/pb-reliability-gpu") -> str:
    """The GPU faults as commands for the lead, run from the repository root on the H200 host."""
    py = "PYTHONPATH=/tmp/pb/playbook-runtime/site:$PWD python3"
    return f"""GPU faults (not run here; on the H200 host, repository root, bundles installed by scripts/gpu_host.sh):

  {py} benchmarks/bench_reliability.py --gpu-write {out}

1. Out of memory at start: Llama-3.3-70B, BF16 (quantization none), TP=1 on one 141 GB H200.
   scripts/gpu_host.sh run {out}/oom-70b-bf16.yaml reliability-oom-70b-bf16 1800
   Expect: exit 0, report rendered; each engine row 'failed' with the engine's out-of-memory reason
   (vLLM: 'CUDA out of memory' / 'No available memory for the cache blocks'; SGLang: 'Not enough
   memory') and its log tail, not a timeout; no engine process left (nvidia-smi shows no process).

2. Engine killed mid-point: the 8B workload (vLLM then SGLang, concurrency 1 and 32).
   scripts/gpu_host.sh run {out}/kill-8b.yaml reliability-kill-8b 1800 &
   {py} benchmarks/bench_reliability.py --kill-engine-in reports/reliability-kill-8b
   Expect: vLLM row 'partial', 'engine process exited with code -9 during the point at concurrency 32',
   its c=1 point kept; SGLang measured as usual; GPU memory freed (no orphan EngineCore). Then
   scripts/gpu_host.sh run {out}/kill-8b.yaml reliability-kill-8b 1800
   re-measures only vLLM's missing point (c=1 byte-identical; sha256sum it before and after).
"""


def _adapter_of(pid: int):
    """The engine adapter whose server module is on ``pid``'s command line, if any."""
    cmd = " ".join(psutil.Process(pid).cmdline())
    for adapter in ENGINES.values():
        if adapter.module and f"-m {adapter.module}" in cmd:
            return adapter
    return None


def kill_engine_in(run_dir: Path) -> str:
    """Wait for the next point of the run in ``run_dir`` to have requests in flight, then SIGKILL its engine."""
    lock = run_dir / LOCK_NAME
    holder = wait_for("a running playbook run (its run.lock)", lambda: read_holder(lock), 3600, 1.0)
    points = run_dir / "points"
    before = len(list(points.rglob("*.json"))) if points.is_dir() else 0

    def engine() -> tuple[int, object] | None:
        for p in descendants(holder.pid):
            try:
                adapter = _adapter_of(p.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):  # vanished while we looked
                continue
            if adapter is not None:
                return p.pid, adapter
        return None

    wait_for("a first point saved", lambda: len(list(points.rglob("*.json"))) > before, 7200, 1.0)
    pid, adapter = wait_for("an engine in the run's process tree", engine, 600, 0.5)
    path, _format, names = adapter.sampling()
    url = engine_url(pid)
    wait_for("requests in flight", lambda: (metric(url, names.running, path=path) or 0) >= 1, 3600, 0.1)
    os.kill(pid, signal.SIGKILL)
    return f"{time.strftime('%H:%M:%S')} killed {adapter.name} engine pid {pid} (run pid {holder.pid}) mid-point"
