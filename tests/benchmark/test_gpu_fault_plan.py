"""The H200 fault list of ``bench_reliability.py --gpu`` checked here (``--dry-run``: nothing is started)."""

import json

from fakes.gpu_faults import run_gpu_faults

from helpers.core.config import load_config
from helpers.model.shape import read_model_shape, weight_bytes


def test_the_gpu_fault_plan_validates_and_writes_its_table(tmp_path):
    rows = run_gpu_faults(tmp_path, dry_run=True)
    assert [r["fault"] for r in rows] == ["oom-70b-bf16", "kill-8b"]
    assert all(r["ok"] is None and r["injected"] == "not run (dry run)" for r in rows)
    oom = load_config(tmp_path / "oom-70b-bf16.yaml")
    assert [e.label for e in oom.engines] == ["vLLM 0.26.0"]  # vLLM only: the GPU minutes are few
    assert not (oom.model.directory / "config.json").read_text().count("quantization_config")
    cmd = rows[0]["named"].split()
    assert "--quantization" not in cmd and "--tensor-parallel-size" not in cmd and "-tp" not in cmd
    assert "--load-format" in cmd and cmd[cmd.index("--load-format") + 1] == "dummy"
    weights_gb = weight_bytes(read_model_shape(oom.model.directory), "bf16") / 1e9
    assert weights_gb > 141, "the weights alone must not fit one 141 GB H200"
    kill = load_config(tmp_path / "kill-8b.yaml")
    assert [e.label for e in kill.engines] == ["vLLM 0.26.0"] and kill.workload.concurrency == [16]
    saved = json.loads((tmp_path / "reliability-gpu.json").read_text())
    assert [r["fault"] for r in saved["rows"]] == ["oom-70b-bf16", "kill-8b"]
    assert (tmp_path / "reliability-gpu.md").read_text().count("| not run (dry run) |") == 2
