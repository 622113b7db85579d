"""Atomic file writes: a file is either its old self or completely new, never half written.

The data goes to a temporary file in the destination's own folder (so the rename stays on one
filesystem), is flushed and fsynced, then ``os.replace``-d over the destination, and the folder is
fsynced so the rename itself survives a crash. When anything fails — a full disk (``ENOSPC``), a
quota, a read-only filesystem — the temporary file is removed and ``AtomicWriteError`` names the
destination; whatever was there before is left untouched.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from helpers.core.errors import PlaybookError


class AtomicWriteError(PlaybookError):
    """A file of the run folder could not be written (full disk, no permission...); the old file is kept."""


TMP_SUFFIX = ".tmp"
"""Suffix of the temporary files (``.<name>.<random>.tmp`` beside the destination)."""


def _reason(err: OSError) -> str:
    return err.strerror or type(err).__name__


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some filesystems refuse fsync on folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    """A fresh temporary name beside ``path`` (hidden, unique per call)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; raise ``AtomicWriteError`` naming ``path`` on failure."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise AtomicWriteError(f"{path}: cannot create its folder ({_reason(err)})") from None
    tmp = temp_path(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
    except OSError as err:
        raise AtomicWriteError(f"{path}: cannot write ({_reason(err)}); the previous file, if any, is kept") from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise AtomicWriteError(f"{path}: cannot write ({_reason(err)}); the previous file, if any, is kept") from None
    _fsync_dir(path.parent)
    return path


def write_text_atomic(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see ``write_bytes_atomic``)."""
    return write_bytes_atomic(path, text.encode(encoding))


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically (values JSON cannot hold become strings)."""
    return write_text_atomic(path, json.dumps(data, indent=2, default=str))
