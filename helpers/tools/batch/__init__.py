"""Batch runs: a matrix of workload configs, each cell a normal ``playbook run``, fanned out by an executor.

The axes are models × engine sets × workloads × GPU types × hosts (or a plain list of configs); every cell
has its own run folder, and the executor is ``local`` or a Ray cluster. ``run.run_batch`` is the entry
(``playbook batch MATRIX``); ``matrix`` expands and validates, ``resume`` decides per cell, ``executors``
run cells, ``figures`` reads each cell's summary, ``index`` writes the batch's page. Nothing happens on import.
"""
