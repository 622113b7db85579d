"""Random-weight model folders: Llama tensor names and shapes, shards that load, the cache by config hash."""

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors import safe_open

from helpers.core.errors import ConfigError
from helpers.core.paths import MODELS_DIR
from helpers.model import random_weights as rw
from helpers.model.shape import count_parameters, read_model_shape

TINY = MODELS_DIR / "tiny-llama"


def load_all(folder):
    """Every tensor of every shard of a folder, by name (torch tensors, as engines read them)."""
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            out.update({k: st.get_tensor(k) for k in st.keys()})  # noqa: SIM118 - safe_open has no __iter__
    return out


def test_llama_8b_tensors_match_the_parameter_count():
    shape = read_model_shape(MODELS_DIR / "llama-3.1-8b")
    shapes = rw.tensor_shapes(shape)
    assert len(shapes) == 2 + 32 * 9 + 1  # embed, lm_head, 9 tensors per layer, final norm
    assert shapes["model.embed_tokens.weight"] == (128256, 4096)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (4096, 4096)
    assert shapes["model.layers.31.self_attn.k_proj.weight"] == (1024, 4096)  # 8 KV heads × 128
    assert shapes["model.layers.0.self_attn.o_proj.weight"] == (4096, 4096)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (4096, 14336)
    assert shapes["model.layers.0.mlp.gate_proj.weight"] == (14336, 4096)
    assert shapes["model.norm.weight"] == (4096,) and shapes["lm_head.weight"] == (128256, 4096)
    total = sum(int(np.prod(s)) for s in shapes.values())
    assert total == count_parameters(shape).total == 8_030_261_248


def test_bias_and_tied_embeddings_follow_the_config():
    shape = read_model_shape(TINY).model_copy(update={"attention_bias": True, "mlp_bias": True,
                                                      "tie_word_embeddings": True})  # fmt: skip
    shapes = rw.tensor_shapes(shape)
    assert "lm_head.weight" not in shapes
    assert shapes["model.layers.1.self_attn.k_proj.bias"] == (128,)
    assert shapes["model.layers.1.mlp.up_proj.bias"] == (512,)
    # Hugging Face's LlamaAttention gives o_proj a bias too when attention_bias is set; count_parameters
    # leaves it out (hidden_size per layer, 0.003% of an 8B model): the files follow the checkpoint layout
    assert shapes["model.layers.1.self_attn.o_proj.bias"] == (256,)
    extra = shape.num_layers * shape.hidden_size
    assert sum(int(np.prod(s)) for s in shapes.values()) == count_parameters(shape).total + extra


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_tiny_llama_folder_loads_with_the_predicted_parameters(tmp_path, backend):
    out = tmp_path / "w"
    lines = []
    got = rw.write_random_weights(TINY, out, shard_bytes=2 * 2**20, backend=backend, log=lines.append)
    assert got == out
    tensors = load_all(out)
    predicted = count_parameters(read_model_shape(TINY)).total
    assert sum(t.numel() for t in tensors.values()) == predicted == 5_375_232
    assert set(tensors) == set(rw.tensor_shapes(read_model_shape(TINY)))
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    assert tensors["model.layers.0.input_layernorm.weight"].float().eq(1.0).all()
    assert tensors["model.norm.weight"].float().eq(1.0).all()
    emb = tensors["model.embed_tokens.weight"].float()
    assert emb.abs().max() <= 1e-3 and emb.std() > 4e-4  # uniform in ±1e-3 (std 5.8e-4), not zeros
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(shards) >= 3 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    index = json.loads((out / rw.INDEX).read_text())
    assert set(index["weight_map"]) == set(tensors) and set(index["weight_map"].values()) == set(shards)
    assert index["metadata"]["total_size"] == predicted * 2
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (out / name).read_bytes() == (TINY / name).read_bytes()
    marker = json.loads((out / rw.MARKER).read_text())
    assert marker["config_sha256_12"] == rw.config_hash(TINY) and marker["parameters"] == predicted
    assert marker["backend"] == backend and marker["dtype"] == "bfloat16"
    assert not list(tmp_path.glob(".w.partial-*"))
    assert lines[-1].startswith(f"random weights: {out} (0.01 GiB in {len(shards)} shards")


def test_second_call_does_nothing(tmp_path):
    out = rw.write_random_weights(TINY, tmp_path / "w", log=lambda _m: None)
    stamp = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    lines = []
    assert rw.write_random_weights(TINY, out, log=lines.append) == out
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamp
    assert lines == [f"random weights: {out} is complete for config {rw.config_hash(TINY)}; nothing to do"]


def test_default_folder_is_named_after_the_config_hash(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "SHM_ROOT", tmp_path / "shm" / "pb-models")  # no /dev/shm here
    monkeypatch.setattr(rw, "CACHE_ROOT", tmp_path / "cache")
    assert rw.default_root() == tmp_path / "cache"
    (tmp_path / "shm").mkdir()
    assert rw.default_root() == tmp_path / "shm" / "pb-models"
    digest = rw.config_hash(TINY)
    assert len(digest) == 12 and rw.random_weights_dir(TINY) == tmp_path / "shm" / "pb-models" / f"tiny-llama-{digest}"


def test_a_changed_config_gets_another_folder(tmp_path):
    other = tmp_path / "tiny-llama"
    shutil.copytree(TINY, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["num_hidden_layers"] = 1
    (other / "config.json").write_text(json.dumps(cfg))
    assert rw.random_weights_dir(other, tmp_path) != rw.random_weights_dir(TINY, tmp_path)
    assert rw.random_weights_dir(other, tmp_path).name.startswith("tiny-llama-")


def test_quantized_checkpoint_and_foreign_folder_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="declares quantization_config \\(fp8\\); random weights are plain bf16"):
        rw.write_random_weights(MODELS_DIR / "llama-3.3-70b-fp8", tmp_path / "w70")
    assert not (tmp_path / "w70").exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="exists and does not hold random weights"):
        rw.write_random_weights(TINY, foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_shards_keep_order_and_a_big_tensor_alone():
    shapes = {"a": (10,), "b": (10,), "big": (100,), "c": (10,)}
    assert rw.plan_shards(shapes, shard_bytes=40) == [["a", "b"], ["big"], ["c"]]
