"""Which point represents an engine configuration once tuning has run."""

from helpers.benchmark.run import tuned_point, tuning_candidates
from helpers.run.records import EngineResult, Point


def point(c: int, phase: str, seqs: int, tok_s: float, sla: bool) -> Point:
    return Point(
        label="x", engine="vllm", concurrency=c, phase=phase, knobs={"max_num_seqs": seqs}, requests=10,
        duration_s=1.0, output_tok_s=tok_s, total_tok_s=tok_s * 2, req_s=1.0, sla_met=sla,
    )  # fmt: skip


def test_the_configured_batch_size_competes_with_the_tried_ones():
    base = point(16, "sweep", 16, 900.0, True)
    r = EngineResult(label="x", engine="vllm", points=[point(1, "sweep", 16, 100.0, True), base,
                                                         point(16, "tune", 4, 500.0, True)])  # fmt: skip
    assert tuning_candidates(r, 16) == [base, r.points[2]]
    r.tuned_knobs = {"max_num_seqs": 16}
    assert tuned_point(r, 16) is base


def test_a_tuned_batch_size_is_the_representative_point():
    tuned = point(16, "tune", 8, 1200.0, True)
    r = EngineResult(label="x", engine="vllm", points=[point(16, "sweep", 16, 900.0, False), tuned],
                     tuned_knobs={"max_num_seqs": 8})  # fmt: skip
    assert tuned_point(r, 16) is tuned


def test_without_tuning_the_target_sweep_point_represents():
    r = EngineResult(label="x", engine="vllm", points=[point(1, "sweep", 16, 100.0, True),
                                                         point(4, "sweep", 16, 300.0, True)])  # fmt: skip
    assert tuned_point(r, 4).concurrency == 4
    assert tuned_point(r, None).output_tok_s == 300.0
