"""Checklist steps 11-12 (notebook 07_review): the quarterly review against archived runs."""
