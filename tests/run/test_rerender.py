"""The guard of a re-render from points (``helpers.run.rerender``) on a real folder, without notebooks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.core.errors import PlaybookError
from helpers.run.lock import LOCK_NAME, RunLock
from helpers.run.rerender import RERENDER_KEY, RerenderError, RerenderGuard, earlier_of_a_resume, healthy, run_info


def _folder(tmp_path, failures: dict | None = None):
    run = tmp_path / "reports" / "r"
    (run / "notebooks").mkdir(parents=True)
    (run / "notebooks" / "01_workload.ipynb").write_text("archived", encoding="utf-8")
    (run / "logs" / "notebooks").mkdir(parents=True)
    (run / "logs" / "notebooks" / "01_workload.log").write_text("archived log\n", encoding="utf-8")
    (run / "points").mkdir()
    os.symlink("../shared/data", run / "data")  # a dangling link, as an archive's data/ link off its host
    info = {"run_id": "r", "failures": failures or {}, "notebook_seconds": {"01_workload.ipynb": 3.5}}
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    return run


def _state(run):
    return {
        str(p.relative_to(run)): os.readlink(p) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
        for p in sorted(run.rglob("*"))
    }


def _rerender(run):
    """What a re-render does to the folder: rewrites, adds files (its kernel log) and folders, removes one."""
    (run / "notebooks" / "01_workload.ipynb").write_text("re-rendered", encoding="utf-8")
    (run / "logs" / "notebooks" / "01_workload.rerender.log").write_text("re-render's lines\n", encoding="utf-8")
    (run / "report.html").write_text("new", encoding="utf-8")
    (run / "points" / "new").mkdir()
    (run / "data").unlink()


def test_a_failed_guarded_rerender_puts_the_folder_back_and_names_the_notebook(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    run = _folder(tmp_path)
    before = _state(run)
    with RunLock(run):  # the re-render's own lock: neither copied nor removed
        with pytest.raises(RerenderError) as err, RerenderGuard(run, from_points=True) as guard:
            assert guard.guarded and guard.earlier["notebook_seconds"] == {"01_workload.ipynb": 3.5}
            _rerender(run)
            guard.check({"01_workload.ipynb": "01_workload.ipynb: TraceError: x.csv: not found"}, ["01_workload.ipynb"])
        assert (run / LOCK_NAME).is_file()
    msg = str(err.value)
    assert "failed in 01_workload.ipynb: TraceError: x.csv: not found;" in msg and "left as it was" in msg
    assert _state(run) == before
    assert sorted(p.name for p in run.parent.iterdir()) == ["r"]  # the copy is gone
    kept = Path(msg.rsplit(" ", 1)[1])
    assert kept.parent == tmp_path
    assert (kept / "notebooks" / "01_workload.ipynb").read_text(encoding="utf-8") == "re-rendered"
    assert (kept / "logs" / "01_workload.log").read_text(encoding="utf-8").endswith("re-render's lines\n")
    assert issubclass(RerenderError, PlaybookError)


def test_any_exception_puts_a_guarded_folder_back_and_success_removes_the_copy(tmp_path, capsys):
    run = _folder(tmp_path)
    before = _state(run)
    with pytest.raises(KeyboardInterrupt), RerenderGuard(run, from_points=True):
        _rerender(run)
        raise KeyboardInterrupt
    assert _state(run) == before
    assert f"stopped; {run} was put back as it was" in capsys.readouterr().err
    with pytest.raises(OSError), RerenderGuard(run, from_points=True):  # e.g. a full disk writing the report
        _rerender(run)
        raise OSError(28, "No space left on device")
    assert _state(run) == before
    assert "was put back as it was" in capsys.readouterr().err
    with RerenderGuard(run, from_points=True) as guard:
        _rerender(run)
        guard.check({}, ["01_workload.ipynb"])
    assert (run / "report.html").read_text(encoding="utf-8") == "new"
    assert sorted(p.name for p in run.parent.iterdir()) == ["r"]


@pytest.mark.parametrize("from_points", [True, False], ids=["archive-with-failures", "measuring-run"])
def test_an_unguarded_run_keeps_what_it_wrote(tmp_path, from_points):
    run = _folder(tmp_path, failures={"03_benchmark.ipynb": "03_benchmark.ipynb: EngineError: x"})
    with RerenderGuard(run, from_points=from_points) as guard:
        assert not guard.guarded
        _rerender(run)
        guard.check({"01_workload.ipynb": "01_workload.ipynb: TraceError: x"}, ["01_workload.ipynb"])
    assert (run / "notebooks" / "01_workload.ipynb").read_text(encoding="utf-8") == "re-rendered"
    assert sorted(p.name for p in run.parent.iterdir()) == ["r"]


def test_run_json_of_a_rerender_keeps_the_measured_seconds_and_every_other_key():
    earlier = {"run_id": "r", "failures": {}, "notebook_seconds": {"03_benchmark.ipynb": 900.0}, "note": "kept"}
    got = run_info("r", {}, {"03_benchmark.ipynb": 1.9}, earlier)
    assert got == {**earlier, RERENDER_KEY: {"03_benchmark.ipynb": 1.9}}
    assert run_info("r", {"a": "b"}, {"x": 1.0}) == {
        "run_id": "r",
        "failures": {"a": "b"},
        "notebook_seconds": {"x": 1.0},
    }
    assert healthy({"run_id": "r", "failures": {}}) and healthy({"run_id": "r"})
    assert not healthy(None) and not healthy({"failures": {"a": "b"}}) and not healthy({"failures": "bad"})


def test_a_resume_that_measured_nothing_keeps_the_measuring_runs_timings(tmp_path):
    run = tmp_path / "run"
    point = run / "points" / "vllm" / "sweep-c0001.json"
    point.parent.mkdir(parents=True)
    point.write_text("{}")
    measured = {"run_id": "r", "failures": {}, "notebook_seconds": {"03_benchmark.ipynb": 300.0}}
    (run / "run.json").write_text(json.dumps(measured))
    os.utime(point, (1_000, 1_000))  # measured long ago
    assert earlier_of_a_resume(run, started=2_000) == measured  # every point kept: recorded as a re-render
    assert run_info("r", {}, {"03_benchmark.ipynb": 2.0}, measured)["notebook_seconds"] == {"03_benchmark.ipynb": 300.0}
    os.utime(point, (3_000, 3_000))
    assert earlier_of_a_resume(run, started=2_000) is None  # a point written since: a measuring run
    os.utime(point, (1_000, 1_000))
    record = run / "crosscheck" / "vllm.json"  # the engine's own client ran, the probes were kept
    record.parent.mkdir()
    record.write_text("{}")
    os.utime(record, (3_000, 3_000))
    assert earlier_of_a_resume(run, started=2_000) is None
    record.unlink()
    (run / "run.json").write_text(json.dumps({"run_id": "r", "failures": {}}))
    os.utime(point, (1_000, 1_000))
    assert earlier_of_a_resume(run, started=2_000) is None  # no timings to keep
