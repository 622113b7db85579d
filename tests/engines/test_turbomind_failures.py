"""TurboMind start failures become failed rows whose reason names them (missing CUDA 12 runtime, backend).

The engine is ``tests/fakes/fake_lmdeploy.py`` behind the real LMDeploy adapter's command line (a test
adapter whose module is the fake), started by the real python launcher through ``run_benchmarks``. It
prints what LMDeploy 0.18.0 prints (read from its wheel: ``lmdeploy/turbomind/__init__.py``,
``serve/core/async_engine.py``, ``archs.py``; the loader's and argparse's own words) and exits.
"""

import asyncio
import sys

import pytest

from helpers.benchmark.run import run_benchmarks
from helpers.core.errors import ConfigError
from helpers.engines import ENGINES, get_engine
from helpers.engines.lmdeploy import LmdeployAdapter
from helpers.launchers.config_check import parse_config

FAKE = "fake-lmdeploy"
CUDART = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"


class FakeLmdeployAdapter(LmdeployAdapter):
    """LMDeploy's flags, refusals and log checks, started from the fake module."""

    name = FAKE
    module = "fake_lmdeploy"
    package = "fake-engine-not-installed"
    runs_on_cpu = True


def engine(label: str, mode: str, backend: str = "turbomind", **fields) -> dict:
    env = {"FAKE_LMDEPLOY_MODE": mode}
    launcher = {"kind": "python", "python": sys.executable, "pythonpath": ["tests/fakes"], "env": env}
    spec = {"label": label, "engine": FAKE, "launcher": launcher, "startup_timeout_s": 20}
    return {**spec, "engine_options": {"backend": backend}, "knobs": {"dummy_weights": False}, **fields}


def config(engines: list[dict]):
    return parse_config(
        {
            "name": "turbomind-faults",
            "model": {"path": "tiny-llama"},
            "engines": engines,
            "workload": {"input_tokens": 16, "output_tokens": 4, "concurrency": [2], "requests_per_point": 4},
            "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},
        }
    )


def test_turbomind_start_failures_are_rows_that_name_them(tmp_path):
    with ENGINES.temporarily(FAKE, FakeLmdeployAdapter()):
        cfg = config(
            [
                engine("tm-no-cudart", "no_cudart"),
                engine("tm-wrong-backend", "fallback", extra_args=["--backend", "tensorrt"]),
                engine("tm-fell-back", "fallback"),
            ]
        )
        no_cudart, wrong, fell_back = asyncio.run(run_benchmarks(cfg, tmp_path))
    assert [r.status for r in (no_cudart, wrong, fell_back)] == ["failed"] * 3
    assert no_cudart.reason == (
        "TurboMind's CUDA 12 runtime is missing: libcudart.so.12 (wheel nvidia-cuda-runtime-cu12, in bundle "
        "lmdeploy-0.18.0-turbomind-cu12; its nvidia/*/lib folders on LD_LIBRARY_PATH): engine process exited with "
        f"code 1 before becoming healthy (log: {CUDART})"
    )
    assert "native module is unavailable" in no_cudart.log_tail and "libcudart" not in no_cudart.log_tail
    assert wrong.reason.startswith(
        "unknown LMDeploy backend 'tensorrt' (allowed: turbomind, pytorch): engine process exited with code 2 "
        "before becoming healthy (log: lmdeploy serve api_server: error: argument --backend: invalid choice: "
    )
    assert fell_back.reason.startswith(
        "asked for the TurboMind backend, but LMDeploy fell back to its PyTorch engine (its log: 'Fallback to "
        "pytorch engine because turbomind is not built.'); not measured as TurboMind."
    )
    assert all(r.points == [] for r in (no_cudart, wrong, fell_back))


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (
            "ImportError: libcublasLt.so.12: cannot open shared object file: No such file or directory",
            "TurboMind's CUDA 12 runtime is missing: libcublasLt.so.12 (wheel nvidia-cublas-cu12,",
        ),
        (
            "ImportError: /usr/lib/libcublas.so.12: version `libcublas.so.12' not found (required by _turbomind.so)",
            "TurboMind's CUDA 12 runtime is of another CUDA build (a CUDA 13 host's do not do): libcublas.so.12",
        ),
        (
            "RuntimeError: TurboMind was requested but its native module is unavailable.",
            "TurboMind could not be loaded (bundle lmdeploy-0.18.0-turbomind-cu12)",
        ),
    ],
)
def test_the_adapter_names_each_turbomind_start_line(line, what):
    named = get_engine("lmdeploy").start_failure_line(f"\x1b[31m{line}\x1b[0m\n")
    assert named is not None and named[0].startswith(what) and named[1] == line
    assert get_engine("lmdeploy").start_failure_line("INFO: started\n") is None
    assert get_engine("vllm").start_failure_line(line) is None  # other engines name nothing


def test_an_unknown_backend_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError, match="engines.0: engine 'tm': engine_options.backend: unknown LMDeploy backend "
                       "'turbomid'; allowed: turbomind, pytorch"):  # fmt: skip
        config([{**engine("tm", "no_cudart", backend="turbomid"), "engine": "lmdeploy"}])
