"""Packing a staged folder: ``tar | xz``, splitting into parts, and checking parts against a manifest."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path

from helpers.core.errors import BundleError
from helpers.tools.bundle.manifest import FileInfo, read_manifest

_CHUNK = 4 * 2**20


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def tree_bytes(folder: Path) -> int:
    """Return the bytes of all regular files under ``folder`` (links not followed)."""
    return sum(p.lstat().st_size for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink())


def pack(stage: Path, members: list[str], archive: Path, level: int = 9, threads: int = 2) -> FileInfo:
    """Write ``tar -C stage -cf - MEMBERS | xz -LEVEL -T THREADS`` to ``archive``; return its FileInfo."""
    tar_cmd = ["tar", "-C", str(stage), "--sort=name", "--owner=0", "--group=0", "--numeric-owner"]
    tar_cmd += ["-cf", "-", "--", *members]
    xz_cmd = ["xz", f"-{level}", f"-T{threads}", "-c"]
    with open(archive, "wb") as out:
        tar = subprocess.Popen(tar_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        xz = subprocess.Popen(xz_cmd, stdin=tar.stdout, stdout=out, stderr=subprocess.PIPE)
        assert tar.stdout is not None
        tar.stdout.close()
        xz_err = xz.communicate()[1]
        tar_err = tar.communicate()[1]
    if tar.returncode != 0 or xz.returncode != 0:
        msg = (tar_err + xz_err).decode(errors="replace").strip()
        raise BundleError(f"packing {stage} into {archive} failed: {msg}")
    return FileInfo(name=archive.name, size=archive.stat().st_size, sha256=sha256_file(archive))


def split_file(path: Path, part_size: int, out_dir: Path | None = None) -> list[FileInfo]:
    """Cut ``path`` into ``PATH.000``, ``PATH.001``, ... of ``part_size`` bytes (the last smaller)."""
    if part_size <= 0:
        raise BundleError(f"part size must be positive, got {part_size}")
    out_dir = Path(out_dir or Path(path).parent)
    parts: list[FileInfo] = []
    with open(path, "rb") as src:
        index = 0
        while True:
            name = f"{Path(path).name}.{index:03d}"
            digest, written = hashlib.sha256(), 0
            with open(out_dir / name, "wb") as dst:
                while written < part_size and (block := src.read(min(_CHUNK, part_size - written))):
                    dst.write(block)
                    digest.update(block)
                    written += len(block)
            if written == 0 and index > 0:
                (out_dir / name).unlink()
                break
            parts.append(FileInfo(name=name, size=written, sha256=digest.hexdigest()))
            index += 1
            if written < part_size:
                break
    return parts


def iter_parts(folder: Path, parts: Iterable[FileInfo]) -> Iterable[bytes]:
    """Yield the bytes of the parts in order, in blocks."""
    for part in parts:
        with open(Path(folder) / part.name, "rb") as fh:
            while block := fh.read(_CHUNK):
                yield block


def join_parts(manifest_path: Path, out: Path) -> Path:
    """Check the parts of a bundle, then concatenate them into the archive file ``out``."""
    verify_parts(manifest_path)
    manifest_path = Path(manifest_path)
    folder = manifest_path if manifest_path.is_dir() else manifest_path.parent
    with open(out, "wb") as dst:
        for block in iter_parts(folder, read_manifest(manifest_path).parts):
            dst.write(block)
    return Path(out)


def verify_parts(manifest_path: Path) -> None:
    """Check every part named in the manifest (present, size, sha256) and the whole archive's sha256.

    Raises BundleError naming the first missing or damaged part.
    """
    manifest_path = Path(manifest_path)
    folder = manifest_path if manifest_path.is_dir() else manifest_path.parent
    manifest = read_manifest(manifest_path)
    if not manifest.parts:
        raise BundleError(f"{manifest_path}: the manifest lists no parts")
    for part in manifest.parts:
        path = folder / part.name
        if not path.is_file():
            raise BundleError(f"bundle {manifest.name}: part {part.name} is missing (expected in {folder})")
        size = path.stat().st_size
        if size != part.size:
            raise BundleError(
                f"bundle {manifest.name}: part {part.name} has {size} bytes, the manifest says {part.size}"
            )
        got = sha256_file(path)
        if got != part.sha256:
            raise BundleError(
                f"bundle {manifest.name}: part {part.name} is damaged: sha256 {got}, expected {part.sha256}"
            )
    whole = hashlib.sha256()
    for block in iter_parts(folder, manifest.parts):
        whole.update(block)
    if whole.hexdigest() != manifest.archive.sha256:
        raise BundleError(
            f"bundle {manifest.name}: the parts join to sha256 {whole.hexdigest()}, "
            f"the manifest's archive {manifest.archive.name} has {manifest.archive.sha256}"
        )
