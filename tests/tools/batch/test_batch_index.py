"""The batch page and record, the summary adapter, and the batch list in reports/index.html."""

import base64
import re
import struct

from batch_data import fake_finished_run

from helpers.core.config import parse_config
from helpers.report.batches import BatchRecord, CellRow, batches_section, chart_png, read_record, write_batch_index
from helpers.report.index import write_index
from helpers.tools.batch.figures import cell_figures

CFG = parse_config({"name": "ix", "model": {"path": "tiny-llama"}, "engines": [
    {"label": "vllm-cpu", "engine": "vllm-cpu", "launcher": {"python": "python3"}}]})  # fmt: skip


def record() -> BatchRecord:
    return BatchRecord(
        batch="b1",
        name="B <one>",
        source="m.yaml",
        executor="ray",
        address="ray://head:10001",
        updated_utc="2026-12-01T10:00:00+00:00",
        axes=["models", "engines"],
        cells=[
            CellRow(cell="m1_cpu", run_id="b1-m1_cpu", values={"models": "m1", "engines": "cpu"}, status="ok",
                    primary="vllm-cpu", primary_engine="vllm-cpu", primary_version="0.32.0", usd_per_mtok=0.1834,
                    output_tok_s=512.4, seconds=95, where="node-a", report="../b1-m1_cpu/report.html"),
            CellRow(cell="m2_cpu", run_id="b1-m2_cpu", values={"models": "m2", "engines": "cpu"}, status="failed",
                    reason="engine <died>", seconds=12),
        ],
    )  # fmt: skip


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_page_has_one_table_row_per_cell_linked_to_its_report(tmp_path):
    page = write_batch_index(tmp_path / "batch-b1", record()).read_text(encoding="utf-8")
    assert "<h1>Batch B &lt;one&gt;</h1>" in page
    assert "2 cell(s): 1 ok, 1 failed, 0 running, 0 pending. Executor ray at ray://head:10001" in page
    rows = re.findall(r"<tr class='pb-(\w+)'>(.*?)</tr>", page)
    assert [s for s, _ in rows] == ["ok", "failed"]
    ok = re.findall(r"<td>(.*?)</td>", rows[0][1])
    assert ok == ["m1_cpu", "m1", "cpu", "ok", "vllm-cpu (vllm-cpu 0.32.0)", "$0.183", "512", "1m35s", "node-a",
                  "<a href='../b1-m1_cpu/report.html'>b1-m1_cpu</a>"]  # fmt: skip
    failed = re.findall(r"<td>(.*?)</td>", rows[1][1])
    assert failed[3] == "failed<br><small>engine &lt;died&gt;</small>" and failed[-1] == "b1-m2_cpu"
    assert page.count("<table>") == 1 and page.count("<img ") == 1
    assert "<script" not in page


def test_the_chart_is_an_embedded_png_sized_by_the_cell_count(tmp_path):
    page = write_batch_index(tmp_path / "batch-b1", record()).read_text(encoding="utf-8")
    data = base64.b64decode(re.search(r"src='data:image/png;base64,([^']+)'", page)[1])
    w, h = png_size(data)
    assert (w, h) == png_size(chart_png(record()))
    three = record().model_copy(update={"cells": [*record().cells, record().cells[0].model_copy(update={"cell": "x"})]})
    assert png_size(chart_png(three))[0] == w and png_size(chart_png(three))[1] > h


def test_the_record_round_trips(tmp_path):
    write_batch_index(tmp_path / "batch-b1", record())
    back = read_record(tmp_path / "batch-b1")
    assert back == record()
    assert read_record(tmp_path / "nowhere") is None


def test_reports_index_lists_the_batches(tmp_path):
    write_batch_index(tmp_path / "batch-b1", record())
    (tmp_path / "batch-broken").mkdir()
    section = batches_section(tmp_path)
    assert section.startswith("<h2>Batches</h2>")
    assert "<a href='batch-b1/index.html'>B &lt;one&gt;</a>: 2 cell(s), 1 ok, 1 failed; executor ray" in section
    assert "broken" not in section
    assert batches_section(tmp_path / "none") == ""
    index = write_index(tmp_path).read_text(encoding="utf-8")
    assert "<a href='batch-b1/index.html'>" in index


def test_cell_figures_read_the_primary_and_its_cost(tmp_path):
    fig = cell_figures(fake_finished_run(tmp_path / "run", CFG, usd=0.42))
    assert (fig.primary, fig.primary_engine, fig.primary_version, fig.usd_per_mtok) == (
        "vllm-cpu", "vllm-cpu", "0.32.0", 0.42)  # fmt: skip
    assert fig.problem is None and fig.workload == "ix"


def test_cell_figures_say_why_a_figure_is_missing(tmp_path):
    fig = cell_figures(fake_finished_run(tmp_path / "a", CFG, primary=None))
    assert fig.primary is None and fig.problem == "no recommendation (vllm-cpu: no health in time)"
    fig = cell_figures(fake_finished_run(tmp_path / "b", CFG, usd=None))
    assert fig.primary == "vllm-cpu" and fig.usd_per_mtok is None
    assert fig.problem.startswith("no $/M output tokens for vllm-cpu")
    assert "cannot read" in cell_figures(tmp_path / "nothing").problem
