"""The first page and ``summary.json`` say what the run was: the unit of a CPU run, versions, the gate, the pairs.

Built from the archived H200 runs' own records (summaries rebuilt with this code) and from a CPU summary.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from helpers.core.config import load_config, parse_config
from helpers.cost.records import CostAnalysis
from helpers.decision.compute import decide
from helpers.environment.engine_status import engine_status_frame
from helpers.report.first_page import break_even_lines, first_page_html, output_unit
from helpers.report.html import _header_html
from helpers.report.run_summary import build_summary
from helpers.run.folder import RunFolder
from helpers.run.summary import parse_summary
from helpers.workload.profile import Profile

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"


def _summary(run: str):
    return build_summary(REPORTS / run, load_config(REPORTS / run / "config.yaml"))


def _cpu(summary):
    """The same run as if it had measured CPU engines (the engine names are all the first page reads)."""
    data = copy.deepcopy(summary.model_dump(mode="json", by_alias=True))
    for e in data["engines"]:
        e["engine"] = "vllm-cpu"
    return parse_summary(data)


def test_a_cpu_run_is_per_replica_not_per_gpu():
    gpu = _summary("h200-20261203-chat-70b-fp8")
    assert output_unit(gpu) == "per GPU"
    cpu = _cpu(gpu)
    assert output_unit(cpu) == "per CPU replica"
    html = first_page_html(cpu)
    assert "alt='output per CPU replica against TTFT p95" in html and "alt='output per GPU" not in html


def test_versions_are_recorded_or_said_missing_and_labels_are_not_repeated():
    s = _summary("h200-20261203-chat-70b-fp8")
    sg = s.engine("SGLang 0.5.16")
    assert sg.version is None and sg.version_source == ""  # rebuilt from points; step 4 checked vLLM only
    header = _header_html(s)
    assert "sglang ?" not in header and "SGLang 0.5.16 (sglang version not recorded): partial" in header
    assert "vLLM 0.26.0: ok" in header and "vLLM 0.26.0 (vllm 0.26.0" not in header
    f = RunFolder(REPORTS / "h200-20261203-chat-70b-fp8")
    d = decide(f.engine_results(), load_config(f.path / "config.yaml"), f.load(Profile), f.load(CostAnalysis))
    # vLLM 6.62 req/s [4.37, 8.39] against SGLang 6.43 [5.80, 7.14]: the evidence does not decide, and says so first
    assert d.sentences[0] == ("Not conclusive: provisionally use `vLLM 0.26.0` as the primary engine and "
                              "`SGLang 0.5.16` as the backup.")  # fmt: skip


def test_a_result_without_a_version_takes_the_one_step_4_recorded(tmp_path):
    """A result rebuilt from its points has no version; step 4's check of the same configuration has one."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(REPORTS / "h200-20261203-chat-70b-fp8", run, ignore=shutil.ignore_patterns("report.html"))
    env = json.loads((run / "environment.json").read_text())
    env["engines"].append({**env["engines"][0], "engine config": "SGLang 0.5.16", "version": "0.5.16"})
    (run / "environment.json").write_text(json.dumps(env))
    sg = build_summary(run, load_config(run / "config.yaml")).engine("SGLang 0.5.16")
    assert (sg.version, sg.version_source) == ("0.5.16", "step 4 engine environment")


def test_summary_carries_the_quality_gate():
    s = _summary("h200-20261202-smollm2")
    assert s.quality is not None and s.quality["rows"]
    assert {e.label: e.quality_gate for e in s.engines} == {r["label"]: "passed" for r in s.quality["rows"]}
    on_disk = json.loads(s.model_dump_json(by_alias=True))
    assert on_disk["engines"][0]["quality_gate"] == "passed" and "quality" in on_disk


def test_break_even_lines_name_only_the_primary_against_configurations_in_contention():
    d = json.loads((REPORTS / "h200-20261202-smollm2" / "decision.json").read_text())
    lines = break_even_lines(d)
    assert lines and all(d["primary"] in line for line in lines)
    assert len(lines) < len(d["break_even"])
    assert not any("SGLang 0.5.16 n-gram is not cheaper per token than vLLM 0.26.0 n-gram" in x for x in lines)
    d["scores"] = [{**x, "eligible": x["label"] == d["primary"]} for x in d["scores"]]
    assert break_even_lines(d) == []  # nothing else in contention: no pair to list


def test_step_4_names_the_interpreter_from_the_repository_root():
    python = ".engines/vllm-cpu/bin/python"
    if not (REPO / python).exists():
        pytest.skip("the CPU engine is not set up (make engines)")
    c = parse_config({"name": "e", "model": {"path": "tiny-llama"},
                      "engines": [{"label": "v", "engine": "vllm-cpu", "launcher": {"python": python}}]})  # fmt: skip
    row = engine_status_frame(c).iloc[0]
    assert row["status"] == "ready" and row["detail"] == "./" + python and str(REPO) not in row["detail"]
