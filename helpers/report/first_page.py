"""The report's first page, read in a minute: the answer, how sure it is, the trade-off, what would change it.

Built only from saved records: ``summary.json`` (schema 2) and step 6's ``cost.json`` inside it (the
per-GPU throughput, read as saved; ARCHITECTURE.md's first-page table names where each field is computed),
rendered by ``templates/pages/first_page.html.j2`` with autoescaping. It shows the four-sentence answer as
plain text (identifiers are no longer wrapped in backticks), the contradiction with the seed's tree when the
measurement overrules it, the verdict (measured, equivalent or not conclusive: the first line when not
conclusive) with what decided, its interval and the probes behind it, one chart of output per GPU (per
replica on a CPU run: ``output_unit``) against TTFT p95 for every configuration with the SLA line and the
recommended one marked, the figures that decided with units and intervals, what would change the decision
(the edge cases, borderline inputs, and the break-even of the primary against the configurations still in
contention: ``break_even_lines``), and what this run did not measure.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from helpers.core.config_engines import placeholder_weights
from helpers.cost.records import CostAnalysis
from helpers.decision.verdict_words import verdict_headline
from helpers.engines import ENGINES
from helpers.report.pages import render
from helpers.run import reader
from helpers.run.records import Figure, Representative
from helpers.run.summary import RunSummary


def plain(text: str) -> str:
    """A sentence without the backticks the decision puts around identifiers."""
    return text.replace("`", "")


def on_cpu(summary: RunSummary) -> bool:
    """Whether every measured configuration of the run ran on a CPU engine (no GPU to divide by)."""
    engines = [e.engine for e in summary.engines if e.representative and e.representative.output_tok_s]
    return bool(engines) and all(name in ENGINES and ENGINES[name].runs_on_cpu for name in engines)


def output_unit(summary: RunSummary) -> str:
    """``per GPU``, or ``per CPU replica`` when the run measured CPU engines only."""
    return "per CPU replica" if on_cpu(summary) else "per GPU"


def saved_cost(summary: RunSummary) -> CostAnalysis | None:
    """Step 6's record as the summary holds it (``cost.json``), typed; None when it has none or another shape."""
    return reader.embedded(summary.cost, CostAnalysis)


def per_gpu_of(cost: CostAnalysis | None, rep: Representative) -> float | None:
    """Output tok/s per GPU of ``rep`` as step 6 saved it (``cost.records.per_gpu``); None: not recorded."""
    row = cost.best_row(rep.label) if cost is not None else None
    return row.output_tok_s_per_gpu if row is not None and row.representative == rep.key else None


def _error_bar(fig: Figure) -> list[list[float]] | None:
    """Matplotlib's asymmetric error of a figure's 95% interval (None without one; never negative)."""
    if fig.half_width is None or fig.low is None or fig.high is None:
        return None
    return [[max(0.0, fig.mean - fig.low)], [max(0.0, fig.high - fig.mean)]]


def tradeoff_png(summary: RunSummary) -> str | None:
    """A data URI of the chart: output tok/s per GPU or CPU replica (x), TTFT p95 (y), SLA line, primary starred."""
    # matplotlib is heavy: imported only where a figure is drawn
    import matplotlib.pyplot as plt

    cost = saved_cost(summary)
    pts = [
        (e.label, per_gpu_of(cost, e.representative), e.representative)
        for e in summary.engines
        if e.representative and e.representative.output_tok_s and e.representative.ttft_ms_p95
    ]
    pts = [(label, x, rep) for label, x, rep in pts if x is not None]  # not recorded: not drawn
    if not pts:
        return None
    sla = (summary.config.get("sla") or {}).get("ttft_p95_ms")
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    for label, x, rep in pts:
        fig_t, fig_x = rep.ttft_ms_p95, rep.output_tok_s
        xerr, yerr = _error_bar(fig_x), _error_bar(fig_t)
        star = label == summary.recommendation.primary
        ax.errorbar([x], [fig_t.mean], xerr=xerr, yerr=yerr, fmt="*" if star else "o", ms=14 if star else 7,
                    capsize=3, label=label + (" (recommended)" if star else ""))  # fmt: skip
    if sla:
        ax.axhline(sla, color="grey", linestyle="--", label=f"SLA {sla:,.0f} ms")
    ax.set_xlabel(f"output tok/s {output_unit(summary)}")
    ax.set_ylabel("TTFT p95 (ms)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _deciding_rows(summary: RunSummary) -> list[tuple[str, str, str, str]]:
    rows = []
    for e in summary.engines:
        rep = e.representative
        if rep is None or rep.output_tok_s is None:
            rows.append((e.label, "not measured", e.status or "", e.reason or ""))
            continue
        rate = rep.request_rate.text("{:,.2f}") + " req/s" if rep.request_rate else "–"
        most = "at most " if rep.lower_bound else ""
        usd = f"{most}${e.usd_per_mtok_output:,.3f} per M output tokens" if e.usd_per_mtok_output is not None else "–"
        what = {
            "capacity": _capacity_words(rep),
            "fixed": f"trials at a fixed {rep.concurrency} streams",
        }.get(rep.source, f"archived point, concurrency {rep.concurrency}")
        rows.append(
            (e.label, f"{rep.output_tok_s.text()} output tok/s; {rate}", usd, f"{what}; {rep.requests} requests")
        )
    return rows


def _capacity_words(rep: Representative) -> str:
    """``SLA capacity 25.6 [24.9, 26.3] req/s (95%, 9 probes near the edge)`` from a representative."""
    cap = rep.capacity
    if cap is None:
        return "SLA capacity"
    unit = "req/s" if rep.concurrency is None else "streams"
    fmt = "{:,.3g}"
    if cap.low is None:
        return f"SLA capacity {fmt.format(cap.mean)} {unit} (no interval)"
    if rep.lower_bound:
        above = (
            "every load tried passed"
            if cap.high is None
            else f"below {fmt.format(cap.high)}: no readable probe between"
        )
        return f"SLA capacity at least {fmt.format(cap.low)} {unit} ({above}; {cap.n} probes, not an interval)"
    high = "unbounded" if cap.high is None else fmt.format(cap.high)
    sure = "" if rep.conclusive else ", wider than asked"
    return f"SLA capacity {fmt.format(cap.mean)} [{fmt.format(cap.low)}, {high}] {unit} (95%, {cap.n} probes{sure})"


def _not_measured(summary: RunSummary) -> list[str]:
    out = []
    engines = summary.config.get("engines") or []
    placeholder = (
        placeholder_weights((e.get("knobs") or {}).get("dummy_weights", True), e.get("engine_options") or {})
        for e in engines
    )
    if any(placeholder):
        out.append("Dummy (random) weights: speed only; answer quality was not measured.")
    for e in summary.engines:
        if e.status in ("failed", "skipped", "partial"):
            out.append(f"{e.label}: {e.status} ({e.reason or 'no reason recorded'}).")
        elif e.representative is not None and e.representative.source == "fixed":
            out.append(f"{e.label}: no SLA capacity search; trials at a fixed load stand for it.")
        elif e.representative is not None and e.representative.source != "capacity":
            out.append(f"{e.label}: nothing measured stands for it ({e.representative.basis}).")
    return out


def break_even_lines(decision: dict[str, Any]) -> list[str]:
    """The break-even verdicts of the primary against the configurations still in contention (eligible ones)."""
    primary = decision.get("primary")
    eligible = {s.get("label") for s in decision.get("scores") or [] if s.get("eligible")}
    out = []
    for b in decision.get("break_even") or []:
        pair = {b.get("harder"), b.get("easier")}
        if b.get("verdict") and primary in pair and (pair - {primary}) <= eligible:
            out.append(plain(b["verdict"]))
    return out


def _verdict(decision: dict[str, Any]) -> dict[str, Any] | None:
    """The verdict line: its headline, text and class; ``first`` when not conclusive (the page's first line)."""
    verdict: dict[str, Any] = decision.get("verdict") or {}
    if not verdict.get("text"):
        return None
    first = verdict.get("verdict") == "not_conclusive"
    return {"head": verdict_headline(verdict), "text": plain(verdict["text"]), "first": first,
            "css": "pb-warn" if first else "pb-note"}  # fmt: skip


def first_page_html(summary: RunSummary) -> str:
    """The first page's HTML, from ``templates/pages/first_page.html.j2`` (every value autoescaped)."""
    decision = summary.decision or {}
    change = [
        plain(w)
        for w in decision.get("warnings") or []
        if "Edge case" in w or "break-even" in w.lower() or w.startswith("Borderline")
    ]
    chart = tradeoff_png(summary)
    page = render(
        "first_page.html.j2",
        contradiction=plain(decision["contradiction"]) if decision.get("contradiction") else None,
        answer=" ".join(plain(s) for s in summary.recommendation.sentences),
        verdict=_verdict(decision),
        chart=chart,
        chart_alt=f"output {output_unit(summary)} against TTFT p95 for every configuration" if chart else "",
        rows=_deciding_rows(summary),
        change=change + break_even_lines(decision),
        missing=_not_measured(summary),
    )
    return str(page)
