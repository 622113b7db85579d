"""Every output names the same representative measurement per engine configuration.

The run folder is filled with the recorded H200 70B FP8 results (vLLM and SGLang, with synthetic fixed-load
trials built from their recorded figures: ``decision_data.with_fixed_trials``), the steps' compute
functions run on it as the notebooks call them, and the summary, the decision, the rollout baseline,
the review and the reports index must all point at what ``helpers.benchmark.sla.representative`` chose.
"""

from decision_data import SGLANG, VLLM, cfg, results

from helpers.benchmark.sla import representatives
from helpers.cost.analysis import analyse
from helpers.decision.compute import decide
from helpers.report.index import archived_runs, index_html
from helpers.report.run_summary import write_summary
from helpers.review.compare import snapshot
from helpers.rollout.choice import choose
from helpers.rollout.rollback import measured_baseline
from helpers.run.folder import RunFolder
from helpers.run.records import save_engine_result
from helpers.run.summary import read_summary

PEAK = {"format": "csv", "source": "trace.csv", "peak_requests_per_s": 5, "output_tokens_mean": 256}


def test_summary_decision_rollout_review_and_index_agree(tmp_path):
    run_dir = tmp_path / "reports" / "run-1"
    c = cfg([VLLM, SGLANG], sla={"ttft_p95_ms": 2000})
    rs = results(VLLM, SGLANG)
    for r in rs:
        save_engine_result(run_dir, r)
    folder = RunFolder(run_dir)
    cost = analyse(rs, c, PEAK)
    folder.save(cost)
    decision = decide(rs, c, PEAK, cost)
    folder.save(decision)
    write_summary(run_dir, c)

    reps = representatives(rs, c)
    want = {label: rep.key for label, rep in reps.items()}
    assert len(set(want.values())) == 2
    # the trials stand for each configuration, never a grid point (the archived 70B run's concurrency 100
    # point, outside the 2 s SLA, was the trap of the grid rule)
    for r in rs:
        assert (reps[r.label].source, reps[r.label].concurrency) == ("fixed", int(r.capacity.trial_load))
        assert reps[r.label].requests == sum(p.requests for p in r.points if p.phase == "trial")

    assert {r.label: r.key for r in cost.representatives} == want
    assert {b.label: b.representative for b in cost.best} == want
    assert {f.label: f.representative for f in cost.fleet} == want
    assert {e["label"]: e["representative"] for e in decision.evidence} == want
    summary = read_summary(run_dir / "summary.json")
    assert {e.label: e.representative.key for e in summary.engines} == want
    assert {e.label: e.representative for e in snapshot(summary).engines} == want
    chosen = choose(c, decision, rs)
    assert chosen.representative.key == want[decision.primary]
    baseline = measured_baseline(chosen)  # the rollout's baseline is that representative, nothing else
    rep = chosen.representative
    assert (baseline.output_tok_s, baseline.concurrency) == (rep.output_tok_s.mean, rep.concurrency)
    assert baseline.basis == rep.basis
    page = index_html(archived_runs(run_dir.parent))
    for label, rep in representatives(rs, c).items():
        assert f"{label} (" in page and f"{rep.output_tok_s.text()} out tok/s at concurrency {rep.concurrency}" in page
