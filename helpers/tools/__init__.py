"""Command line, notebook runner, engine set-up and offline bundles."""
