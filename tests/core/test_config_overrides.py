"""``playbook run --set KEY=VALUE``: one field of a config changed for one run, validated like the file.

On the GPU hosts the H200 configs were edited with ``sed`` before every H100 run (``cost.gpu``, the
cross-check); ``--set`` does it on the command line, and the run folder's ``config.yaml`` records it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from helpers.core.config import load_config
from helpers.core.config_overrides import apply_overrides
from helpers.core.errors import ConfigError
from helpers.tools.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
TURBOMIND_70B = ROOT / "playbook" / "workloads" / "h200-offline" / "chat-70b-fp8-turbomind.yaml"


def test_the_h100_edits_of_the_70b_config_are_two_sets():
    cfg = load_config(TURBOMIND_70B, ["cost.gpu=H100-SXM5-80GB", "evidence.crosscheck.enabled=false"])
    assert cfg.cost.gpu == "H100-SXM5-80GB" and cfg.evidence.crosscheck.enabled is False
    plain = load_config(TURBOMIND_70B)
    assert plain.cost.gpu == "H200-SXM-141GB" and plain.evidence.crosscheck.enabled is True  # the file is unchanged
    assert cfg.engines == plain.engines


def test_values_are_yaml_and_a_number_picks_a_list_item():
    data = {"a": {"b": 1}, "engines": [{"knobs": {"x": 1}}, {"knobs": {}}], "empty": None}
    out = apply_overrides(
        data, ["a.b=0.95", "engines.1.knobs.x=[1, 8]", "a.c=false", "empty.k=text with spaces", "new.deep.key=3"]
    )
    assert out == {
        "a": {"b": 0.95, "c": False},
        "engines": [{"knobs": {"x": 1}}, {"knobs": {"x": [1, 8]}}],
        "empty": {"k": "text with spaces"},
        "new": {"deep": {"key": 3}},
    }
    assert data["a"] == {"b": 1}  # the mapping read from the file is not changed
    assert apply_overrides({"engines": ["a", "b"]}, ["engines.1=c"]) == {"engines": ["a", "c"]}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("cost.gpu", "--set 'cost.gpu': expected KEY=VALUE"),
        ("cost..gpu=x", "--set 'cost..gpu=x': expected KEY=VALUE"),
        ("engines.9.knobs.memory_fraction=0.9", "--set engines.9: '9' is not an index of that list (0-2)"),
        ("engines.label=x", "--set engines.label: 'label' is not an index of that list (0-2)"),
        ("name.x=1", "--set name.x: the value before 'x' is not a mapping"),
        ("cost.gpu=[1, 2", "--set cost.gpu: the value is not valid YAML"),
    ],
)
def test_a_bad_override_names_itself(item, message):
    with pytest.raises(ConfigError) as err:
        load_config(TURBOMIND_70B, [item])
    assert str(err.value).startswith(message)


def test_an_unknown_key_or_a_bad_value_fails_validation_with_its_dotted_path():
    with pytest.raises(ConfigError, match=r"with --set cost\.gpuu=x: cost\.gpuu: unknown key \(typo\?\)"):
        load_config(TURBOMIND_70B, ["cost.gpuu=x"])
    with pytest.raises(ConfigError, match=r"engines\.0\.knobs\.memory_fraction"):
        load_config(TURBOMIND_70B, ["engines.0.knobs.memory_fraction=7"])


def test_the_run_command_takes_repeated_sets():
    args = build_parser().parse_args(["run", str(TURBOMIND_70B), "--set", "cost.gpu=H100-SXM5-80GB", "--set", "a=1"])
    assert args.overrides == ["cost.gpu=H100-SXM5-80GB", "a=1"]
    assert build_parser().parse_args(["run", str(TURBOMIND_70B)]).overrides is None


def test_a_run_with_sets_archives_the_config_as_run(tmp_path):
    """The real command on the CPU default's config, stopped after step 1: the archived config has the value set."""
    import subprocess

    run = subprocess.run(
        [sys.executable, "-m", "helpers.tools.cli", "run", "playbook/workloads/default.yaml", "--run-id", "set-1",
         "--reports-dir", str(tmp_path), "--only", "01_workload", "--no-check", "--quiet",
         "--set", "sla.ttft_p95_ms=1234", "--set", "team.size=9"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    archived = yaml.safe_load((tmp_path / "set-1" / "config.yaml").read_text())
    assert archived["sla"]["ttft_p95_ms"] == 1234 and archived["team"]["size"] == 9
    assert yaml.safe_load((ROOT / "playbook/workloads/default.yaml").read_text())["sla"]["ttft_p95_ms"] != 1234
