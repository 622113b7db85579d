"""Resume decisions per cell, and a whole batch run through a fake executor (no engine, no child process)."""

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time

import yaml
from batch_data import fake_finished_run, two_models

from helpers.core.config import parse_config
from helpers.tools.batch.executors import EXECUTORS
from helpers.tools.batch.executors.base import CellOutcome, Executor
from helpers.tools.batch.matrix import load_batch
from helpers.tools.batch.resume import decide, move_aside, wait_for_previous_run
from helpers.tools.batch.run import run_batch

CFG = parse_config({"name": "r", "model": {"path": "tiny-llama"}, "engines": [
    {"label": "vllm-cpu", "engine": "vllm-cpu", "launcher": {"python": "python3"}}]})  # fmt: skip


def test_no_folder_is_new(tmp_path):
    assert decide(tmp_path / "cell", CFG).action == "new"
    (tmp_path / "empty").mkdir()
    assert decide(tmp_path / "empty", CFG).action == "new"


def test_a_finished_folder_with_the_same_config_is_kept(tmp_path):
    d = decide(fake_finished_run(tmp_path / "cell", CFG), CFG)
    assert (d.action, d.why) == ("keep", "finished earlier with the same config")


def test_a_folder_without_summary_or_report_resumes(tmp_path):
    run = fake_finished_run(tmp_path / "cell", CFG)
    (run / "report.html").unlink()  # killed between the summary and the report
    assert decide(run, CFG).action == "resume"
    (run / "summary.json").unlink()
    (run / "points").mkdir()
    (run / "points" / "vllm-cpu__sweep__c1.json").write_text("{}", encoding="utf-8")
    assert decide(run, CFG).action == "resume"


def test_a_changed_config_replaces_the_folder(tmp_path):
    run = fake_finished_run(tmp_path / "cell", CFG)
    changed = CFG.model_copy(update={"description": "other"})
    assert decide(run, changed).action == "replace"
    moved = move_aside(run, tmp_path / "replaced")
    assert not run.exists() and (moved / "summary.json").is_file()
    assert moved.parent == tmp_path / "replaced" and moved.name.startswith("cell-")


class FakeExecutor(Executor):
    """Runs nothing: writes a finished run folder per task, fails the cells named in ``FAIL``."""

    kind = "fake"
    FAIL: set[str] = set()
    seen: list[str] = []

    def run(self, tasks, reports_dir, events):
        for t in tasks:
            FakeExecutor.seen.append(t.cell)
            events.started(t.cell, "testhost")
            if t.cell in self.FAIL:
                events.finished(CellOutcome(t.cell, 2, "engine exploded", 1.0, "testhost"))
                continue
            cfg = parse_config(yaml.safe_load(t.config_path.read_text(encoding="utf-8")))
            fake_finished_run(reports_dir / t.run_id, cfg, usd=0.5 if "4l" in t.cell else 0.25)
            events.finished(CellOutcome(t.cell, 0, None, 2.0, "testhost"))


def _run(matrix, reports, fail=()):
    FakeExecutor.FAIL, FakeExecutor.seen = set(fail), []
    err = io.StringIO()
    with EXECUTORS.temporarily("fake", FakeExecutor):
        page, record = run_batch(matrix, executor="fake", reports_dir=reports, stream=err)
    return page, record, err.getvalue()


def test_a_failing_cell_is_a_row_and_the_others_go_on(write_matrix, tmp_path):
    reports = tmp_path / "reports"
    page, record, err = _run(write_matrix(two_models()), reports, fail={"tiny-llama_cpu"})
    rows = {c.cell: c for c in record.cells}
    assert rows["tiny-llama_cpu"].status == "failed" and rows["tiny-llama_cpu"].reason == "engine exploded"
    assert rows["tiny-4l_cpu"].status == "ok" and rows["tiny-4l_cpu"].usd_per_mtok == 0.5
    assert rows["tiny-4l_cpu"].primary == "vllm-cpu" and rows["tiny-4l_cpu"].primary_version == "0.32.0"
    assert rows["tiny-4l_cpu"].report == "../unit-batch-tiny-4l_cpu/report.html"
    assert page == reports / "batch-unit-batch" / "index.html"
    stored = json.loads((reports / "batch-unit-batch" / "batch.json").read_text(encoding="utf-8"))
    assert [c["status"] for c in stored["cells"]] == ["failed", "ok"]
    assert "cell tiny-llama_cpu: failed: engine exploded" in err
    assert "[batch] 1/2 done, 0 running, 1 failed, 0 pending" in err
    assert (reports / "batch-unit-batch" / "cells" / "tiny-4l_cpu.yaml").stat().st_mode & 0o777 == 0o600
    assert "batch-unit-batch/index.html" in (reports / "index.html").read_text(encoding="utf-8")


def test_a_second_run_keeps_finished_cells_and_runs_only_the_rest(write_matrix, tmp_path):
    reports, matrix = tmp_path / "reports", write_matrix(two_models())
    _run(matrix, reports, fail={"tiny-llama_cpu"})
    kept_summary = reports / "unit-batch-tiny-4l_cpu" / "summary.json"
    before = kept_summary.stat().st_mtime_ns
    time.sleep(0.01)
    _, record, err = _run(matrix, reports)
    assert FakeExecutor.seen == ["tiny-llama_cpu"], "the finished cell was run again"
    assert kept_summary.stat().st_mtime_ns == before
    assert "cell tiny-4l_cpu: kept (finished earlier with the same config)" in err
    assert [(c.status, c.kept) for c in record.cells] == [("ok", False), ("ok", True)]
    assert (record.cells[1].seconds, record.cells[1].where) == (2.0, "testhost"), "a kept cell keeps its wall time"


def test_a_changed_cell_config_moves_the_old_folder_aside(write_matrix, tmp_path):
    reports = tmp_path / "reports"
    _run(write_matrix(two_models()), reports)
    data = two_models()
    data["axes"]["models"][1]["set"]["workload"] = {"requests_per_point": 5}
    _, record, err = _run(write_matrix(data), reports)
    assert FakeExecutor.seen == ["tiny-4l_cpu"]
    assert "cell tiny-4l_cpu: its config changed since the folder was written; old folder moved to" in err
    replaced = list((reports / "batch-unit-batch" / "replaced").iterdir())
    assert len(replaced) == 1 and replaced[0].name.startswith("unit-batch-tiny-4l_cpu-")
    assert all(c.status == "ok" for c in record.cells)


def test_a_half_done_cell_runs_again_under_its_run_id(write_matrix, tmp_path):
    reports, matrix = tmp_path / "reports", write_matrix(two_models())
    half = reports / "unit-batch-tiny-llama_cpu" / "points"
    half.mkdir(parents=True)
    (half / "p.json").write_text("{}", encoding="utf-8")
    _, _, err = _run(matrix, reports)
    assert FakeExecutor.seen == ["tiny-llama_cpu", "tiny-4l_cpu"]
    assert "cell tiny-llama_cpu: resuming" in err
    assert (half / "p.json").is_file(), "measured points must survive a resume"


def test_a_finished_cell_without_a_primary_is_a_failed_row_with_the_engine_reason(write_matrix, tmp_path):
    reports = tmp_path / "reports"
    batch = load_batch(write_matrix(two_models()))
    for c in batch.cells:
        fake_finished_run(reports / c.run_id, c.config, primary=None if "4l" in c.cell else "vllm-cpu")
    _, record, _ = _run(write_matrix(two_models()), reports)
    assert FakeExecutor.seen == []
    row = record.cells[1]
    assert row.status == "failed" and row.kept
    assert row.reason == "no recommendation (vllm-cpu: no health in time)"


def _lock(run_dir, pid, host):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.lock").write_text(json.dumps({"pid": pid, "host": host, "started": "t"}), encoding="utf-8")


def test_a_resume_waits_for_the_previous_run_of_the_cell_to_stop(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    threading.Thread(target=proc.wait, daemon=True).start()  # reaped as init reaps a killed batch's cell
    try:
        _lock(tmp_path / "cell", proc.pid, socket.gethostname())
        said, t0 = [], time.monotonic()
        assert wait_for_previous_run(tmp_path / "cell", say=said.append, sleep=0.1)
        assert time.monotonic() - t0 >= 1.0 and proc.poll() is not None
        assert said == [
            f"waiting for the previous run of cell (pid {proc.pid} on host {socket.gethostname()}, started t) to stop"
        ]
    finally:
        proc.kill()
        proc.wait()


def test_no_wait_for_a_gone_run_or_another_hosts_lock(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    _lock(tmp_path / "a", proc.pid, socket.gethostname())
    _lock(tmp_path / "b", os.getpid(), "another-host")
    for d in ("a", "b", "none"):
        said = []
        assert wait_for_previous_run(tmp_path / d, say=said.append, timeout_s=0.1)
        assert said == []
    _lock(tmp_path / "c", os.getpid(), socket.gethostname())  # alive and never stopping
    assert not wait_for_previous_run(tmp_path / "c", say=lambda _: None, timeout_s=0.2, sleep=0.05)
