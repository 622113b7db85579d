"""The quality gate: answer checks, the evaluation set, and a broken configuration failing the gate.

The engines are ``tests/fakes/fake_openai_server.py`` answering from the evaluation set
(``FAKE_ANSWERS``): right, every n-th item wrong (``FAKE_WRONG_EVERY``), or as if the chat template
had dropped the question (``FAKE_ENGINE_MODE=drop_question``).
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest
from fakes.fake_process import fake_server

from helpers.benchmark.quality import (
    DEFAULT_EVAL_SET,
    DUMMY_REASON,
    is_correct,
    judge_quality,
    load_eval_set,
    load_outcome,
    normalize,
    run_quality,
    save_outcome,
    unmeasured,
)
from helpers.core.paths import REPO_ROOT

EVAL = DEFAULT_EVAL_SET


def _run(url: str, **kw) -> object:
    return asyncio.run(run_quality(url, "tiny-llama", EVAL, concurrency=4, **kw))


def test_normalize_drops_case_punctuation_accents_and_special_tokens():
    assert normalize("The capital of Brazil is Brasília!<|im_end|>") == "the capital of brazil is brasilia"
    assert normalize("  12,\n\n13 ") == "12 13"


@pytest.mark.parametrize(
    ("output", "answers", "expected"),
    [
        ("The capital of France is Paris.", ["Paris"], True),
        ("Parisian food is good", ["Paris"], False),  # whole words only
        ("12 + 5 = 17", ["17"], True),
        ("12 + 5 = 170", ["17"], False),
        ("One kilometer is 1,000 meters.", ["1000", "1,000"], True),
        ("The capital is Mexico City.", ["Mexico City"], True),
        ("It is in Mexico.", ["Mexico City"], False),
        ("The first letter of the word 'dog' is 'D'.", ["d"], True),
        ("", ["Paris"], False),
    ],
)
def test_is_correct_matches_whole_normalised_words(output, answers, expected):
    assert is_correct(output, answers) is expected


def test_eval_set_has_100_to_200_unique_items_in_every_category():
    items = load_eval_set()
    assert 100 <= len(items) <= 200
    assert len({x.id for x in items}) == len(items)
    cats = {x.category for x in items}
    assert cats == {"capital", "arithmetic", "units", "completion", "spelling"}
    assert min(sum(x.category == c for x in items) for c in cats) >= 15


def test_no_item_is_answered_by_echoing_its_question():
    """An engine that repeats the prompt (or a template that keeps only it) must not score."""
    echoed = [x.id for x in load_eval_set() if is_correct(x.prompt, x.answers)]
    assert echoed == []


def test_eval_set_file_is_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location("make_eval_set", REPO_ROOT / "scripts" / "make_eval_set.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [x.model_dump() for x in load_eval_set()] == module.build()


def test_right_answers_score_full_marks_and_agree_with_themselves(tmp_path: Path):
    with fake_server(tmp_path, {"FAKE_ANSWERS": str(EVAL)}) as url:
        out = _run(url)
    assert out.measurable and out.n == len(load_eval_set()) and out.correct == out.n and out.errors == 0
    assert out.accuracy == 1.0
    assert out.items[0].output.startswith("The answer is ")


def test_broken_chat_template_fails_the_gate(tmp_path: Path):
    """A configuration whose template drops the question answers nothing right: the gate fails it."""
    with fake_server(tmp_path / "a", {"FAKE_ANSWERS": str(EVAL)}) as url:
        good = _run(url)
    with fake_server(tmp_path / "b", {"FAKE_ANSWERS": str(EVAL), "FAKE_ENGINE_MODE": "drop_question"}) as url:
        broken = _run(url)
    assert broken.correct == 0
    ref, bad = judge_quality({"bf16": good, "broken template": broken}, "bf16", threshold_points=2.0)
    assert ref.gate_passed is True and ref.delta_points == 0.0
    assert bad.gate_passed is False and bad.delta_points == -100.0
    assert bad.agreed == 0 and bad.compared == good.n and bad.agreement == 0.0
    assert "-100.0 points" in bad.reason


def test_gate_threshold_in_points(tmp_path: Path):
    """One wrong answer in 170 (-0.6 points) passes at 2 points; one in 25 (-4.1 points) fails."""
    with fake_server(tmp_path / "a", {"FAKE_ANSWERS": str(EVAL)}) as url:
        good = _run(url)
    with fake_server(tmp_path / "b", {"FAKE_ANSWERS": str(EVAL), "FAKE_WRONG_EVERY": "100"}) as url:
        slight = _run(url)
    with fake_server(tmp_path / "c", {"FAKE_ANSWERS": str(EVAL), "FAKE_WRONG_EVERY": "25"}) as url:
        worse = _run(url)
    rows = {r.label: r for r in judge_quality({"ref": good, "fp8": slight, "int4": worse}, "ref", 2.0)}
    assert rows["fp8"].correct == good.n - 1 and rows["fp8"].gate_passed is True
    assert rows["fp8"].agreed == good.n - 1
    assert rows["int4"].correct == good.n - good.n // 25 and rows["int4"].gate_passed is False
    # a looser gate lets the same configuration through
    assert judge_quality({"ref": good, "int4": worse}, "ref", 5.0)[1].gate_passed is True


def test_failed_requests_count_as_wrong_with_their_error(tmp_path: Path):
    """Requests the engine refuses (here: a wrong API key; on an engine, prompts over max_model_len) score 0."""
    with fake_server(tmp_path, {"FAKE_ANSWERS": str(EVAL), "FAKE_API_KEY": "right"}) as url:
        out = asyncio.run(run_quality(url, "m", EVAL, api_key="wrong", limit=8))
        ok = asyncio.run(run_quality(url, "m", EVAL, api_key="right", limit=8))
    assert out.n == 8 and out.errors == 8 and out.correct == 0 and out.accuracy == 0.0
    assert "401" in out.items[0].error
    assert ok.correct == 8 and ok.errors == 0
    row = judge_quality({"ok": ok, "refused": out}, "ok")[1]
    assert row.gate_passed is False and "8 requests failed" in row.reason


def test_dummy_weights_are_never_given_a_number():
    out = asyncio.run(run_quality("http://127.0.0.1:9", "m", EVAL, dummy_weights=True))  # nothing is sent
    assert out.measurable is False and out.reason == DUMMY_REASON and out.accuracy is None and out.items == []
    rows = judge_quality({"on": out, "off": unmeasured()}, "on")
    assert all(r.gate_passed is None and r.accuracy is None and r.agreement is None for r in rows)
    assert rows[1].reason == DUMMY_REASON


def test_unmeasurable_reference_leaves_others_ungated(tmp_path: Path):
    with fake_server(tmp_path, {"FAKE_ANSWERS": str(EVAL)}) as url:
        real = _run(url, limit=10)
    row = judge_quality({"ref": unmeasured(), "real": real}, "ref")[1]
    assert row.accuracy == 1.0 and row.gate_passed is None and "not measurable" in row.reason


def test_unknown_reference_is_refused():
    with pytest.raises(KeyError, match="'nope'"):
        judge_quality({"a": unmeasured()}, "nope")


def test_outcome_round_trips_through_json(tmp_path: Path):
    with fake_server(tmp_path, {"FAKE_ANSWERS": str(EVAL)}) as url:
        out = _run(url, limit=5)
    assert load_outcome(save_outcome(out, tmp_path / "q.json")) == out


def test_gate_compares_the_items_both_answered(tmp_path: Path):
    """A configuration asked only part of the set is judged on those items, not on the reference's whole set."""
    with fake_server(tmp_path / "a", {"FAKE_ANSWERS": str(EVAL), "FAKE_WRONG_EVERY": "2"}) as url:
        ref = _run(url)  # every second item wrong: 50%
    with fake_server(tmp_path / "b", {"FAKE_ANSWERS": str(EVAL)}) as url:
        part = _run(url, limit=10)  # all right on the first 10
    row = judge_quality({"ref": ref, "part": part}, "ref")[1]
    assert (row.correct, row.n, row.compared, row.agreed) == (10, 10, 10, 5)
    assert row.delta_points == 50.0 and row.gate_passed is True


def test_min_agreement_fails_a_configuration_whose_answers_changed(tmp_path: Path):
    """Same accuracy, different answers (e.g. outputs cut short): only an agreement floor catches it."""
    with fake_server(tmp_path / "a", {"FAKE_ANSWERS": str(EVAL)}) as url:
        ref = _run(url, limit=20)
    changed = ref.model_copy(deep=True)
    for item in changed.items[::2]:
        item.output = item.output.removesuffix(".") + " indeed."  # still right, not the same text
    rows = judge_quality({"ref": ref, "changed": changed}, "ref", 2.0, min_agreement=0.9)
    assert rows[1].delta_points == 0.0 and rows[1].agreement == 0.5 and rows[1].gate_passed is False
    assert "agreement 50% with the reference (minimum 90%)" in rows[1].reason
    assert judge_quality({"ref": ref, "changed": changed}, "ref", 2.0)[1].gate_passed is True
