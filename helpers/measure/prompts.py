"""Prompts of an exact token length, written as a JSONL dataset that guidellm replays.

The playbook's model folders use a word-level tokenizer (``helpers.model.folder``): word ``w<i>``
is token ``i``. So a prompt of N tokens is N words, a shared system prompt is the same first words
in every request, and unique prompts start with different words (no accidental prefix hits).

``style="edit-text"`` (``workload.prompts``) writes an edit task instead: an instruction to rewrite the
English passage that follows it with one word replaced, so a real model's answer repeats its prompt, the
case n-gram speculative decoding drafts from. The passage is made here from a small grammar of common
words (``EDIT_WORDS``), about as many words as the request's unique tokens; its exact token count is the
tokenizer's (guidellm reports it).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from helpers.model.folder import FIRST_WORD_ID, WORD_RANGE_FILE


@dataclass(frozen=True)
class RequestShape:
    """The lengths of one request: prompt tokens (including the shared prefix) and output tokens."""

    input_tokens: int
    output_tokens: int
    shared_prefix_tokens: int = 0
    prefix_group: int = 0  # requests of the same group share the same prefix words


def word_id_range(model_dir: Path) -> tuple[int, int]:
    """The ids ``[first, end)`` that are ``w<i>`` words in the model's tokenizer."""
    ranges = Path(model_dir) / WORD_RANGE_FILE
    if ranges.is_file():
        first, end = json.loads(ranges.read_text(encoding="utf-8"))["word_ids"]
        return int(first), int(end)
    vocab = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))["vocab_size"]
    return FIRST_WORD_ID, int(vocab)


ONE_TOKEN_WORDS_FILE = "playbook_words.json"
"""A real model's list of words that its tokenizer reads as one token each (written at model set-up)."""


def vocabulary(model_dir: Path) -> tuple[int, int] | list[str]:
    """What prompts are made of: the real model's one-token words when it lists them, else ``w<i>`` ids."""
    words = Path(model_dir) / ONE_TOKEN_WORDS_FILE
    if words.is_file():
        return list(json.loads(words.read_text(encoding="utf-8"))["words"])
    return word_id_range(model_dir)


def _words(rng: random.Random, n: int, vocab: tuple[int, int] | list[str]) -> list[str]:
    if isinstance(vocab, list):
        return [vocab[rng.randrange(len(vocab))] for _ in range(n)]
    return [f"w{rng.randrange(*vocab)}" for _ in range(n)]


EDIT_WORDS = {
    "adj": ["old", "small", "quiet", "green", "bright", "heavy", "early", "cold", "narrow", "busy"],
    "noun": ["river", "farmer", "teacher", "village", "bridge", "garden", "market", "window", "letter", "train"],
    "verb": ["crossed", "painted", "watched", "carried", "opened", "cleaned", "followed", "visited", "built", "found"],
    "place": ["near the hill", "after the rain", "in the morning", "by the station", "at the end of the road",
              "before the winter", "under the old tree", "beside the school"],
}  # fmt: skip
EDIT_SWAPS = [("river", "lake"), ("village", "town"), ("garden", "park"), ("train", "bus"), ("letter", "note")]
PROMPT_STYLES = ("random-words", "edit-text")


def edit_passage(rng: random.Random, n_words: int, keep: str) -> str:
    """About ``n_words`` words of plain sentences from ``EDIT_WORDS``, every other one naming ``keep``."""
    w, out, count, i = EDIT_WORDS, [], 0, 0
    while count < n_words:
        subject = keep if i % 2 == 0 else rng.choice(w["noun"])
        sentence = (
            f"The {rng.choice(w['adj'])} {subject} {rng.choice(w['verb'])} the {rng.choice(w['noun'])} "
            f"{rng.choice(w['place'])}."
        )
        out.append(sentence)
        count += len(sentence.split())
        i += 1
    return " ".join(out)


def edit_prompt(rng: random.Random, n_words: int) -> str:
    """An instruction to rewrite a passage with one word replaced, then the passage (about ``n_words`` words)."""
    old, new = rng.choice(EDIT_SWAPS)
    head = f"Rewrite the text below. Replace the word {old} with {new} and keep every other word as it is.\n\n"
    tail = "\n\nRewritten text:\n"
    budget = max(8, n_words - len(head.split()) - len(tail.split()))
    return head + edit_passage(rng, budget, old) + tail


def make_prompts(shapes: list[RequestShape], model_dir: Path, seed: int = 0, style: str = "random-words") -> list[dict]:
    """One dataset row per shape: ``prompt`` of ``input_tokens`` tokens and ``output_tokens_count``.

    ``style`` is ``random-words`` (exactly ``input_tokens`` one-token words) or ``edit-text`` (the shared
    prefix, then an edit task of about the remaining length; module docstring).
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt style {style!r}; allowed: {', '.join(PROMPT_STYLES)}")
    vocab = vocabulary(model_dir)
    if style == "edit-text" and not isinstance(vocab, list):
        raise ValueError(
            f"workload.prompts: edit-text needs a real model's tokenizer ({ONE_TOKEN_WORDS_FILE} in {model_dir}); "
            "a word-level stand-in reads English as unknown tokens"
        )
    rng = random.Random(seed)
    prefixes: dict[tuple[int, int], list[str]] = {}
    rows = []
    for s in shapes:
        n_prefix = min(s.shared_prefix_tokens, s.input_tokens)
        key = (s.prefix_group, n_prefix)
        if n_prefix and key not in prefixes:
            prefixes[key] = _words(random.Random(f"prefix-{seed}-{key}"), n_prefix, vocab)
        head = prefixes[key] if n_prefix else []
        if style == "edit-text":
            prompt = " ".join(head) + ("\n\n" if head else "") + edit_prompt(rng, s.input_tokens - n_prefix)
        else:
            prompt = " ".join(head + _words(rng, s.input_tokens - n_prefix, vocab))
        rows.append({"prompt": prompt, "output_tokens_count": s.output_tokens})
    return rows


def write_dataset(
    shapes: list[RequestShape], model_dir: Path, path: Path, seed: int = 0, style: str = "random-words"
) -> Path:
    """Write the prompts of ``shapes`` (in ``style``) as JSONL to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in make_prompts(shapes, model_dir, seed, style):
            f.write(json.dumps(row) + "\n")
    return path


def fixed_shapes(n: int, input_tokens: int, output_tokens: int, shared_prefix_tokens: int = 0) -> list[RequestShape]:
    """``n`` requests of the same lengths (the synthetic workload)."""
    return [RequestShape(input_tokens, output_tokens, shared_prefix_tokens) for _ in range(n)]
