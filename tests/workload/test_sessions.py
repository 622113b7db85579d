"""Sessions of an OpenAI-style log: statistics, the replay plan, and bad turns reported by line number."""

from pathlib import Path

import pytest

from helpers.core.config import MultiTurn
from helpers.workload.sessions import agent_loop, plan_from_trace, plan_synthetic, session_stats
from helpers.workload.traces import load_trace

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def sessions_trace():
    return load_trace(FIX / "openai_sessions.jsonl", "openai-log")


def test_plan_keeps_two_sessions_of_three_growing_turns():
    plan = plan_from_trace(sessions_trace())
    assert [s.id for s in plan.sessions] == ["a", "b"]
    a, b = plan.sessions
    assert [t.prompt_tokens for t in a.turns] == [20, 35, 50]
    assert [t.new_tokens for t in a.turns] == [20, 10, 10]  # 35 = 20 + 5 (reply) + 10
    assert [t.prompt_tokens for t in b.turns] == [20, 30, 40]
    assert [t.new_tokens for t in b.turns] == [20, 5, 6]
    assert [t.line for t in a.turns] == [1, 3, 6]
    assert [t.start_s for t in a.turns] == [0.0, 2.0, 4.0]
    assert [t.duration_s for t in b.turns] == pytest.approx([1.0, 0.5, 0.5])


def test_bad_turns_are_counted_with_line_numbers():
    plan = plan_from_trace(sessions_trace())
    assert plan.skipped == 2
    assert plan.skipped_examples == [
        "line 4: no session id (replayed as sessions)",
        "line 8: session b: starts at 1.000 s, before its previous turn at 5.000 s",
    ]


def test_history_that_shrinks_is_noted_and_replay_continues(tmp_path):
    p = tmp_path / "cut.jsonl"
    rows = [
        '{"start_time": 1, "session_id": "x", "prompt": "p", "usage": {"prompt_tokens": 100, "completion_tokens": 10}}',
        '{"start_time": 2, "session_id": "x", "prompt": "p", "usage": {"prompt_tokens": 50, "completion_tokens": 10}}',
    ]
    p.write_text("\n".join(rows) + "\n")
    plan = plan_from_trace(load_trace(p, "openai-log"))
    assert [t.prompt_tokens for t in plan.sessions[0].turns] == [100, 111]
    assert plan.skipped == 0 and "1 turns' prompts did not grow" in plan.notes[0]


def test_window_and_prompt_cap():
    plan = plan_from_trace(sessions_trace(), requests=4)
    assert [len(s.turns) for s in plan.sessions] == [3, 1]
    capped = plan_from_trace(sessions_trace(), max_prompt_tokens=36)
    assert [len(s.turns) for s in capped.sessions] == [2, 2]
    assert capped.notes[-1] == "2 turns past 36 prompt tokens not replayed (sessions end there)"
    later = plan_from_trace(sessions_trace(), start_s=0.25)
    assert [s.id for s in later.sessions] == ["b"]


def test_a_trace_without_sessions_is_refused():
    with pytest.raises(ValueError, match="no conversation or session ids"):
        plan_from_trace(load_trace(FIX / "openai_usage.jsonl"))


def test_session_stats():
    st = session_stats(sessions_trace())
    assert st.sessions == 2 and st.requests_in_sessions == 7 and st.requests_without_session == 1
    assert st.turns_max == 4 and st.turns_p50 == 3.5  # b has its back-in-time turn too (stats keep it)
    assert st.multi_turn_share == 1.0
    assert st.history_growth_tokens_p50 == 10.0  # a: 15, 15; b: 10, 10, 4
    assert st.think_time_s_p50 == pytest.approx(1.0)
    assert session_stats(load_trace(FIX / "openai_usage.jsonl")) is None


def test_synthetic_and_agent_loop_plans():
    plan = plan_synthetic(MultiTurn(sessions=3, turns=3, system_prompt_tokens=8, user_turn_tokens=4, output_tokens=2))
    assert plan.lanes == 4 and len(plan.sessions) == 3
    t = plan.sessions[0].turns
    assert [x.prompt_tokens for x in t] == [12, 18, 24] and [x.new_tokens for x in t] == [12, 4, 4]
    assert [x.start_s for x in t] == [0.0, 1.0, 2.0]
    assert {s.system_group for s in plan.sessions} == {"shared"}
    agent = agent_loop(sessions=2, calls=10)
    assert agent.system_prompt_tokens == 2048 and agent.turns == 10 and agent.shared_system_prompt
