"""Step 6 view: cost."""

from __future__ import annotations

from helpers.notebook import Context, not_yet


def show(ctx: Context) -> None:
    """Step 6."""
    not_yet("cost analysis")
