"""Notebook context and display helpers, the HTML report and the reports index."""
