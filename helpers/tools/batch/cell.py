"""One cell of a batch: a normal ``playbook run`` in a child process, with its own log and run folder.

``run_cell_process`` starts ``python -m helpers.tools.batch.cell`` (this module's ``main``), which calls
``helpers.tools.runner.run_playbook`` with the cell's config, run id and reports folder; re-running a run id
resumes at its last finished benchmark point. The child has its own session and gets SIGTERM when the batch
process dies (even by SIGKILL), and SIGTERM stops it like ``playbook run`` stops: the notebook kernel and the
engines it started end with it, measured points stay. Every executor runs cells through this function, so
a cell on a Ray worker runs exactly as a cell here.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from helpers.core.errors import PlaybookError
from helpers.core.paths import REPO_ROOT
from helpers.tools.runner import run_playbook

ERROR_PREFIX = "playbook: error: "
_PR_SET_PDEATHSIG = 1


def _child_setup(parent: int) -> Callable[[], None]:
    """For the cell process before exec: its own session, and SIGTERM when ``parent`` dies."""
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

    def setup() -> None:
        os.setsid()
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the batch died before the signal was armed
                os._exit(1)

    return setup


def failure_reason(log_text: str, rc: int) -> str:
    """The reason a cell process failed, in one line: its ``playbook: error:`` line, else its last line."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    errors = [ln[len(ERROR_PREFIX) :] for ln in lines if ln.startswith(ERROR_PREFIX)]
    if errors:
        return errors[-1][:500]
    if rc in (-signal.SIGTERM, -signal.SIGKILL, 130):
        return f"stopped (exit {rc}); measured points are kept and the next batch run resumes them"
    tail = lines[-1][:300] if lines else "no output"
    return f"exit {rc}: {tail}"


def run_cell_process(
    config_path: Path, run_id: str, reports_dir: Path, log_path: Path
) -> tuple[int, str | None, float]:
    """Run one cell to its end; return (exit status, reason when it failed, seconds).

    Ctrl-C or SIGTERM of the batch stops the cell too (by the pid started here) before it propagates.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "helpers.tools.batch.cell", str(config_path), run_id, str(reports_dir)]
    t0 = time.monotonic()
    with open(log_path, "ab") as log:
        log.write(f"[batch] {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, preexec_fn=_child_setup(os.getpid())
        )
        try:
            rc = proc.wait()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    seconds = time.monotonic() - t0
    if rc == 0:
        return 0, None, seconds
    return rc, failure_reason(log_path.read_text(encoding="utf-8", errors="replace"), rc), seconds


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.tools.batch.cell CONFIG RUN_ID REPORTS_DIR``: run one cell (what a batch starts)."""
    p = argparse.ArgumentParser(prog="helpers.tools.batch.cell", description="Run one batch cell.")
    p.add_argument("config")
    p.add_argument("run_id")
    p.add_argument("reports_dir")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        report = run_playbook(args.config, run_id=args.run_id, reports_dir=Path(args.reports_dir), log_output=True)
    except PlaybookError as err:
        print(f"{ERROR_PREFIX}{err}", flush=True)
        return 2
    except KeyboardInterrupt:
        print("[cell] stopped; points measured so far are kept", flush=True)
        return 130
    print(f"[cell] report: {report}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
