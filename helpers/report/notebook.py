"""What every notebook needs: the step context (config + run folder) and escaped display helpers.

Notebooks stay thin: they call ``start`` once, then one view per checklist step. Everything shown
goes through these helpers, which escape user-supplied text (workload names, engine labels) so
that it renders as text in the HTML report.
"""

from __future__ import annotations

import html
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.core.config import PlaybookConfig, load_config
from helpers.core.paths import PLAYBOOK_DIR, REPORTS_DIR
from helpers.run.records import write_json_atomic

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

    def path(self, *parts: str) -> Path:
        """A path inside the run folder (parent folders created)."""
        p = self.run_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def save_json(self, name: str, data: Any) -> Path:
        """Write an artifact of this run as JSON."""
        p = self.path(name)
        write_json_atomic(p, data)
        return p

    def load_json(self, name: str) -> Any | None:
        """Read an artifact of this run, or None if an earlier step did not write it."""
        p = self.run_dir / name
        if not p.is_file():
            return None
        return json.loads(p.read_text(encoding="utf-8"))


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
    return Context(cfg=cfg, run_dir=rd.resolve(), config_path=path)


def slug(text: str) -> str:
    """A filesystem-safe form of a name."""
    out = "".join(c if c.isalnum() or c in "-_" else "-" for c in text.lower())
    return "-".join(x for x in out.split("-") if x) or "run"


def esc(value: Any) -> str:
    """HTML-escape any value as text."""
    return html.escape("" if value is None else str(value), quote=True)


def _display(obj: Any) -> None:
    # present only inside a notebook kernel
    from IPython.display import display

    display(obj)


def show_html(markup: str) -> None:
    """Display trusted markup built by the playbook (callers escape what they interpolate)."""
    # present only inside a notebook kernel
    from IPython.display import HTML

    _display(HTML(markup))


def say(text: str, kind: str = "note") -> None:
    """Display a sentence (escaped) as a paragraph; ``kind`` styles it: note, warn, ok, missing."""
    show_html(f'<p class="pb-{esc(kind)}">{esc(text)}</p>')


def not_yet(what: str) -> None:
    """State plainly that a step has nothing to show yet, instead of inventing content."""
    say(f"Not available in this run: {what}", "missing")


def show_table(df: Any, caption: str | None = None, floatfmt: str = "{:,.2f}") -> None:
    """Display a DataFrame as an escaped HTML table."""
    if not isinstance(df, pd.DataFrame):
        df = pd.DataFrame(df)
    if df.empty:
        not_yet(caption or "no rows")
        return
    body = df.to_html(index=False, escape=True, na_rep="–", float_format=lambda x: floatfmt.format(x), border=0)
    cap = f"<p class='pb-caption'>{esc(caption)}</p>" if caption else ""
    show_html(f"{cap}<div class='pb-table'>{body}</div>")


def figure_png(fig: Any, dpi: int = 110) -> bytes:
    """A matplotlib figure rendered to PNG bytes, whatever backend is active."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def show_figure(fig: Any) -> None:
    """Display a matplotlib figure as an embedded PNG (so the report carries it) and close it."""
    # heavy; imported only where a figure is drawn
    import matplotlib.pyplot as plt

    # present only inside a notebook kernel
    from IPython.display import Image

    _display(Image(data=figure_png(fig)))
    plt.close(fig)


def progress(message: str) -> None:
    """A progress line for whoever watches the run (stderr: kept out of the report)."""
    print(message, file=sys.stderr, flush=True)
