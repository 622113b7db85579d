"""Executor pieces that run without an engine: archives, Ray addresses and placement, progress, the cell process."""

import io
import socket
import tarfile
import time

import pytest
from batch_data import two_models

from helpers.tools.batch.archive import pack_run_folder, unpack_run_folder
from helpers.tools.batch.cell import failure_reason, run_cell_process
from helpers.tools.batch.executors import EXECUTORS
from helpers.tools.batch.executors.base import ClusterError, ExecutorSpec, Resources
from helpers.tools.batch.executors.ray_cluster import (
    RayExecutor,
    check_reachable,
    parse_address,
    task_options,
    unplaceable,
)
from helpers.tools.batch.progress import Progress, duration_text
from helpers.tools.cli import main


def test_executors_are_registered_by_kind():
    assert EXECUTORS.names() == ["local", "ray"]


def test_a_run_folder_travels_as_bytes_without_its_lock(tmp_path):
    src = tmp_path / "run"
    (src / "points" / "e").mkdir(parents=True)
    (src / "points" / "e" / "c1.json").write_text('{"a": 1}', encoding="utf-8")
    (src / "summary.json").write_text("{}", encoding="utf-8")
    (src / "run.lock").write_text('{"pid": 1, "host": "elsewhere"}', encoding="utf-8")
    dst = tmp_path / "reports" / "run"
    dst.mkdir(parents=True)
    (dst / "stale.txt").write_text("old", encoding="utf-8")
    unpack_run_folder(pack_run_folder(src), dst)
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*")) == [
        "points", "points/e", "points/e/c1.json", "summary.json"]  # fmt: skip
    assert (dst / "points" / "e" / "c1.json").read_text(encoding="utf-8") == '{"a": 1}'
    assert [p.name for p in dst.parent.iterdir()] == ["run"], "no staging folder may be left"


def test_an_archive_leaving_its_folder_is_refused_and_the_folder_kept(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    dst = tmp_path / "reports" / "run"
    dst.mkdir(parents=True)
    (dst / "summary.json").write_text("{}", encoding="utf-8")
    with pytest.raises(tarfile.TarError):
        unpack_run_folder(buf.getvalue(), dst)
    assert (dst / "summary.json").is_file() and not (tmp_path / "reports" / "escape.txt").exists()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("ray://head.svc:10001", ("head.svc", 10001)),
        ("10.0.0.5:6379", ("10.0.0.5", 6379)),
        ("ray://[::1]:10001", ("::1", 10001)),
        ("auto", None),
        (None, None),
    ],
)
def test_ray_addresses(address, expected):
    assert parse_address(address) == expected


def test_a_malformed_address_is_one_line():
    with pytest.raises(ClusterError, match="is not HOST:PORT, ray://HOST:PORT or auto"):
        parse_address("ray://head")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_an_unreachable_cluster_is_one_clear_line():
    port = _closed_port()
    t0 = time.monotonic()
    with pytest.raises(ClusterError) as exc:
        check_reachable(f"ray://127.0.0.1:{port}", 2)
    assert time.monotonic() - t0 < 5
    assert str(exc.value).startswith(f"the Ray cluster at ray://127.0.0.1:{port} is unreachable (")
    assert "\n" not in str(exc.value)


def test_the_cli_says_an_unreachable_cluster_in_one_line(tmp_path, capsys, write_matrix):
    port = _closed_port()
    matrix = write_matrix(two_models())
    argv = ["batch", str(matrix), "--executor", "ray", "--address", f"127.0.0.1:{port}", "--reports-dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"playbook: error: the Ray cluster at 127.0.0.1:{port} is unreachable")
    assert not any("Traceback" in ln for ln in err)
    assert not list(tmp_path.glob("unit-batch-*")), "no cell may have started"


def test_ray_executor_reads_ray_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "ray://from-env:10001")
    assert RayExecutor(ExecutorSpec(kind="ray"))._address() == "ray://from-env:10001"
    assert RayExecutor(ExecutorSpec(kind="ray", address="auto"))._address() == "auto"


def test_task_options_carry_the_cells_resources():
    assert task_options(Resources(num_cpus=1, num_gpus=0)) == {"num_cpus": 1, "num_gpus": 0, "max_retries": 0}
    opts = task_options(Resources(num_cpus=8, num_gpus=2, accelerator_type="H100", custom={"node:10.0.0.5": 0.01}))
    assert opts == {"num_cpus": 8, "num_gpus": 2, "max_retries": 0, "accelerator_type": "H100",
                    "resources": {"node:10.0.0.5": 0.01}}  # fmt: skip


def test_a_cell_no_node_can_hold_is_named():
    nodes = [{"CPU": 16.0, "GPU": 1.0, "accelerator_type:A10G": 1.0}, {"CPU": 2.0}]
    assert unplaceable(Resources(num_cpus=4, num_gpus=1), nodes) is None
    why = unplaceable(Resources(num_cpus=4, num_gpus=2), nodes)
    assert why == "no node of the Ray cluster has CPU=4, GPU=2 (nodes offer: CPU=16, GPU=1; CPU=2)"
    assert "accelerator_type:H100" in unplaceable(Resources(num_gpus=1, accelerator_type="H100"), nodes)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_counts_and_eta():
    out, clock = io.StringIO(), Clock()
    p = Progress(["a", "b", "c", "d"], kept=["a"], stream=out, clock=clock)
    assert p.line() == "[batch] 1/4 done (1 kept), 0 running, 0 failed, 3 pending; ETA ?"
    p.started("b", "h1")
    clock.t = 100
    p.finished("b", True, 100)
    p.started("c")
    clock.t = 130
    assert p.line() == "[batch] 2/4 done (1 kept), 1 running, 0 failed, 1 pending; ETA 2m50s"  # 70 left + 100
    p.finished("c", False, 30, "boom")
    p.started("c")  # a late notice is ignored
    assert p.line().startswith("[batch] 2/4 done (1 kept), 0 running, 1 failed, 1 pending")
    text = out.getvalue()
    assert "[batch] cell b: started on h1" in text and "[batch] cell c: failed: boom (30s)" in text


def test_durations():
    assert [duration_text(s) for s in (5, 95, 4000)] == ["5s", "1m35s", "1h06m"]


def test_failure_reasons_come_from_the_error_line():
    log = "[playbook] 01_workload.ipynb ...\nplaybook: error: cfg.yaml: model.path: nope\n"
    assert failure_reason(log, 2) == "cfg.yaml: model.path: nope"
    assert failure_reason("a\nTraceback\nMemoryError\n", 1) == "exit 1: MemoryError"
    assert failure_reason("", -9).startswith("stopped (exit -9)")


def test_a_cell_process_that_fails_returns_its_reason(tmp_path):
    config = tmp_path / "cell.yaml"
    config.write_text("name: x\nmodel: {path: tiny-llama}\nengines: []\n", encoding="utf-8")
    log = tmp_path / "logs" / "cell.log"
    rc, reason, seconds = run_cell_process(config, "x-run", tmp_path / "reports", log)
    assert rc == 2
    assert reason.startswith(f"{config}: engines: List should have at least 1 item")
    assert seconds > 0 and log.read_text(encoding="utf-8").startswith("[batch] ")
    assert not (tmp_path / "reports" / "x-run").exists()
