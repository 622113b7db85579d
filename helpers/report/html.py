"""The HTML decision report: the executed notebooks merged into one self-contained page.

The report opens with the recommendation (the four-sentence answer), the run's facts and a table
of contents; then every checklist step's section in order (ids ``step-1`` … ``step-12``). Code is
hidden, stderr (progress lines) is dropped, images are embedded as data URIs, and no script is
loaded from the network, so an archived report opens offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from helpers.core.paths import TEMPLATES_DIR

if TYPE_CHECKING:
    import nbformat

from helpers.report.first_page import first_page_html
from helpers.report.index import configuration_head, hardware_text
from helpers.report.notebook import STEP_TITLES, esc
from helpers.report.pages import fragment, render
from helpers.run.summary import RunSummary, read_summary


def _clean_outputs(cell: nbformat.NotebookNode) -> None:
    """Drop stderr streams and execution counts; keep displays, stdout and errors."""
    if cell.get("cell_type") != "code":
        return
    cell["outputs"] = [
        o for o in cell.get("outputs", []) if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
    ]
    cell["execution_count"] = None


def _header_html(summary: RunSummary) -> str:
    """The report's header (``templates/pages/report_header.html.j2``) from the run's summary record.

    Its failed notebooks are the summary's ``failures`` (``run.json``'s, read once by ``run_summary``).
    """
    rec = summary.recommendation
    engines = ", ".join(f"{configuration_head(e.label, e.engine, e.version)}: {e.status}" for e in summary.engines)
    meta = [
        ("Run", summary.run_id),
        ("Date (UTC)", summary.created_utc),
        ("Workload", summary.workload),
        ("Model", summary.model),
        ("Hardware", hardware_text(summary.hardware)),
        ("Engines", engines),
        ("Primary / backup", f"{rec.primary or '–'} / {rec.backup or '–'}"),
    ]
    page = render(
        "report_header.html.j2",
        workload=summary.workload,
        flags=summary.review_flags,
        first_page=fragment(first_page_html(summary)),
        failures=summary.failures,
        meta=[(k, "" if v is None else v) for k, v in meta],
        toc=list(STEP_TITLES.items()),
    )
    return str(page)


def _report_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The cells of one executed notebook that belong in the report.

    Left out: the parameters cells, and the notebook's own title (the markdown before its parameters
    cell), which would repeat the step headings (``<h2 id="step-N">``) that follow it.
    """

    def is_parameters(cell: nbformat.NotebookNode) -> bool:
        return bool({"parameters", "injected-parameters"} & set(cell.get("metadata", {}).get("tags", [])))

    out, before_parameters = [], any(is_parameters(c) for c in nb.cells)
    for cell in nb.cells:
        if is_parameters(cell):
            before_parameters = False
            continue
        if before_parameters and cell.get("cell_type") == "markdown":
            continue
        out.append(cell)
    return out


def merged_notebook(run_dir: Path) -> nbformat.NotebookNode:
    """One notebook: a header cell, then every executed notebook's cells after its parameters."""
    # nbformat validates with jsonschema, whose import takes seconds: loaded only when a report is rendered
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook, new_output  # with nbformat, as above

    run_dir = Path(run_dir)
    summary = read_summary(run_dir / "summary.json")
    header = nbformat.v4.new_code_cell("")
    header.outputs = [new_output("display_data", data={"text/html": _header_html(summary)})]
    cells = [header]
    seen_steps: set[int] = set()
    for path in sorted((run_dir / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in _report_cells(nb):
            if cell.get("cell_type") == "markdown":
                seen_steps.update(n for n in STEP_TITLES if f'id="step-{n}"' in cell.source)
            _clean_outputs(cell)
            cells.append(cell)
    for n in sorted(set(STEP_TITLES) - seen_steps):  # a notebook that never ran still gets its section
        cells.append(
            new_markdown_cell(
                f'<h2 id="step-{n}">Step {n} — {esc(STEP_TITLES[n])}</h2>\n\n'
                "<p class='pb-missing'>This step's notebook did not run in this run.</p>"
            )
        )
    merged = new_notebook(cells=cells)
    merged.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    merged.metadata["title"] = esc(f"Engine decision report: {summary.workload}")
    return merged


def _bundled_templates() -> Path | None:
    """The folder of nbconvert's own templates when it sits beside the package, else None.

    That is the case when nbconvert was installed with ``pip --target`` (an offline bundle): its
    templates are then not on the Jupyter path.
    """
    # nbconvert is heavy; only the report renderer needs it
    import nbconvert

    bundled = Path(nbconvert.__file__).resolve().parent.parent / "share" / "jupyter" / "nbconvert" / "templates"
    return bundled if bundled.is_dir() else None


def render_html(nb: nbformat.NotebookNode) -> str:
    """Render a notebook to self-contained HTML with code hidden."""
    # nbconvert is heavy; only the report renderer needs it
    from nbconvert import HTMLExporter

    bundled = _bundled_templates()
    extra = [str(bundled)] if bundled else []
    exporter = HTMLExporter(
        template_name="playbook",
        # base dirs find each template's own files; the plain path resolves our explicit
        # ``{% extends 'lab/index.html.j2' %}`` when nbconvert's templates are not on the Jupyter path
        extra_template_basedirs=[str(TEMPLATES_DIR), *extra],
        extra_template_paths=extra,
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    body, _ = exporter.from_notebook_node(nb)
    return body


def render_report(run_dir: Path) -> Path:
    """Write ``report.html`` into the run folder and return its path."""
    out = Path(run_dir) / "report.html"
    out.write_text(render_html(merged_notebook(run_dir)), encoding="utf-8")
    return out
