"""The process groups a run started, recorded in its run folder so that none outlives the run.

An engine runs in a session of its own (its API server, EngineCore and workers share one process
group); a notebook kernel is a session leader too (jupyter_client starts it so), and guidellm's worker
processes are in the kernel's group. Each such group is recorded in ``<run folder>/run.pids``, one
JSON line: its id (the leader's pid), the leader's start time (``/proc``, clock ticks since boot),
the boot id, what it is, and the ``owner``: the pid of the ``playbook run`` holding the run lock.

``reap`` ends an owner's groups that still have processes (SIGTERM, SIGCONT for a stopped one, then
SIGKILL), by group id only, never by name. A group whose leader still exists with another start
time (the pid was reused) or that was recorded before the last boot is left alone; a group whose
leader is gone can only be the recorded one (Linux does not hand out a pid that is still some
group's id). Three places reap:

* ``Watchdog``: ``playbook run`` starts ``python -m helpers.run.processes --watch PID --run-dir D``,
  which polls its parent and reaps the moment it is gone, ``kill -9`` included, then exits; on a
  normal exit the run reaps its own groups and stops the watchdog.
* ``RunLock.acquire`` (``helpers.run.lock``), taking over the stale lock of a dead run, reaps that
  run's groups (in case its watchdog died too).
* ``end_group`` is also what ``ServerHandle.stop`` uses for what is left of an engine whose API
  server died (killed by pid, its EngineCore lives on otherwise).

A watchdog, not ``PR_SET_PDEATHSIG``: the death signal reaches one process, the one started, and
fires when the *thread* that started it ends; the engine's EngineCore (a child of the API server)
and guidellm's workers (spawned by multiprocessing inside guidellm, no hook to set it) are not
covered. A watchdog ends whole groups, whoever started their members.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

PIDS_NAME = "run.pids"
"""File name of the recorded process groups in the run folder."""

_PROC = Path("/proc")
_POLL_S = 0.5


@dataclass(frozen=True)
class Group:
    """One recorded process group."""

    pgid: int
    start: int | None
    boot: str | None
    what: str
    owner: int

    def describe(self, n: int) -> str:
        """``engine vllm-cpu (group 123, 3 processes)``."""
        return f"{self.what} (group {self.pgid}, {n} process{'es' if n != 1 else ''})"


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None when there is no such process."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def boot_id() -> str | None:
    """The id of the current boot (``/proc/sys/kernel/random/boot_id``), or None off Linux."""
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (zombies do not)."""
    out = []
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return out


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_empty(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while members(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def end_group(pgid: int, grace_s: float = 10.0, settle_s: float = 0.0) -> int:
    """End what still runs of group ``pgid`` (a group this run started); return how many processes it had.

    Waits ``settle_s`` for the group to exit on its own (after its leader's own clean exit), then
    SIGTERM (and SIGCONT, so that a stopped process gets it), ``grace_s``, SIGKILL.
    """
    if pgid <= 1 or pgid == os.getpgrp():
        return 0
    found = len(members(pgid))
    if not found or (settle_s > 0 and _wait_empty(pgid, settle_s)):
        return 0
    for sig in (signal.SIGTERM, signal.SIGCONT):
        _signal_group(pgid, sig)
    if not _wait_empty(pgid, grace_s):
        _signal_group(pgid, signal.SIGKILL)
        _wait_empty(pgid, 5.0)
    return found


def record_group(run_dir: str | Path, pgid: int, what: str, owner: int | None) -> bool:
    """Record group ``pgid`` as started by the ``playbook run`` ``owner``; False when not recorded.

    ``owner`` is the pid holding the run lock (``helpers.run.lock.live_holder``). Without one (a
    notebook run by hand, a test) nothing is recorded: the engine's own death signal
    (``helpers.launchers.server``) is what ends it with its kernel. The owner's own group never is.
    """
    if owner is None or pgid <= 1:
        return False
    try:
        if pgid == os.getpgid(owner):
            return False
    except ProcessLookupError:
        return False
    group = Group(pgid=pgid, start=start_ticks(pgid), boot=boot_id(), what=what, owner=owner)
    line = (json.dumps(asdict(group)) + "\n").encode()
    try:
        fd = os.open(Path(run_dir) / PIDS_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        os.write(fd, line)  # one short append: whole lines even when two processes record at once
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def record_own_group(run_dir: str | Path, what: str, owner: int | None) -> bool:
    """Record the caller's own group when it leads it (a notebook kernel does): guidellm's workers are in it."""
    if os.getpgrp() != os.getpid() or any(g.pgid == os.getpid() for g in recorded(run_dir)):
        return False
    return record_group(run_dir, os.getpid(), what, owner)


def recorded(run_dir: str | Path) -> list[Group]:
    """Every group recorded in ``run_dir`` (lines that do not parse are ignored)."""
    try:
        lines = (Path(run_dir) / PIDS_NAME).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in lines:
        try:
            out.append(Group(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return out


def _ours(group: Group) -> bool:
    """Whether the group id still stands for the group recorded (same boot, leader gone or the same one)."""
    if group.boot is not None and group.boot != boot_id():
        return False
    now = start_ticks(group.pgid)
    return now is None or group.start is None or now == group.start


def _live(run_dir: Path, owner: int) -> Iterator[tuple[Group, int]]:
    for group in recorded(run_dir):
        if group.owner == owner and _ours(group):
            n = len(members(group.pgid))
            if n:
                yield group, n


def reap(run_dir: str | Path, owner: int, grace_s: float = 10.0) -> list[str]:
    """End every group ``owner`` recorded in ``run_dir`` that still runs; return what was ended, in words."""
    run_dir = Path(run_dir)
    ended = []
    for group, n in list(_live(run_dir, owner)):
        _signal_group(group.pgid, signal.SIGTERM)
        _signal_group(group.pgid, signal.SIGCONT)
        ended.append((group, n))
    deadline = time.monotonic() + grace_s
    for group, _n in ended:
        if not _wait_empty(group.pgid, max(0.0, deadline - time.monotonic())):
            _signal_group(group.pgid, signal.SIGKILL)
            _wait_empty(group.pgid, 5.0)
    return [group.describe(n) for group, n in ended]


def forget(run_dir: str | Path, owner: int) -> None:
    """Drop ``owner``'s records from ``run_dir`` (after they were reaped); the file goes when none is left."""
    path = Path(run_dir) / PIDS_NAME
    keep = [g for g in recorded(run_dir) if g.owner != owner]
    try:
        if not keep:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(json.dumps(asdict(g)) + "\n" for g in keep), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a record left behind is reaped again, harmlessly, at the next takeover


class Watchdog:
    """Context manager of ``playbook run``: a watchdog process reaps this run's groups if the run dies.

    On a normal exit (exceptions and Ctrl-C included) the run reaps its own groups here and stops the
    watchdog; ``kill -9`` leaves that to the watchdog, which notices within half a second.
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.proc: subprocess.Popen | None = None
        self.ended: list[str] = []

    def __enter__(self) -> Watchdog:
        cmd = [sys.executable, "-m", "helpers.run.processes", "--watch", str(os.getpid()), "--run-dir"]
        repo = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(
            [*cmd, str(self.run_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C to the terminal's group does not reach it before it is needed
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended = reap(self.run_dir, os.getpid())
        forget(self.run_dir, os.getpid())
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.ended:
            print(f"playbook: ended what this run left running: {'; '.join(self.ended)}", file=sys.stderr)


def watch(parent: int, run_dir: Path) -> list[str]:
    """Poll until ``parent`` is gone (this process was re-parented), then reap its groups; return them.

    Reaps until a pass finds nothing, for an engine that a dying kernel was just starting.
    """
    while os.getppid() == parent:
        time.sleep(_POLL_S)
    ended: list[str] = []
    for _ in range(5):
        now = reap(run_dir, parent)
        if not now:
            break
        ended += now
        time.sleep(1.0)
    forget(run_dir, parent)
    return ended


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.run.processes --watch PID --run-dir DIR``: the watchdog of one run."""
    ap = argparse.ArgumentParser(description="End a dead playbook run's process groups")
    ap.add_argument("--watch", type=int, required=True, help="pid of the playbook run (this process's parent)")
    ap.add_argument("--run-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ended = watch(args.watch, args.run_dir)
    if ended:
        try:
            print(f"playbook watchdog: the run (pid {args.watch}) is gone; ended: {'; '.join(ended)}", file=sys.stderr)
        except OSError:  # nobody reads the dead run's stderr any more
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
