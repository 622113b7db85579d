"""Measurement clients: load generation (guidellm), Prometheus /metrics, NVML telemetry, prompts."""
