"""The offline GPU-host path: receiving bundle folders, the bundles' default folder, running some engines only."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers.core.config import load_config
from helpers.core.errors import ConfigError
from helpers.run.rerender import FROM_POINTS_ENV, MEASURE_ONLY_ENV, measured_here
from helpers.tools.bundle.cli import add_bundle_arguments, default_out
from helpers.tools.cli import build_parser
from helpers.tools.engine_subset import config_file, select_engines, with_archived_engines

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_host.sh"
CHAT = REPO / "playbook" / "workloads" / "h200-offline" / "chat-8b.yaml"


def _bundle(folder: Path, name: str) -> Path:
    b = folder / name
    b.mkdir(parents=True)
    (b / "manifest.json").write_text("{}")
    (b / "install.sh").write_text("true\n")
    (b / f"{name}.tar.xz.000").write_bytes(b"x")
    return b


def _receive(tmp_path: Path, *dirs: Path) -> subprocess.CompletedProcess:
    env = {"PB": str(tmp_path / "pb"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["bash", str(SCRIPT), "receive", *map(str, dirs)], capture_output=True, text=True, env=env)


def test_receive_takes_a_bundle_folder_or_a_folder_of_them(tmp_path):
    one = _bundle(tmp_path / "transfer1", "vllm-0.26.0")
    parent = tmp_path / "transfer2"
    _bundle(parent, "sglang-0.5.16")
    _bundle(parent, "playbook-runtime")
    out = _receive(tmp_path, one, parent)
    assert out.returncode == 0, out.stderr
    parts = tmp_path / "pb" / "parts"
    assert sorted(p.name for p in parts.iterdir()) == ["playbook-runtime", "sglang-0.5.16", "vllm-0.26.0"]
    assert (parts / "vllm-0.26.0" / "vllm-0.26.0.tar.xz.000").is_file()
    assert "cannot stat" not in out.stderr


def test_receive_refuses_a_folder_without_bundles(tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "notes.txt").write_text("hi")
    out = _receive(tmp_path, empty)
    assert out.returncode == 2 and "holds no bundle" in out.stderr
    assert not (tmp_path / "pb" / "parts" / "*").exists()
    assert _receive(tmp_path, tmp_path / "missing").returncode == 2


def test_bundles_default_to_the_current_repository(tmp_path, monkeypatch):
    clone = tmp_path / "other-clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "sub").mkdir()
    monkeypatch.chdir(clone / "sub")
    assert default_out() == clone.resolve() / ".bundles"
    assert default_out(tmp_path) == tmp_path.resolve() / ".bundles"  # no repository above: the folder itself
    assert add_bundle_arguments(argparse.ArgumentParser()).parse_args(["vllm"]).out is None  # resolved when run


def test_run_only_some_engines(tmp_path):
    cfg = load_config(CHAT)
    labels = [e.label for e in cfg.engines]
    sub = select_engines(cfg, labels[:1])
    assert [e.label for e in sub.engines] == labels[:1]
    with pytest.raises(ConfigError, match="unknown engine label.*'nope'.*allowed: " + repr(labels[0])):
        select_engines(cfg, ["nope"])
    with config_file(sub, CHAT, subset=True) as path:
        assert [e.label for e in load_config(path).engines] == labels[:1]
        assert not path.is_relative_to(REPO)
    assert not path.exists()  # the private copy is gone after the run
    args = build_parser().parse_args(["run", str(CHAT), "--engines", labels[0], "x y"])
    assert args.engines == [labels[0], "x y"]


def test_a_resume_with_engines_keeps_the_archived_configurations(tmp_path):
    cfg = load_config(CHAT)
    first, second = (e.label for e in cfg.engines[:2])
    archived = tmp_path / "config.yaml"
    assert with_archived_engines(select_engines(cfg, [first]), archived) == select_engines(cfg, [first])  # no file
    archived.write_text(yaml.safe_dump(select_engines(cfg, [second]).model_dump(mode="json"), sort_keys=False))
    merged = with_archived_engines(select_engines(cfg, [first]), archived)
    assert [e.label for e in merged.engines] == [second, first]  # the archived one first, the named one after
    changed = cfg.engines[1].model_copy(update={"note": "tuned again"})  # named again: this attempt's copy wins
    again = with_archived_engines(cfg.model_copy(update={"engines": [changed]}), archived)
    assert [(e.label, e.note) for e in again.engines] == [(second, "tuned again")]
    archived.write_text("engines: [")  # unreadable: the named configurations alone
    assert with_archived_engines(select_engines(cfg, [first]), archived).engines == select_engines(cfg, [first]).engines


def test_an_attempt_measures_only_the_configurations_it_names(monkeypatch):
    monkeypatch.delenv(FROM_POINTS_ENV, raising=False)
    monkeypatch.delenv(MEASURE_ONLY_ENV, raising=False)
    assert measured_here("a")
    monkeypatch.setenv(MEASURE_ONLY_ENV, '["a", "b c"]')
    assert measured_here("b c") and not measured_here("d")
    monkeypatch.setenv(FROM_POINTS_ENV, "1")
    assert not measured_here("a")  # a re-render measures nothing


def test_bundle_specs_cite_no_file_outside_the_repository():
    texts = {p.name: p.read_text() for p in (REPO / "helpers" / "data" / "bundles").iterdir() if p.is_file()}
    assert texts and [name for name, t in texts.items() if "shared/gpu/" in t] == []
