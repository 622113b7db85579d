"""The ``docker`` launcher: an official container image, GPUs passed in, port published on 127.0.0.1."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.launchers.base import HOST, Launcher
from helpers.launchers.python import _options_file_args

if TYPE_CHECKING:
    from helpers.core.config import EngineSpec, LauncherSpec, ModelSpec
    from helpers.engines.base import EngineAdapter

MODEL_MOUNT = "/model"
OPTIONS_MOUNT = "/playbook-launch"


class DockerLauncher(Launcher):
    """``docker run --rm --gpus all -p 127.0.0.1:P:P -v MODEL:/model:ro IMAGE <engine args>``."""

    kind = "docker"

    def build(
        self, adapter: EngineAdapter, spec: EngineSpec, model: ModelSpec, port: int, run_dir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """The ``docker run`` command; the engine's env goes in as ``-e`` flags."""
        image = spec.launcher.image or adapter.default_image
        if not image:
            raise ValueError(f"engine {adapter.name!r} has no default image; set launcher.image")
        env = {**adapter.env(spec), **spec.launcher.env}
        cmd = ["docker", "run", "--rm", "--gpus", "all", "--ipc", "host", "--shm-size", "16g"]
        cmd += ["-p", f"{HOST}:{port}:{port}", "-v", f"{model.directory}:{MODEL_MOUNT}:ro"]
        for k in sorted(env):
            cmd += ["-e", f"{k}={env[k]}"]
        args = adapter.server_args(spec, model, MODEL_MOUNT, "0.0.0.0", port)  # inside the container

        host_args = _options_file_args(adapter, spec, run_dir)
        if host_args:
            host_file = Path(host_args[1])
            cmd += ["-v", f"{host_file.parent}:{OPTIONS_MOUNT}:ro"]
            args += [host_args[0], f"{OPTIONS_MOUNT}/{host_file.name}"]
        cmd += [image, *adapter.container_entrypoint, *args]
        return cmd, {}

    def version(self, adapter: EngineAdapter, spec: EngineSpec) -> str | None:
        """The image tag stands for the version (the image is not started just to ask)."""
        image = spec.launcher.image or adapter.default_image or ""
        return image.rsplit(":", 1)[-1] if ":" in image else None

    def available(self, spec: LauncherSpec) -> bool:
        """Whether a Docker engine answers here."""
        try:
            return subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def readiness(self, adapter: EngineAdapter, spec: EngineSpec) -> tuple[str, str | None, str]:
        """Ready when the image is present locally."""
        image = spec.launcher.image or adapter.default_image or ""
        try:
            r = subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            return "missing", None, f"docker not usable here: {err}"
        if r.returncode != 0:
            return "missing", None, f"image {image} not present (or no Docker engine running)"
        return "ready", self.version(adapter, spec), image
