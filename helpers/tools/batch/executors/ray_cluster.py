"""The ``ray`` executor: each cell is a Ray task, placed by Ray's own scheduler.

A cell's task asks for its GPUs (``num_gpus`` from the cell) or CPUs; no scheduling happens here.

The cluster is addressed as Ray addresses it: ``executor.address`` in the matrix or ``--address`` (``ray://HOST:
10001`` for the Ray client, the way a KubeRay head service is reached; ``HOST:6379`` for a driver on the
cluster's network; ``auto``), else ``RAY_ADDRESS``, else a new Ray instance on this machine. A host and port
that do not answer fail before ``ray.init`` in one line (``ClusterError``).

Workers may be other machines, so run folders travel as bytes (``helpers.tools.batch.archive``): the task gets
the cell's config text and, for a half-done cell, its folder; it runs the cell in a scratch folder with
``helpers.tools.batch.cell.run_cell_process`` and returns the folder as tar.gz bytes with its log, which the
driver unpacks into reports/. Workers need this repository's packages and the cells' engines and model
folders at the same paths (an image built from the repository, or ``executor.runtime_env``).
"""

from __future__ import annotations

import os
import shutil
import socket
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from helpers.tools.batch.archive import pack_run_folder, unpack_run_folder
from helpers.tools.batch.cell import run_cell_process
from helpers.tools.batch.executors.base import BatchEvents, CellOutcome, CellTask, ClusterError, Executor, Resources

LOG_TAIL_BYTES = 2_000_000
"""At most this much of a cell's log comes back from its worker."""


def parse_address(address: str | None) -> tuple[str, int] | None:
    """(host, port) of an explicit Ray address (``ray://h:p`` or ``h:p``); None for ``auto``, ``local`` or none."""
    if not address or address in ("auto", "local"):
        return None
    hostport = address.split("://", 1)[1] if "://" in address else address
    hostport = hostport.split("/", 1)[0]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(f"Ray address {address!r} is not HOST:PORT, ray://HOST:PORT or auto")
    return host.strip("[]") or "127.0.0.1", int(port)


def check_reachable(address: str | None, timeout_s: float) -> None:
    """Raise ``ClusterError`` in one line when an explicit address does not accept a TCP connection."""
    target = parse_address(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except OSError as err:
        raise ClusterError(
            f"the Ray cluster at {address} is unreachable ({err.strerror or err}); "
            "check the address (ray://HOST:10001 for a KubeRay head service) and that the cluster is up"
        ) from None


def task_options(res: Resources) -> dict[str, Any]:
    """Ray task options for a cell's resources; a cell is not retried (a re-run of the batch resumes it)."""
    opts: dict[str, Any] = {"num_cpus": res.num_cpus or 1, "num_gpus": res.num_gpus or 0, "max_retries": 0}
    if res.accelerator_type:
        opts["accelerator_type"] = res.accelerator_type
    if res.custom:
        opts["resources"] = dict(res.custom)
    return opts


def _wants(res: Resources) -> dict[str, float]:
    want = {"CPU": res.num_cpus or 1, "GPU": res.num_gpus or 0, **res.custom}
    if res.accelerator_type:
        want[f"accelerator_type:{res.accelerator_type}"] = 0.001
    return {k: v for k, v in want.items() if v}


def unplaceable(res: Resources, nodes: list[dict[str, float]]) -> str | None:
    """Why no node of the cluster (each node's total resources) can ever hold the cell, or None if one can."""
    want = _wants(res)
    if any(all(node.get(k, 0) >= v for k, v in want.items()) for node in nodes):
        return None
    asked = ", ".join(f"{k}={v:g}" for k, v in want.items())
    offer = "; ".join(", ".join(f"{k}={v:g}" for k, v in sorted(n.items()) if k in want) or "none" for n in nodes)
    return f"no node of the Ray cluster has {asked} (nodes offer: {offer or 'no nodes'})"


class StartNotices:
    """Collects "cell started on host" notices from tasks (a Ray actor while the batch runs)."""

    def __init__(self) -> None:
        self._new: list[tuple[str, str]] = []

    def started(self, cell: str, where: str) -> None:
        """A task began its cell."""
        self._new.append((cell, where))

    def drain(self) -> list[tuple[str, str]]:
        """The notices since the last call."""
        out, self._new = self._new, []
        return out


def run_cell_remote(payload: dict[str, Any], notices: Any = None) -> dict[str, Any]:
    """A cell's Ray task, on a worker: run it in a scratch folder and return its folder and log as bytes."""
    host = socket.gethostname()
    if notices is not None:
        notices.started.remote(payload["cell"], host)
    scratch = Path(tempfile.mkdtemp(prefix="pb-cell-"))
    try:
        reports, run_id = scratch / "reports", payload["run_id"]
        if payload.get("prior"):
            unpack_run_folder(payload["prior"], reports / run_id)
        config, log = scratch / "cell.yaml", scratch / "cell.log"
        config.write_text(payload["config_text"], encoding="utf-8")
        rc, reason, seconds = run_cell_process(config, run_id, reports, log)
        folder = reports / run_id
        return {
            "rc": rc,
            "reason": reason,
            "seconds": seconds,
            "where": host,
            "config": str(config),
            "log": log.read_bytes()[-LOG_TAIL_BYTES:] if log.is_file() else b"",
            "archive": pack_run_folder(folder) if folder.is_dir() else None,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class RayExecutor(Executor):
    """Submits every cell as a Ray task at once and collects them as they finish."""

    kind = "ray"

    def _address(self) -> str | None:
        return self.spec.address or os.environ.get("RAY_ADDRESS") or None

    def _connect(self, ray: Any) -> None:
        address = self._address()
        check_reachable(address, self.spec.connect_timeout_s)
        try:
            ray.init(
                address=address,
                runtime_env=self.spec.runtime_env or None,
                log_to_driver=False,
                logging_level="ERROR",
            )
        except Exception as err:  # ray raises ConnectionError, RuntimeError, grpc errors...: one line for all
            text = " ".join(str(err).split())[:400] or type(err).__name__
            where = address or "a new local instance"
            raise ClusterError(f"cannot connect to the Ray cluster at {where}: {text}") from None

    def _nodes(self, ray: Any) -> list[dict[str, float]] | None:
        try:
            return [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        except Exception:  # not every client mode answers ray.nodes(); Ray then decides alone
            return None

    def run(self, tasks: list[CellTask], reports_dir: Path, events: BatchEvents) -> None:
        """Submit all cells, report starts and finishes as Ray reports them, unpack each folder into reports/."""
        try:
            import ray  # heavy optional dependency: imported only when a batch runs on Ray
        except ImportError:
            raise ClusterError(
                "Ray is not installed: it is the batch extra (pip install -e '.[batch]'; `make venv` installs it)"
            ) from None
        self._connect(ray)
        try:
            nodes = None if self.spec.autoscaling else self._nodes(ray)
            notices = ray.remote(num_cpus=0)(StartNotices).remote()
            remote = ray.remote(run_cell_remote)
            pending: dict[Any, CellTask] = {}
            for t in tasks:
                why = unplaceable(t.resources, nodes) if nodes else None
                if why:
                    events.finished(CellOutcome(t.cell, 1, why))
                    continue
                pending[remote.options(**task_options(t.resources)).remote(self._payload(t, reports_dir), notices)] = t
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=2.0)
                for cell, where in ray.get(notices.drain.remote()):
                    events.started(cell, where)
                for ref in done:
                    events.finished(self._collect(ray, ref, pending.pop(ref), Path(reports_dir)))
        finally:
            ray.shutdown()

    def _payload(self, t: CellTask, reports_dir: Path) -> dict[str, Any]:
        prior = Path(reports_dir) / t.run_id
        return {
            "cell": t.cell,
            "run_id": t.run_id,
            "config_text": t.config_path.read_text(encoding="utf-8"),
            "prior": pack_run_folder(prior) if prior.is_dir() and any(prior.iterdir()) else None,
        }

    def _collect(self, ray: Any, ref: Any, t: CellTask, reports_dir: Path) -> CellOutcome:
        try:
            result = ray.get(ref)
        except ray.exceptions.RayError as err:
            first = (str(err).strip().splitlines() or [""])[0][:300]
            return CellOutcome(t.cell, 1, f"Ray task failed: {type(err).__name__}: {first}")
        t.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(t.log_path, "ab") as log:
            log.write(result["log"])
        reason = result["reason"] and result["reason"].replace(result["config"], str(t.config_path))
        if result["archive"]:
            try:
                unpack_run_folder(result["archive"], reports_dir / t.run_id)
            except (OSError, ValueError, tarfile.TarError) as err:
                reason = f"the run folder from {result['where']} could not be unpacked: {err}"
        return CellOutcome(t.cell, result["rc"] if reason is None or result["rc"] else 1, reason, result["seconds"],
                           result["where"])  # fmt: skip
