"""The first page is rendered from the saved records alone: every step's compute function fails if called.

An archived run folder is copied, ``summary.json`` is rebuilt from its records and the first page and the
report's header are rendered from it, while the compute functions of steps 5-8 (the representative, the
pricing, the fleet, the break-even, the decision) raise. The figures on the page are the archived ones.
A record that is missing is an error that names the step to run, never a silent recomputation.
"""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import sys
from pathlib import Path

import pytest

from helpers.core.config import load_config
from helpers.decision.compute import decide
from helpers.report.first_page import first_page_html
from helpers.report.html import _header_html
from helpers.report.run_summary import NOT_RECORDED, build_summary
from helpers.run.folder import RunFolder
from helpers.run.reader import MissingRecordError
from helpers.run.summary import read_summary

REPORTS = Path(__file__).resolve().parents[2] / "reports"
RUN = "h200-20261203-chat-70b-fp8"
COMPUTING = [
    "helpers.benchmark.sla",
    "helpers.cost.analysis",
    "helpers.cost.compute",
    "helpers.cost.fleet",
    "helpers.cost.break_even",
    "helpers.decision.compute",
    "helpers.decision.choice",
    "helpers.decision.evidence",
    "helpers.decision.tree",
    "helpers.decision.risk",
]


class Recomputed(AssertionError):
    """A step's compute function was called while rendering from the saved records."""


def _forbid_computing(monkeypatch: pytest.MonkeyPatch) -> int:
    """Make every function defined in the computing modules raise, wherever it was imported to; return how many."""
    forbidden = {}
    for name in COMPUTING:
        module = importlib.import_module(name)
        for attr, fn in vars(module).items():
            if inspect.isfunction(fn) and fn.__module__ == name:
                forbidden[id(fn)] = f"{name}.{attr}"

    def raiser(what: str):
        def called(*_a, **_k):
            raise Recomputed(f"{what} was called: the first page must read saved records only")

        return called

    patched = 0
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("helpers."):
            for attr, value in list(vars(module).items()):
                if id(value) in forbidden:
                    monkeypatch.setattr(module, attr, raiser(forbidden[id(value)]))
                    patched += 1
    return patched


def _text(html: str) -> str:
    """The page as text, charts left out."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "PNG", html)


def test_first_page_renders_from_saved_records_with_every_compute_function_failing(tmp_path, monkeypatch):
    run = tmp_path / RUN
    shutil.copytree(REPORTS / RUN, run, ignore=shutil.ignore_patterns("report.html", "notebooks", "logs"))
    cfg = load_config(run / "config.yaml")
    archived = read_summary(REPORTS / RUN / "summary.json")
    assert _forbid_computing(monkeypatch) > 20
    with pytest.raises(Recomputed):  # the patch holds: step 6 or 7 called now fails
        importlib.import_module("helpers.cost.analysis").analyse(RunFolder(run).engine_results(), cfg)
    with pytest.raises(Recomputed):
        importlib.import_module("helpers.decision.compute").decide(RunFolder(run).engine_results(), cfg)

    summary = build_summary(run, cfg)
    page = first_page_html(summary)
    header = _header_html(summary)

    assert [e.representative.key for e in summary.engines] == [e.representative.key for e in archived.engines]
    assert [e.usd_per_mtok_output for e in summary.engines] == [e.usd_per_mtok_output for e in archived.engines]
    assert summary.recommendation == archived.recommendation  # the same decision
    assert summary.recommendation.evidence == "not conclusive"  # the index's line (decision.evidence.evidence_line)
    assert _text(page) == _text(first_page_html(archived))
    assert "Not conclusive: provisionally use vLLM 0.26.0 as the primary engine" in page
    for e in archived.engines:  # every configuration's deciding figures, as step 6 saved them
        assert f"${e.usd_per_mtok_output:,.3f} per M output tokens" in page
        assert f"{e.representative.output_tok_s.text()} output tok/s" in page
    assert "data:image/png;base64," in page  # the chart: throughput per GPU read from step 6's record
    assert page in header and "Engine decision report: " in header


def test_a_missing_cost_record_is_an_error_naming_step_6_never_a_recomputation(tmp_path, monkeypatch):
    run = tmp_path / RUN
    shutil.copytree(REPORTS / RUN, run, ignore=shutil.ignore_patterns("report.html", "notebooks", "logs"))
    cfg = load_config(run / "config.yaml")
    folder = RunFolder(run)
    with pytest.raises(MissingRecordError, match=r"cost.json is missing .*step 6 .*playbook/04_cost.ipynb"):
        decide(folder.engine_results(), cfg, None, None)
    # the summary of a run without step 6's record and without an earlier summary: nothing priced, said so
    (run / "cost.json").unlink()
    (run / "summary.json").unlink()
    _forbid_computing(monkeypatch)
    summary = build_summary(run, cfg)
    assert all(e.representative is None and e.usd_per_mtok_output is None for e in summary.engines)
    assert {e.cost_source for e in summary.engines} == {"no priced measurement"}
    page = first_page_html(summary)
    assert "<td>not measured</td>" in page and "per M output tokens" not in page  # the table prices nothing


def test_a_saved_price_is_read_for_the_representative_it_was_computed_for(tmp_path):
    run = tmp_path / RUN
    shutil.copytree(REPORTS / RUN, run, ignore=shutil.ignore_patterns("report.html", "notebooks", "logs"))
    cost = (run / "cost.json").read_text(encoding="utf-8")
    # step 6 priced another measurement of the first configuration than the one that stands for it now
    first = read_summary(run / "summary.json").engines[0]
    (run / "cost.json").write_text(cost.replace(first.representative.key, first.representative.key + "-other"))
    summary = build_summary(run, load_config(run / "config.yaml"))
    assert summary.engines[0].usd_per_mtok_output is None and summary.engines[0].cost_source == NOT_RECORDED
    assert summary.engines[1].usd_per_mtok_output is not None
