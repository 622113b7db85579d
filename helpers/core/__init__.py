"""Shared foundations: the typed config, the exception base, paths, secrets, the registry, small text helpers."""
