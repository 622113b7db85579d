"""Test-suite set-up: the shared test data modules (``decision_data``, ``rollout_data``) and the fakes
(``fakes/``) live at the top of ``tests/`` and are importable from every sub-folder."""

import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
for _p in (TESTS_DIR, TESTS_DIR / "rollout"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def pytest_collection_modifyitems(config, items):
    """Mark the tests of ``tiers.py`` ``slow``: ``make test-fast`` leaves them out, ``make test`` runs them."""
    import pytest
    from tiers import is_slow

    for item in items:
        if is_slow(item.nodeid):  # node ids are relative to the repository (pyproject.toml's folder)
            item.add_marker(pytest.mark.slow)
