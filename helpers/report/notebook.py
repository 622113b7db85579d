"""What every notebook needs: the step context (config + run folder) and escaped display helpers.

Notebooks stay thin: they call ``start`` once, then one view per checklist step. Everything shown
goes through these helpers, which escape user-supplied text (workload names, engine labels) so
that it renders as text in the HTML report.
"""

from __future__ import annotations

import html
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mistune
import pandas as pd

from helpers.core.config import PlaybookConfig
from helpers.core.paths import PLAYBOOK_DIR, REPORTS_DIR
from helpers.core.text import slug
from helpers.launchers.config_check import load_config
from helpers.report.tables import COLLAPSE_ROWS, for_people, table_html, write_csv
from helpers.run.folder import RunFolder

_DISPLAY: dict[str, Path | None] = {"run_dir": None}  # the run folder of this kernel's notebook (set by start)

STEP_TITLES = {
    1: "Workload profile",
    2: "Hardware",
    3: "Team",
    4: "Memory plan and engine test environments",
    5: "Live engine benchmarks",
    6: "Cost per million tokens and TCO",
    7: "Decision",
    8: "Risk",
    9: "Pilot",
    10: "Rollout",
    11: "Quarterly review",
    12: "Continuous learning",
}


@dataclass
class Context:
    """A notebook's view of the run: the validated config and the run folder it writes into."""

    cfg: PlaybookConfig
    run_dir: Path
    config_path: Path

    @property
    def folder(self) -> RunFolder:
        """The run folder, through which every step saves and loads its typed records."""
        return RunFolder(self.run_dir)

    def path(self, *parts: str) -> Path:
        """A path inside the run folder (parent folders created)."""
        p = self.run_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p


def _resolve_config(config_path: str) -> Path:
    p = Path(config_path).expanduser()
    if p.is_absolute() or p.is_file():
        return p.resolve()
    for base in (PLAYBOOK_DIR, PLAYBOOK_DIR.parent):
        if (base / p).is_file():
            return (base / p).resolve()
    return p


def start(config_path: str, run_dir: str = "") -> Context:
    """Load and validate the config; use ``run_dir`` or, interactively, a scratch run folder."""
    path = _resolve_config(config_path)
    cfg = load_config(path)
    rd = Path(run_dir) if run_dir else REPORTS_DIR / f"interactive-{slug(cfg.name)}"
    rd.mkdir(parents=True, exist_ok=True)
    _DISPLAY["run_dir"] = rd.resolve()  # where show_table writes its CSV files
    return Context(cfg=cfg, run_dir=rd.resolve(), config_path=path)


def esc(value: Any) -> str:
    """HTML-escape any value as text."""
    return html.escape("" if value is None else str(value), quote=True)


def _display(obj: Any) -> None:
    # IPython is present only inside a notebook kernel
    from IPython.display import display

    display(obj)


def show_html(markup: str) -> None:
    """Display trusted markup built by the playbook (callers escape what they interpolate)."""
    # IPython is present only inside a notebook kernel
    from IPython.display import HTML

    _display(HTML(markup))


def say(text: str, kind: str = "note") -> None:
    """Display a sentence (escaped) as a paragraph; ``kind`` styles it: note, warn, ok, missing."""
    show_html(f'<p class="pb-{esc(kind)}">{esc(text)}</p>')


def not_yet(what: str) -> None:
    """State plainly that a step has nothing to show yet, instead of inventing content."""
    say(f"Not available in this run: {what}", "missing")


def show_table(
    df: Any,
    caption: str | None = None,
    floatfmt: str = "{:,.2f}",
    csv_name: str | None = None,
    collapse_rows: int = COLLAPSE_ROWS,
) -> None:
    """Display a DataFrame as an escaped HTML table for people.

    Headers become words with units and money columns dollars (``helpers.report.tables``); a table of
    more than ``collapse_rows`` rows is folded into ``<details>``. The full data is written as CSV to
    ``<run>/tables/<csv_name>.csv`` (``csv_name`` defaults to the caption's slug for a folded table) when
    the notebook's run folder is known (``start``), and the caption links to it.
    """
    if not isinstance(df, pd.DataFrame):
        df = pd.DataFrame(df)
    if df.empty:
        not_yet(caption or "no rows")
        return
    long = len(df) > collapse_rows
    name = csv_name or (caption if long and caption else None)
    link = ""
    run_dir = _DISPLAY.get("run_dir")
    if name and run_dir is not None:
        path = write_csv(df, run_dir, slug(name))
        rel = path.relative_to(run_dir).as_posix()
        link = f" <a class='pb-csv' href='{esc(rel)}'>(all {len(df):,} rows as CSV)</a>"
    shown = for_people(df)
    table = f"<div class='pb-table'>{table_html(shown, floatfmt)}</div>"
    if long:
        what = esc(caption) if caption else "table"
        table = f"<details class='pb-long'><summary>{what}: {len(df):,} rows (show)</summary>{table}</details>"
    cap = f"<p class='pb-caption'>{esc(caption)}{link}</p>" if caption else (f"<p>{link}</p>" if link else "")
    show_html(f"{cap}{table}")


_MARKDOWN = mistune.create_markdown(escape=True, plugins=["table"])


def markdown_html(text: str, first_level: int = 4) -> str:
    """Markdown (the rollout's ``.md`` files) as HTML with raw HTML escaped; headings start at ``<h4>``.

    Headings are shifted so that a document's title never competes with the report's step headings.
    """
    shift = first_level - 1
    out = re.sub(r"<(/?)h([1-6])", lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + shift)}", _MARKDOWN(text))
    return re.sub(r"<table>(.*?)</table>", r"<div class='pb-table'><table>\1</table></div>", out, flags=re.S)


def show_markdown(text: str, summary: str | None = None, open_: bool = True) -> None:
    """Display a markdown document (escaped); with ``summary``, inside a ``<details>`` element."""
    body = f"<div class='pb-doc'>{markdown_html(text)}</div>"
    if summary:
        body = f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{body}</details>"
    show_html(body)


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    """A matplotlib figure rendered to PNG bytes, whatever backend is active."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def show_figure(fig: Any) -> None:
    """Display a matplotlib figure as an embedded PNG (so the report carries it) and close it."""
    # matplotlib is heavy: imported only where a figure is drawn
    import matplotlib.pyplot as plt

    # IPython is present only inside a notebook kernel
    from IPython.display import Image

    _display(Image(data=figure_png(fig)))
    plt.close(fig)


def progress(message: str) -> None:
    """A progress line for whoever watches the run (stderr: kept out of the report)."""
    print(message, file=sys.stderr, flush=True)
