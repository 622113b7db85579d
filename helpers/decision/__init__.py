"""Checklist steps 7-8 (notebook 05_decision): decision tree, scores, the answer, risk register."""
