"""Checklist step 5 (notebook 03_benchmark): live engine benchmarks, the SLA and the representative point."""
