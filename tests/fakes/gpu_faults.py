"""The reliability faults for the H200 host (``bench_reliability.py --gpu --out DIR [--dry-run]``).

Two faults, vLLM 0.26.0 only, each one real ``playbook run --only 03_benchmark`` into a scratch
reports folder under ``DIR``, about 4 GPU-minutes in all (an engine start there takes 80-135 s):

* ``oom-70b-bf16``: out of memory at start: Llama-3.3-70B in BF16 (dummy weights, ~141 GB) at TP=1
  on one 141 GB GPU. Wanted: exit 0, the row ``failed`` with a reason that names the fault (``out of
  GPU memory at start: ...``, the engine's own line quoted; not a timeout) and the log tail, nothing of
  the engine left, no process on the GPU.
* ``kill-8b``: the 8B workload's engine (its API server) killed by pid with requests in flight.
  Wanted: exit 0, the row ``partial`` naming the kill, nothing of its process group left (no orphan
  EngineCore holding the GPU's memory).

Each row is written to ``DIR/reliability-gpu.json`` and ``DIR/reliability-gpu.md`` as soon as it is
known. ``--dry-run`` (here, no GPU) writes the configs, validates them, builds each launch command
and writes the same files with every fault "not run (dry run)", so the plan can be checked.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import yaml
from fakes.faults import descendants, engine_url, metric, pids_alive, playbook_cmd, wait_for

from helpers.core.config import load_config
from helpers.core.paths import MODELS_DIR, REPO_ROOT, WORKLOADS_DIR
from helpers.engines import get_engine
from helpers.launchers import LAUNCHERS
from helpers.launchers.server import OUT_OF_GPU_MEMORY_AT_START
from helpers.run.processes import members
from helpers.run.records import label_slug

LABEL = "vLLM 0.26.0"
# the faults, not the evidence: no capacity search, no trials, no quality gate
NO_EXTRAS = {"evidence": {"search": {"enabled": False}, "trials": {"enabled": False}}, "quality": {"enabled": False}}
API_SERVER = "vllm.entrypoints.openai.api_server"


def _vllm_only(name: str) -> dict:
    cfg = yaml.safe_load((WORKLOADS_DIR / name).read_text(encoding="utf-8"))
    cfg["engines"] = [e for e in cfg["engines"] if e["label"] == LABEL]
    cfg.update(copy.deepcopy(NO_EXTRAS))
    for key in ("requests_per_stream", "target_concurrency"):
        cfg["workload"].pop(key, None)
    return cfg


def write_configs(out: Path) -> dict[str, Path]:
    """Write the two fault configs (and the BF16 70B model folder) into ``out``; name → config path."""
    model = out / "llama-3.3-70b-bf16"
    model.mkdir(parents=True, exist_ok=True)
    for f in (MODELS_DIR / "llama-3.3-70b-fp8").iterdir():
        if f.name != "config.json":
            shutil.copy2(f, model / f.name)
    shape = json.loads((MODELS_DIR / "llama-3.3-70b-fp8" / "config.json").read_text())
    shape.pop("quantization_config", None)  # BF16 weights: 2 bytes per parameter, ~141 GB for 70.6 B
    (model / "config.json").write_text(json.dumps(shape, indent=2) + "\n")

    oom = _vllm_only("h200-offline/chat-70b-fp8.yaml")
    oom.update(name="reliability-oom-70b-bf16")
    oom["model"] = {"path": str(model), "served_name": "llama-3.3-70b-bf16"}
    oom["engines"][0]["knobs"].update(quantization="none", tensor_parallel=1)
    oom["engines"][0]["startup_timeout_s"] = 420
    oom["workload"].update(concurrency=[1], requests_per_point=2, max_seconds_per_point=60)

    kill = _vllm_only("h200-offline/chat-8b.yaml")
    kill.update(name="reliability-kill-8b")
    kill["workload"].update(concurrency=[16], requests_per_point=160, max_seconds_per_point=90)
    paths = {}
    for name, cfg in (("oom-70b-bf16", oom), ("kill-8b", kill)):
        paths[name] = out / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return paths


class Tree:
    """Every process seen in a run's tree while it runs (polled), to find what outlived it."""

    def __init__(self, root: int):
        self.root, self.seen, self._stop = root, set(), threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.seen |= {p.pid for p in descendants(self.root)}
            time.sleep(0.5)

    def left(self) -> list[int]:
        """Stop polling; the processes seen that still run."""
        self._stop.set()
        self._thread.join(5)
        return pids_alive(sorted(self.seen))


def gpu_processes() -> str:
    """Processes on the GPU and the memory used, from ``nvidia-smi`` ('' when it cannot be asked)."""
    q = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        apps = subprocess.run(q, capture_output=True, text=True, timeout=30, check=False).stdout.split("\n")
        used = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    n = sum(1 for line in apps if line.strip())
    return f"GPU 0 after: {used} MiB used, {n} compute process(es)"


def _row_of(reports: Path, run_id: str) -> dict:
    p = reports / run_id / "engines" / f"{label_slug(LABEL)}.json"
    return json.loads(p.read_text()) if p.is_file() else {}


def _run(reports: Path, cfg: Path, run_id: str, log: Path) -> tuple[subprocess.Popen, Tree]:
    with open(log, "ab") as f:
        proc = subprocess.Popen(playbook_cmd(reports, cfg, run_id), cwd=REPO_ROOT, stdout=f, stderr=subprocess.STDOUT)
    return proc, Tree(proc.pid)


def oom_named(reason: str | None) -> bool:
    """Whether an engine row's reason names an out-of-GPU-memory start (what the OOM fault must show)."""
    return str(reason).startswith(OUT_OF_GPU_MEMORY_AT_START)


def fault_oom(reports: Path, cfg: Path, log: Path) -> dict:
    """Out of memory at start; the run goes on to a rendered report and a row that names it."""
    t0 = time.monotonic()
    proc, tree = _run(reports, cfg, "oom-70b-bf16", log)
    rc = proc.wait(600)
    took, left = time.monotonic() - t0, tree.left()
    row = _row_of(reports, "oom-70b-bf16")
    reason = str(row.get("reason"))
    named = oom_named(reason)
    return {
        "fault": "out of memory at start (70B BF16, TP=1, one H200)",
        "injected": "141 GB of dummy BF16 weights for a 141 GB GPU",
        "survived": f"exit {rc} after {took:.0f} s; " + (f"left running: {len(left)}" if left else "nothing left"),
        "lost": "none (nothing measured before the start)",
        "named": f"engine row: {row.get('status')}: {reason[:300]}" + (" + log tail" * bool(row.get("log_tail"))),
        "gpu": gpu_processes(),
        "ok": rc == 0 and row.get("status") == "failed" and named and not left,
    }


def fault_kill(reports: Path, cfg: Path, log: Path) -> dict:
    """The API server killed by pid with requests in flight; nothing of its group may survive."""
    t0 = time.monotonic()
    proc, tree = _run(reports, cfg, "kill-8b", log)
    try:
        api = wait_for("the engine", lambda: next((p.pid for p in descendants(proc.pid) if _is_api(p)), None), 300)
        url = engine_url(api)
        wait_for("requests in flight", lambda: (metric(url, "vllm:num_requests_running") or 0) >= 1, 420, 0.1)
        group = members(api)
        os.kill(api, signal.SIGKILL)
        rc = proc.wait(600)
    finally:
        if proc.poll() is None:  # the fault could not be injected: the run's watchdog ends its engine
            proc.kill()
    took, left = time.monotonic() - t0, sorted(set(tree.left()) | set(pids_alive(group)))
    row = _row_of(reports, "kill-8b")
    return {
        "fault": "engine killed by pid mid-point (8B, c=16)",
        "injected": f"SIGKILL of the API server with requests in flight; its group had {len(group)} processes",
        "survived": f"exit {rc} after {took:.0f} s; "
        + (f"left running: {len(left)}" if left else "nothing of the engine's group left"),
        "lost": "the point in flight is not saved (re-measured on resume)",
        "named": f"engine row: {row.get('status')}: {row.get('reason')}",
        "gpu": gpu_processes(),
        "ok": rc == 0 and row.get("status") == "partial" and "-9" in str(row.get("reason")) and not left,
    }


def _is_api(p) -> bool:
    try:
        return any(API_SERVER in part for part in p.cmdline())
    except Exception:  # noqa: BLE001 - gone while we looked
        return False


def _plan(paths: dict[str, Path], out: Path) -> list[dict]:
    """Dry run: each config validated and its launch command built; rows that say "not run"."""
    rows = []
    for name, path in paths.items():
        cfg = load_config(path)  # raises ConfigError naming the field if the plan is wrong
        spec = cfg.engines[0]
        cmd, env = LAUNCHERS[spec.launcher.kind].build(get_engine(spec.engine), spec, cfg.model, 8000, out / name)
        knobs = spec.knobs.model_dump(exclude_defaults=True)
        rows.append(
            {
                "fault": name,
                "injected": "not run (dry run)",
                "survived": f"config {path.name}: {spec.label}, {cfg.model.path}, knobs {knobs}",
                "lost": "",
                "named": " ".join(cmd[2:]),
                "gpu": "",
                "ok": None,
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    head = "| fault | injected | run survived | points lost | fault named | GPU after |\n|---|---|---|---|---|---|"
    cells = (
        f"| {r['fault']} | {r['injected']} | {r['survived']} | {r['lost']} | {r['named']} | {r['gpu']} |".replace(
            "\n", " "
        )
        for r in rows
    )
    return "\n".join([head, *cells])


def _write(out: Path, rows: list[dict], started: str, t0: float) -> None:
    meta = {"host": platform.node(), "started": started, "seconds": round(time.monotonic() - t0), "rows": rows}
    (out / "reliability-gpu.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / "reliability-gpu.md").write_text(
        f"GPU faults on {meta['host']}, {started}, {meta['seconds']} s\n\n{table(rows)}\n"
    )


def run_gpu_faults(out: Path, dry_run: bool = False, only: list[str] | None = None) -> list[dict]:
    """Run (or, ``dry_run``, plan) the GPU faults into ``out``; the table is rewritten after each fault."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    paths = write_configs(out)
    if only:
        paths = {k: v for k, v in paths.items() if k in only}
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    t0, rows = time.monotonic(), []
    if dry_run:
        rows = _plan(paths, out)
        _write(out, rows, started, t0)
        return rows
    reports = out / "reports"
    for name, fault in (("oom-70b-bf16", fault_oom), ("kill-8b", fault_kill)):
        if name not in paths:
            continue
        try:
            rows.append(fault(reports, paths[name], out / f"{name}.log"))
        except (TimeoutError, OSError, subprocess.SubprocessError) as err:
            rows.append({"fault": name, "injected": "?", "survived": f"benchmark error: {err}", "lost": "",
                         "named": "", "gpu": gpu_processes(), "ok": False})  # fmt: skip
        _write(out, rows, started, t0)
    return rows
