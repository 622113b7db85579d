"""Steps 9-10 view: pilot and rollout artifacts."""

from __future__ import annotations

from helpers.notebook import Context, not_yet


def pilot(ctx: Context) -> None:
    """Step 9."""
    not_yet("pilot launch configuration")


def rollout(ctx: Context) -> None:
    """Step 10."""
    not_yet("rollout artifacts")
