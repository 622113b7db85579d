"""Write ``requirements.lock``: the pinned set the playbook installs, read from the environment that runs this.

The set is what ``pyproject.toml`` declares (``[project] dependencies`` and every extra: batch, bundle, dev)
and everything those require, transitively, at the versions installed here; the project itself is left out,
and a local version label (``torch 2.13.0+cpu``) is written as its public version (``torch==2.13.0``), which
pip matches with the same build. Markers are evaluated for this machine (Linux, CPython 3.11).

To change a pin: install the version into the venv (``.venv/bin/pip install NAME==VERSION``), run the tests,
then rewrite the lock and commit it:

    .venv/bin/python scripts/lock.py            # rewrite requirements.lock
    .venv/bin/python scripts/lock.py --check    # exit 1 if it differs from this environment (tests run it)
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
HEADER = """\
# The playbook's pinned environment: what pyproject.toml declares (dependencies and the extras batch, bundle,
# dev) and all they require, at the versions tested. `make venv` installs it, then the project with --no-deps;
# environment.yml (conda) installs it too. Written by scripts/lock.py from the venv; do not edit by hand:
#   .venv/bin/pip install NAME==VERSION && .venv/bin/python scripts/lock.py
"""


def declared() -> list[Requirement]:
    """The project's own requirements: its dependencies and every extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    own = canonicalize_name(project["name"])
    return [r for r in map(Requirement, lines) if canonicalize_name(r.name) != own]


def _applies(req: Requirement, extras: set[str]) -> bool:
    """Whether ``req`` holds here, for a distribution asked for with ``extras``."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in extras | {""})


def closure(roots: list[Requirement]) -> dict[str, str]:
    """Canonical name → installed version of ``roots`` and all they require (with the extras asked for)."""
    pinned: dict[str, str] = {}
    asked: dict[str, set[str]] = {}
    todo = [(r, set()) for r in roots if _applies(r, set())]
    while todo:
        req, _ = todo.pop()
        name = canonicalize_name(req.name)
        extras = set(req.extras)
        if name in asked and extras <= asked[name]:
            continue
        asked.setdefault(name, set()).update(extras)
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            raise SystemExit(f"{req.name} is required but not installed here: install it, then lock") from None
        pinned[name] = dist.version.split("+", 1)[0]
        for sub in map(Requirement, dist.requires or []):
            if _applies(sub, asked[name]):
                todo.append((sub, set()))
    return pinned


def lock_text() -> str:
    """The lock file's text for this environment."""
    pins = closure(declared())
    return HEADER + "".join(f"{n}=={v}\n" for n, v in sorted(pins.items()))


def main(argv: list[str] | None = None) -> int:
    """Write the lock, or with ``--check`` say whether the committed one is this environment's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if requirements.lock is stale")
    args = ap.parse_args(argv)
    text = lock_text()
    if args.check:
        if LOCK.read_text(encoding="utf-8") != text:
            print(f"{LOCK.name} differs from this environment: run scripts/lock.py", file=sys.stderr)
            return 1
        return 0
    LOCK.write_text(text, encoding="utf-8")
    print(f"{LOCK.name}: {text.count(chr(10)) - HEADER.count(chr(10))} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
