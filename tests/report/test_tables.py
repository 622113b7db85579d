"""Tables for people: words and units in headers, dollars, long tables folded, the full data as CSV."""

from __future__ import annotations

import pandas as pd
import pytest

import helpers.report.notebook as notebook
from helpers.report.tables import human_column, money


@pytest.fixture
def shown(monkeypatch, tmp_path):
    out: list[str] = []
    monkeypatch.setattr(notebook, "_display", lambda obj: out.append(obj.data))
    monkeypatch.setitem(notebook._DISPLAY, "run_dir", tmp_path)
    return out


@pytest.mark.parametrize(
    ("field", "header"),
    [
        ("usd_per_mtok_output", "$ per M output tokens"),
        ("ttft_ms_p95", "TTFT p95 (ms)"),
        ("output_tok_s", "output tok/s"),
        ("build_s", "build / cold start (s)"),
        ("gpu_saving_per_token_pct", "GPU saving per token (%)"),
        ("requests_per_s", "req/s"),
        ("TTFT p95 ms", "TTFT p95 (ms)"),
        ("checked by", "checked by"),
    ],
)
def test_headers_are_words_with_units(field, header):
    assert human_column(field) == header


def test_money_is_dollars():
    assert [money(x) for x in (4116.51, 4.54, 0.1624, None)] == ["$4,117", "$4.54", "$0.162", "–"]


def test_show_table_for_people(shown, tmp_path):
    df = pd.DataFrame({"label": ["<b>vllm</b>"], "usd_per_mtok_output": [0.1624], "ttft_ms_p95": [1188.2]})
    notebook.show_table(df, "Cost")
    html = shown[-1]
    assert "$ per M output tokens" in html and "$0.162" in html and "TTFT p95 (ms)" in html
    assert "&lt;b&gt;vllm&lt;/b&gt;" in html and "<details" not in html
    assert not (tmp_path / "tables").exists()  # a short table without csv_name writes no CSV


def test_long_tables_fold_and_keep_their_full_data_as_csv(shown, tmp_path):
    df = pd.DataFrame({"concurrency": range(40), "output_tok_s": [float(i) for i in range(40)]})
    notebook.show_table(df, "Every point")
    html = shown[-1]
    assert "<details class='pb-long'>" in html and "40 rows" in html
    csv = tmp_path / "tables" / "every-point.csv"
    assert csv.is_file() and pd.read_csv(csv).shape == (40, 2) and "href='tables/every-point.csv'" in html
    notebook.show_table(df.head(3), "Short", csv_name="short points")
    assert (tmp_path / "tables" / "short-points.csv").is_file() and "<details" not in shown[-1]


def test_old_signature_still_works(shown):
    notebook.show_table([{"a": 1.23456}], "x", "{:.1f}")
    assert "1.2" in shown[-1]


def test_markdown_is_escaped_and_headings_sit_below_the_steps(shown):
    notebook.show_markdown("# Title <script>x</script>\n\n| a |\n|---|\n| `<i>` |\n")
    html = shown[-1]
    assert "<h4>Title &lt;script&gt;" in html and "<h1" not in html and "<script>" not in html
    assert "<div class='pb-table'><table>" in html


def test_a_quality_gate_that_measured_nothing_names_no_reference(shown):
    from helpers.benchmark.quality_phase import QualityGate
    from helpers.benchmark.view import show_quality
    from helpers.core.paths import REPORTS_DIR
    from helpers.run.folder import RunFolder

    dummy = RunFolder(REPORTS_DIR / "h100-20261206-chat-70b-fp8").load(QualityGate)  # dummy weights: nothing judged
    assert dummy is not None and not dummy.measured and dummy.reference
    show_quality(dummy)
    page = "".join(shown)
    assert "Quality gate: not measured; why, per configuration" in page and "against" not in page
    assert "not measured (dummy weights)" in page
    shown.clear()
    real = RunFolder(REPORTS_DIR / "h200-20261202-smollm2").load(QualityGate)  # real weights: judged
    assert real is not None and real.measured
    show_quality(real)
    assert f"each configuration against `{real.reference}`" in "".join(shown)


def test_a_result_rebuilt_without_a_version_shows_the_one_step_4_found_said_so():
    """The 70B H100 run: TurboMind's and vLLM's results were rebuilt from their points after cut calls."""
    from helpers.benchmark.view import engines_table
    from helpers.core.paths import REPORTS_DIR
    from helpers.environment.records import EnvironmentRecord, MemoryPlanRecord
    from helpers.run.folder import RunFolder

    folder = RunFolder(REPORTS_DIR / "h100-20261206-chat-70b-fp8")
    results = folder.engine_results()
    assert {r.label: r.version for r in results}["vLLM 0.26.0"] is None
    df = engines_table(results, folder.load(MemoryPlanRecord), None, folder.load(EnvironmentRecord))
    versions = dict(zip(df["engine config"], df["version"], strict=True))
    assert versions == {
        "LMDeploy 0.18.0 (TurboMind)": "0.18.0 (step 4)",
        "vLLM 0.26.0": "0.26.0 (step 4)",
        "SGLang 0.5.16": "0.5.16",
    }
    bare = engines_table(results)["version"]  # without step 4: as recorded, missing where the record has none
    assert [None if v != v else v for v in bare] == [r.version for r in results]
