"""GGUF → Hugging Face folder: names, the undone rotary permutation, config, tokenizer, on a tiny GGUF we write.

The tiny file is made with ``gguf.GGUFWriter`` the way llama.cpp's converter makes one: query and key
rows permuted per head, Q8_0 and F32 tensors, a byte-level BPE vocabulary. The real SmolLM2 folder is
checked too when ``playbook setup-model smollm2`` has made it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from helpers.model.gguf import (
    WORDS_FILE,
    GgufError,
    build_tokenizer,
    convert_gguf,
    hf_config,
    hf_tensor_name,
    single_token_words,
    unpermute_rope,
)
from helpers.tools.model_setup import is_ready, model_dir

gguf = pytest.importorskip("gguf")
Q8 = gguf.GGMLQuantizationType.Q8_0
F32 = gguf.GGMLQuantizationType.F32

HIDDEN, HEADS, KV_HEADS, FFN, LAYERS = 32, 4, 2, 64, 2
TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "c", "Ġ", "1", "2", "ab", "Ġa", "12", "Ġab", "Ġc"]
TYPES = [3, 3, 3] + [1] * (len(TOKENS) - 3)
MERGES = ["a b", "Ġ a", "1 2", "Ġ ab", "Ġ c"]
TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's row order for rotary projections (the operation ``unpermute_rope`` undoes)."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def roundtrip_q8(w: np.ndarray) -> np.ndarray:
    return gguf.quants.dequantize(gguf.quants.quantize(w, Q8), Q8)


def write_tiny_gguf(path: Path, *, pre: str = "smollm", arch: str = "llama", tied: bool = True) -> dict:
    """A 2-layer Llama GGUF; returns the Hugging Face tensors it must convert back to (float32)."""
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(100000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(TOKENS)
    w.add_token_types(TYPES)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_chat_template(TEMPLATE)
    expected: dict[str, np.ndarray] = {}

    def put(gguf_name: str, hf_name: str, arr: np.ndarray, quantized: bool, stored: np.ndarray | None = None) -> None:
        stored = arr if stored is None else stored
        if quantized:
            w.add_tensor(gguf_name, gguf.quants.quantize(stored, Q8), raw_dtype=Q8)
        else:
            w.add_tensor(gguf_name, stored.astype(np.float32))
        expected[hf_name] = arr

    emb = rng.standard_normal((len(TOKENS), HIDDEN)).astype(np.float32)
    put("token_embd.weight", "model.embed_tokens.weight", emb, False)
    kv = HIDDEN // HEADS * KV_HEADS
    for i in range(LAYERS):
        pre_name, hf = f"blk.{i}.", f"model.layers.{i}."
        for g, h, shape in (("attn_v", "self_attn.v_proj", (kv, HIDDEN)), ("attn_output", "self_attn.o_proj",
                            (HIDDEN, HIDDEN)), ("ffn_gate", "mlp.gate_proj", (FFN, HIDDEN)), ("ffn_up", "mlp.up_proj",
                            (FFN, HIDDEN)), ("ffn_down", "mlp.down_proj", (HIDDEN, FFN))):  # fmt: skip
            x = rng.standard_normal(shape).astype(np.float32)
            put(pre_name + g + ".weight", hf + h + ".weight", roundtrip_q8(x), True, x)
        q = roundtrip_q8(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32))
        k = roundtrip_q8(rng.standard_normal((kv, HIDDEN)).astype(np.float32))
        # quantising after the permutation keeps each value, so the expectation is exact
        put(pre_name + "attn_q.weight", hf + "self_attn.q_proj.weight", q, True, llama_cpp_permute(q, HEADS))
        put(pre_name + "attn_k.weight", hf + "self_attn.k_proj.weight", k, True, llama_cpp_permute(k, KV_HEADS))
        for g, h in (("attn_norm", "input_layernorm"), ("ffn_norm", "post_attention_layernorm")):
            put(pre_name + g + ".weight", hf + h + ".weight", rng.standard_normal(HIDDEN).astype(np.float32), False)
    put("output_norm.weight", "model.norm.weight", np.ones(HIDDEN, np.float32), False)
    if not tied:
        put("output.weight", "lm_head.weight", rng.standard_normal((len(TOKENS), HIDDEN)).astype(np.float32), False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, dict]:
    path = tmp_path / "tiny.gguf"
    return path, write_tiny_gguf(path)


def _metadata(path: Path) -> dict:
    from helpers.model.gguf import read_metadata

    return read_metadata(gguf.GGUFReader(str(path)))


def test_unpermute_undoes_llama_cpp_permutation():
    w = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    assert np.array_equal(unpermute_rope(llama_cpp_permute(w, 2), 2), w)
    assert not np.array_equal(llama_cpp_permute(w, 2), w)
    with pytest.raises(GgufError, match="rotary pairs"):
        unpermute_rope(np.zeros((6, 2)), 4)


@pytest.mark.parametrize(
    ("gguf_name", "hf_name"),
    [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight"),
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
        ("blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"),
        ("output.weight", "lm_head.weight"),
    ],
)
def test_tensor_names(gguf_name, hf_name):
    assert hf_tensor_name(gguf_name) == hf_name


def test_unknown_tensor_name_is_refused():
    with pytest.raises(GgufError, match="blk.0.ssm_conv"):
        hf_tensor_name("blk.0.ssm_conv.weight")


def test_config_from_metadata(tiny):
    cfg = hf_config(_metadata(tiny[0]))
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]) == (LAYERS, HIDDEN, FFN)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (HEADS, KV_HEADS, 8)
    assert cfg["rms_norm_eps"] == 1e-5 and cfg["rope_theta"] == 100000.0  # float32 metadata, decimal again
    assert (cfg["vocab_size"], cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]) == (len(TOKENS), 1, 2, 2)


def test_other_architectures_are_refused(tmp_path: Path):
    path = tmp_path / "q.gguf"
    write_tiny_gguf(path, arch="qwen2")
    with pytest.raises(GgufError, match="'qwen2' is not supported"):
        hf_config(_metadata(path))


def test_converted_weights_equal_the_originals(tiny, tmp_path: Path):
    from safetensors.numpy import load_file

    path, expected = tiny
    out = convert_gguf(path, tmp_path / "hf", dtype="float32")
    got = load_file(str(out / "model.safetensors"))
    assert set(got) == set(expected)
    for name, arr in expected.items():
        np.testing.assert_array_equal(got[name], arr, err_msg=name)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is True and cfg["torch_dtype"] == "float32"


def test_untied_output_becomes_lm_head(tmp_path: Path):
    path = tmp_path / "u.gguf"
    expected = write_tiny_gguf(path, tied=False)
    out = convert_gguf(path, tmp_path / "hf")
    assert json.loads((out / "config.json").read_text())["tie_word_embeddings"] is False
    assert "lm_head.weight" in expected and (out / "model.safetensors").stat().st_mode & 0o044 == 0o044


def test_tokenizer_splits_digits_like_llama_cpp_smollm(tiny):
    tok = build_tokenizer(_metadata(tiny[0]))
    ids = tok.encode("ab 12").ids
    assert [TOKENS[i] for i in ids] == ["ab", "Ġ", "1", "2"]  # digits one by one: the "1 2" merge never applies
    assert tok.decode(ids) == "ab 12"
    assert tok.encode("<|im_start|>ab<|im_end|>").ids == [1, 9, 2]  # control tokens stay whole


def test_single_token_words_make_prompts_of_exact_length(tiny, tmp_path: Path):
    tok = build_tokenizer(_metadata(tiny[0]))
    assert single_token_words(tok) == ["ab"]  # "c" and "a" are one letter; "Ġab" and "ab" are one token each
    assert len(tok.encode(" ".join(["ab"] * 7)).ids) == 7
    out = convert_gguf(tiny[0], tmp_path / "hf")
    assert json.loads((out / WORDS_FILE).read_text()) == {"words": ["ab"]}


def test_plain_gpt2_pre_tokenizer_merges_digits(tmp_path: Path):
    path = tmp_path / "g.gguf"
    write_tiny_gguf(path, pre="gpt2")
    tok = build_tokenizer(_metadata(path))
    assert [TOKENS[i] for i in tok.encode("ab 12").ids] == ["ab", "Ġ", "12"]


def test_folder_has_tokenizer_files_and_chat_template(tiny, tmp_path: Path):
    out = convert_gguf(tiny[0], tmp_path / "hf")
    tcfg = json.loads((out / "tokenizer_config.json").read_text())
    assert tcfg["chat_template"] == TEMPLATE
    assert (tcfg["bos_token"], tcfg["eos_token"], tcfg["pad_token"]) == ("<|im_start|>", "<|im_end|>", "<|im_end|>")
    assert tcfg["add_bos_token"] is False
    assert json.loads((out / "generation_config.json").read_text()) == {"bos_token_id": 1, "eos_token_id": 2,
                                                                          "pad_token_id": 2}  # fmt: skip
    assert Tokenizer.from_file(str(out / "tokenizer.json")).encode("ab").ids == [9]


def test_transformers_runs_the_converted_folder(tiny, tmp_path: Path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = convert_gguf(tiny[0], tmp_path / "hf", dtype="float32")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out))
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ids = tok("ab 12", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert tuple(logits.shape) == (1, 4, len(TOKENS)) and torch.isfinite(logits).all()
    chat = tok.apply_chat_template([{"role": "user", "content": "ab"}], tokenize=False)
    assert chat == "<|im_start|>user\nab<|im_end|>\n"


@pytest.mark.skipif(not is_ready("smollm2"), reason="real model not set up (playbook setup-model smollm2)")
def test_real_smollm2_folder():
    d = model_dir("smollm2")
    cfg = json.loads((d / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["vocab_size"]) == (30, 576, 49152)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    assert tok.encode("The capital of France is").ids == [504, 3575, 282, 4649, 314]  # as transformers' GGUF loader
    words = json.loads((d / WORDS_FILE).read_text())["words"]
    assert len(words) > 2000 and len(tok.encode(" ".join(words[::7][:300])).ids) == 300
