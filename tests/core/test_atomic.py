"""Atomic writes: never a truncated file, on a real full filesystem and on injected write failures."""

import errno
import json
import os
from pathlib import Path

import pytest
from fakes.tmpfs import fill, tiny_tmpfs

from helpers.core import atomic
from helpers.core.atomic import AtomicWriteError, write_bytes_atomic, write_json_atomic, write_text_atomic
from helpers.core.errors import PlaybookError
from helpers.run.records import Point, save_point


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(atomic.TMP_SUFFIX))


def point(c: int = 1) -> Point:
    return Point(
        label="e", engine="vllm", concurrency=c, requests=4, duration_s=1.0, output_tok_s=1, total_tok_s=2, req_s=4
    )


def test_write_replaces_and_leaves_no_temp_file(tmp_path):
    p = tmp_path / "sub" / "a.json"
    write_json_atomic(p, {"x": 1})
    write_json_atomic(p, {"x": 2, "when": Path("/p")})
    assert json.loads(p.read_text()) == {"x": 2, "when": "/p"}
    assert leftovers(p.parent) == []


def test_json_bytes_are_what_the_records_always_wrote(tmp_path):
    data = {"a": [1, 2], "b": {"c": None}}
    write_json_atomic(tmp_path / "a.json", data)
    assert (tmp_path / "a.json").read_text(encoding="utf-8") == json.dumps(data, indent=2, default=str)


def test_new_files_get_the_umask_mode_not_a_private_one(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "m.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "m.txt").stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("victim", ["write", "fsync", "replace"])
def test_an_injected_failure_keeps_the_old_file_and_names_the_path(tmp_path, monkeypatch, victim):
    p = tmp_path / "point.json"
    p.write_text("old", encoding="utf-8")

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, victim, no_space)
    with pytest.raises(AtomicWriteError) as err:
        write_text_atomic(p, "new content")
    monkeypatch.undo()
    msg = str(err.value)
    assert isinstance(err.value, PlaybookError)
    assert msg.startswith(f"{p}: cannot write (No space left on device)") and "\n" not in msg
    assert p.read_text(encoding="utf-8") == "old"
    assert leftovers(tmp_path) == []


def test_a_folder_that_cannot_be_made_is_an_atomic_write_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(AtomicWriteError, match=r"file/sub/a\.json: cannot create its folder"):
        write_bytes_atomic(tmp_path / "file" / "sub" / "a.json", b"x")


def test_a_real_full_disk_never_leaves_a_truncated_file(tmp_path):
    with tiny_tmpfs(tmp_path / "disk", "64k") as disk:
        small = disk / "points" / "e" / "sweep-c0001.json"
        save_point(disk, point(1))
        before = small.read_bytes()
        filler = fill(disk)
        with pytest.raises(AtomicWriteError, match=r"sweep-c0001\.json: cannot write \(No space left on device\)"):
            write_bytes_atomic(small, b"x" * 100_000)
        assert small.read_bytes() == before  # the finished point is intact
        with pytest.raises(AtomicWriteError, match=r"sweep-c0004\.json: cannot write"):
            save_point(disk, point(4))
        assert not (disk / "points" / "e" / "sweep-c0004.json").exists()
        assert leftovers(small.parent) == []
        filler.unlink()
        save_point(disk, point(4))  # space is back: the same write works
        assert (disk / "points" / "e" / "sweep-c0004.json").is_file()


def test_a_payload_larger_than_the_disk_fails_whole(tmp_path):
    with tiny_tmpfs(tmp_path / "disk", "64k") as disk:
        with pytest.raises(AtomicWriteError, match="No space left on device"):
            write_bytes_atomic(disk / "big.bin", b"y" * 200_000)
        assert list(disk.iterdir()) == []
