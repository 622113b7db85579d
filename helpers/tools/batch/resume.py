"""What a batch does with each cell's run folder when it starts: keep it, resume it, or start it.

A cell is finished when its folder has ``summary.json`` and ``report.html`` and the ``config.yaml`` that
``playbook run`` archived there equals the cell's config now (both as ``public_dict`` gives them): it is kept.
A folder without both files is resumed: the cell runs again with the same run id, and ``playbook run``
keeps every benchmark point already measured. A folder whose config differs is moved aside into the
batch's ``replaced/`` folder (not deleted) and the cell starts afresh. A cell whose previous run is still
stopping on this host (a batch killed a moment ago) is waited for before it resumes.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml

from helpers.core.config import PlaybookConfig, public_dict
from helpers.run.lock import LOCK_NAME, pid_alive, read_holder

Action = Literal["keep", "resume", "new", "replace"]


@dataclass(frozen=True)
class Decision:
    """What to do with one cell's run folder, and why, in words."""

    action: Action
    why: str


def archived_config(run_dir: Path) -> dict | None:
    """The config a run folder was last run with (its ``config.yaml``), or None."""
    p = Path(run_dir) / "config.yaml"
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) if p.is_file() else None
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def decide(run_dir: Path, cfg: PlaybookConfig) -> Decision:
    """The decision for a cell whose config is ``cfg`` and whose run folder is ``run_dir``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return Decision("new", "no run folder yet")
    before = archived_config(run_dir)
    if before is not None and before != public_dict(cfg):
        return Decision("replace", "its config changed since the folder was written")
    finished = (run_dir / "summary.json").is_file() and (run_dir / "report.html").is_file()
    if finished and before is not None:
        return Decision("keep", "finished earlier with the same config")
    return Decision("resume", "half done: measured points are kept, the rest is run")


def move_aside(run_dir: Path, replaced_dir: Path, now: datetime | None = None) -> Path:
    """Move a stale run folder into ``replaced_dir`` (as ``<run id>-<UTC time>``); return where it went."""
    now = now or datetime.now(UTC)
    replaced_dir.mkdir(parents=True, exist_ok=True)
    target = replaced_dir / f"{Path(run_dir).name}-{now:%Y%m%d-%H%M%S}"
    n = 1
    while target.exists():
        n += 1
        target = replaced_dir / f"{Path(run_dir).name}-{now:%Y%m%d-%H%M%S}-{n}"
    Path(run_dir).rename(target)
    return target


def wait_for_previous_run(
    run_dir: Path, timeout_s: float = 180, say: Callable[[str], None] = print, sleep: float = 1.0
) -> bool:
    """Wait while the process in ``run_dir``'s run lock is alive on this host; False if it outlived ``timeout_s``.

    After a batch is killed its cell gets SIGTERM and stops its kernel and engines, which takes a while;
    resuming the cell before that would be refused by the run lock.
    """
    holder = read_holder(Path(run_dir) / LOCK_NAME)
    if holder is None or holder.pid is None or holder.host != socket.gethostname() or not pid_alive(holder.pid):
        return True
    say(f"waiting for the previous run of {Path(run_dir).name} ({holder.describe()}) to stop")
    deadline = time.monotonic() + timeout_s
    while pid_alive(holder.pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(sleep)
    return True
