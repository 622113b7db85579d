"""``playbook run --from-points``: a configuration whose run was cut before its engine row was saved.

Seen on the H200 (2026-12-01): LMDeploy's run hit the call's time limit while its trials stepped down,
so only its points and its engine log were in the run folder. The rebuilt row is ``partial``, holds
every stored point, and takes the KV capacity from the engine's own start-up log line.
"""

from __future__ import annotations

import copy

import pytest
from decision_data import VLLM, lmdeploy_random_cfg, results

from helpers.benchmark.evidence import rebuild_from_points
from helpers.benchmark.points import time_cap_notes
from helpers.benchmark.session import EngineSession
from helpers.benchmark.sla import representative
from helpers.run.progress import PROGRESS_FILE, ProgressEvents, started_note, started_times
from helpers.run.records import EngineResult, save_engine_result, save_point

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
    run = EngineSession(spec, cfg, tmp_path)
    run.log_path().parent.mkdir(parents=True, exist_ok=True)
    run.log_path().write_text(LMDEPLOY_LOG)
    got = rebuild_from_points(run)
    assert got.status == "partial" and "rebuilt from its stored points" in got.reason
    assert sorted(p.concurrency for p in got.points) == [1, 32]
    assert got.kv_capacity_tokens == 12464 * 64
    # nothing stored for a configuration: skipped, with the reason
    run_b = EngineSession(spec.model_copy(update={"label": "other"}), cfg, tmp_path)
    other = rebuild_from_points(run_b)
    assert other.status == "skipped" and other.points == [] and other.kv_capacity_tokens is None


def test_a_cut_run_without_the_search_keeps_its_fixed_load_trials(tmp_path):
    """Search disabled: the trials saved one by one are the record of the fixed load (not a capacity)."""
    cfg = lmdeploy_random_cfg(
        evidence={"search": {"enabled": False}, "trials": {"fixed_concurrency": 8}}, workload={"concurrency": [1, 8]}
    )
    spec, recorded_point = cfg.engines[0], results(VLLM)[0].points[1]

    def stored(c: int, phase: str, tag: str = "", trial: int | None = None, factor: float = 1.0) -> None:
        p = copy.deepcopy(recorded_point)
        p.label, p.engine, p.concurrency, p.phase, p.trial = spec.label, "lmdeploy", c, phase, trial
        p.output_tok_s *= factor
        save_point(tmp_path, p, tag)

    for c in (1, 8):
        stored(c, "sweep")
    for i, f in enumerate((0.98, 1.0, 1.02)):
        stored(8, "trial", f"t{i}", i, f)
    stored(4, "trial", "t3", 3, 5.0)  # an earlier attempt's trial at another load: not one of these
    run = EngineSession(spec, cfg, tmp_path)
    got = rebuild_from_points(run)
    cap = got.capacity
    assert got.status == "partial" and (cap.searched, cap.capacity, cap.trial_load) == (False, None, 8.0)
    assert cap.trials_note == "3 trial(s) at 8 streams"
    rep = representative(got, cfg)
    assert (rep.source, rep.concurrency, rep.output_tok_s.n) == ("fixed", 8, 3)
    assert rep.output_tok_s.mean == pytest.approx(recorded_point.output_tok_s)
    assert rep.requests == 3 * recorded_point.requests


def test_a_configuration_skipped_in_one_attempt_and_measured_in_a_later_one_is_rebuilt(tmp_path):
    """Seen on the H100 (2026-12-06): TurboMind's start was cut twice (its row saved as skipped), then a resumed
    call measured it and was cut in turn. The re-render used the stale skipped row and said "not measured"
    above nine stored probes; the points win, and the cold start comes back from the progress file."""
    cfg = lmdeploy_random_cfg(evidence={"search": {"enabled": False}})
    spec = cfg.engines[0]
    save_engine_result(tmp_path, EngineResult(label=spec.label, engine="lmdeploy", status="skipped", reason="cut"))
    events = ProgressEvents(tmp_path / PROGRESS_FILE)
    events.note(started_note("someone else", 1.0, 2.0))
    events.note(started_note(spec.label, 40.2, 41.4))
    events.note(started_note(spec.label, 38.0, 39.0))  # a later attempt's start: the first one is the cold start
    run = EngineSession(spec, cfg, tmp_path)
    assert rebuild_from_points(run).status == "skipped"  # no points yet: still not measured
    p = copy.deepcopy(results(VLLM)[0].points[0])
    p.label, p.engine, p.phase = spec.label, "lmdeploy", "sweep"
    save_point(tmp_path, p)
    got = rebuild_from_points(EngineSession(spec, cfg, tmp_path))
    assert got.status == "partial" and [q.concurrency for q in got.points] == [p.concurrency]
    assert (got.ready_s, got.cold_start_s) == (40.0, 41.0)  # the note keeps whole seconds
    assert started_times(tmp_path, "someone") == [] and started_times(tmp_path / "none", spec.label) == []


def test_a_cut_probe_is_named_by_its_rate_and_a_cut_level_by_its_concurrency():
    """The H100 70B report said "at concurrency 0" for open-loop probes the time cap cut (2026-12-06)."""
    r = copy.deepcopy(results(VLLM)[0])
    level, probe = r.points[0], copy.deepcopy(r.points[0])
    level.incomplete, level.offered_rate = 33, None
    probe.incomplete, probe.phase, probe.concurrency, probe.offered_rate = 7, "search", 0, 0.704
    r.points = [level, probe]
    notes = time_cap_notes([r], 120)
    assert notes[0].startswith(f"{r.label} at concurrency {level.concurrency}: the 120 s time cap")
    assert "33 request(s) in flight" in notes[0]
    assert notes[1].startswith(f"{r.label}, search at 0.704 req/s offered: the 120 s time cap ended it with 7")
    assert "concurrency 0" not in " ".join(notes)
    level.incomplete = probe.incomplete = 0
    assert time_cap_notes([r], 120) == []
