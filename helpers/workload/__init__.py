"""Checklist step 1 (notebook 01_workload): traces, the workload profile, request shapes and load levels."""
