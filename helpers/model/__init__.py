"""Model-shape arithmetic, GPU specifications, reference data and model folders."""
