"""Config sections of the model and the engine configurations: model folder, knobs, launcher, engine spec.

The names of engines and launchers are plain text here: the foundation knows no registry. They are checked
against ``ENGINES`` and ``LAUNCHERS`` by ``helpers.launchers.config_check``, where a config is loaded for a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from helpers.core.config_base import PositiveInt, _Strict
from helpers.core.paths import resolve_model_dir


class ModelSpec(_Strict):
    """The model under test: a folder with ``config.json`` and a tokenizer (weights optional)."""

    path: str = Field(description="Model folder: absolute, relative to cwd, or a name under playbook/models.")
    served_name: str | None = Field(default=None, description="Name the engine serves it under; defaults to path.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        default="auto", description="Activation/weight dtype the engine is asked for."
    )

    @field_validator("path")
    @classmethod
    def _model_dir_exists(cls, v: str) -> str:
        d = _model_dir(v)
        if not (d / "config.json").is_file():
            hint = "; real-weight folders are made by `playbook setup-model NAME`" if ".engines" in v else ""
            raise ValueError(f"model folder {v!r} has no config.json (looked in {d}){hint}")
        return v

    @property
    def directory(self) -> Path:
        """The resolved model folder."""
        return resolve_model_dir(self.path)


def _model_dir(v: str) -> Path:
    """``resolve_model_dir(v)``, with a path that cannot be looked up as ``ValueError`` naming it.

    A name longer than the file system allows raises ``OSError`` and ``~nosuchuser`` ``RuntimeError``.
    """
    try:
        d = resolve_model_dir(v)
        (d / "config.json").is_file()
    except OSError as err:
        raise ValueError(f"model folder {v!r} cannot be looked up ({err.strerror or err})") from None
    except RuntimeError as err:
        raise ValueError(f"model folder {v!r} cannot be looked up ({err})") from None
    return d


DEFAULT_MEMORY_FRACTION = 0.9
"""Share of GPU memory an engine is assumed to take when a configuration does not set one (vLLM's default)."""


class Speculative(_Strict):
    """Speculative decoding: drafts from the prompt's own n-grams (no draft model) or from a draft model."""

    method: Literal["ngram", "draft"] = Field(description="ngram (prompt lookup) or draft (a smaller model).")
    num_tokens: PositiveInt = Field(default=4, description="Tokens drafted per step.")
    draft_model: str | None = Field(default=None, description="Draft model folder (method: draft); same tokenizer.")
    ngram_max: PositiveInt = Field(default=4, description="Longest n-gram looked up (method: ngram).")
    ngram_min: PositiveInt | None = Field(
        default=None, description="Shortest n-gram looked up (vLLM only; its default is ngram_max, not 1)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Speculative:
        if self.method == "draft" and not self.draft_model:
            raise ValueError("knobs.speculative.draft_model is required when method is 'draft'")
        if self.method == "ngram" and self.draft_model:
            raise ValueError("knobs.speculative.draft_model is only for method 'draft'")
        if self.draft_model and not (_model_dir(self.draft_model) / "config.json").is_file():
            raise ValueError(f"knobs.speculative.draft_model {self.draft_model!r} has no config.json")
        if self.ngram_min and self.ngram_min > self.ngram_max:
            raise ValueError(f"knobs.speculative.ngram_min ({self.ngram_min}) exceeds ngram_max ({self.ngram_max})")
        return self


class Knobs(_Strict):
    """Engine-neutral tuning knobs; each engine adapter maps them onto its own flags."""

    max_num_seqs: PositiveInt | None = Field(default=None, description="Max concurrent sequences (batch size).")
    max_batched_tokens: PositiveInt | None = Field(default=None, description="Max tokens per scheduler step.")
    prefix_caching: bool | None = Field(default=None, description="Prefix caching on/off; None = engine default.")
    kv_cache_dtype: Literal["auto", "fp8"] = Field(default="auto", description="KV-cache dtype.")
    quantization: Literal["none", "fp8"] = Field(default="none", description="Weight quantization.")
    tensor_parallel: PositiveInt = Field(default=1, description="Tensor-parallel size (GPUs).")
    memory_fraction: float | None = Field(
        default=None, gt=0, le=1, description="Share of GPU memory the engine may take."
    )
    dummy_weights: bool = Field(default=True, description="Serve random weights from config.json only.")
    max_model_len: PositiveInt | None = Field(default=None, description="Max context length.")
    speculative: Speculative | None = Field(default=None, description="Speculative decoding (needs real weights).")

    @model_validator(mode="after")
    def _speculative_needs_real_weights(self) -> Knobs:
        if self.speculative is not None and self.dummy_weights:
            raise ValueError(
                "knobs.speculative needs real weights: with dummy_weights: true the drafts are random and "
                "never accepted, so acceptance rate and speedup mean nothing; set dummy_weights: false"
            )
        return self


class LauncherSpec(_Strict):
    """How an engine process is started: a Python interpreter, a container image, or an existing endpoint."""

    kind: str = Field(default="python", description="Registered launcher: python, docker or endpoint.")
    python: str | None = Field(
        default=None,
        description="Interpreter that has the engine (python launcher): a path (relative to the repo root) or a "
        "name on PATH; None: the interpreter running the playbook (the engine from the current environment).",
    )
    pythonpath: list[str] = Field(default_factory=list, description="Folders put first on PYTHONPATH.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    image: str | None = Field(default=None, description="Container image (docker launcher).")
    url: str | None = Field(default=None, description="Base URL of a running server (endpoint launcher).")
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key; never the key itself.",
    )


def placeholder_weights(dummy_weights: bool, engine_options: Mapping[str, str]) -> bool:
    """Whether a configuration serves weights that mean nothing: the dummy loader, or a random-weight folder.

    ``EngineSpec.placeholder_weights`` for a parsed spec; this form also reads a stored config's engine entry.
    """
    return bool(dummy_weights) or engine_options.get("weights") == "random"


class EngineSpec(_Strict):
    """One engine configuration to benchmark."""

    label: str = Field(description="Name of this configuration in tables and plots.")
    engine: str = Field(description="Registered engine adapter: vllm, vllm-cpu, sglang, trtllm, lmdeploy or endpoint.")
    version: str | None = Field(
        default=None,
        description="Engine version this configuration is meant to measure (e.g. 0.26.0); `playbook check` fails "
        "a launcher that has another (python: the package's version; docker: the image tag). None: any version.",
    )
    launcher: LauncherSpec = Field(
        default_factory=LauncherSpec,
        description="How the engine starts; left out: the python launcher with the interpreter running the "
        "playbook (this engine from the current environment).",
    )
    knobs: Knobs = Field(default_factory=Knobs)
    extra_args: list[str] = Field(default_factory=list, description="Extra command-line flags, passed as given.")
    engine_options: dict[str, str] = Field(
        default_factory=dict,
        description="Engine-specific settings the adapter understands (trtllm: backend: pytorch | tensorrt; "
        "lmdeploy: backend: turbomind | pytorch, weights: random, weights_root: DIR).",
    )
    startup_timeout_s: float = Field(default=600, gt=0, description="Seconds to wait for health after launch.")
    note: str = Field(
        default="",
        description="Why this configuration is set up as it is, shown beside it in step 5's engine table "
        "(e.g. a backend chosen because another's libraries could not be carried).",
    )
    tune_max_num_seqs: list[PositiveInt] = Field(
        default_factory=list,
        description="Batch sizes to try at the target concurrency; the best within the SLA is the tuned config.",
    )

    @property
    def placeholder_weights(self) -> bool:
        """Whether the engine serves weights that mean nothing: the dummy loader, or a random-weight folder.

        Speed and memory are those of the model's shape; answers are noise, so quality is not measurable
        and speculative drafts are never accepted.
        """
        return placeholder_weights(self.knobs.dummy_weights, self.engine_options)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: object) -> object:
        """A version YAML reads as a number (``version: 1.2``) is taken as its text."""
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
