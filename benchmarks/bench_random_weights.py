"""How fast ``playbook random-weights`` writes a checkpoint: MB/s per backend, on a cut-down model shape.

The shape is ``--model``'s ``config.json`` with ``--layers`` decoder layers (default: the 70B block-FP8 shape,
4 of its 80 layers, about 4.9 GB), written ``--repeat`` times per backend into ``--out`` (default: a temporary
folder under /dev/shm when it has room, else the system's temporary folder). It prints the seconds and MB/s of
each write. No assertions: run it with ``python benchmarks/bench_random_weights.py``; run the same script with
``PYTHONPATH`` at another checkout to compare two writers side by side.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from helpers.core.paths import MODELS_DIR  # noqa: E402
from helpers.model.random_weights import plan_random_weights, write_random_weights  # noqa: E402


def cut_model(src: Path, layers: int, into: Path) -> Path:
    """A copy of the model folder's config and tokenizer with ``layers`` decoder layers."""
    d = into / f"{src.name}-{layers}l"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.safetensors"))
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_hidden_layers"] = layers
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODELS_DIR / "llama-3.3-70b-fp8")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backends", nargs="+", default=["numpy", "torch"])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model = cut_model(args.model, args.layers, Path(work))
        size = plan_random_weights(model).total_bytes
        shm = Path("/dev/shm")
        base = args.out or (shm if shm.is_dir() and shutil.disk_usage(shm).free > 2 * size else Path(work))
        print(f"{model.name}: {size / 1e9:.2f} GB a write, into {base}")
        for backend in args.backends:
            seconds = []
            for i in range(args.repeat):
                out = base / f"bench-random-weights-{backend}-{i}"
                t0 = time.perf_counter()
                write_random_weights(model, out, backend=backend, log=lambda _m: None)
                seconds.append(time.perf_counter() - t0)
                shutil.rmtree(out)
            med = statistics.median(seconds)
            print(
                f"{backend:>5}: median {med:.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f}, "
                f"n={len(seconds)}), {size / 1e6 / med:,.0f} MB/s"
            )


if __name__ == "__main__":
    main()
