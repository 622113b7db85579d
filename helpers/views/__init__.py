"""Notebook views: one function per checklist step that computes, saves its artifact, and displays.

Logic lives in the concern modules (``helpers.benchmark``, ``helpers.cost``...); views only wire
them to the run folder and to escaped tables and plots.
"""
