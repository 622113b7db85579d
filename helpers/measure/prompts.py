"""Prompts of an exact token length, written as a JSONL dataset that guidellm replays.

The playbook's model folders use a word-level tokenizer (``helpers.model.folder``): word ``w<i>``
is token ``i``. So a prompt of N tokens is N words, a shared system prompt is the same first words
in every request, and unique prompts start with different words (no accidental prefix hits).
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


def make_prompts(shapes: list[RequestShape], model_dir: Path, seed: int = 0) -> list[dict]:
    """One dataset row per shape: ``prompt`` of exactly ``input_tokens`` words and ``output_tokens_count``."""
    vocab = vocabulary(model_dir)
    rng = random.Random(seed)
    prefixes: dict[tuple[int, int], list[str]] = {}
    rows = []
    for s in shapes:
        n_prefix = min(s.shared_prefix_tokens, s.input_tokens)
        key = (s.prefix_group, n_prefix)
        if n_prefix and key not in prefixes:
            prefixes[key] = _words(random.Random(f"prefix-{seed}-{key}"), n_prefix, vocab)
        words = (prefixes[key] if n_prefix else []) + _words(rng, s.input_tokens - n_prefix, vocab)
        rows.append({"prompt": " ".join(words), "output_tokens_count": s.output_tokens})
    return rows


def write_dataset(shapes: list[RequestShape], model_dir: Path, path: Path, seed: int = 0) -> Path:
    """Write the prompts of ``shapes`` as JSONL to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in make_prompts(shapes, model_dir, seed):
            f.write(json.dumps(row) + "\n")
    return path


def fixed_shapes(n: int, input_tokens: int, output_tokens: int, shared_prefix_tokens: int = 0) -> list[RequestShape]:
    """``n`` requests of the same lengths (the synthetic workload)."""
    return [RequestShape(input_tokens, output_tokens, shared_prefix_tokens) for _ in range(n)]
