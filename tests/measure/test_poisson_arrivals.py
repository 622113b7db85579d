"""Open-loop Poisson probes send at the rate asked, with any number of guidellm worker processes.

guidellm 0.8.1's own ``poisson`` profile seeds every worker process's generator alike, so with 8
workers a 180-request probe at 15 req/s sent at 21-38 req/s (see ``run_rate``). The playbook draws
the schedule itself and guidellm replays it (after a lead of ``SCHEDULE_LEAD_S``, so that the workers
are up before the first send is due); this sends one through the fake engine with 4 workers.
"""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest
from fakes.fake_process import fake_server

from helpers.core.paths import MODELS_DIR
from helpers.measure.loadgen import poisson_schedule, run_rate, scheduled_dataset
from helpers.measure.prompts import fixed_shapes, write_dataset


def test_the_schedule_is_one_seeded_poisson_process():
    a, b = poisson_schedule(20.0, 4000, seed=7), poisson_schedule(20.0, 4000, seed=7)
    assert a == b and a[0] == 0.0 and len(a) == 4000 and all(y > x for x, y in zip(a, a[1:], strict=False))
    gaps = np.diff(a)
    assert abs(gaps.mean() - 1 / 20) < 4 * (1 / 20) / math.sqrt(len(gaps))  # mean gap 1/rate
    assert abs(gaps.std() / gaps.mean() - 1) < 0.1  # exponential gaps: coefficient of variation 1
    assert poisson_schedule(20.0, 50, seed=8) != poisson_schedule(20.0, 50, seed=7)[:50]
    for n in (2, 40, 500):  # the rate sent is the rate asked, whatever the draw
        for seed in range(5):
            assert poisson_schedule(32.0, n, seed)[-1] == pytest.approx((n - 1) / 32.0, rel=1e-9)
    # one stream at two loads: the same bursts, scaled (what two configurations compared on it receive)
    slow, fast = np.array(poisson_schedule(10.0, 300, 3)), np.array(poisson_schedule(20.0, 300, 3))
    assert np.allclose(slow, 2 * fast)
    assert abs(np.diff(slow).std() / np.diff(slow).mean() - 1) < 0.15  # still Poisson-like gaps
    with pytest.raises(ValueError, match="rate > 0"):
        poisson_schedule(0, 5, 1)


def test_scheduled_dataset_cycles_the_prompts_and_stamps_each_row(tmp_path):
    src = tmp_path / "p.jsonl"
    src.write_text('{"prompt": "a", "output_tokens_count": 2}\n{"prompt": "b", "output_tokens_count": 3}\n')
    out = scheduled_dataset(src, [0.0, 0.5, 1.25], tmp_path / "s.jsonl")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["prompt"], r["relative_timestamp"]) for r in rows] == [("a", 0.0), ("b", 0.5), ("a", 1.25)]


def test_a_poisson_probe_sends_its_schedule_with_several_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYBOOK_GUIDELLM_WORKERS", "4")
    model_dir = MODELS_DIR / "tiny-llama"
    dataset = write_dataset(fixed_shapes(120, 16, 4), model_dir, tmp_path / "prompts.jsonl", seed=1)
    rate, n, seed = 15.0, 120, 3
    planned = poisson_schedule(rate, n, seed)
    planned_rate = (n - 1) / planned[-1]
    with fake_server(tmp_path, {"FAKE_TOKEN_DELAY_S": "0.005"}) as url:
        res = asyncio.run(run_rate(url, "tiny-llama", model_dir, dataset, rate, n, 60.0, seed=seed))
    assert res.offered_rate == rate and res.errors == 0 and abs(len(res.request_starts_s) - n) <= 1
    # what was sent follows the planned schedule, not clumps of 4, and the first requests do not leave
    # together while the workers start (the schedule's lead): each within a few tens of ms of its time
    sent = np.array(sorted(res.request_starts_s))
    lag = sent - np.array(planned[: len(sent)])
    assert np.percentile(np.abs(lag - np.median(lag)), 95) < 0.1, lag
    assert res.dispatch_delay_p95_ms < 100, res.dispatch_delay_p95_ms
    assert abs(res.sent_rate - planned_rate) / planned_rate < 0.1, (res.sent_rate, planned_rate)
