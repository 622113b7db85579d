"""The run lock: one ``playbook run`` per run folder at a time.

The lock is ``<run folder>/run.lock``, held with ``flock`` for as long as the run lives and holding
the holder's pid, host, start time and command line as JSON. The kernel drops an ``flock`` when its
process dies, however it dies (``kill -9`` included), so a lock file whose ``flock`` can be taken
belongs to a run that is gone: it is taken over, and the takeover is said on stderr. A lock that is
held refuses at once, naming its holder. A lock file left by a run on another host is not taken
over (its pid cannot be checked from here): the message says to delete it if that run is gone.
Taking over, the new run first ends the process groups the dead run recorded and left running
(``helpers.run.processes.reap``: its engines, its kernels' load-generator workers) and says so.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from helpers.core.errors import PlaybookError
from helpers.run.processes import forget, reap

LOCK_NAME = "run.lock"
"""File name of the lock in the run folder."""

_READ_RETRIES = 20
"""Attempts (10 ms apart) to read a holder's record while it is being written."""


class RunLockedError(PlaybookError):
    """The run folder is in use by another ``playbook run`` (or its lock cannot be taken)."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run lock."""

    pid: int | None
    host: str | None
    started: str | None
    argv: list[str] | None = None

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        """Parse a lock file's record; None when it is empty or not a record."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        pid = data.get("pid")
        argv = data.get("argv")
        return cls(
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            host=str(data["host"]) if data.get("host") is not None else None,
            started=str(data["started"]) if data.get("started") is not None else None,
            argv=[str(a) for a in argv] if isinstance(argv, list) else None,
        )

    def describe(self) -> str:
        """``pid 123 on host h, started 2026-...`` (unknown parts say so)."""
        return f"pid {self.pid or '?'} on host {self.host or '?'}, started {self.started or '?'}"


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_holder(path: Path) -> Holder | None:
    """The record in a lock file, or None when there is none (missing, empty, unreadable)."""
    try:
        return Holder.from_text(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def live_holder(run_dir: str | Path) -> int | None:
    """The pid of the live process on this host whose record is in ``run_dir``'s lock, if any."""
    holder = read_holder(Path(run_dir) / LOCK_NAME)
    if holder is None or holder.pid is None or holder.host not in (None, socket.gethostname()):
        return None
    return holder.pid if pid_alive(holder.pid) else None


def _record() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }


class RunLock:
    """``flock``-held ``run.lock`` in a run folder; use as a context manager or ``acquire``/``release``."""

    def __init__(self, run_dir: str | Path, stderr: TextIO | None = None):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self.stderr = stderr
        self.took_over: Holder | None = None
        self.ended: list[str] = []  # the dead run's process groups this takeover ended
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def _say(self, msg: str) -> None:
        print(f"playbook: {msg}", file=self.stderr or sys.stderr, flush=True)

    def _holder_of_held_lock(self) -> Holder | None:
        """The record of a lock someone else holds, waiting briefly for one being written."""
        for _ in range(_READ_RETRIES):
            holder = read_holder(self.path)
            if holder is not None and holder.pid is not None:
                return holder
            time.sleep(0.01)
        return read_holder(self.path)

    def _open_locked(self) -> int:
        """Open ``run.lock`` and take its ``flock``; the file is the one at the path (not one just removed)."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise RunLockedError(f"{self.path}: cannot open the run lock ({err.strerror or err})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = self._holder_of_held_lock()
                who = holder.describe() if holder else "a process whose record is unreadable"
                raise RunLockedError(
                    f"{self.path}: run folder in use by another playbook run ({who}); "
                    "wait for it or use another --run-id"
                ) from None
            except OSError as err:
                os.close(fd)
                raise RunLockedError(f"{self.path}: cannot lock the run folder ({err.strerror or err})") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # the holder removed the file after we opened it: lock the new one

    def acquire(self) -> RunLock:
        """Take the lock; raise ``RunLockedError`` naming the holder when another live run has it.

        A lock file left by a dead run on this host is taken over and said on stderr; one left by a
        run on another host is refused (its pid cannot be checked from here).
        """
        if self._fd is not None:
            return self
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunLockedError(f"{self.run_dir}: cannot create the run folder ({err.strerror or err})") from None
        fd = self._open_locked()
        try:
            previous = Holder.from_text(os.read(fd, 1 << 16).decode("utf-8", errors="replace"))
            host = socket.gethostname()
            if previous is not None and previous.host not in (None, host):
                raise RunLockedError(
                    f"{self.path}: run folder locked by a run on another host ({previous.describe()}); "
                    "delete the file if that run is gone"
                )
            if previous is not None and previous.pid is not None and previous.pid != os.getpid():
                state = "still exists but does not hold the lock" if pid_alive(previous.pid) else "is gone"
                self._say(f"taking over the stale run lock {self.path} of {previous.describe()} (that process {state})")
                self.took_over = previous
                self.ended = reap(self.run_dir, previous.pid)
                forget(self.run_dir, previous.pid)
                if self.ended:
                    self._say(f"ended what that run left running: {'; '.join(self.ended)}")
            data = json.dumps(_record()).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        except OSError as err:
            os.close(fd)
            raise RunLockedError(f"{self.path}: cannot write the run lock ({err.strerror or err})") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        """Remove the lock file and drop the lock (a no-op when not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                os.unlink(self.path)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
