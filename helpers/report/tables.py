"""Tables for people: column names in words with their units, money with ``$``, long tables collapsed.

``human_column`` turns a record's field name (``usd_per_mtok_output``, ``ttft_ms_p95``) into a header
(``$ per M output tokens``, ``TTFT p95 (ms)``); names that are already words are kept. ``table_html``
renders a DataFrame escaped, formats money columns as dollars, and folds tables longer than
``COLLAPSE_ROWS`` into a ``<details>`` element; the full data goes to CSV beside the report.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

COLLAPSE_ROWS = 15
TABLES_DIR = "tables"

# field names whose words the generic rule would get wrong
COLUMN_NAMES: dict[str, str] = {
    "label": "configuration",
    "usd_per_mtok": "$ per M output tokens",
    "usd_per_mtok_output": "$ per M output tokens",
    "usd_per_mtok_total": "$ per M tokens (in + out)",
    "usd_per_hour": "$ per hour",
    "price_per_hour": "$ per GPU-hour",
    "gpu_monthly_usd": "GPU $ per month",
    "ops_monthly_usd": "operations $ per month",
    "tco_monthly_usd": "TCO $ per month",
    "extra_ops_usd_month": "extra operations $ per month",
    "output_tok_s": "output tok/s",
    "total_tok_s": "total tok/s",
    "demand_output_tok_s": "demand (output tok/s)",
    "demand_concurrency": "demand (concurrency)",
    "break_even_output_tok_s": "break-even (output tok/s)",
    "break_even_requests_per_s": "break-even (req/s)",
    "break_even_mtok_month": "break-even (M tokens per month)",
    "break_even_gpus_easier": "break-even (GPUs, easier engine)",
    "gpu_saving_per_token_pct": "GPU saving per token (%)",
    "ttft_ms_p95": "TTFT p95 (ms)",
    "sla_ttft_p95_ms": "SLA: TTFT p95 (ms)",
    "build_s": "build / cold start (s)",
    "ops_hours_per_month": "operations hours per month",
    "base_ops_hours": "base operations hours per month",
    "rebuilds_per_month": "rebuilds per month",
    "gpus_per_replica": "GPUs per replica",
    "sla_share": "share of points within the SLA",
    "meets_sla": "meets the SLA",
    "within_sla": "within the SLA",
    "pays_off_now": "pays off now",
    "why_not": "why not",
    "total_score": "total score",
}
_WORDS = {"ttft": "TTFT", "itl": "ITL", "kv": "KV", "gpu": "GPU", "gpus": "GPUs", "tco": "TCO", "sla": "SLA",
          "mtok": "M tokens", "tp": "TP", "usd": "$", "e2e": "end-to-end"}  # fmt: skip
_SPACED_UNITS = {"ms", "s", "GiB", "MiB", "%"}
_UNITS = {"ms": "ms", "s": "s", "pct": "%", "gib": "GiB", "mib": "MiB", "usd": "$"}


def human_column(name: Any) -> str:
    """A header in words with its unit for a field name; a name that already has spaces is kept."""
    text = str(name)
    if text in COLUMN_NAMES:
        return COLUMN_NAMES[text]
    if "_" not in text:
        head, _, last = text.rpartition(" ")
        return f"{head} ({last})" if head and last in _SPACED_UNITS else text
    words = text.split("_")
    units = [w for w in words if w in _UNITS and w not in ("s", "usd")]
    if len(words) > 1 and words[-1] == "s" and words[-2] not in ("tok", "req", "per"):
        units.append("s")
        words = words[:-1]
    words = [w for w in words if w not in units]
    text = " ".join(_WORDS.get(w, w) for w in words)
    text = re.sub(r"\b(tok|req) s\b", r"\1/s", text)
    text = re.sub(r"\brequests per s\b", "req/s", text)
    text = re.sub(r"\bper s\b", "/s", text)
    return f"{text} ({', '.join(_UNITS[u] for u in units)})" if units else text


def is_money(name: Any) -> bool:
    """Whether a column holds dollars (by its field name or header)."""
    text = str(name)
    return "usd" in text.split("_") or "$" in text or text in ("price_per_hour", "cost_value")


def money(value: Any) -> str:
    """A dollar amount: whole dollars from $100, cents from $1, three decimals below."""
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    if abs(value) >= 100:
        return f"${value:,.0f}"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:,.3f}"


def for_people(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with money columns as dollar text and headers in words (the data itself is not changed)."""
    out = df.copy()
    for col in out.columns:
        if is_money(col) and pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(money)
    out.columns = [human_column(c) for c in out.columns]
    return out


def _cell(value: Any, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return floatfmt.format(value)
    return str(value)


def table_html(df: pd.DataFrame, floatfmt: str = "{:,.2f}") -> str:
    """``df`` (already ``for_people``) as an escaped HTML table; numeric and money columns right-aligned."""
    num = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) or "$" in str(c)
           for c in df.columns]  # fmt: skip

    def cls(i: int) -> str:
        return " class='num'" if num[i] else ""

    head = "".join(f"<th{cls(i)}>{html.escape(str(c))}</th>" for i, c in enumerate(df.columns))
    rows = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{html.escape(_cell(v, floatfmt))}</td>" for i, v in enumerate(row)) + "</tr>"
        for row in df.itertuples(index=False, name=None)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def write_csv(df: pd.DataFrame, run_dir: Path, name: str) -> Path:
    """Write the full table (field names kept) as ``<run>/tables/<name>.csv``; returns its path."""
    path = Path(run_dir) / TABLES_DIR / f"{name}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path
