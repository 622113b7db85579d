"""Step 8's migration plan, ``canary.md``, ``alerts.rules.yaml`` and ``autoscaling.yaml`` tell one story.

Each archived run is copied, its steps 8-10 are computed again from its stored records with this code,
and the four texts are parsed and their numbers compared: the traffic schedule, the rollback criteria and
the rules that fire on them, the throughput floor and its expression, the restart limit, the replica
bounds and the in-flight trigger.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import helpers.report.notebook as notebook
from helpers.core.config import load_config
from helpers.decision import view as decision_view
from helpers.decision.tree import DecisionResult
from helpers.rollout import view

REPO = Path(__file__).resolve().parents[2]
RUNS = ["h200-20261203-chat-70b-fp8", "h200-20261201-multiturn-8b", "h200-20261201-chat-8b-poisson"]
SCHEDULE = re.compile(r"(\d+)% \((?:smoke test, )?([^)]*)\)")
NUM = r"([\d,]+(?:\.\d+)?)"


def _n(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.fixture(params=RUNS)
def rewritten(request, tmp_path, monkeypatch):
    """Steps 8-10 of an archived run, computed again from its records: (risk record, rollout files)."""
    run = tmp_path / request.param
    shutil.copytree(REPO / "reports" / request.param, run,
                    ignore=shutil.ignore_patterns("report.html", "notebooks", "rollout*", "risk.json"))  # fmt: skip
    monkeypatch.setattr(notebook, "_display", lambda obj: None)
    ctx = notebook.Context(cfg=load_config(run / "config.yaml"), run_dir=run, config_path=run / "config.yaml")
    risk = decision_view.risk(ctx, ctx.folder.load(DecisionResult))
    manifest = view.pilot(ctx)
    assert manifest is not None
    return ctx, risk, {k: run / v for k, v in manifest.files.items()}


def _rules(files) -> list[dict]:
    return yaml.safe_load(files["alerts"].read_text())["groups"][0]["rules"]


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_one_traffic_schedule_in_step_8_and_canary(rewritten):
    _, risk, files = rewritten
    canary = files["canary"].read_text()
    table = re.findall(r"^\| \d+ \| (\d+)% \| ([^|]+?) \|", _section(canary, "Traffic steps"), re.M)
    if risk.migration["to"] is None:  # multiturn-8b: the tree's choice, no measured backup to migrate to
        assert risk.migration["steps"] == ["No backup was measured: measure one."]
        assert len(table) >= 3 and table[-1][0] == "100"
        return
    step8 = next(s for s in risk.migration["steps"] if "%" in s)
    assert [(int(a), b) for a, b in SCHEDULE.findall(step8)] == [(int(a), b) for a, b in table]
    assert len(table) >= 3 and table[-1][0] == "100"


def test_every_rollback_criterion_names_a_rule_that_exists_or_says_none_does(rewritten):
    ctx, risk, files = rewritten
    rules = {r["alert"]: r for r in _rules(files)}
    bullets = re.findall(r"^- (.+)$", _section(files["canary"].read_text(), "Rollback criteria"), re.M)
    named = set()
    for b in bullets:
        text, _, alert = b.rpartition(" — ")
        names = re.findall(r"`(\w+)`", alert)
        assert names or alert.startswith("no alert rule"), b
        for n in names:
            assert rules[n]["labels"]["rollback"] == "true", n
            named.add(n)
        # the same criterion, word for word, in step 8 (same config; the baseline sentence is the backup's)
        if "tok/s" not in text and risk.migration["to"] is not None:
            assert text in risk.migration["rollback_triggers"], text
    assert named == {n for n, r in rules.items() if r["labels"]["rollback"] == "true"}
    assert {"EngineTTFTP95High", "EngineMetricsAbsent", "EnginePodRestarts"} <= named
    ttft = rules["EngineTTFTP95High"]
    limit = _n(re.search(rf"TTFT p95 above {NUM} ms", " ".join(bullets)).group(1))
    assert ttft["expr"].endswith(f"> {limit:g}") and limit == ctx.cfg.sla.ttft_p95_ms
    minutes = int(re.search(r"TTFT p95 above .* for (\d+) minutes?", " ".join(bullets)).group(1))
    assert ttft["for"] == f"{minutes}m"
    restarts = int(re.search(r"more than (\d+) pod restart", " ".join(bullets)).group(1))
    assert rules["EnginePodRestarts"]["expr"].endswith(f"> {restarts}")


def test_the_throughput_floor_follows_the_load_in_text_and_rule(rewritten):
    ctx, _, files = rewritten
    canary = files["canary"].read_text()
    rules = {r["alert"]: r for r in _rules(files)}
    m = re.search(rf"below (\d+)% of \({NUM} tok/s per running request × the requests running, at most {NUM}\)",
                  canary)  # fmt: skip
    from helpers.benchmark.in_flight import in_flight  # here, so the file's other tests run on code without it

    primary = ctx.folder.load(DecisionResult).primary
    held = in_flight(next((r for r in ctx.folder.engine_results() if r.label == primary), None))
    if m is None:  # no in-flight count measured for the primary: then no floor and no rule either
        assert held is None and "EngineThroughputBelowFloor" not in rules
        return
    share, per, cap = int(m.group(1)) / 100, _n(m.group(2)), _n(m.group(3))
    assert share == ctx.cfg.rollout.rollback.throughput_floor
    expr = rules["EngineThroughputBelowFloor"]["expr"]
    factor, cap_rule = re.search(r"< ([\d.e+-]+) \* clamp_max\(.*, ([\d.e+-]+)\)$", expr).groups()
    assert float(factor) == pytest.approx(share * per, rel=0.002)  # the text rounds to 0.1 tok/s
    assert float(cap_rule) == pytest.approx(cap, abs=0.5)
    # at a 5% step (one request running) the floor is a small fraction of the floor at the measured load
    lo, hi = (_n(x) for x in re.search(rf": {NUM} tok/s with 1 running up to {NUM} tok/s", canary).groups())
    assert lo == pytest.approx(share * per, abs=0.6) and hi == pytest.approx(share * per * cap, rel=0.01, abs=1)


def test_autoscaling_text_and_yaml_agree(rewritten):
    _, _, files = rewritten
    canary = files["canary"].read_text()
    if "autoscaling" not in files:
        assert "no autoscaling" in canary
        return
    so = yaml.safe_load(files["autoscaling"].read_text())["spec"]
    m = re.search(r"KEDA\): (\d+) to (\d+) replicas \(min (\d+): .*; max (\d+): ", canary)
    assert m, canary
    lo, hi, lo2, hi2 = map(int, m.groups())
    assert (lo, hi) == (lo2, hi2) == (so["minReplicaCount"], so["maxReplicaCount"])
    ceil = re.search(r"min \d+: ⌈(\d+) × ([\d.]+)/([\d.]+)⌉", canary)
    if ceil:  # the minimum's own arithmetic gives the YAML's number
        import math

        assert math.ceil(int(ceil.group(1)) * float(ceil.group(2)) / float(ceil.group(3))) == lo
    text_thresholds = {float(x) for x in re.findall(r"÷ replicas > ([\d.]+)", canary)}
    assert text_thresholds == {float(t["metadata"]["threshold"]) for t in so["triggers"]}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (apt-get install -y prometheus)")
def test_the_floor_rule_spares_a_canary_step_and_catches_a_slow_engine(tmp_path):
    """promtool's rule unit test on the 70B run's floor: 2 requests served at the measured per-request speed
    (a 5% step) do not fire, the same 2 at a third of it do; an absolute floor would have fired on both."""
    run = "h200-20261203-chat-70b-fp8"
    shutil.copytree(REPO / "reports" / run, tmp_path / run, ignore=shutil.ignore_patterns("report.html", "rollout*"))
    ctx = notebook.Context(cfg=load_config(tmp_path / run / "config.yaml"), run_dir=tmp_path / run,
                           config_path=tmp_path / run / "config.yaml")  # fmt: skip
    files = {k: tmp_path / run / v for k, v in view.pilot(ctx).files.items()}
    rule = next(r for r in _rules(files) if r["alert"] == "EngineThroughputBelowFloor")
    factor = float(re.search(r"< ([\d.e+-]+) \*", rule["expr"]).group(1))
    per = factor / ctx.cfg.rollout.rollback.throughput_floor
    sel = 'model_name="llama-3.3-70b-fp8",instance="pod-a:8000"'

    def series(tok_s_per_request: float) -> list[dict]:
        return [
            {"series": f"vllm:generation_tokens_total{{{sel}}}", "values": f"0+{2 * tok_s_per_request * 60:g}x30"},
            {"series": f"vllm:num_requests_running{{{sel}}}", "values": "2x30"},
        ]

    slow = 2 * per / 3
    ann = {k: v.replace("{{ $labels.instance }}", "pod-a:8000").replace('{{ $value | printf "%.0f" }}', f"{slow:.0f}")
           for k, v in rule["annotations"].items()}  # fmt: skip
    test = {"rule_files": [str(files["alerts"])], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": series(per),
         "alert_rule_test": [{"eval_time": "20m", "alertname": rule["alert"], "exp_alerts": []}]},
        {"interval": "1m", "input_series": series(per / 3),
         "alert_rule_test": [{"eval_time": "20m", "alertname": rule["alert"],
                              "exp_alerts": [{"exp_labels": {**rule["labels"], "instance": "pod-a:8000"},
                                              "exp_annotations": ann}]}]},
    ]}  # fmt: skip
    path = tmp_path / "floor.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    out = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
