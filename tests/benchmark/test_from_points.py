"""``playbook run --from-points``: a configuration whose run was cut before its engine row was saved.

Seen on the H200 (2026-12-01): LMDeploy's run hit the call's time limit while its trials stepped down,
so only its points and its engine log were in the run folder. The rebuilt row is ``partial``, holds
every stored point, and takes the KV capacity from the engine's own start-up log line.
"""

from __future__ import annotations

import copy

from decision_data import VLLM, lmdeploy_random_cfg, results

from helpers.benchmark.evidence import rebuild_from_points
from helpers.benchmark.run import EngineRun
from helpers.run.records import save_point

LMDEPLOY_LOG = (
    "2026-12-01 15:53:03,690 - lmdeploy - INFO - base.py:439 - Building CacheEngine with config: \n"
    "CacheConfig(max_batches=1024, block_size=64, num_cpu_blocks=0, num_gpu_blocks=12464, kernel_block_size=64)\n"
)


def test_a_cut_run_is_rebuilt_from_its_points_and_its_engine_log(tmp_path):
    cfg = lmdeploy_random_cfg(evidence={"search": {"enabled": False}})
    spec = cfg.engines[0]
    points = []
    for c in (1, 32):
        p = copy.deepcopy(results(VLLM)[0].points[0])
        p.label, p.engine, p.concurrency, p.phase = spec.label, "lmdeploy", c, "sweep"
        save_point(tmp_path, p)
        points.append(p)
    run = EngineRun(spec, cfg, tmp_path)
    run.log_path().parent.mkdir(parents=True, exist_ok=True)
    run.log_path().write_text(LMDEPLOY_LOG)
    got = rebuild_from_points(run)
    assert got.status == "partial" and "rebuilt from its stored points" in got.reason
    assert sorted(p.concurrency for p in got.points) == [1, 32]
    assert got.kv_capacity_tokens == 12464 * 64
    # nothing stored for a configuration: skipped, with the reason
    run_b = EngineRun(spec.model_copy(update={"label": "other"}), cfg, tmp_path)
    other = rebuild_from_points(run_b)
    assert other.status == "skipped" and other.points == [] and other.kv_capacity_tokens is None
