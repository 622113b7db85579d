"""``playbook run --time-limit``: the real CLI stops before an engine that cannot finish in time, and resumes.

The run is the real CLI (``tests/fakes/kernel_playbook.py``: the lock, the watchdog, the runner) with step 5
in a kernel-like child that starts two fake engines through the real python launcher and drives them with
guidellm. The limit lets the first configuration start (its least expected time fits with a few seconds to
spare) and, once it has run for about 12 s (more than those few seconds), not the second: the run exits 75,
says why, and has not started the second engine; run again without the limit on the same run id, it keeps the
first and measures the second.
"""

import os
import subprocess
import sys
from pathlib import Path

import yaml
from fakes.fake_engine import FAKE_ENGINE, FakeEngineAdapter, fake_spec

from helpers.benchmark.plan import least_seconds
from helpers.core.config import parse_config
from helpers.core.paths import REPO_ROOT
from helpers.engines import ENGINES
from helpers.run.progress import PROGRESS_FILE, read_events
from helpers.run.records import load_engine_result
from helpers.run.time_limit import STOP_FILE

FAKES = REPO_ROOT / "tests" / "fakes"


def config(tmp_path: Path) -> tuple[Path, dict]:
    slow = {"FAKE_TOKEN_DELAY_S": "0.25"}  # 8 tokens: 2 s a request, 6 requests one at a time: about 12 s
    cfg = {
        "name": "time-limit",
        "model": {"path": "tiny-llama"},
        "engines": [fake_spec("first", env=slow), fake_spec("second")],
        "evidence": {"search": {"enabled": False}, "trials": {"enabled": False}},
        "quality": {"enabled": False},
        "workload": {"input_tokens": 16, "output_tokens": 8, "concurrency": [1], "requests_per_point": 6},
    }
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, cfg


def run(tmp_path: Path, cfg: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(FAKES / "kernel_playbook.py"), str(tmp_path / "reports"), str(cfg), "r", *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_run_stops_before_an_engine_it_cannot_finish_and_resumes(tmp_path):
    path, raw = config(tmp_path)
    with ENGINES.temporarily(FAKE_ENGINE, FakeEngineAdapter()):
        cfg = parse_config(raw)
        need = [least_seconds(spec, cfg, tmp_path / "empty")[0] for spec in cfg.engines]
    assert need[0] == need[1] > 0  # the same priors: the config's, not the engines' speed
    run_dir = tmp_path / "reports" / "r"

    res = run(tmp_path, path, "--time-limit", f"{need[0] + 8:.1f}")  # the first fits; 12 s later the second does not
    assert res.returncode == 75, res.stdout + res.stderr
    said = res.stderr.strip().splitlines()[-1]
    assert said.startswith("playbook: stopped before 'second' for the time limit: it needs at least ")
    assert said.endswith("points measured so far are kept (resume with --run-id)")
    assert "[playbook] 03_benchmark.ipynb stopped: stopped before 'second'" in res.stdout
    assert load_engine_result(run_dir, "first").status == "ok" and load_engine_result(run_dir, "second") is None
    started = [e["unit"]["key"] for e in read_events(run_dir / PROGRESS_FILE)[0] if e["event"] == "start"]
    assert "first|cold|main" in started and not any(k.startswith("second|") for k in started)  # never launched
    assert (run_dir / STOP_FILE).is_file() and not (run_dir / "run.json").exists()  # nothing rendered

    again = run(tmp_path, path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert load_engine_result(run_dir, "second").status == "ok" and not (run_dir / STOP_FILE).exists()
    events = read_events(run_dir / PROGRESS_FILE)[0]
    resumed = events[max(i for i, e in enumerate(events) if e["event"] == "plan") :]
    keys = [e["unit"]["key"] for e in resumed if e["event"] == "start"]
    assert "second|cold|main" in keys and "first|cold|main" not in keys  # the first kept, not measured again
