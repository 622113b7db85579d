"""Checklist step 6 (notebook 04_cost): $/Mtok, fleet size, TCO and break-even."""
