"""Prompt styles: random words (nothing to copy) and edit-this-text (the answer repeats the prompt)."""

import random

import pytest

from helpers.core.paths import MODELS_DIR, REPO_ROOT
from helpers.measure.prompts import RequestShape, edit_passage, make_prompts

SMOLLM2 = REPO_ROOT / ".engines" / "models" / "smollm2-135m-instruct"


def test_an_edit_passage_names_the_word_to_replace_in_every_other_sentence():
    text = edit_passage(random.Random(1), 120, "river")
    sentences = [s for s in text.split(". ") if s]
    assert len(text.split()) >= 120 and sum("river" in s for s in sentences) >= len(sentences) // 2


@pytest.mark.skipif(not SMOLLM2.is_dir(), reason="SmolLM2 is not set up (make models)")
def test_edit_text_prompts_keep_the_shared_prefix_and_ask_for_a_rewrite():
    rows = make_prompts([RequestShape(256, 64, 32)] * 2, SMOLLM2, seed=3, style="edit-text")
    first, second = (r["prompt"] for r in rows)
    assert first.split()[:32] == second.split()[:32]  # the shared system prompt stays shared
    assert "Rewrite the text below. Replace the word" in first and first.endswith("Rewritten text:\n")
    assert all(r["output_tokens_count"] == 64 for r in rows)
    assert 200 < len(first.split()) < 320


def test_edit_text_needs_a_real_tokenizer():
    with pytest.raises(ValueError, match="needs a real model's tokenizer"):
        make_prompts([RequestShape(64, 8)], MODELS_DIR / "tiny-llama", style="edit-text")
    with pytest.raises(ValueError, match="prompt style"):
        make_prompts([RequestShape(64, 8)], MODELS_DIR / "tiny-llama", style="poetry")
