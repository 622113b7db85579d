"""Model folders without weights: a Llama ``config.json`` plus a word-level tokenizer.

Engines serve these with ``--load-format dummy`` (random weights): speed depends on shapes, not on
weight values. The tokenizer maps each word ``w<i>`` to token id ``i``, so a prompt of exactly N
tokens is N such words separated by spaces (see ``helpers.measure.prompts``). The top of the vocabulary
holds English words and punctuation (lower-cased), so that English text — guidellm's synthetic and
trace-replay prompts — also becomes distinct tokens rather than unknown ones.
``playbook_tokenizer.json`` records which ids are ``w<i>`` words.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FIRST_WORD_ID = 3  # ids 0-2 are <unk>, <s>, </s>
WORD_RANGE_FILE = "playbook_tokenizer.json"
PUNCTUATION = [".", ",", "?", "!", ";", ":", "'", '"', "-", "(", ")"]


def english_words() -> list[str]:
    """The English word list guidellm's synthetic text (Faker, en_US) draws from, lower-cased."""
    # faker: large word lists, read once when a model folder is written
    from faker.providers.lorem.en_US import Provider

    return sorted({w.lower() for w in Provider.word_list})


_LLAMA_BASE: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "mlp_bias": False,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

_LLAMA3_ROPE = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3",
}

PRESETS: dict[str, dict[str, Any]] = {
    # 2 layers, 256 wide: what two CPU cores can serve at interactive speed.
    "tiny-llama": {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "vocab_size": 8192,
    },
    # The shapes of Llama-3.1-8B and Llama-3.3-70B (public config values).
    "llama-3.1-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": _LLAMA3_ROPE,
        "vocab_size": 128256,
    },
    "llama-3.3-70b-fp8": {
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 80,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": _LLAMA3_ROPE,
        "vocab_size": 128256,
        # Makes vLLM/SGLang allocate FP8 weights (dynamic activation scales) from a config alone.
        "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"},
    },
}


def llama_config(preset: str) -> dict[str, Any]:
    """The full ``config.json`` of a preset."""
    if preset not in PRESETS:
        raise KeyError(f"unknown model preset {preset!r}; allowed: {', '.join(sorted(PRESETS))}")
    return {**_LLAMA_BASE, **PRESETS[preset]}


def write_model_folder(out: str | Path, preset: str) -> Path:
    """Write ``config.json`` and a word-level tokenizer for ``preset`` into ``out``."""
    # tokenizers: a native library, loaded only where prompts are tokenized
    from tokenizers import (
        Tokenizer,
        models,
        normalizers,
        pre_tokenizers,
    )

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = llama_config(preset)
    vocab_size = cfg["vocab_size"]
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")

    extra = english_words() + PUNCTUATION
    words_end = vocab_size - len(extra)  # ids [FIRST_WORD_ID, words_end) are w<i> words
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"w{i}": i for i in range(FIRST_WORD_ID, words_end)})
    vocab.update({w: words_end + k for k, w in enumerate(extra)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # words and punctuation apart; decode joins with spaces
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.save(str(out / "tokenizer.json"))
    tcfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": cfg["max_position_embeddings"],
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tcfg, indent=2) + "\n", encoding="utf-8")
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
    gen = {"bos_token_id": 1, "eos_token_id": 2}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n", encoding="utf-8")
    ranges = {"word_ids": [FIRST_WORD_ID, words_end], "english_ids": [words_end, vocab_size]}
    (out / WORD_RANGE_FILE).write_text(json.dumps(ranges, indent=2) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.model.folder PRESET OUT``: write a model folder."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(f"usage: python -m helpers.model.folder {{{','.join(PRESETS)}}} OUT")
        return 2
    print(write_model_folder(args[1], args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
