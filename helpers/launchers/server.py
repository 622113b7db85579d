"""Engine server processes: start with a log file, wait for health, read the log tail, stop by process group.

An engine that exits before it is healthy because it ran out of memory is said to have done so, with
the engine's own line quoted (``out_of_memory_line``): the line is often far above the log tail, under
the API server's traceback of the failed start.

An engine starts in a session of its own, so its API server and the processes it starts (vLLM's
EngineCore, workers) are one process group; ``stop`` ends the group, also when the API server is
already dead (killed by pid, its EngineCore would live on holding the GPU). Started for a
``playbook run``, the group is recorded in the run folder (``helpers.run.processes``) so that the
run's watchdog, or the next run on that run id, ends it if the run itself is killed.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from helpers.core.errors import EngineError
from helpers.run.lock import live_holder
from helpers.run.processes import end_group, record_group, record_own_group

if TYPE_CHECKING:
    from helpers.engines.base import EngineAdapter


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


PORT_TAKEN = "Address already in use"
"""What an engine's log says when its port was taken between ``free_port`` and the engine binding it.

Seen in a batch on a local Ray cluster: the engine binds its port some 20 s after ``free_port`` freed
it, and the other cells and Ray's own workers take ports meanwhile.
"""


def start_on_a_free_port(
    start: Callable[[int], ServerHandle],
    log_text: Callable[[], str],
    timeout_s: float,
    say: Callable[[str], None] | None = None,
    attempts: int = 3,
) -> float:
    """Start an engine on a free port (``start(port)``) and wait until healthy; seconds to healthy.

    An engine that exits because its port was taken (``PORT_TAKEN`` in ``log_text()``) is started again
    on another free port, at most ``attempts`` times in all; any other failure is raised at once.
    """
    for attempt in range(attempts):
        port = free_port()
        handle = start(port)
        try:
            return handle.wait_healthy(timeout_s)
        except EngineError:
            if attempt + 1 == attempts or PORT_TAKEN not in log_text():
                raise
            handle.stop()
            if say is not None:
                say(f"port {port} was taken before the engine bound it: starting it again on another port")
    raise AssertionError("unreachable: the last attempt returns or raises")


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file ('' if missing), terminal colour codes removed."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(_ANSI.sub("", line) for line in data.splitlines()[-lines:])


# What vLLM, SGLang and LMDeploy print when a start runs out of (GPU) memory; matched case-sensitively.
_OUT_OF_MEMORY = re.compile(
    r"(?:[\w.]*\.)?OutOfMemoryError"  # torch.OutOfMemoryError, torch.cuda.OutOfMemoryError (PyTorch engines)
    r"|CUDA out of memory"  # that error's message
    r"|CUDA (?:runtime )?error: out of memory"  # RuntimeError: CUDA error: ...; LMDeploy TurboMind's [TM][ERROR]
    r"|No available memory for the cache blocks"  # vLLM: nothing left for the KV cache
    r"|larger than the available KV cache memory"  # vLLM: one max-length request's KV cache does not fit
    r"|is less than desired GPU memory utilization"  # vLLM: free memory at start below its share
    r"|Not enough memory\. Please try to increase --mem-fraction-static"  # SGLang: no room for the KV pool
    r"|No enough gpu memory"  # LMDeploy's PyTorch engine: no room for the cache
)
_EXCEPTION_NAME = re.compile(r"\b[A-Za-z_][\w.]*(?:Error|Exception): ")
OUT_OF_MEMORY_AT_START = "out of memory at start"
"""How the failure reason of a CPU engine that ran out of memory before it was healthy begins."""
OUT_OF_GPU_MEMORY_AT_START = "out of GPU memory at start"
"""How the failure reason of a GPU engine that ran out of memory before it was healthy begins."""
QUOTE_CHARS = 160
HEALTH_POLL_FAST_S = 0.1
"""Seconds between health probes while an engine is young (``ServerHandle.wait_healthy``)."""
HEALTH_POLL_FAST_FOR_S = 5.0
"""How long after launch health is probed that often; every second after that."""


def out_of_memory_line(log: str) -> str | None:
    """The first line of an engine log that says the engine ran out of memory, quoted; None if there is none.

    Recognised: PyTorch's ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...`` (vLLM,
    SGLang, LMDeploy's PyTorch engine), ``CUDA error: out of memory`` and TurboMind's ``CUDA runtime
    error: out of memory``, vLLM's ``No available memory for the cache blocks``, ``... is larger than
    the available KV cache memory`` and ``... is less than desired GPU memory utilization``, SGLang's
    ``Not enough memory. Please try to increase --mem-fraction-static`` and LMDeploy's ``No enough gpu
    memory for runtime``. The quote starts at the exception's name where the line has one before the
    message (``ValueError: To serve at least one request ...``), else at the message, so that the
    ``(EngineCore pid=N) ERROR date [file:line]`` prefix is dropped; colour codes are removed and it
    is cut to ``QUOTE_CHARS`` characters, with an ellipsis.
    """
    for raw in log.splitlines():
        if _OUT_OF_MEMORY.search(raw) is None:
            continue
        line = _ANSI.sub("", raw)
        m = _OUT_OF_MEMORY.search(line)
        if m is None:  # a colour code inside the message
            continue
        names = [n.start() for n in _EXCEPTION_NAME.finditer(line, 0, m.start())]
        quote = line[names[-1] if names else m.start() :].strip()
        return quote if len(quote) <= QUOTE_CHARS else quote[: QUOTE_CHARS - 1].rstrip() + "…"
    return None


@dataclass
class ServerHandle:
    """A started (or external) engine server."""

    base_url: str
    adapter: EngineAdapter
    log_path: Path
    process: subprocess.Popen | None = None
    api_key: str | None = field(default=None, repr=False)
    started_at: float = field(default_factory=time.monotonic)
    log_offset: int = 0
    """Where this start's output begins in ``log_path`` (the file is appended to by every start)."""

    @property
    def headers(self) -> dict[str, str]:
        """HTTP headers for requests to the server (the API key, if any)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def alive(self) -> bool:
        """False once a process we started has exited (an external endpoint counts as alive)."""
        return self.process is None or self.process.poll() is None

    def exit_reason(self) -> str:
        """Why the process is gone, for a result row."""
        if self.process is None:
            return "endpoint unreachable"
        code = self.process.poll()
        return f"engine process exited with code {code}" if code is not None else "engine still running"

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the engine log."""
        return tail(self.log_path, lines)

    def log_since_start(self, limit: int = 4 * 2**20) -> str:
        """The engine log written since this start (at most its last ``limit`` bytes; '' if unreadable)."""
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(self.log_offset, size - limit))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def start_failure(self) -> str:
        """Why the process exited before it was healthy, for a result row; an out-of-memory start says so.

        ``out of GPU memory at start: engine process exited with code 1 before becoming healthy (log:
        torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …)`` when this start's log has a
        line ``out_of_memory_line`` recognises (``out of memory at start`` for a CPU engine); else what the
        adapter names (``EngineAdapter.start_failure_line``) in the same form; else ``engine process exited
        with code N before becoming healthy``.
        """
        reason = f"{self.exit_reason()} before becoming healthy"
        log = self.log_since_start()
        line = out_of_memory_line(log)
        if line is None:
            named = self.adapter.start_failure_line(log)
            return f"{named[0]}: {reason} (log: {named[1]})" if named else reason
        what = OUT_OF_MEMORY_AT_START if self.adapter.runs_on_cpu else OUT_OF_GPU_MEMORY_AT_START
        return f"{what}: {reason} (log: {line})"

    def healthy(self, timeout: float = 5.0) -> bool:
        """One health probe: True on HTTP 200."""
        try:
            r = httpx.get(self.base_url + self.adapter.health_path, headers=self.headers, timeout=timeout)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def wait_healthy(self, timeout_s: float, on_tick: Callable[[float], None] | None = None) -> float:
        """Poll health until it answers; return seconds since launch. Raise ``EngineError`` on death or timeout.

        Every ``HEALTH_POLL_FAST_S`` for the first ``HEALTH_POLL_FAST_FOR_S`` (a server that is up in under a
        second, as the test suite's stand-ins are, is not kept waiting a whole second), then every second.
        """
        deadline = self.started_at + timeout_s
        while True:
            if not self.alive():
                raise EngineError(self.start_failure())
            if self.healthy():
                return time.monotonic() - self.started_at
            now = time.monotonic()
            if on_tick:
                on_tick(now - self.started_at)
            if now >= deadline:
                raise EngineError(f"no health at {self.base_url}{self.adapter.health_path} within {timeout_s:.0f} s")
            time.sleep(HEALTH_POLL_FAST_S if now - self.started_at < HEALTH_POLL_FAST_FOR_S else 1.0)

    def stop(self, grace_s: float = 20.0) -> int:
        """Stop the process group we started (SIGINT, then SIGTERM, then SIGKILL), by its id only.

        Whatever of the group outlives its leader (an EngineCore whose API server was killed) is ended
        too; returns how many such leftover processes there were.
        """
        p = self.process
        if p is None:
            return 0
        clean = False
        if p.poll() is None:
            for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(p.pid, sig)
                    os.killpg(p.pid, signal.SIGCONT)  # a stopped (hung) engine gets the signal too
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=wait)
                    clean = sig != signal.SIGKILL
                    break
                except subprocess.TimeoutExpired:
                    continue
        # the group id stays the leader's pid while any member lives: Linux does not hand it out again
        return end_group(p.pid, grace_s=10.0, settle_s=5.0 if clean else 0.0)


_PR_SET_PDEATHSIG = 1
if sys.platform.startswith("linux"):
    import ctypes

    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the forked child must not import
else:  # pragma: no cover - the engines run on Linux
    _prctl = None


def _own_session_dying_with_parent(parent: int) -> Callable[[], None]:
    """For the child before exec: a new session, SIGINT back to its default, and SIGTERM when the starter dies.

    An engine outlives a killed notebook kernel or ``playbook run`` otherwise (it has its own
    session so that ``stop`` can end its whole group), holding the GPU's memory. SIGINT is ``stop``'s
    graceful signal: a run started with SIGINT ignored (``nohup … &``, a background job of a
    non-interactive shell, some CI runners) would hand that on through exec, and every stop would wait its
    20 s grace for nothing before SIGTERM. The engine's own session keeps a terminal's Ctrl-C away from it.
    """

    def setup() -> None:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os._exit(1)

    return setup


def record_for_run(run_dir: Path | None, pgid: int | None, what: str) -> None:
    """Record an engine's group (``pgid``) and the caller's own (a kernel: guidellm's workers) for the run."""
    if run_dir is None:
        return
    owner = live_holder(run_dir)
    if pgid is not None:
        record_group(run_dir, pgid, what, owner)
    record_own_group(run_dir, "notebook kernel and its load-generator workers", owner)


def start_process(
    cmd: list[str],
    env: dict[str, str],
    log_path: Path,
    base_url: str,
    adapter: EngineAdapter,
    run_dir: Path | None = None,
) -> ServerHandle:
    """Start ``cmd`` in its own process group with stdout/stderr to ``log_path``.

    The process gets SIGTERM if the one that started it dies (see ``_own_session_dying_with_parent``);
    with ``run_dir``, its group is recorded for the run (``record_for_run``).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **env}
    if "PYTHONPATH" in env and os.environ.get("PYTHONPATH"):
        full_env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + os.environ["PYTHONPATH"]
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
    offset = log.seek(0, os.SEEK_END)
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            preexec_fn=_own_session_dying_with_parent(os.getpid()),
        )
    except OSError as err:
        log.write(f"could not start {cmd[0]}: {err}\n".encode())
        raise EngineError(f"could not start {cmd[0]}: {err.strerror or err}") from None
    finally:
        log.close()
    record_for_run(run_dir, proc.pid, f"engine {adapter.name}")
    return ServerHandle(base_url=base_url, adapter=adapter, log_path=log_path, process=proc, log_offset=offset)
