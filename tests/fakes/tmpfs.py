"""A tiny real filesystem for full-disk tests: a ``tmpfs`` of a few KiB mounted on a test folder.

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the test is skipped with the reason
(``tiny_tmpfs``), or the caller is told why (``mount_tmpfs``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def mount_tmpfs(mount_point: Path, size: str = "64k") -> str | None:
    """Mount a ``tmpfs`` of ``size`` on ``mount_point``; None on success, else why it could not be mounted."""
    mount_point.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if res.returncode == 0 else f"mounting a tmpfs is not permitted here: {res.stderr.strip()}"


def unmount(mount_point: Path) -> None:
    """Unmount (lazily: a process may still hold a file there)."""
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)


@contextmanager
def tiny_tmpfs(mount_point: Path, size: str = "64k") -> Iterator[Path]:
    """Mount a ``tmpfs`` of ``size`` on ``mount_point`` for the ``with`` block (skip the test if not permitted)."""
    why = mount_tmpfs(mount_point, size)
    if why:
        pytest.skip(why)
    try:
        yield mount_point
    finally:
        unmount(mount_point)


def fill(folder: Path, name: str = ".filler") -> Path:
    """Fill the filesystem of ``folder`` to the last byte with one file; return that file."""
    path = folder / name
    with open(path, "wb", buffering=0) as f:
        for chunk in (b"\0" * 4096, b"\0"):  # whole blocks, then the last partial one
            try:
                while True:
                    f.write(chunk)
            except OSError:
                pass
    return path
