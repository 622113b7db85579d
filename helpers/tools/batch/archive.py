"""A run folder as tar.gz bytes and back: how a cell's folder travels between a remote worker and reports/.

The driver sends a half-done cell's folder to the worker (so it resumes there) and unpacks the folder the
worker sends back. ``run.lock`` is left out both ways: it names the host and pid of the run that held it,
and a lock left by another host would refuse the next local run of that folder.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from pathlib import Path

LEFT_OUT = {"run.lock"}
"""File names that never travel with a run folder."""


def pack_run_folder(run_dir: Path) -> bytes:
    """The contents of ``run_dir`` as tar.gz bytes (paths relative to the folder)."""
    run_dir = Path(run_dir)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(run_dir.rglob("*")):
            if p.name in LEFT_OUT or not (p.is_file() or p.is_dir()) or p.is_symlink():
                continue
            tar.add(p, arcname=str(p.relative_to(run_dir)), recursive=False)
    return buf.getvalue()


def unpack_run_folder(data: bytes, run_dir: Path) -> Path:
    """Replace ``run_dir`` with the folder packed in ``data``; return ``run_dir``.

    The archive is unpacked beside the target first (tarfile's ``data`` filter: no absolute paths, links or
    paths leaving the folder), then swapped in, so a bad archive never leaves half a folder.
    """
    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}.", dir=run_dir.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(staging, filter="data")
        old = run_dir.with_name(f".{run_dir.name}.old")
        if old.exists():
            shutil.rmtree(old)
        if run_dir.exists():
            run_dir.rename(old)
        staging.rename(run_dir)
        if old.exists():
            shutil.rmtree(old)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return run_dir
