"""A static wave the client came back short from is measured again once (a small fake client: an error path)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import helpers.benchmark.batching as batching
from helpers.measure.loadgen import LoadResult


def _result(done: int, hung: str | None = None) -> LoadResult:
    return LoadResult(requests=done, errors=0, incomplete=0, duration_s=1.0, output_tok_s=1.0, total_tok_s=1.0,
                      req_s=1.0, input_tokens_mean=16.0, output_tokens_mean=8.0, hung=hung)  # fmt: skip


def _drive(monkeypatch, answers: list[LoadResult]) -> tuple[LoadResult, int]:
    calls = []

    async def fake_run_point(**kw):
        calls.append(kw)
        return answers[len(calls) - 1]

    monkeypatch.setattr(batching, "run_point", fake_run_point)
    res = asyncio.run(batching._wave(Path("wave.jsonl"), 4, {}))
    return res, len(calls)


def test_a_wave_short_of_a_request_is_measured_again_once(monkeypatch):
    res, calls = _drive(monkeypatch, [_result(3), _result(4)])
    assert calls == 2 and res.requests == 4
    res, calls = _drive(monkeypatch, [_result(3), _result(3)])  # once only: the second stands
    assert calls == 2 and res.requests == 3


def test_a_whole_or_hung_wave_is_not_measured_again(monkeypatch):
    assert _drive(monkeypatch, [_result(4)])[1] == 1
    assert _drive(monkeypatch, [_result(2, hung="no token for 30 s")])[1] == 1
