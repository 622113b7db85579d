"""OpenAI-style request logs: JSONL, one chat or completion request per line.

Accepted keys (the request may also sit under ``request`` or ``body``, the response under
``response``):

- prompt: ``messages`` (a list of ``{"role", "content"}``; content a string or a list of text
  parts) or ``prompt`` (a string);
- token counts: ``usage.prompt_tokens`` / ``usage.completion_tokens`` when present; otherwise the
  model's tokenizer (``<model_dir>/tokenizer.json``) counts the prompt and the response text
  (``response.choices[0].message.content`` or ``.text``, or ``completion``);
- start: ``start_time``, ``timestamp``, ``request_time`` or ``created`` (epoch s / ms, ISO-8601);
- end, optional: ``end_time``, or ``latency_s`` / ``duration_s`` / ``latency_ms`` / ``duration_ms``;
- conversation, optional: ``conversation_id`` or ``session_id``.

Besides the usual columns, the requests carry ``line`` (the line number in the file) and, when the
prompt starts with system messages, ``system_id`` (a hash of their text: equal ids, equal system prompt).

With a tokenizer the prompt is rendered as the model folders' chat template does (each message's
content followed by a space), cut into KV-cache blocks of ``block_size`` tokens, and each full
block is hashed by the text of its tokens (robust to tokenizers that map unknown words to one id).
``system_tokens`` counts the tokens of the leading ``system`` messages.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpers.core.errors import TraceError
from helpers.workload.traces._common import SkipLog, finite, json_object, nonneg_int, to_seconds
from helpers.workload.traces.base import JsonLinesReader, Trace, finish_trace

START_KEYS = ("start_time", "timestamp", "request_time", "created")
DURATION_KEYS = {"latency_s": 1.0, "duration_s": 1.0, "latency_ms": 1e-3, "duration_ms": 1e-3}
CONVERSATION_KEYS = ("conversation_id", "session_id")


def _content(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
    if c is None:
        return ""
    raise ValueError(f"message content must be text, got {type(c).__name__}")


def _prompt(req: dict[str, Any]) -> tuple[str, int]:
    """Return the rendered prompt and the length (chars) of its leading system messages."""
    if not isinstance(req, dict):
        raise ValueError(f"the request must be an object, got {type(req).__name__}")
    if "messages" in req:
        msgs = req["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
            raise ValueError("messages must be a list of objects")
        text, system_chars, leading = "", 0, True
        for m in msgs:
            text += _content(m.get("content")) + " "
            if leading and m.get("role") == "system":
                system_chars = len(text)
            else:
                leading = False
        return text, system_chars
    if isinstance(req.get("prompt"), str):
        return req["prompt"], 0
    raise ValueError("no messages or prompt")


def _response_text(resp: dict[str, Any], obj: dict[str, Any]) -> str | None:
    choices = resp.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        c = choices[0]
        if isinstance(c.get("message"), dict):
            return _content(c["message"].get("content"))
        if isinstance(c.get("text"), str):
            return c["text"]
    if isinstance(obj.get("completion"), str):
        return obj["completion"]
    return None


def _well_formed(text: str) -> str:
    r"""``text`` with lone surrogates (valid JSON escapes such as ``\ud800``, not text) replaced by ``?``.

    The tokenizer refuses them (``TypeError``); one character for one keeps the offsets of the rest.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def _parse(obj: dict[str, Any]) -> dict[str, Any]:
    """One log line as a record; ``ValueError`` says what is wrong."""
    req = obj.get("request") or obj.get("body") or obj
    resp = obj.get("response") if isinstance(obj.get("response"), dict) else obj
    text, system_chars = _prompt(req)
    text = _well_formed(text)
    usage = resp.get("usage") or obj.get("usage") or {}
    start_key = next((k for k in START_KEYS if k in obj), None)
    if start_key is None:
        raise ValueError(f"no start time (one of {', '.join(START_KEYS)})")
    start = to_seconds(obj[start_key])
    end = np.nan
    if "end_time" in obj:
        end = to_seconds(obj["end_time"])
    else:
        for k, scale in DURATION_KEYS.items():
            if k in obj:
                end = start + finite(obj[k], k) * scale
                if not np.isfinite(end):
                    raise ValueError(f"{k} is out of range, got {obj[k]!r}")
                break
    response = _response_text(resp, obj)
    return {
        "start_s": start,
        "end_s": end,
        "text": text,
        "system_chars": system_chars,
        "prompt_tokens": nonneg_int(usage["prompt_tokens"], "usage.prompt_tokens")
        if "prompt_tokens" in usage
        else None,
        "completion_tokens": nonneg_int(usage["completion_tokens"], "usage.completion_tokens")
        if "completion_tokens" in usage
        else None,
        "response_text": None if response is None else _well_formed(response),
        "conversation": next((str(obj[k]) for k in CONVERSATION_KEYS if k in obj), None),
        "system_id": hashlib.blake2b(text[:system_chars].encode(), digest_size=8).hexdigest() if system_chars else None,
    }


def _block_hashes(text: str, offsets: list[tuple[int, int]], block_size: int) -> np.ndarray:
    """One 63-bit hash per full block: the text from the block's first token to the end of its last."""
    n_full = len(offsets) // block_size
    out = np.empty(n_full, dtype=np.int64)
    for j in range(n_full):
        a = offsets[j * block_size][0]
        b = offsets[(j + 1) * block_size - 1][1]
        digest = hashlib.blake2b(text[a:b].encode(), digest_size=8).digest()
        out[j] = int.from_bytes(digest, "little") >> 1
    return out


def _tokenizer(model_dir: Path | None):
    if model_dir is None:
        return None
    # tokenizers: a native library, loaded only where prompts are tokenized
    from tokenizers import Tokenizer

    f = Path(model_dir) / "tokenizer.json"
    if not f.is_file():
        raise TraceError(f"{f}: tokenizer not found (needed to count tokens of the log)")
    return Tokenizer.from_file(str(f))


class OpenAILogReader(JsonLinesReader):
    """Reader of OpenAI-style JSONL request logs (chat messages or prompts, optional usage)."""

    name = "openai-log"
    description = "JSONL of OpenAI-style requests: messages or prompt, optional usage, start/end times."

    def claims_line(self, line: str) -> bool:
        """Claim a JSON object with a chat or completion request in it."""
        obj = json_object(line)
        if obj is None:
            return False
        req = obj.get("request") or obj.get("body") or obj
        return isinstance(req, dict) and ("messages" in req or "prompt" in req)

    def read(self, path: Path, *, model_dir: Path | None = None, block_size: int = 16) -> Trace:
        """Read the log; token counts from usage or the tokenizer, block hashes when a tokenizer is given."""
        log = SkipLog(path, self.name, self.claimed_by)
        records: list[dict[str, Any]] = []
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    obj = json_object(line)
                    if obj is None:
                        log.skip(lineno, line, "not a JSON object")
                        continue
                    try:
                        rec = _parse(obj)
                    except (ValueError, TypeError, KeyError, OverflowError) as err:
                        log.skip(lineno, line, str(err))
                        continue
                    rec["line"] = lineno
                    records.append(rec)
        except (OSError, UnicodeDecodeError) as err:
            raise TraceError(f"{path}: cannot read trace file ({err})") from None
        tok = _tokenizer(model_dir)
        if tok is None:
            for r in records:
                if r["prompt_tokens"] is None or r["completion_tokens"] is None:
                    raise TraceError(
                        f"{path}: line {r['line']}: no usage token counts; give a model folder so its "
                        "tokenizer can count the text"
                    )
        notes: list[str] = []
        hashes: list[np.ndarray] | None = None
        kept: list[dict[str, Any]] = []
        if tok is not None:
            hashes = []
            encs = tok.encode_batch([r["text"] for r in records], add_special_tokens=False)
            for r, enc in zip(records, encs, strict=True):
                if r["completion_tokens"] is None:
                    if r["response_text"] is None:
                        log.skip(r["line"], "", "no usage.completion_tokens and no response text")
                        continue
                    r["completion_tokens"] = len(tok.encode(r["response_text"], add_special_tokens=False).ids)
                offs = enc.offsets
                if r["prompt_tokens"] is None:
                    r["prompt_tokens"] = len(offs)
                r["system_tokens"] = sum(1 for a, _ in offs if a < r["system_chars"])
                hashes.append(_block_hashes(r["text"], offs, block_size))
                kept.append(r)
        else:
            kept = records
            notes.append("no tokenizer given: token counts from usage")
        frame = pd.DataFrame(
            {
                "start_s": [r["start_s"] for r in kept],
                "end_s": [r["end_s"] for r in kept],
                "input_tokens": [r["prompt_tokens"] for r in kept],
                "output_tokens": [r["completion_tokens"] for r in kept],
            },
            dtype=float,
        )
        if tok is not None:
            frame["system_tokens"] = np.array([r["system_tokens"] for r in kept], dtype=np.int64)
        if any(r["conversation"] is not None for r in kept):
            frame["conversation"] = [r["conversation"] for r in kept]
        frame["line"] = np.array([r["line"] for r in kept], dtype=np.int64)
        if any(r["system_id"] is not None for r in kept):
            frame["system_id"] = [r["system_id"] for r in kept]
        if frame["end_s"].isna().all():
            notes.append("no end times in the log")
        return finish_trace(
            path,
            self.name,
            frame,
            hashes=hashes,
            block_size=block_size if tok is not None else None,
            skipped=log.count,
            examples=log.examples,
            notes=notes,
            no_reuse_reason=None if tok is not None else "no tokenizer given, so the prompts cannot be cut into blocks",
        )
