"""What ``playbook check`` says: one ``Check`` per thing checked, each one line with ✓ or ✗ and the fix.

A ✗ either concerns the whole run (``rows`` empty: the config, the model folder, the disk, the loopback
interface) or names the engine configurations it makes fail (``rows``): those will be failed rows of
step 5, and the others still run. ``playbook run`` stops on the first kind only (``CheckReport.stops_run``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OK, FAILED = "✓", "✗"


@dataclass(frozen=True)
class Check:
    """One thing checked: what (``name``), whether it is fine, what was found and, on a ✗, the fix."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    rows: tuple[str, ...] = ()
    """The engine configurations a ✗ makes fail (their labels); empty: the ✗ concerns the whole run."""

    def line(self) -> str:
        """The check as one line: ``✓ name: detail`` or ``✗ name: detail — consequence; fix: ...``."""
        text = f"{OK if self.ok else FAILED} {self.name}: {self.detail}"
        if self.ok:
            return text
        if len(self.rows) == 1:
            text += " — that configuration will be a failed row"
        elif self.rows:
            text += f" — these {len(self.rows)} configurations will be failed rows"
        else:
            text += " — the run cannot start"
        return text + (f"; fix: {self.fix}" if self.fix else "")


@dataclass
class CheckReport:
    """Every check of one config, in the order they were made."""

    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        """The checks with a ✗."""
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.failed

    @property
    def stops_run(self) -> bool:
        """True when a ✗ concerns the whole run (``playbook run`` stops before any notebook)."""
        return any(not c.rows for c in self.failed)

    @property
    def failed_rows(self) -> list[str]:
        """Labels of the configurations that will be failed rows, each once, in order."""
        return list(dict.fromkeys(label for c in self.failed for label in c.rows))

    def summary(self) -> str:
        """One closing line: all passed, or how many failed and what that means for a run."""
        n, bad = len(self.checks), len(self.failed)
        if not bad:
            return f"playbook check: all {n} checks passed"
        what = "a run would not start" if self.stops_run else f"{len(self.failed_rows)} configuration(s) would fail"
        return f"playbook check: {bad} of {n} checks failed ({what})"

    def text(self) -> str:
        """Every line and the summary, as printed and archived (``logs/check.txt``)."""
        return "\n".join([*(c.line() for c in self.checks), self.summary()]) + "\n"
