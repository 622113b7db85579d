"""``playbook predict``: a real CLI call on the shipped configs for GPUs this machine does not have."""

import json
import math
import subprocess
import sys

import pytest

from helpers.core.paths import REPO_ROOT
from helpers.cost.compute import cost_per_million
from helpers.tools.cli import main


def playbook(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers.tools.cli", *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )


@pytest.fixture(scope="module")
def predicted():
    """--json of chat-8b and chat-70b-fp8 on an H100 (by an alias) and an H200: four real CLI calls."""
    out = {}
    for config in ("chat-8b", "chat-70b-fp8"):
        for gpu in ("H100-SXM-80GB", "H200"):
            res = playbook("predict", f"playbook/workloads/h200-offline/{config}.yaml", "--gpu", gpu, "--json")
            assert res.returncode == 0, res.stderr
            out[config, gpu] = json.loads(res.stdout)
    return out


def test_the_gpu_is_named_by_its_spec_and_no_engine_is_needed(predicted):
    assert predicted["chat-8b", "H100-SXM-80GB"]["prediction"]["gpu"] == "H100-SXM5-80GB"
    assert predicted["chat-8b", "H200"]["prediction"]["gpu"] == "H200-SXM-141GB"


@pytest.mark.parametrize("config", ["chat-8b", "chat-70b-fp8"])
def test_capacity_fleet_and_cost_follow_from_the_prediction(predicted, config):
    for gpu in ("H100-SXM-80GB", "H200"):
        for f in predicted[config, gpu]["fleets"]:
            p = f["prediction"]
            assert p["available"] and 0 < p["capacity_requests_per_s"] < p["peak_requests_per_s"]
            assert p["calibration_factor"] is not None and "archived" in p["calibration_basis"]
            assert f["peak_requests_per_s"] == 20  # the configs' workload.peak_requests_per_s
            assert f["replicas"] == math.ceil(20 / p["capacity_requests_per_s"])
            assert f["usd_per_mtok_output"] == pytest.approx(
                cost_per_million(f["price_per_gpu_hour"], p["capacity_requests_per_s"] * 256)
            )
    h100 = predicted[config, "H100-SXM-80GB"]["fleets"][0]
    h200 = predicted[config, "H200"]["fleets"][0]
    assert (h100["price_per_gpu_hour"], h200["price_per_gpu_hour"]) == (5.01, 4.54)  # gpu_prices.yaml
    assert h100["prediction"]["capacity_requests_per_s"] < h200["prediction"]["capacity_requests_per_s"]


def test_the_70b_on_an_h100_is_bounded_by_its_kv_cache(predicted):
    p = predicted["chat-70b-fp8", "H100-SXM-80GB"]["fleets"][0]["prediction"]
    assert p["batch_limit"] == "KV cache" and p["max_batch"] < 20
    assert predicted["chat-70b-fp8", "H100-SXM-80GB"]["fleets"][0]["replicas"] > 10


def test_the_text_says_what_it_assumed_and_a_cpu_engine_gets_no_gpu_model(capsys):
    assert main(["predict", "playbook/workloads/h200-offline/chat-8b.yaml", "--gpu", "H100-SXM-80GB", "--raw"]) == 0
    text = capsys.readouterr().out
    assert "Predicted on H100-SXM5-80GB" in text and "raw model (calibration not applied)" in text
    assert "fleet: 1 replica(s)" in text and "per M output tokens at $5.01/GPU-h" in text
    assert main(["predict", "playbook/workloads/default.yaml", "--gpu", "H200"]) == 0
    assert "no prediction: no GPU model for a CPU engine" in capsys.readouterr().out


def test_an_unknown_gpu_is_an_error_naming_the_known_ones():
    res = playbook("predict", "playbook/workloads/h200-offline/chat-8b.yaml", "--gpu", "H900")
    assert res.returncode == 2 and "'H900'" in res.stderr and "H200-SXM-141GB" in res.stderr
