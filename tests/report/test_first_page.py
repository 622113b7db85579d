"""The report's first page: contradiction first, plain sentences, confidence, chart, deciding figures, gaps."""

from helpers.report.first_page import first_page_html, per_gpu_of, saved_cost
from helpers.run.summary import parse_summary

XSS = "<img src=x onerror=alert(1)>"
TIE = "`a` and `b` are a tie within noise (±4.0%, 3 and 3 trials)"
DUMMY = {"dummy_weights": True}


def summary(contradiction=None):
    rep = {"label": "a", "engine": "vllm", "source": "capacity", "meets_sla": True,
           "output_tok_s": {"mean": 1000.0, "low": 950.0, "high": 1050.0, "n": 3},
           "ttft_ms_p95": {"mean": 800.0, "low": 700.0, "high": 900.0, "n": 3},
           "request_rate": {"mean": 4.0, "low": 3.8, "high": 4.2, "n": 3}, "requests": 300}  # fmt: skip
    return parse_summary(
        {
            "schema": 2,
            "run_id": "r",
            "recommendation": {"primary": f"a{XSS}", "backup": None, "sentences": ["Use `a` as the primary engine."]},
            "engines": [
                {
                    "label": f"a{XSS}",
                    "engine": "vllm",
                    "status": "ok",
                    "representative": rep,
                    "usd_per_mtok_output": 0.5,
                }
            ],  # fmt: skip
            "decision": {
                "contradiction": contradiction,
                "warnings": [],
                "verdict": {
                    "verdict": "equivalent",
                    "margin_pct": 5.0,
                    "text": "`a` and `b` are equivalent within ±5%",
                },
            },  # fmt: skip
            "cost": {  # step 6's record as saved: the priced representative, with its throughput per GPU
                "best": [
                    {
                        "label": "a",
                        "engine": "vllm",
                        "representative": "a@4.000req/s",
                        "output_tok_s": 1000.0,
                        "gpus_per_replica": 2,
                        "usd_per_mtok_output": 0.5,
                    }
                ],
                "demand": {"output_tokens_mean": 250.0, "basis": "no peak traffic given"},
            },  # fmt: skip
            "config": {
                "sla": {"ttft_p95_ms": 2000},
                "engines": [{"label": f"a{XSS}", "knobs": {"dummy_weights": True}}],
            },
        }
    )


def test_first_page_leads_with_the_contradiction_and_writes_plain_escaped_text():
    html = first_page_html(summary("The measurements contradict the seed's decision tree: it points to vLLM, but X."))
    assert html.index("contradict the seed") < html.index("Use a as the primary engine.")
    assert "`" not in html and XSS not in html and "&lt;img src=x" in html
    assert "Verdict: equivalent (±5%)." in html and "a and b are equivalent within ±5%" in html
    assert "data:image/png;base64," in html  # the trade-off chart
    assert "1,000 ± 50 (n=3) output tok/s" in html and "$0.500 per M output tokens" in html
    assert "Dummy (random) weights" in html  # what was not measured


def test_no_contradiction_no_warning_line():
    assert "contradict" not in first_page_html(summary())


def test_a_verdict_that_is_not_conclusive_is_the_first_line_of_the_page():
    s = summary(None)
    s.decision["verdict"] = {"verdict": "not_conclusive", "text": "`a` against `b` is not conclusive: 6 more probes"}
    html = first_page_html(s)
    assert html.startswith("<p class='pb-warn'><b>Verdict: not conclusive.</b> a against b is not conclusive")
    s.decision["verdict"] = {"verdict": "measured", "difference_pct": 12.0, "low_pct": 6.1, "high_pct": 18.3}
    s.decision["verdict"]["text"] = "`a` serves 12.0% more"
    assert "Verdict: measured, +12.0% [+6.1%, +18.3%]." in first_page_html(s)


def test_a_script_in_a_label_or_a_sentence_is_text_not_markup():
    s = summary(None)
    s.engines[0].label = "<script>alert('label')</script>"
    s.recommendation.sentences = ["Use `<script>alert(1)</script>` now."]
    html = first_page_html(s)
    assert "<script>" not in html and "&lt;script&gt;alert(&#39;label&#39;)&lt;/script&gt;" in html
    assert "Use &lt;script&gt;alert(1)&lt;/script&gt; now." in html


def test_throughput_per_gpu_is_read_from_step_6s_record_and_never_computed_when_missing():
    s = summary(None)
    assert per_gpu_of(saved_cost(s), s.engines[0].representative) == 500.0  # 1,000 tok/s on 2 GPUs, as saved
    s.cost = None  # an archive whose summary holds no cost record: not recorded, so not drawn
    assert per_gpu_of(saved_cost(s), s.engines[0].representative) is None
    html = first_page_html(s)
    assert "data:image/png;base64," not in html and "1,000 ± 50 (n=3) output tok/s" in html


def test_a_measured_verdict_with_an_unbounded_end_reads_unbounded_everywhere():
    # the CPU default's prefix-cache comparison: the better side's capacity is a lower bound (no failing load)
    from helpers.decision.evidence import EvidenceVerdict
    from helpers.decision.verdict_words import verdict_headline

    v = EvidenceVerdict(verdict="measured", difference_pct=234.7, low_pct=234.6, high_pct=None, significant=True,
                        text="`a` serves 234.7% more")  # fmt: skip
    assert verdict_headline(v.model_dump()) == "measured, +234.7% [+234.6%, unbounded]"
    s = summary(None)
    s.decision["verdict"] = v.model_dump()
    assert "Verdict: measured, +234.7% [+234.6%, unbounded]." in first_page_html(s)
