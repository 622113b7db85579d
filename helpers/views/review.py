"""Steps 11-12 view: quarterly review and continuous learning."""

from __future__ import annotations

from helpers.notebook import Context, not_yet


def review(ctx: Context) -> None:
    """Step 11."""
    not_yet("quarterly review")


def learning(ctx: Context) -> None:
    """Step 12."""
    not_yet("version currency")
