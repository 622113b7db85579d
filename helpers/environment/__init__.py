"""Checklist steps 2-4 (notebook 02_environment): hardware, team, memory plan, engine environments."""
