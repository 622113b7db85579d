"""A tiny real filesystem for full-disk tests: a ``tmpfs`` of a few KiB mounted on a test folder.

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the test is skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tiny_tmpfs(mount_point: Path, size: str = "64k") -> Iterator[Path]:
    """Mount a ``tmpfs`` of ``size`` on ``mount_point`` for the ``with`` block (skip the test if not permitted)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {res.stderr.strip() or res.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)


def fill(folder: Path, name: str = ".filler") -> Path:
    """Fill the filesystem of ``folder`` to the last byte with one file; return that file."""
    path = folder / name
    chunk = b"\0" * 4096
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:  # the last partial block
            while True:
                f.write(b"\0")
        except OSError:
            pass
    return path
