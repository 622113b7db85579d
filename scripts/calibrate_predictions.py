"""Recompute the capacity-prediction calibration from the archived runs and write its two files.

``python scripts/calibrate_predictions.py`` (after archiving a run with a measured capacity) writes
``helpers/data/prediction_calibration.yaml`` (the per-engine factors step 4 applies) and
``docs/measurements/prediction-vs-measured.md`` (the table). ``tests/environment/test_calibration.py``
fails when either is stale.
"""

from __future__ import annotations

from pathlib import Path

from helpers.environment.calibration import archived_runs, calibrate, calibration_yaml, markdown
from helpers.environment.prediction import CALIBRATION_FILE

DOCS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "measurements" / "prediction-vs-measured.md"


def main() -> None:
    """Write the calibration data file and the docs page."""
    rows, table = calibrate(archived_runs())
    CALIBRATION_FILE.write_text(calibration_yaml(table), encoding="utf-8")
    DOCS_PAGE.parent.mkdir(parents=True, exist_ok=True)
    DOCS_PAGE.write_text(markdown(rows, table), encoding="utf-8")
    print(f"wrote {CALIBRATION_FILE} and {DOCS_PAGE}")


if __name__ == "__main__":
    main()
