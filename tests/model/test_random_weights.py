"""Random-weight model folders: Llama tensor names and shapes, shards that load, the cache by config hash."""

import fcntl
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch
from safetensors import safe_open

from helpers.core.errors import ConfigError
from helpers.core.paths import MODELS_DIR
from helpers.model import checkpoint_plan as cp
from helpers.model import fp8_blocks, weight_values
from helpers.model import random_weights as rw
from helpers.model.shape import count_parameters, read_model_shape

TINY = MODELS_DIR / "tiny-llama"
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic"}  # as playbook/models/llama-3.3-70b-fp8 declares it


def model_copy(tmp_path, name, **changes):
    """A copy of tiny-llama under ``tmp_path/name`` with these config.json keys set (None: removed)."""
    d = tmp_path / name
    shutil.copytree(TINY, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return d


def fp8_model(tmp_path, name="tiny-fp8", quant=None):
    """tiny-llama as block FP8, with sizes that are not all multiples of 128 (320 = 5 heads of 64, 200)."""
    return model_copy(tmp_path, name, hidden_size=320, num_attention_heads=5, intermediate_size=200,
                      quantization_config=quant or FP8)  # fmt: skip


def load_all(folder):
    """Every tensor of every shard of a folder, by name (torch tensors, as engines read them)."""
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            out.update({k: st.get_tensor(k) for k in st.keys()})  # noqa: SIM118 - safe_open has no __iter__
    return out


def test_llama_8b_tensors_match_the_parameter_count():
    shape = read_model_shape(MODELS_DIR / "llama-3.1-8b")
    shapes = cp.tensor_shapes(shape)
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
    shapes = cp.tensor_shapes(shape)
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
    assert set(tensors) == set(cp.tensor_shapes(read_model_shape(TINY)))
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
    assert not list(tmp_path.glob(".w.partial*"))
    progress = re.compile(
        r"random weights: shard \d+ of \d+ written, [\d.]+ of [\d.]+ GB in \d+s \([\d,]+ MB/s\); "
        r"ETA \d+s"
    )
    assert len(lines) == len(shards) + 1 and all(progress.fullmatch(line) for line in lines[:-1])
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
    awq = model_copy(tmp_path, "awq", quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    with pytest.raises(ConfigError, match=f"{awq / 'config.json'}: quantization_config.quant_method is 'awq'; random"):
        rw.write_random_weights(awq, tmp_path / "w-awq")
    assert not (tmp_path / "w-awq").exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="exists and does not hold random weights"):
        rw.write_random_weights(TINY, foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_shards_keep_order_and_a_big_tensor_alone():
    shapes = {"a": (10,), "b": (10,), "big": (100,), "c": (10,)}
    assert cp.plan_shards(shapes, shard_bytes=40) == [["a", "b"], ["big"], ["c"]]


def dequantize(weight, scale):
    """An fp8 weight times its 128 × 128 block's scale (the edge blocks cut to the weight's shape)."""
    blocks = scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return weight.float() * blocks[: weight.shape[0], : weight.shape[1]]


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_fp8_config_gets_block_fp8_linear_layers(tmp_path, backend):
    src = fp8_model(tmp_path)
    source_config = (src / "config.json").read_bytes()
    out = tmp_path / "w"
    lines = []
    rw.write_random_weights(src, out, shard_bytes=2 * 2**20, backend=backend, log=lines.append)
    tensors = load_all(out)
    shapes = cp.tensor_shapes(read_model_shape(src))
    linear = [n for n in shapes if n.split(".")[-2] in fp8_blocks.LINEAR]
    assert len(linear) == 2 * 7 and all(n.startswith("model.layers.") for n in linear)
    scales = {n.removesuffix(".weight") + ".weight_scale_inv" for n in linear}
    assert set(tensors) == set(shapes) | scales
    expected_scales = {"q_proj": (3, 3), "k_proj": (1, 3), "v_proj": (1, 3), "o_proj": (3, 3),
                       "gate_proj": (2, 3), "up_proj": (2, 3), "down_proj": (3, 2)}  # fmt: skip
    for name in linear:
        w, s = tensors[name], tensors[name.removesuffix(".weight") + ".weight_scale_inv"]
        assert w.dtype == torch.float8_e4m3fn and tuple(w.shape) == shapes[name]
        assert s.dtype == torch.float32 and tuple(s.shape) == expected_scales[name.split(".")[-2]]
        assert tuple(s.shape) == tuple(-(-d // 128) for d in w.shape)  # ceil
        deq = dequantize(w, s)
        assert deq.abs().max() <= 1e-3 and deq.std() > 4e-4  # uniform in ±8.5e-4 (std 4.9e-4)
        assert deq.unique().numel() > 100 and not torch.isnan(w.float()).any()
    others = set(shapes) - set(linear)
    assert others and {tensors[n].dtype for n in others} == {torch.bfloat16}
    assert tensors["model.norm.weight"].float().eq(1.0).all()
    emb = tensors["lm_head.weight"].float()
    assert emb.abs().max() <= 1e-3 and emb.std() > 4e-4
    written = json.loads((out / "config.json").read_text())
    assert written["quantization_config"] == {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                              "weight_block_size": [128, 128]}  # fmt: skip
    assert {k: v for k, v in written.items() if k != "quantization_config"} == {
        k: v for k, v in json.loads(source_config).items() if k != "quantization_config"
    }
    assert (src / "config.json").read_bytes() == source_config  # the source is not modified
    on_disk = sum(t.numel() * t.element_size() for t in tensors.values())
    index = json.loads((out / rw.INDEX).read_text())
    assert index["metadata"]["total_size"] == on_disk == rw.plan_random_weights(src).total_bytes
    assert set(index["weight_map"]) == set(tensors)
    marker = json.loads((out / rw.MARKER).read_text())
    assert marker["bytes"] == on_disk and marker["precision"] == "fp8" and marker["dtype"] == "float8_e4m3fn"
    assert marker["bytes_by_dtype"]["float32"] == 4 * sum(tensors[n].numel() for n in scales)
    assert marker["bytes_by_dtype"]["float8_e4m3fn"] == sum(tensors[n].numel() for n in linear)
    assert marker["parameters"] == count_parameters(read_model_shape(src)).total
    assert lines[-1].endswith(f"{backend}, fp8)")
    stamp = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = []
    assert rw.write_random_weights(src, out, backend=backend, log=again.append) == out
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamp
    assert again == [f"random weights: {out} is complete for config {rw.config_hash(src)}; nothing to do"]


def test_numpy_e4m3_bytes_are_torchs_float8():
    table = torch.arange(0, 256, dtype=torch.uint8)
    table = table[(table & 0x7F) != 0x7F].view(torch.float8_e4m3fn).float()  # every finite value
    finite = np.sort(table.unique().numpy())
    mids = (finite[1:] + finite[:-1]) / 2  # ties: to the even bit pattern, as torch rounds
    rand = (np.random.default_rng(1).random(100_000, np.float32) * 2 - 1) * 500  # past ±448: saturates
    for x in (table.numpy(), mids.astype(np.float32), rand, np.float32([-0.0, 1e-9, 460.0, -1e6])):
        want = torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(torch.float8_e4m3fn).view(torch.uint8)
        assert np.array_equal(fp8_blocks.e4m3_bits(x), want.numpy())


def test_llama_70b_fp8_plans_block_fp8_without_writing():
    plan = rw.plan_random_weights(MODELS_DIR / "llama-3.3-70b-fp8")
    assert plan.precision == "fp8" and plan.config["quantization_config"]["weight_block_size"] == [128, 128]
    assert plan.shapes["model.layers.79.mlp.down_proj.weight_scale_inv"] == (64, 224)
    assert plan.total_bytes == 72_673_083_392  # 67.7 GiB: linear 1 byte a weight, the rest bf16, scales fp32
    by = plan.bytes_by_dtype()
    assert by["float8_e4m3fn"] == count_parameters(read_model_shape(MODELS_DIR / "llama-3.3-70b-fp8")).linear
    assert rw.plan_random_weights(MODELS_DIR / "llama-3.1-8b").total_bytes == 8_030_261_248 * 2


def test_bf16_and_fp8_folders_differ_by_config_hash_only(tmp_path):
    bf16 = model_copy(tmp_path / "a", "tiny", quantization_config=None)
    fp8 = model_copy(tmp_path / "b", "tiny", quantization_config=FP8)
    a, b = rw.random_weights_dir(bf16, tmp_path), rw.random_weights_dir(fp8, tmp_path)
    assert (a.name, b.name) == (f"tiny-{rw.config_hash(bf16)}", f"tiny-{rw.config_hash(fp8)}") and a != b


@pytest.mark.parametrize(
    ("quant", "field"),
    [
        ({**FP8, "weight_block_size": [64, 64]}, "weight_block_size is \\[64, 64\\]; random FP8 weights"),
        ({"quant_method": "gptq", "bits": 4}, "quant_method is 'gptq'"),
        ({**FP8, "activation_scheme": "static"}, "activation_scheme is 'static'"),
        ({**FP8, "fmt": "e5m2"}, "fmt is 'e5m2'"),
        ({**FP8, "modules_to_not_convert": ["model.layers.0.mlp.down_proj"]}, "modules_to_not_convert"),
    ],
)
def test_other_quantizations_are_refused_naming_the_file_and_field(tmp_path, quant, field):
    src = fp8_model(tmp_path, quant=quant)
    with pytest.raises(ConfigError, match=f"^{src / 'config.json'}: quantization_config.{field}"):
        rw.write_random_weights(src, tmp_path / "w")
    assert not (tmp_path / "w").exists() and not list(tmp_path.glob(".w.partial*"))


def test_fp8_with_its_block_size_and_lm_head_left_out_is_accepted(tmp_path):
    quant = {**FP8, "fmt": "e4m3", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]}
    src = fp8_model(tmp_path, quant=quant)
    plan = rw.plan_random_weights(src)
    assert plan.precision == "fp8" and plan.config == json.loads((src / "config.json").read_text())


@pytest.mark.parametrize("quant", [None, FP8])
def test_too_small_a_filesystem_fails_before_anything_is_written(tmp_path, quant):
    src = model_copy(tmp_path, "huge", vocab_size=2**30, quantization_config=quant)  # 1 TiB of embeddings
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "sub" / "w"
    with pytest.raises(ConfigError) as err:
        rw.write_random_weights(src, out, log=lambda _m: None)
    needed = rw.plan_random_weights(src).total_bytes + sum(p.stat().st_size for p in src.iterdir())
    msg = str(err.value)
    assert msg.startswith(f"{out}: the random weights need {needed / 2**30:.1f} GiB but {tmp_path} has ")
    free = float(re.search(r"has ([\d.]+) GiB free", msg).group(1))
    assert abs(free - shutil.disk_usage(tmp_path).free / 2**30) < 1
    assert "pass --out on a larger filesystem" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no folder, no partial folder


def test_the_two_backends_write_the_same_bytes(tmp_path):
    src = fp8_model(tmp_path)
    a = rw.write_random_weights(src, tmp_path / "a", shard_bytes=2**20, backend="torch", log=lambda _m: None)
    b = rw.write_random_weights(src, tmp_path / "b", shard_bytes=2**20, backend="numpy", log=lambda _m: None)
    files = sorted(p.name for p in a.glob("*.safetensors"))
    assert len(files) >= 3 and files == sorted(p.name for p in b.glob("*.safetensors"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_a_tensor_larger_than_the_pool_repeats_no_row():
    pools = weight_values.Pools(seed=3)
    rows = pools.tile(pools.fp8, (2048, 1024))  # 2 Mi values: the pool, about 1 Mi, twice
    assert rows.shape == (2048, 1024) and np.unique(rows, axis=0).shape[0] == 2048
    again = pools.tile(pools.fp8, (2048, 1024))
    assert not np.array_equal(rows, again)  # each tensor starts at its own offset


class Interrupt(Exception):
    """Stands for a run cut while the weights are written."""


def cut_at_once(_line):
    raise Interrupt


def test_an_interrupted_write_keeps_its_whole_shards_and_the_next_call_goes_on(tmp_path):
    src = fp8_model(tmp_path)
    fresh = rw.write_random_weights(src, tmp_path / "fresh", shard_bytes=2**20, log=lambda _m: None)
    out = tmp_path / "w"
    seen = []

    def cut_after_two(line):
        seen.append(line)
        if len(seen) == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        rw.write_random_weights(src, out, shard_bytes=2**20, log=cut_after_two)
    partial = tmp_path / ".w.partial"
    kept = sorted(p.name for p in partial.glob("*.safetensors"))
    assert not out.exists() and len(kept) == 2 and not list(partial.glob("*.tmp"))
    stamp = {f: (partial / f).stat().st_mtime_ns for f in kept}
    lines = []
    assert rw.write_random_weights(src, out, shard_bytes=2**20, log=lines.append) == out
    total = len(list(fresh.glob("*.safetensors")))
    assert lines[0] == f"random weights: 2 of {total} shards kept from an earlier call in {partial}"
    assert {f: (out / f).stat().st_mtime_ns for f in kept} == stamp  # not written again
    assert sum("written" in line for line in lines) == total - 2
    names = sorted(p.name for p in fresh.iterdir() if p.name != rw.MARKER)
    assert names == sorted(p.name for p in out.iterdir() if p.name != rw.MARKER)  # no plan or lock file left
    assert all((out / f).read_bytes() == (fresh / f).read_bytes() for f in names)  # as if never cut
    assert json.loads((out / rw.MARKER).read_text())["shards_kept"] == 2 and not partial.exists()


def test_a_partial_folder_of_another_plan_is_started_over(tmp_path):
    src = fp8_model(tmp_path)
    out = tmp_path / "w"
    with pytest.raises(Interrupt):
        rw.write_random_weights(src, out, shard_bytes=2**20, seed=1, log=cut_at_once)
    assert len(list((tmp_path / ".w.partial").glob("*.safetensors"))) == 1
    lines = []
    rw.write_random_weights(src, out, shard_bytes=2**20, seed=2, log=lines.append)
    assert not any("kept from an earlier call" in line for line in lines)
    assert json.loads((out / rw.MARKER).read_text())["shards_kept"] == 0


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    src = fp8_model(tmp_path)
    partial = tmp_path / ".w.partial"
    partial.mkdir()
    fd = os.open(partial / rw.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(ConfigError, match=f"^{partial}: another process is writing these random weights now"):
            rw.write_random_weights(src, tmp_path / "w", shard_bytes=2**20, log=lambda _m: None)
    finally:
        os.close(fd)
    assert rw.write_random_weights(src, tmp_path / "w", shard_bytes=2**20, log=lambda _m: None).is_dir()
