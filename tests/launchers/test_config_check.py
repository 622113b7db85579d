"""The registries' check of a config happens outside the foundation, with the same one-line errors.

``helpers.core.config`` validates the shape and knows no registry; ``helpers.launchers.config_check`` (what
``playbook run``, ``playbook check`` and the notebooks' ``start`` load through) refuses an unknown engine or
launcher, naming the file and the field.
"""

import copy
import subprocess
import sys

import pytest
import yaml

from helpers.core import config as core_config
from helpers.core.errors import ConfigError
from helpers.core.paths import REPO_ROOT
from helpers.launchers.config_check import load_config, parse_config
from helpers.report.notebook import start

GOOD = {
    "name": "registry-check",
    "model": {"path": "tiny-llama"},
    "engines": [
        {"label": "a", "engine": "vllm-cpu", "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"}},
        {"label": "b", "engine": "vllm-cpu", "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"}},
    ],
}


def edited(index: int, **changes) -> dict:
    data = copy.deepcopy(GOOD)
    for key, value in changes.items():
        data["engines"][index][key] = value
    return data


def written(tmp_path, data) -> str:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def test_the_foundation_takes_any_engine_name():
    cfg = core_config.parse_config(edited(1, engine="no-such-engine"))
    assert cfg.engines[1].engine == "no-such-engine"


def test_an_unknown_engine_names_the_field_and_the_registered_ones(tmp_path):
    path = written(tmp_path, edited(1, engine="vllmm"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    allowed = "endpoint, lmdeploy, sglang, trtllm, vllm, vllm-cpu"
    assert str(info.value) == f"{path}: engines.1.engine: unknown engine 'vllmm'; allowed: {allowed}"


def test_an_unknown_launcher_names_the_field():
    with pytest.raises(ConfigError) as info:
        parse_config(edited(0, launcher={"kind": "podman"}), "x.yaml")
    assert (
        str(info.value)
        == "x.yaml: engines.0.launcher.kind: unknown launcher 'podman'; allowed: docker, endpoint, python"
    )


def test_what_a_launcher_needs_names_the_engine_configuration():
    with pytest.raises(ConfigError) as info:
        parse_config(edited(1, engine="endpoint", launcher={"kind": "endpoint"}), "x.yaml")
    assert str(info.value) == "x.yaml: engines.1: launcher.url is required for the endpoint launcher"


def test_the_notebooks_start_refuses_an_unknown_engine(tmp_path):
    with pytest.raises(ConfigError, match=r"engines\.0\.engine: unknown engine 'vllmm'"):
        start(written(tmp_path, edited(0, engine="vllmm")), str(tmp_path / "run"))


def test_playbook_check_and_run_refuse_an_unknown_engine(tmp_path):
    path = written(tmp_path, edited(0, engine="vllmm"))
    for command in (["check", path, "--reports-dir", str(tmp_path / "r")], ["run", path]):
        res = subprocess.run(
            [sys.executable, "-m", "helpers.tools.cli", *command],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode != 0, res.stdout
        assert "engines.0.engine: unknown engine 'vllmm'" in res.stdout + res.stderr, command
