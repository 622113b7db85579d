"""Steps 2-4 view: hardware, team, memory plan and engine environments."""

from __future__ import annotations

from helpers.notebook import Context, not_yet


def hardware(ctx: Context) -> None:
    """Step 2."""
    not_yet("hardware inventory")


def team(ctx: Context) -> None:
    """Step 3."""
    not_yet("team answers")


def memory_plan(ctx: Context) -> None:
    """Step 4: memory plan."""
    not_yet("memory plan")


def engine_environments(ctx: Context) -> None:
    """Step 4: engine environments."""
    not_yet("engine environments")
