"""What a notebook's kernel prints stays out of the console and lands in the run folder's notebook log.

A real kernel through papermill: it prints, warns, writes to its original stderr descriptor (what
multiprocessing's resource tracker inherits: "leaked semaphore objects" reached the console that way)
and starts a child process that writes there too.
"""

import nbformat

from helpers.tools.runner import execute, notebook_log

CELL = r"""
import os, subprocess, sys, warnings
print("PRINTED-LINE")
warnings.warn("WARNED-LINE")
os.write(2, b"ORIGINAL-FD-LINE\n")
subprocess.run([sys.executable, "-c", "import os; os.write(2, b'CHILD-LINE\\n')"])
"""


def test_kernel_output_goes_to_the_notebook_log_not_the_console(tmp_path, capfd):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('config_path = ""\nrun_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(CELL)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "09_noise.ipynb"
    nbformat.write(nb, path)
    run_dir = tmp_path / "run"
    assert execute(path, tmp_path / "out.ipynb", tmp_path / "cfg.yaml", run_dir) is None
    shown = capfd.readouterr()
    log = notebook_log(run_dir, path).read_text(encoding="utf-8")
    for line in ("PRINTED-LINE", "WARNED-LINE", "ORIGINAL-FD-LINE", "CHILD-LINE"):
        assert line in log, line
        assert line not in shown.out + shown.err, line
    assert "IPKernelApp" not in shown.err and "IPKernelApp" in log  # the kernel's start-up warning, kept
