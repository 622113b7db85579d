"""The notebooks of a run share one real kernel (``helpers.tools.kernel``), emptied before each of them.

Real notebooks through papermill and a real IPython kernel: what one notebook defined is gone for
the next (it fails as it would alone in Jupyter), imported modules stay (the kernel is the same
process), the kernel's descriptor-level output lands in the log of the notebook that wrote it, and a
notebook that kills its kernel does not take the next one with it.
"""

import nbformat
import psutil

from helpers.tools.kernel import RunKernel
from helpers.tools.runner import execute, notebook_log

DUNDERS = "print('DUNDERS', ','.join(sorted(k for k in dir() if k.startswith('__'))))"


def _notebook(path, source: str):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('config_path = ""\nrun_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(source)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _out(path):
    """What the notebook's code cell printed (the executed copy papermill wrote)."""
    cell = nbformat.read(path, as_version=4).cells[-1]
    return "".join(o.get("text", "") for o in cell.get("outputs", []))


def test_names_do_not_survive_but_the_process_does(tmp_path):
    first = _notebook(
        tmp_path / "01_a.ipynb",
        "import os, colorsys\nLEFT_OVER = 1\nprint('PID', os.getpid())\nos.write(2, b'FIRST-FD\\n')\n" + DUNDERS,
    )
    second = _notebook(
        tmp_path / "02_b.ipynb",
        "import os, sys\nprint('PID', os.getpid())\nprint('MODULE', 'colorsys' in sys.modules)\n"
        "os.write(2, b'SECOND-FD\\n')\nprint('NAME', 'LEFT_OVER' in dir())\n" + DUNDERS,
    )
    third = _notebook(tmp_path / "03_c.ipynb", "print(LEFT_OVER)")
    run_dir = tmp_path / "run"
    with RunKernel(tmp_path) as kernel:
        assert execute(first, tmp_path / "o1.ipynb", tmp_path / "c.yaml", run_dir, kernel=kernel) is None
        assert execute(second, tmp_path / "o2.ipynb", tmp_path / "c.yaml", run_dir, kernel=kernel) is None
        err = execute(third, tmp_path / "o3.ipynb", tmp_path / "c.yaml", run_dir, kernel=kernel)
    assert err is not None and "NameError" in err and "LEFT_OVER" in err
    one, two = _out(tmp_path / "o1.ipynb"), _out(tmp_path / "o2.ipynb")
    assert one.split("PID ")[1].split()[0] == two.split("PID ")[1].split()[0], (one, two)  # the same kernel
    assert "MODULE True" in two and "NAME False" in two
    # the module's own names survive (multiprocessing reads __main__.__spec__ to start its processes)
    assert one.split("DUNDERS ")[1].split()[0] == two.split("DUNDERS ")[1].split()[0] and "__spec__" in two
    first_log = notebook_log(run_dir, first).read_text(encoding="utf-8")
    second_log = notebook_log(run_dir, second).read_text(encoding="utf-8")
    assert "FIRST-FD" in first_log and "FIRST-FD" not in second_log
    assert "SECOND-FD" in second_log and "SECOND-FD" not in first_log
    assert "IPKernelApp" in first_log  # the kernel's start-up warning, in the log of the notebook it started for


def test_a_notebook_that_kills_its_kernel_does_not_stop_the_next(tmp_path):
    dying = _notebook(tmp_path / "01_dies.ipynb", "import os\nos._exit(3)")
    after = _notebook(tmp_path / "02_after.ipynb", "import os\nprint('ALIVE', os.getpid())")
    run_dir = tmp_path / "run"
    with RunKernel(tmp_path) as kernel:
        err = execute(dying, tmp_path / "o1.ipynb", tmp_path / "c.yaml", run_dir, kernel=kernel)
        assert err is not None and err.startswith("01_dies.ipynb: ")
        assert execute(after, tmp_path / "o2.ipynb", tmp_path / "c.yaml", run_dir, kernel=kernel) is None
        assert kernel.alive()
    pid = int(_out(tmp_path / "o2.ipynb").split("ALIVE ")[1].split()[0])  # the kernel started again
    assert not kernel.alive() and not _running(pid)  # shut down on leaving


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
