"""Sessions: the turns of a conversation as a trace records them, profiled and planned for a replay.

A session is the requests that share a ``conversation`` id (OpenAI-style logs carry
``conversation_id`` or ``session_id``). Turn ``k``'s prompt is the history — every earlier prompt and
reply of the session — plus its new message, so it adds ``input_k - input_{k-1} - output_{k-1}``
tokens; its think time is the pause from the previous turn's end to its start.

``session_stats`` profiles that (sessions, turns per session, history growth, think time);
``plan_from_trace`` and ``plan_synthetic`` make a ``SessionPlan`` that
``helpers.workload.structured`` writes for guidellm. Bad turns are skipped, counted and described
by line number, never raised: a turn without a session id, or one that starts before the previous
turn of its session (in file order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.config import MultiTurn
from helpers.workload.traces.base import MAX_REPORTED_LINES, Trace


class SessionStats(BaseModel):
    """What the sessions of a trace look like (turns, history growth, think time)."""

    model_config = ConfigDict(extra="forbid")

    sessions: int = Field(description="Distinct session (conversation) ids.")
    requests_in_sessions: int = Field(description="Requests that carry a session id.")
    requests_without_session: int = Field(description="Requests without one.")
    turns_mean: float = Field(description="Mean turns per session.")
    turns_p50: float = Field(description="Median turns per session.")
    turns_p95: float = Field(description="95th percentile of turns per session.")
    turns_max: int = Field(description="Most turns in one session.")
    multi_turn_share: float = Field(description="Share of sessions with two or more turns.")
    history_growth_tokens_mean: float | None = Field(
        description="Mean growth of the prompt from one turn to the next (tokens); None: no second turns."
    )
    history_growth_tokens_p50: float | None = Field(description="Median of that growth.")
    new_tokens_per_turn_p50: float | None = Field(
        description="Median tokens a later turn adds beyond the previous prompt and reply (the new message)."
    )
    turn_gap_s_p50: float | None = Field(description="Median start-to-start gap between turns (s).")
    think_time_s_p50: float | None = Field(
        description="Median pause from a turn's end to the next turn's start (s); None: no end times."
    )
    think_time_s_p95: float | None = Field(description="95th percentile of that pause (s).")


@dataclass
class PlannedTurn:
    """One turn to replay: when, how long it ran, and its token counts."""

    start_s: float
    duration_s: float
    new_tokens: int
    prompt_tokens: int
    output_tokens: int
    line: int | None = None


@dataclass
class Session:
    """The turns of one session, in order, and the system prompt its first turn starts with."""

    id: str
    turns: list[PlannedTurn]
    system_tokens: int = 0
    system_group: str | None = None


@dataclass
class SessionPlan:
    """Sessions to replay; ``lanes`` sessions at a time when set, else each at its recorded start."""

    sessions: list[Session]
    lanes: int | None = None
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def turns(self) -> int:
        """Turns in all sessions."""
        return sum(len(s.turns) for s in self.sessions)

    def skip(self, line: int | None, why: str) -> None:
        """Count a skipped turn; describe the first few by line number."""
        self.skipped += 1
        if len(self.skipped_examples) < MAX_REPORTED_LINES:
            self.skipped_examples.append(f"line {line}: {why}" if line is not None else why)


def _has_sessions(trace: Trace) -> bool:
    return "conversation" in trace.requests and trace.requests["conversation"].notna().any()


def _ordered(trace: Trace) -> pd.DataFrame:
    """Requests with a session id, in file order (``line``) when known, else by start."""
    df = trace.requests
    df = df[df["conversation"].notna()].copy()
    df["conversation"] = df["conversation"].astype(str)
    key = "line" if "line" in df else "start_s"
    return df.sort_values(["conversation", key], kind="stable")


def _q(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def session_stats(trace: Trace) -> SessionStats | None:
    """Session statistics of a trace with session ids; None when it has none."""
    if not _has_sessions(trace):
        return None
    df = _ordered(trace)
    turns = df.groupby("conversation", sort=False).size().to_numpy()
    same = df["conversation"].to_numpy()
    later = np.concatenate([[False], same[1:] == same[:-1]])
    inp = df["input_tokens"].to_numpy(dtype=np.int64)
    out = df["output_tokens"].to_numpy(dtype=np.int64)
    start = df["start_s"].to_numpy(dtype=float)
    end = df["end_s"].to_numpy(dtype=float)
    prev = np.roll(np.arange(len(df)), 1)
    growth = (inp - inp[prev])[later]
    new = (inp - inp[prev] - out[prev])[later]
    gap = (start - start[prev])[later]
    think = (start - end[prev])[later]
    think = think[~np.isnan(think)]
    return SessionStats(
        sessions=len(turns),
        requests_in_sessions=len(df),
        requests_without_session=len(trace) - len(df),
        turns_mean=float(turns.mean()),
        turns_p50=float(np.percentile(turns, 50)),
        turns_p95=float(np.percentile(turns, 95)),
        turns_max=int(turns.max()),
        multi_turn_share=float((turns >= 2).mean()),
        history_growth_tokens_mean=float(growth.mean()) if len(growth) else None,
        history_growth_tokens_p50=_q(growth, 50),
        new_tokens_per_turn_p50=_q(new, 50),
        turn_gap_s_p50=_q(gap, 50),
        think_time_s_p50=_q(think, 50),
        think_time_s_p95=_q(think, 95),
    )


def plan_from_trace(
    trace: Trace, *, requests: int | None = None, start_s: float = 0.0, max_prompt_tokens: int | None = None
) -> SessionPlan:
    """The sessions of a trace to replay at their recorded starts; bad turns skipped and reported.

    Takes whole sessions whose first turn starts at or after ``start_s`` until ``requests`` turns
    are planned. A session ends before a turn whose prompt exceeds ``max_prompt_tokens``. Raises
    ``ValueError`` when the trace has no session ids at all.
    """
    if not _has_sessions(trace):
        raise ValueError(f"the {trace.format} trace has no conversation or session ids to replay as sessions")
    plan = SessionPlan(sessions=[])
    df = trace.requests
    lines = df["line"] if "line" in df else pd.Series([None] * len(df), index=df.index)
    for idx in df.index[df["conversation"].isna()]:
        plan.skip(_line(lines[idx]), "no session id (replayed as sessions)")
    dropped = shrank = 0
    for sid, g in _ordered(trace).groupby("conversation", sort=False):
        turns: list[PlannedTurn] = []
        last_start, last_prompt, last_out = -np.inf, 0, 0
        for row in g.itertuples(index=False):
            line = _line(getattr(row, "line", None))
            if row.start_s < last_start:
                why = f"starts at {row.start_s:.3f} s, before its previous turn at {last_start:.3f} s"
                plan.skip(line, f"session {sid}: {why}")
                continue
            history = last_prompt + last_out if turns else 0
            new = int(row.input_tokens) - history
            if new < 1:
                shrank += 1
                new = 1
            duration = 0.0 if np.isnan(row.end_s) else float(row.end_s - row.start_s)
            turns.append(PlannedTurn(float(row.start_s), duration, new, history + new, int(row.output_tokens), line))
            last_start, last_prompt, last_out = row.start_s, history + new, int(row.output_tokens)
        if not turns or turns[0].start_s < start_s:
            continue
        if max_prompt_tokens is not None:
            cut = next((i for i, t in enumerate(turns) if t.prompt_tokens > max_prompt_tokens), len(turns))
            dropped += len(turns) - cut
            turns = turns[:cut]
            if not turns:
                continue
        system = _system_tokens(g)
        plan.sessions.append(Session(str(sid), turns, min(system, turns[0].new_tokens), _system_group(g)))
    plan.sessions.sort(key=lambda s: s.turns[0].start_s)
    if requests is not None:
        plan.sessions = _first_turns(plan.sessions, requests)
    if shrank:
        plan.notes.append(
            f"{shrank} turns' prompts did not grow by the previous prompt and reply (history cut?): "
            "replayed as the previous history plus one new token"
        )
    if dropped:
        plan.notes.append(f"{dropped} turns past {max_prompt_tokens} prompt tokens not replayed (sessions end there)")
    return plan


def _line(value) -> int | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else int(value)


def _system_tokens(g: pd.DataFrame) -> int:
    return int(g["system_tokens"].iloc[0]) if "system_tokens" in g else 0


def _system_group(g: pd.DataFrame) -> str | None:
    """Sessions whose first prompts start with the same system prompt share its words (``system_id``)."""
    if "system_id" in g and isinstance(g["system_id"].iloc[0], str):
        return g["system_id"].iloc[0]
    return None


def _first_turns(sessions: list[Session], n: int) -> list[Session]:
    """Whole sessions, in start order, until ``n`` turns (the last one cut to fit)."""
    out, total = [], 0
    for s in sessions:
        if total >= n:
            break
        take = s.turns[: n - total]
        out.append(Session(s.id, take, s.system_tokens, s.system_group))
        total += len(take)
    return out


def plan_synthetic(mt: MultiTurn) -> SessionPlan:
    """The sessions a ``MultiTurn`` config describes, ``sessions_in_flight`` at a time."""
    sessions = []
    for i in range(mt.sessions):
        turns, prompt = [], 0
        for k in range(mt.turns):
            new = mt.user_turn_tokens + (mt.system_prompt_tokens if k == 0 else 0)
            prompt += new + (mt.output_tokens if k else 0)
            turns.append(PlannedTurn(k * mt.think_time_s, 0.0, new, prompt, mt.output_tokens))
        group = "shared" if mt.shared_system_prompt else f"session-{i}"
        sessions.append(Session(f"s{i}", turns, mt.system_prompt_tokens, group))
    note = (
        f"synthetic sessions: {mt.sessions} of {mt.turns} turns, {mt.system_prompt_tokens}-token "
        f"{'shared' if mt.shared_system_prompt else 'per-session'} system prompt, {mt.user_turn_tokens} new and "
        f"{mt.output_tokens} output tokens a turn, {mt.think_time_s:g} s think time, {mt.sessions_in_flight} at once"
    )
    return SessionPlan(sessions=sessions, lanes=mt.sessions_in_flight, notes=[note])


def agent_loop(
    sessions: int = 8,
    calls: int = 16,
    tool_prompt_tokens: int = 2048,
    result_tokens: int = 48,
    output_tokens: int = 24,
    tool_time_s: float = 0.2,
    sessions_in_flight: int = 4,
) -> MultiTurn:
    """An agent loop as a ``MultiTurn``: one long shared tool prompt, many short calls a session."""
    return MultiTurn(
        sessions=sessions,
        turns=calls,
        system_prompt_tokens=tool_prompt_tokens,
        shared_system_prompt=True,
        user_turn_tokens=result_tokens,
        output_tokens=output_tokens,
        think_time_s=tool_time_s,
        sessions_in_flight=sessions_in_flight,
        live_reply=True,
    )
