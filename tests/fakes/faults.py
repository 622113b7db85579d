"""Fault injection for the reliability tests and ``benchmarks/bench_reliability.py``.

Finds an engine in the process tree of the run that started it (never by name across the machine),
reads a counter from its ``/metrics`` to know that requests are in flight, and waits for conditions.
Every process it signals is a descendant of a pid the caller started.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from helpers.measure.metrics import MetricsParseError, parse_page

CLI = (  # the real `playbook run` (helpers.tools.cli.main), with its run folders in a scratch reports folder
    "import sys, functools; from helpers.tools import cli, runner; "
    "cli.run_playbook = functools.partial(runner.run_playbook, reports_dir=sys.argv[1]); "
    "raise SystemExit(cli.main(sys.argv[2:]))"
)


def playbook_cmd(reports: Path, config: Path, run_id: str) -> list[str]:
    """``playbook run CONFIG --run-id RUN_ID --only 03_benchmark`` with its run folder under ``reports``."""
    return [sys.executable, "-c", CLI, str(reports), "run", str(config), "--run-id", run_id, "--only", "03_benchmark"]


def descendants(root: int) -> list[psutil.Process]:
    """Every live descendant of ``root`` ([] once it is gone)."""
    try:
        return psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def find_in_tree(root: int, marker: str) -> int | None:
    """The pid of the first descendant of ``root`` whose command line contains ``marker``."""
    for p in descendants(root):
        try:
            if any(marker in part for part in p.cmdline()):
                return p.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def engine_url(pid: int) -> str:
    """The base URL of an engine from its own command line (``--port P``, on 127.0.0.1)."""
    cmd = psutil.Process(pid).cmdline()
    return f"http://127.0.0.1:{cmd[cmd.index('--port') + 1]}"


def metric(url: str, name: str, timeout: float = 2.0, path: str = "/metrics") -> float | None:
    """One series of a server's Prometheus page (summed over labels), or None when it cannot be read."""
    try:
        return parse_page(httpx.get(url + path, timeout=timeout).text).get(name)
    except (httpx.HTTPError, MetricsParseError):
        return None


def busy_engine(root: int, marker: str, series: str, at_least: float = 1) -> int | None:
    """The pid of the engine under ``root`` once its ``series`` on ``/metrics`` reaches ``at_least``; None before.

    The engine is found again at every call: one that exited because its port was taken is started
    again on another port, by a new process.
    """
    pid = find_in_tree(root, marker)
    try:
        return pid if pid is not None and (metric(engine_url(pid), series) or 0) >= at_least else None
    except psutil.NoSuchProcess:  # gone between finding it and reading its command line
        return None


def wait_for(what: str, check: Callable[[], object], timeout_s: float, interval_s: float = 0.2):
    """Poll ``check`` until it returns something truthy; ``TimeoutError`` naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval_s)
    raise TimeoutError(f"{what}: not within {timeout_s:g} s")


def pids_alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that still run (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            continue
    return out


def kill_all(pids: list[int]) -> None:
    """SIGCONT then SIGKILL each of ``pids`` (processes this caller started); missing ones are skipped."""
    for pid in pids:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break


def leftovers(folder: Path) -> list[str]:
    """Temporary files of atomic writes left anywhere under ``folder`` (there must be none)."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*.tmp"))


GARBAGE = [
    b"#### not a row ####",
    b"abc,def,ghi",
    b"1700000000.5,12",
    b"1700000000.5,\xff\xfe,3",
    b'"open,1,2',
    b"1,-4,2",
]
"""Garbage lines of a CSV trace: a comment, words, too few fields, bytes that are not UTF-8, a stray quote, a
negative count."""


def write_garbage_csv(path: Path, lines: int, rate: float = 0.01, seed: int = 0) -> int:
    """Write a CSV trace (BOM, CRLF) of ``lines`` rows, ``rate`` of them garbage; return how many are garbage."""
    rng, bad, t, buf = random.Random(seed), 0, 1_700_000_000.0, []
    with open(path, "wb") as f:
        f.write(b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\r\n")
        for _ in range(lines):
            t += 0.01
            if rng.random() < rate:
                buf.append(GARBAGE[bad % len(GARBAGE)])
                bad += 1
            else:
                buf.append(b"%.2f,%d,%d" % (t, rng.randint(1, 4000), rng.randint(1, 500)))
            if len(buf) == 100_000:
                f.write(b"\r\n".join(buf) + b"\r\n")
                buf = []
        f.write(b"\r\n".join(buf) + (b"\r\n" if buf else b""))
    return bad


def describe(pids: list[int]) -> str:
    """What the processes are, counted by kind (``2 guidellm worker, VLLM::EngineCore``); '' for none."""
    kinds: dict[str, int] = {}
    for pid in pids:
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())
        except psutil.NoSuchProcess:
            continue
        kind = (
            "resource tracker"
            if "resource_tracker" in cmd
            else "guidellm worker"
            if "spawn_main" in cmd
            else "kernel fork"
            if "ipykernel_launcher" in cmd
            else "engine"
            if "api_server" in cmd
            else cmd.split()[0].rsplit("/", 1)[-1]
        )
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{n} {k}" if n > 1 else k for k, n in sorted(kinds.items()))
