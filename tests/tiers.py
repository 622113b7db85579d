"""The test tiers: which tests ``make test-fast`` leaves out (marked ``slow`` by ``conftest.py``).

``make test`` runs everything (what CI runs). ``make test-fast`` runs the unit tests only: not ``e2e``, not
``engine``, not ``slow``. A test is slow when it starts processes, servers, notebook kernels or a browser,
or drives a load in real time: those below took 2 s or more each in a run of the suite on two shared CPU
cores (2026-12-05). A whole file where most of its tests do; otherwise the test itself.
"""

SLOW_FILES = {
    "tests/benchmark/test_capacity_statistics.py",
    "tests/benchmark/test_crosscheck.py",
    "tests/benchmark/test_evidence.py",
    "tests/benchmark/test_faults.py",
    "tests/benchmark/test_reliability_faults.py",
    "tests/benchmark/test_structured_phase.py",
    "tests/engines/test_turbomind_failures.py",
    "tests/environment/test_prediction_notebook.py",
    "tests/measure/test_interference.py",
    "tests/measure/test_poisson_arrivals.py",
    "tests/report/test_browser.py",
    "tests/report/test_browser_rollout.py",
    "tests/review/test_review_notebook.py",
    "tests/run/test_lock.py",
    "tests/run/test_processes.py",
    "tests/run/test_time_limit_run.py",
    "tests/tools/test_check.py",
    "tests/tools/test_check_run.py",
    "tests/tools/test_cli.py",
    "tests/tools/test_init.py",
    "tests/tools/test_model_setup.py",
    "tests/tools/test_predict.py",
    "tests/tools/test_rerender_from_points.py",
    "tests/tools/test_run_kernel.py",
    "tests/workload/test_structured_replay.py",
}
SLOW_TESTS = {
    "tests/benchmark/test_capacity.py::test_search_finds_the_fake_engines_edge_through_guidellm",
    "tests/benchmark/test_quality.py::test_broken_chat_template_fails_the_gate",
    "tests/benchmark/test_quality.py::test_gate_compares_the_items_both_answered",
    "tests/benchmark/test_quality.py::test_gate_threshold_in_points",
    "tests/core/test_secrets.py::test_without_the_key_the_server_refuses_and_the_row_says_so",
    "tests/launchers/test_config_check.py::test_playbook_check_and_run_refuse_an_unknown_engine",
    "tests/measure/test_loadgen_requests.py::test_requests_ask_for_final_usage_but_not_per_chunk_usage",
    "tests/model/test_gguf.py::test_transformers_runs_the_converted_folder",
    "tests/test_docs.py::test_the_generated_reference_pages_are_not_stale",
    "tests/tools/batch/test_batch_executors.py::test_a_cell_process_that_fails_returns_its_reason",
}


def is_slow(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (``tests/x.py::test_y[param]``) is in the slow tier."""
    path, _, rest = nodeid.partition("::")
    return path in SLOW_FILES or f"{path}::{rest.split('[')[0]}" in SLOW_TESTS
