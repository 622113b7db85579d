"""A run's time limit (``playbook run --time-limit S``): start no engine configuration that cannot finish in time.

A GPU slot of fixed length (a batch scheduler's wall limit, a lent machine's ten-minute calls) ends a run
wherever it is. Killed mid-engine, the run keeps its points, but the engine's cold start, its grid and the
probe it was cut in are spent again by the resume: on the H200 (``h200-20261207-chat-8b-pair``, 2026-12-07)
SGLang's cold start, grid point and first probe, about 3 GPU-minutes of 16.6, were measured twice. With a
limit, step 5 asks before each configuration it would start whether its least expected time
(``helpers.benchmark.plan.least_seconds``) still fits before the deadline; if not, it starts nothing more,
leaves ``logs/stopped.json`` saying why, and the run stops there (``TimeLimitReached``: the CLI exits 75,
"resume with --run-id"). The deadline reaches the notebooks' kernels as ``DEADLINE_ENV`` (seconds since the
epoch), set by ``helpers.tools.runner``. A configuration already started stops between two capacity probes
when the next would not end before the deadline (``helpers.benchmark.probe_size.ensure_time``): on an H100
(``h100-20261207-chat-8b-start-grid``) the hard limit ended a call as its fifteenth probe began, with the
client's cancelled tasks as the last words. The caller's own hard limit (``timeout``) still ends a run that
overruns anything else (a cold start, a grid point, a cross-check).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from helpers.core.errors import TimeLimitReached

DEADLINE_ENV = "PLAYBOOK_DEADLINE"
"""Seconds since the epoch by which the run should be done; unset: no limit."""

STOP_FILE = Path("logs") / "stopped.json"
"""Where step 5 says why it stopped for the time limit; removed when the next attempt of the run starts."""


def deadline_from(time_limit_s: float | None, now: float | None = None) -> str | None:
    """``DEADLINE_ENV``'s value for a limit of ``time_limit_s`` seconds from ``now``; None without a limit."""
    if time_limit_s is None:
        return None
    return f"{(time.time() if now is None else now) + time_limit_s:.3f}"


def seconds_left(now: float | None = None) -> float | None:
    """Seconds until the run's deadline (negative once past); None when the run has no limit."""
    raw = os.environ.get(DEADLINE_ENV)
    if not raw:
        return None
    return float(raw) - (time.time() if now is None else now)


def stop_for_time(run_dir: Path, label: str, need_s: float, left_s: float, what: str) -> TimeLimitReached:
    """Record (``STOP_FILE``) and return the stop before ``label``: it needs ``need_s``, ``left_s`` are left."""
    text = (
        f"stopped before {label!r} for the time limit: it needs at least {need_s:,.0f} s ({what}) and "
        f"{max(0.0, left_s):,.0f} s are left"
    )
    path = Path(run_dir) / STOP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"label": label, "need_s": need_s, "left_s": left_s, "reason": text}), "utf-8")
    return TimeLimitReached(text)


def stop_unless_fits(
    run_dir: Path, label: str, need: Callable[[], tuple[float, str]], say: Callable[[str], None]
) -> None:
    """Under a limit, raise the recorded stop before ``label`` when ``need()`` (seconds, what) no longer fits.

    ``need`` is asked only when the run has a limit; the stop is said (``say``) before it is raised.
    """
    left = seconds_left()
    if left is None:
        return
    need_s, what = need()
    if need_s > left:
        stop = stop_for_time(run_dir, label, need_s, left, what)
        say(f"{label}: {stop}; resume with the same --run-id")
        raise stop


def stopped(run_dir: Path) -> str | None:
    """Why step 5 stopped this attempt for the time limit (``STOP_FILE``), or None when it did not."""
    path = Path(run_dir) / STOP_FILE
    if not path.is_file():
        return None
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["reason"])
    except (ValueError, KeyError, TypeError):
        return "stopped for the time limit"


def clear_stop(run_dir: Path) -> None:
    """Forget an earlier attempt's stop (a new attempt starts)."""
    (Path(run_dir) / STOP_FILE).unlink(missing_ok=True)
