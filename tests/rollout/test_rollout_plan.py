"""Steps 9-10 as a report shows them: every artifact displayed, replicas and autoscaling from the run, one set
of rollback criteria, alerts that suit engines which pre-allocate, GPU selectors that survive relabelling."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from rollout_data import config, decision_for, results

import helpers.report.notebook as notebook
from helpers.core.config import load_config
from helpers.cost.records import CostAnalysis, Demand, FleetRow
from helpers.decision.risk import migration_plan
from helpers.rollout import validate_rollout, view, write_rollout
from helpers.rollout.rollback import rollback_criteria
from helpers.rollout.scaling import validate_autoscaling

REPO = Path(__file__).resolve().parents[2]
ARCHIVED = REPO / "reports" / "h200-20261129-chat-8b"
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (apt-get install -y prometheus; make tools)"
)
MACHINE_PATH = re.compile(r"(/work|/tmp|/home|/root)/")
DEMAND = Demand(output_tokens_mean=256, basis="the test's demand")


def _rules(files) -> dict[str, dict]:
    return {r["alert"]: r for r in yaml.safe_load(files["alerts"].read_text())["groups"][0]["rules"]}


def _deployment(files) -> dict:
    return next(d for d in yaml.safe_load_all(files["k8s"].read_text()) if d and d["kind"] == "Deployment")


@pytest.fixture
def archived_run(tmp_path, monkeypatch):
    """A copy of an archived H200 run and a capture of everything its step 9-10 views display."""
    run = tmp_path / "run"
    shutil.copytree(ARCHIVED, run, ignore=shutil.ignore_patterns("report.html", "notebooks", "rollout*"))
    shown: list[str] = []
    monkeypatch.setattr(notebook, "_display", lambda obj: shown.append(obj.data))
    ctx = notebook.Context(cfg=load_config(run / "config.yaml"), run_dir=run, config_path=run / "config.yaml")
    return ctx, shown


def test_pilot_and_rollout_show_every_artifact_by_the_writers_keys(archived_run):
    """Step 9 was an empty heading (the view asked for 'launch.sh', the writer returns 'launch_shell')."""
    ctx, shown = archived_run
    manifest = view.pilot(ctx)
    view.show_pilot(ctx, manifest)
    pilot_html = "\n".join(shown)
    assert "exec " in pilot_html and "vllm.entrypoints.openai.api_server" in pilot_html  # launch.sh's command
    assert "Where to pilot" in pilot_html and "What to collect" in pilot_html and "What to retune" in pilot_html
    shown.clear()
    view.show_rollout(ctx, manifest, view.validate(ctx, manifest))
    rollout_html = "\n".join(shown)
    for text in ("Traffic steps", "Rollback criteria", "Common problems", "Recovery", "Scaling", "autoscaling.yaml"):
        assert text in rollout_html, text
    assert not MACHINE_PATH.search(pilot_html + rollout_html)


@needs_promtool
def test_validation_messages_name_no_machine_path(tmp_path):
    res, cfg = results(), config()
    files = write_rollout(tmp_path, cfg, decision_for("vllm", cfg, res), res)
    checks = validate_rollout(files)
    assert checks["alerts"][0] and "SUCCESS" in checks["alerts"][1]
    for name, (_, msg) in checks.items():
        assert str(tmp_path) not in msg and not MACHINE_PATH.search(msg), f"{name}: {msg}"


def test_replicas_come_from_the_fleet_sizing(tmp_path):
    res, cfg = results(), config()
    row = FleetRow(label="vllm-h200", engine="vllm", replicas=3, gpus_per_replica=2, sizing_basis="peak 40 req/s")
    cost = CostAnalysis(fleet=[row], demand=DEMAND)
    files = write_rollout(tmp_path / "a", cfg, decision_for("vllm", cfg, res), res, cost=cost)
    assert _deployment(files)["spec"]["replicas"] == 3
    assert "3 replica(s) for peak 40 req/s" in files["canary"].read_text()
    # no fleet row (or one that could not be sized): one replica, and the plan says why
    files = write_rollout(tmp_path / "b", cfg, decision_for("vllm", cfg, res), res, cost=CostAnalysis(demand=DEMAND))
    assert _deployment(files)["spec"]["replicas"] == 1 and "no fleet sizing" in files["canary"].read_text()


@needs_promtool
def test_autoscaling_policy_is_written_when_asked_and_validated_honestly(tmp_path):
    res = results()
    cfg = config(hardware={"autoscaling": True}, workload={"peak_requests_per_s": 40, "mean_requests_per_s": 10})
    row = FleetRow(label="sglang-h200", engine="sglang", replicas=4, sizing_basis="peak 40 req/s")
    cost = CostAnalysis(fleet=[row], demand=DEMAND.model_copy(update={"requests_per_s": 40}))
    files = write_rollout(tmp_path, cfg, decision_for("sglang", cfg, res), res, cost=cost)
    so = yaml.safe_load(files["autoscaling"].read_text())
    assert (
        so["kind"] == "ScaledObject" and so["spec"]["scaleTargetRef"]["name"] == _deployment(files)["metadata"]["name"]
    )
    assert (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) == (1, 6)  # 4 × 10/40, 4 × 1.5
    queries = {t["name"]: t["metadata"] for t in so["spec"]["triggers"]}
    assert "sglang:num_running_reqs" in queries["in-flight-requests"]["query"]
    assert (
        "sglang:token_usage" in queries["kv-cache-usage"]["query"] and queries["kv-cache-usage"]["threshold"] == "0.8"
    )
    ok, msg = validate_rollout(files)["autoscaling"]
    assert ok is None and "not schema-checked" in msg and "promtool" in msg  # partial, and it says so
    broken = tmp_path / "broken.yaml"
    so["spec"]["triggers"][0]["metadata"]["query"] = "sum(rate(x[5m])"
    broken.write_text(yaml.safe_dump(so))
    assert validate_autoscaling(broken, files["k8s"])[0] is False
    off = write_rollout(tmp_path / "off", config(), decision_for("sglang", cfg, res), res, cost=cost)
    assert "autoscaling" not in off and "no autoscaling" in off["canary"].read_text()


def test_one_set_of_rollback_criteria_in_migration_plan_canary_and_alerts(tmp_path):
    res = results()
    cfg = config(rollout={"rollback": {"breach_for": "7m", "throughput_floor": 0.85}})
    d = decision_for("vllm", cfg, res)
    files = write_rollout(tmp_path, cfg, d, res)
    canary = files["canary"].read_text()
    plan = migration_plan(d, cfg, res)
    assert _rules(files)["EngineTTFTP95High"]["for"] == "7m"
    assert _rules(files)["EngineTTFTP95High"]["labels"]["rollback"] == "true"
    ttft = "TTFT p95 above 2,000 ms (the SLA) for 7 minutes"
    assert ttft in canary and ttft in plan["rollback_triggers"]
    for text in (canary, " ".join(plan["rollback_triggers"])):
        assert "below 85% of (" in text and "failing for 7 minutes" in text
        assert "10 minutes" not in text and "80%" not in text and "90%" not in text
    assert rollback_criteria(config()).breach_for == "5m"  # the default lives in one place: config.Rollback


def test_kv_cache_pages_and_gpu_memory_warns_where_the_engine_preallocates(tmp_path):
    res, cfg = results(), config()
    files = write_rollout(tmp_path, cfg, decision_for("sglang", cfg, res), res)
    rules = _rules(files)
    assert "sglang:token_usage" in rules["EngineKVCacheFull"]["expr"] and "> 95" in rules["EngineKVCacheFull"]["expr"]
    assert rules["EngineKVCacheFull"]["labels"]["severity"] == "page"
    assert rules["EngineGPUMemoryHigh"]["labels"]["severity"] == "warning"
    cpu = _rules(write_rollout(tmp_path / "cpu", cfg, decision_for("vllm-cpu", cfg, res), res))
    assert "vllm:kv_cache_usage_perc" in cpu["EngineKVCacheFull"]["expr"] and "EngineGPUMemoryHigh" not in cpu


def test_nothing_deployed_loads_dummy_weights_or_names_this_machine(tmp_path):
    res, cfg = results(), config()
    for engine in ("vllm", "sglang", "trtllm"):
        files = write_rollout(tmp_path / engine, cfg, decision_for(engine, cfg, res), res)
        record = json.loads(files["launch_json"].read_text())
        commands = json.dumps([record["python"], record["docker"], record["container"]])
        texts = [(k, files[k].read_text()) for k in ("launch_shell", "launch_docker", "k8s")]
        for key, text in [*texts, ("launch_json", commands)]:
            assert not re.search(r"load.format\W+dummy", text), (engine, key)
            assert str(REPO) not in text and str(tmp_path) not in text, (engine, key)
        for key in ("launch_shell", "launch_docker"):
            check = subprocess.run(["bash", "-n", str(files[key])], capture_output=True, text=True)
            assert check.returncode == 0, check.stderr


@needs_promtool
@pytest.mark.parametrize("label", ["pod", "exported_pod"])
def test_gpu_selectors_match_pod_or_exported_pod(tmp_path, label):
    """Behind a ServiceMonitor without honorLabels the DCGM series carry ``exported_pod`` (``pod`` is then the
    exporter's); the alert expressions must find the deployment's GPUs either way."""
    res, cfg = results(), config()
    files = write_rollout(tmp_path, cfg, decision_for("vllm", cfg, res), res)
    rules = _rules(files)
    pod = "rollout-test-vllm-h200-7d9f-abcde"
    extra = ',pod="dcgm-exporter-x1"' if label == "exported_pod" else ""
    sel = f'{label}="{pod}",gpu="0"{extra}'
    series = [
        {"series": f"DCGM_FI_DEV_GPU_UTIL{{{sel}}}", "values": "20x15"},
        {"series": f"DCGM_FI_DEV_FB_USED{{{sel}}}", "values": "99000x15"},
        {"series": f"DCGM_FI_DEV_FB_FREE{{{sel}}}", "values": "1000x15"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{pod="other-deployment-1",gpu="0"}', "values": "5x15"},
    ]
    util = rules["EngineGPUUtilLow"]["expr"].rsplit(" < ", 1)[0]
    mem = rules["EngineGPUMemoryHigh"]["expr"].rsplit(" > ", 1)[0]
    mem_labels = f'{{gpu="0",pod="{pod}"' + (f',exported_pod="{pod}"' if label == "exported_pod" else "") + "}"
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": util, "eval_time": "5m", "exp_samples": [{"labels": f'{{pod="{pod}"}}', "value": 20}]},
                    {"expr": mem, "eval_time": "5m", "exp_samples": [{"labels": mem_labels, "value": 99}]},
                ],
            }
        ],
    }
    path = tmp_path / "gpu.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    out = subprocess.run(["promtool", "test", "rules", path.name], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
