"""Steps 7-8 view: decision and risk."""

from __future__ import annotations

from helpers.notebook import Context, not_yet


def decide(ctx: Context) -> dict:
    """Step 7."""
    return {}


def show(ctx: Context, decision: dict) -> None:
    """Step 7."""
    not_yet("decision")


def risk(ctx: Context, decision: dict) -> None:
    """Step 8."""
    not_yet("risk register")
