"""The rollout of an LMDeploy pick carries real weights: the benchmark's ``weights: random`` stays behind.

LMDeploy has no dummy loader, so the benchmark served it random bf16 weights through
``engine_options: {weights: random}``; the pilot must load the checkpoint. The decision is a real one over
recorded results (``rollout_data``) with LMDeploy's configuration made the primary.
"""

from __future__ import annotations

from rollout_data import config, decision_for, results

from helpers.core.config import parse_config
from helpers.core.paths import MODELS_DIR
from helpers.rollout.choice import apply_tuned, choose
from helpers.rollout.launch import plan, shell_script

LMD = {
    "label": "lmdeploy-turbomind",
    "engine": "lmdeploy",
    "launcher": {"python": "python3"},
    "engine_options": {"backend": "turbomind", "weights": "random"},
    "knobs": {"dummy_weights": False, "memory_fraction": 0.8, "max_model_len": 4096},
}


def lmdeploy_pick():
    """A config with an LMDeploy TurboMind entry on random weights, its result, and a decision choosing it."""
    base = config()
    data = base.model_dump(mode="json", exclude_none=True)
    data["model"] = {"path": "llama-3.1-8b", "served_name": "llama-8b"}
    data["engines"] = [*data["engines"], LMD]
    cfg = parse_config(data, "test")
    res = results()
    lmd = res[1].model_copy(update={"label": LMD["label"], "engine": "lmdeploy", "tuned_knobs": {"max_num_seqs": 64}})
    for p in lmd.points:
        p.label, p.engine = LMD["label"], "lmdeploy"
    res = [*res, lmd]
    decision = decision_for("sglang", cfg, res).model_copy(
        update={"primary": LMD["label"], "primary_family": "lmdeploy"}
    )
    return cfg, res, decision


def test_apply_tuned_drops_random_weights_and_keeps_the_backend():
    cfg = parse_config({"name": "t", "model": {"path": "tiny-llama"}, "engines": [LMD]})
    spec = cfg.engines[0]
    assert spec.placeholder_weights
    tuned, applied = apply_tuned(spec, {"max_num_seqs": 32, "not_a_knob": 1})
    assert tuned.engine_options == {"backend": "turbomind"} and not tuned.placeholder_weights
    assert (tuned.knobs.max_num_seqs, tuned.knobs.dummy_weights, applied) == (32, False, {"max_num_seqs": 32})
    assert spec.engine_options["weights"] == "random"  # the config itself is not changed
    rooted = spec.model_copy(update={"engine_options": {**spec.engine_options, "weights_root": "/data/pb"}})
    assert apply_tuned(rooted, None)[0].engine_options == {"backend": "turbomind"}  # where they were written, too


def test_the_rollout_of_an_lmdeploy_pick_loads_the_checkpoint(tmp_path):
    cfg, res, decision = lmdeploy_pick()
    chosen = choose(cfg, decision, res)
    assert chosen.spec.label == LMD["label"] and "weights" not in chosen.spec.engine_options
    assert any("the rollout loads the real checkpoint" in n for n in chosen.notes)
    p = plan(chosen, cfg.model, tmp_path)
    model_dir = str(MODELS_DIR / "llama-3.1-8b")
    served = p.python_cmd[p.python_cmd.index("api_server") + 1]
    assert served == model_dir and "shm" not in served  # not the random-weight folder
    assert p.python_cmd[p.python_cmd.index("--backend") + 1] == "turbomind"
    assert p.python_cmd[p.python_cmd.index("--max-batch-size") + 1] == "64"  # the tuned value
    assert p.docker_cmd[p.docker_cmd.index("api_server") + 1] == "/model"  # the container form builds too


def test_a_result_without_a_version_is_launched_under_the_configs_version(tmp_path):
    """A run cut before its result was saved has no measured version: the launch script said "(LMDeploy )" on the
    H100 70B run (2026-12-06). The config's declared version (what ``playbook check`` compares) stands in."""
    cfg, res, decision = lmdeploy_pick()
    res[-1].version = None
    spec = cfg.engines[-1]
    declared = cfg.model_copy(update={"engines": [*cfg.engines[:-1], spec.model_copy(update={"version": "0.18.0"})]})
    assert choose(declared, decision, res).version == "0.18.0"
    chosen = choose(cfg, decision, res)
    assert chosen.version is None
    script = shell_script(plan(chosen, cfg.model, tmp_path), chosen)
    assert "(LMDeploy (version unknown)) for workload" in script
    res[-1].version = "0.18.1"  # what the run measured wins over the declaration
    assert choose(declared, decision, res).version == "0.18.1"
