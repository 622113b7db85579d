"""Batch tests: ``batch_data`` (matrices, fake run folders) is importable; ``write_matrix`` writes a matrix file."""

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def write_matrix(tmp_path):
    def write(data: dict, name: str = "m.yaml") -> Path:
        p = tmp_path / name
        p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return p

    return write
