"""The quality gate: does a configuration still answer like the reference configuration does.

Faster is worth nothing if a configuration answers worse (FP8 weights or KV cache, speculative
decoding, a broken chat template, a context limit that cuts prompts). Each configuration answers an
evaluation set of our own (``helpers/data/eval/quality-v1.jsonl``: short questions with checkable
answers) greedily (temperature 0) through the same OpenAI API the benchmark uses. Two figures:

* accuracy — the share of items whose output contains one of the item's answers as whole words,
  after normalisation (``is_correct``);
* agreement — the share of items whose normalised output equals the reference configuration's.

A configuration fails the gate when its accuracy is more than ``threshold_points`` percentage
points under the reference's (seed 003 §5.4: choose quantisation whose accuracy loss is < 2%). On
dummy weights nothing is measured: the outcome says so and carries no number.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import time
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from statistics import NormalDist

import httpx
from pydantic import BaseModel, ConfigDict, Field

from helpers.core.paths import DATA_DIR

DEFAULT_EVAL_SET = DATA_DIR / "eval" / "quality-v1.jsonl"
DUMMY_REASON = "dummy weights: quality not measurable"
_SPECIAL_TOKEN = re.compile(r"<\|[^|>]*\|>")
_NON_WORD = re.compile(r"[^0-9a-z]+")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalItem(_Record):
    """One question of the evaluation set and the answers that count as right."""

    id: str
    category: str
    prompt: str
    answers: list[str] = Field(min_length=1)


class ItemResult(_Record):
    """What one configuration answered to one item."""

    id: str
    output: str = Field(description="Raw text the engine returned ('' after an error).")
    correct: bool
    error: str | None = Field(default=None, description="Why the request failed, if it did.")


class QualityOutcome(_Record):
    """One configuration's answers to the evaluation set (or why there are none)."""

    measurable: bool
    reason: str | None = Field(default=None, description="Why it was not measured (measurable=False).")
    eval_set: str = Field(default="", description="File name of the evaluation set.")
    eval_set_sha256: str = ""
    n: int = 0
    correct: int = 0
    errors: int = Field(default=0, description="Items whose request failed (they count as wrong).")
    accuracy: float | None = Field(default=None, description="correct / n; None when not measurable.")
    seconds: float = 0.0
    items: list[ItemResult] = Field(default_factory=list)


class QualityRow(_Record):
    """The gate's verdict on one configuration against the reference configuration."""

    label: str
    reference: str
    measurable: bool
    reason: str | None = None
    correct: int | None = None
    n: int | None = None
    accuracy: float | None = None
    accuracy_low: float | None = Field(default=None, description="95% Wilson interval of the accuracy, low end.")
    accuracy_high: float | None = None
    delta_points: float | None = Field(default=None, description="(accuracy - reference accuracy) × 100.")
    delta_low: float | None = Field(
        default=None, description="95% interval of delta_points over the paired items (Agresti-Min), low end."
    )
    delta_high: float | None = None
    agreed: int | None = None
    compared: int | None = None
    agreement: float | None = Field(default=None, description="Share of outputs equal to the reference's.")
    gate_passed: bool | None = Field(default=None, description="None when either side is not measurable.")
    threshold_points: float


def wilson(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of a share ``correct / n`` (None for n = 0)."""
    if n <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_delta_interval(gained: int, lost: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """95% interval of the accuracy difference (this − reference) over ``n`` paired items, in points.

    ``gained``: items right here and wrong in the reference; ``lost``: the other way round. Agresti and
    Min's adjusted interval for paired proportions (half an item added to each cell of the 2×2 table), which
    stays a real interval when no item changed.
    """
    if n <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    g, lo, m = gained + 0.5, lost + 0.5, n + 2
    diff = (g - lo) / m
    half = z * math.sqrt(max(0.0, (g + lo) - (g - lo) ** 2 / m)) / m
    return round(max(-1.0, diff - half) * 100, 2), round(min(1.0, diff + half) * 100, 2)


def normalize(text: str) -> str:
    """Lower-case words and numbers only: special tokens, punctuation and accents dropped, spaces collapsed."""
    text = _SPECIAL_TOKEN.sub(" ", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return " ".join(_NON_WORD.sub(" ", text).split())


def is_correct(output: str, answers: list[str]) -> bool:
    """Whether one of ``answers`` appears as whole words in the normalised ``output``."""
    padded = f" {normalize(output)} "
    return any(f" {a} " in padded for a in (normalize(x) for x in answers) if a)


def load_eval_set(path: str | Path = DEFAULT_EVAL_SET, limit: int | None = None) -> list[EvalItem]:
    """The items of a JSONL evaluation set (the first ``limit`` of them, if given)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    items = [EvalItem.model_validate_json(line) for line in lines if line.strip()]
    return items[:limit] if limit else items


def unmeasured(reason: str = DUMMY_REASON) -> QualityOutcome:
    """The outcome of a configuration whose quality cannot be measured (no number, the reason)."""
    return QualityOutcome(measurable=False, reason=reason)


async def _answer(
    client: httpx.AsyncClient, url: str, model: str, item: EvalItem, max_tokens: int, gate: asyncio.Semaphore
) -> ItemResult:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": item.prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": False,
    }
    async with gate:
        try:
            resp = await client.post(url, json=body)
            resp.raise_for_status()
            text = resp.json()["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as err:
            if isinstance(err, httpx.HTTPStatusError):
                detail = f"HTTP {err.response.status_code}: {err.response.text[:200]}"
            else:
                detail = f"{type(err).__name__}: {str(err)[:200]}"
            return ItemResult(id=item.id, output="", correct=False, error=detail)
    return ItemResult(id=item.id, output=text, correct=is_correct(text, item.answers))


async def run_quality(
    base_url: str,
    served_model: str,
    eval_set_path: str | Path = DEFAULT_EVAL_SET,
    *,
    api_key: str | None = None,
    concurrency: int = 4,
    max_tokens: int = 16,
    timeout_s: float = 60.0,
    limit: int | None = None,
    dummy_weights: bool = False,
) -> QualityOutcome:
    """Ask every item greedily through ``/v1/chat/completions`` of a running engine; count the right answers.

    ``timeout_s`` bounds one request. A failed request (HTTP error, prompt over the context limit)
    counts as a wrong answer and is listed with its error. With ``dummy_weights`` nothing is sent.
    """
    if dummy_weights:
        return unmeasured(DUMMY_REASON)
    path = Path(eval_set_path)
    items = load_eval_set(path, limit)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = base_url.rstrip("/") + "/v1/chat/completions"
    gate = asyncio.Semaphore(max(1, concurrency))
    started = time.monotonic()
    limits = httpx.Limits(max_connections=max(1, concurrency))
    async with httpx.AsyncClient(headers=headers, timeout=timeout_s, limits=limits) as client:
        results = await asyncio.gather(*(_answer(client, url, served_model, it, max_tokens, gate) for it in items))
    correct = sum(r.correct for r in results)
    return QualityOutcome(
        measurable=True,
        eval_set=path.name,
        eval_set_sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        n=len(results),
        correct=correct,
        errors=sum(r.error is not None for r in results),
        accuracy=correct / len(results) if results else None,
        seconds=round(time.monotonic() - started, 2),
        items=list(results),
    )


def _compare(outcome: QualityOutcome, reference: QualityOutcome) -> tuple[int, int, int, int, int, int]:
    """Over the items both answered: (agreed, compared, correct here, correct in the reference, gained, lost).

    ``gained``: right here and wrong in the reference; ``lost``: wrong here and right in the reference.

    Outputs agree when their normalised texts are equal; a failed request never agrees.
    """
    ref = {r.id: r for r in reference.items}
    agreed = compared = correct = ref_correct = gained = lost = 0
    for r in outcome.items:
        other = ref.get(r.id)
        if other is None:
            continue
        compared += 1
        correct += r.correct
        ref_correct += other.correct
        gained += r.correct and not other.correct
        lost += other.correct and not r.correct
        agreed += r.error is None and other.error is None and normalize(r.output) == normalize(other.output)
    return agreed, compared, correct, ref_correct, gained, lost


def judge_quality(
    outcomes_by_label: Mapping[str, QualityOutcome],
    reference_label: str,
    threshold_points: float = 2.0,
    min_agreement: float | None = None,
) -> list[QualityRow]:
    """One row per configuration: accuracy, agreement with the reference, and whether it passes the gate.

    A configuration passes when its accuracy is at most ``threshold_points`` percentage points under
    the reference's on the items both answered (and, if ``min_agreement`` is set, when at least that
    share of its outputs equal the reference's). Where either side is not measurable, the row has no
    numbers it cannot have and ``gate_passed`` is None, with the reason.
    """
    if reference_label not in outcomes_by_label:
        known = ", ".join(outcomes_by_label) or "none"
        raise KeyError(f"reference configuration {reference_label!r} has no quality outcome (have: {known})")
    ref = outcomes_by_label[reference_label]
    rows: list[QualityRow] = []
    for label, out in outcomes_by_label.items():
        row = QualityRow(
            label=label, reference=reference_label, measurable=out.measurable, threshold_points=threshold_points
        )
        if not out.measurable:
            row.reason = out.reason
            rows.append(row)
            continue
        row.correct, row.n, row.accuracy = out.correct, out.n, out.accuracy
        row.accuracy_low, row.accuracy_high = wilson(out.correct, out.n) or (None, None)
        if label == reference_label:
            row.delta_points, row.gate_passed = 0.0, True
            row.reason = "reference configuration"
        elif not ref.measurable:
            row.reason = f"reference {reference_label!r} not measurable: {ref.reason}"
        elif out.eval_set_sha256 != ref.eval_set_sha256:
            row.reason = f"answered a different evaluation set than the reference ({out.eval_set} vs {ref.eval_set})"
        else:
            row.agreed, row.compared, correct, ref_correct, gained, lost = _compare(out, ref)
            if not row.compared:
                row.reason = "no item in common with the reference"
                rows.append(row)
                continue
            row.agreement = row.agreed / row.compared
            row.delta_points = round((correct - ref_correct) / row.compared * 100, 2)
            row.delta_low, row.delta_high = paired_delta_interval(gained, lost, row.compared) or (None, None)
            why = []
            if row.delta_points < -threshold_points:
                why.append(f"accuracy {row.delta_points:+.1f} points vs the reference (limit -{threshold_points:g})")
            if min_agreement is not None and row.agreement < min_agreement:
                why.append(f"agreement {row.agreement:.0%} with the reference (minimum {min_agreement:.0%})")
            if why and out.errors:
                why.append(f"{out.errors} requests failed")
            row.gate_passed = not why
            row.reason = "; ".join(why) or None
        rows.append(row)
    return rows


def save_outcome(outcome: QualityOutcome, path: str | Path) -> Path:
    """Write an outcome as JSON (the run folder keeps one per configuration)."""
    p = Path(path)
    p.write_text(json.dumps(outcome.model_dump(mode="json"), indent=1) + "\n", encoding="utf-8")
    return p


def load_outcome(path: str | Path) -> QualityOutcome:
    """Read an outcome written by ``save_outcome``."""
    return QualityOutcome.model_validate_json(Path(path).read_text(encoding="utf-8"))
