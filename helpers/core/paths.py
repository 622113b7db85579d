"""Filesystem locations of the project, derived from this file's position."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE_DIR.parent
PLAYBOOK_DIR = REPO_ROOT / "playbook"
WORKLOADS_DIR = PLAYBOOK_DIR / "workloads"
MODELS_DIR = PLAYBOOK_DIR / "models"
REPORTS_DIR = REPO_ROOT / "reports"
DOCS_DIR = REPO_ROOT / "docs"
MEASUREMENTS_DIR = DOCS_DIR / "measurements"
ENGINES_DIR = REPO_ROOT / ".engines"
DATA_DIR = PACKAGE_DIR / "data"
TEMPLATES_DIR = PACKAGE_DIR / "report" / "templates"


def resolve_model_dir(path: str | Path) -> Path:
    """Return the model folder for ``path``: absolute, a name in ``playbook/models``, repo-relative, or cwd-relative."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    if (MODELS_DIR / p).is_dir():
        return MODELS_DIR / p
    if (REPO_ROOT / p).is_dir():  # e.g. .engines/models/<name>, from the repo root or a notebook's cwd
        return REPO_ROOT / p
    return p.resolve()


def resolve_repo_path(path: str | Path) -> Path:
    """Resolve a path from a config: absolute as is, relative to the repository root otherwise."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else REPO_ROOT / p


def repo_relative(text: str) -> str:
    """``text`` with the repository root written as ``.`` (no machine path in a record or report)."""
    root = str(REPO_ROOT)
    return text.replace(root + "/", "./").replace(root, ".")
