"""A tiny stand-in engine for error-path tests: OpenAI completions (plain and streamed SSE), health, metrics.

Started like an engine (``python -m fake_openai_server --host H --port P ...``; unknown flags are
ignored). Its behaviour comes from environment variables:

* ``FAKE_ENGINE_MODE``: ``ok`` (default); ``die_mid_point`` (exits after ``FAKE_DIE_AFTER`` streamed
  requests); ``hang_mid_point`` (after ``FAKE_DIE_AFTER`` streamed requests it stops answering anything,
  ``/health`` and ``/metrics`` included, while the process lives on: a deadlocked engine);
  ``never_healthy`` (``/health`` answers 503); ``bad_metrics`` (``/metrics`` is not Prometheus text);
  ``bad_flag`` (exits at start like an argument parser rejecting a flag); ``oom_at_start`` (prints a
  failed start shaped like vLLM's: the EngineCore's traceback ending in ``FAKE_OOM_LINE``, by default
  PyTorch's CUDA out-of-memory error, then 60 lines of the API server's own traceback, so that the line
  is far above the log tail; exits with code 1 before it is healthy).
* ``FAKE_API_KEY``: when set, every request must carry ``Authorization: Bearer <key>`` (else 401).
* ``FAKE_TOKEN_DELAY_S``: seconds between streamed tokens (default 0.002).
* ``FAKE_SERVICE_SLOTS``: when set to k > 0, at most k completions are served at once and the others
  wait in a strict FIFO queue (``vllm:num_requests_waiting`` reports it). A request holds its slot for
  ``S = max_tokens x FAKE_TOKEN_DELAY_S`` seconds (tokens paced on an absolute schedule, so overhead
  does not stretch it) and its first token leaves as soon as it gets a slot: its TTFT is its queueing
  time plus overhead. This is a queue with a known edge, capacity ``mu = k / S`` requests/s:

  - arrivals at a constant rate ``lam <= mu`` never wait (D/D/k): TTFT stays at its overhead;
  - past ``mu`` the queue grows without bound: the n-th request waits about ``n (1/mu - 1/lam)`` s
    and completions run at ``mu``, below the offered ``lam``;
  - Poisson arrivals (M/D/k) wait a little below ``mu`` too, more and more as ``lam`` nears ``mu``.

  E.g. k=4, 8 tokens, 0.05 s a token: S=0.4 s, mu=10 req/s. Unset or 0: no limit (the default).
* ``FAKE_CAPTURE_FILE``: when set, each completion request is appended to that file as one JSON line
  (``prompt``, ``max_tokens``, arrival time ``t``), so a test can check what a replay sent.
* ``FAKE_CACHE_BLOCK``: when set to b > 0, the usage carries ``prompt_tokens_details.cached_tokens``: the
  longest whole-block word prefix the prompt shares with an earlier prompt (an unbounded prefix cache of
  b-word blocks, at most prompt - 1 words), as vLLM reports with ``--enable-prompt-tokens-details``.
* ``FAKE_ANSWERS``: a JSONL evaluation set (``prompt``, ``answers``); ``/v1/chat/completions`` then answers
  the item whose prompt is the last user message with "The answer is <answers[0]>." (anything else:
  "I do not know."). ``FAKE_WRONG_EVERY=n`` answers every n-th item wrongly; ``FAKE_ENGINE_MODE=drop_question``
  answers as if the chat template had dropped the user's message (the quality gate must catch both).

``/metrics`` counts requests in ``fake:requests_total`` and authorised ones in
``fake:authorized_requests_total``; of the streamed ones, those asking for usage in the last chunk
(``stream_options.include_usage``) and in every chunk (``continuous_usage_stats``); plus
vLLM-named series so the vLLM adapter's names resolve. The key itself is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("FAKE_ENGINE_MODE", "ok")
KEY = os.environ.get("FAKE_API_KEY")
DIE_AFTER = int(os.environ.get("FAKE_DIE_AFTER", "3"))
TOKEN_DELAY_S = float(os.environ.get("FAKE_TOKEN_DELAY_S", "0.002"))
SERVICE_SLOTS = int(os.environ.get("FAKE_SERVICE_SLOTS", "0") or 0)
CAPTURE_FILE = os.environ.get("FAKE_CAPTURE_FILE")
CACHE_BLOCK = int(os.environ.get("FAKE_CACHE_BLOCK", "0") or 0)
OOM_LINE = os.environ.get(
    "FAKE_OOM_LINE",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of"
    " 139.81 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 138.78 GiB memory in use.",
)
_cached_blocks: set[int] = set()
_hung = threading.Event()  # hang_mid_point: set once the engine stops answering
ANSWERS_FILE = os.environ.get("FAKE_ANSWERS")
WRONG_EVERY = int(os.environ.get("FAKE_WRONG_EVERY", "0") or 0)


def _answers() -> dict[str, tuple[int, str]]:
    """prompt -> (position in the set, first answer) of ``FAKE_ANSWERS`` (empty when unset)."""
    if not ANSWERS_FILE:
        return {}
    with open(ANSWERS_FILE, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    return {x["prompt"]: (i, x["answers"][0]) for i, x in enumerate(items)}


def _chat_body(req: dict) -> dict:
    """A non-streamed chat completion answering from ``FAKE_ANSWERS`` (see the module docstring)."""
    users = [m.get("content", "") for m in req.get("messages") or [] if m.get("role") == "user"]
    question = "" if MODE == "drop_question" or not users else users[-1]
    hit = _answers().get(question)
    if hit is None:
        text = "I do not know."
    elif WRONG_EVERY and hit[0] % WRONG_EVERY == WRONG_EVERY - 1:
        text = "I am not sure."
    else:
        text = f"The answer is {hit[1]}."
    usage = {"prompt_tokens": len(question.split()), "completion_tokens": len(text.split())}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    return {"id": "chat0", "object": "chat.completion", "model": req.get("model"), "choices": [choice], "usage": usage}


def _capture(req: dict, usage: dict) -> None:
    """Append the request to ``FAKE_CAPTURE_FILE`` and add cached tokens to ``usage`` (when asked for)."""
    words = str(req.get("prompt", "")).split()
    with _lock:
        if CACHE_BLOCK > 0:
            full = (len(words) - 1) // CACHE_BLOCK if words else 0
            keys, key = [], 0
            for j in range(len(words) // CACHE_BLOCK):  # hash of the prefix up to each block's end
                key = hash((key, tuple(words[j * CACHE_BLOCK : (j + 1) * CACHE_BLOCK])))
                keys.append(key)
            hit = next((j for j in range(full) if keys[j] not in _cached_blocks), full)
            _cached_blocks.update(keys)
            usage["prompt_tokens_details"] = {"cached_tokens": hit * CACHE_BLOCK}
        if CAPTURE_FILE:
            with open(CAPTURE_FILE, "a", encoding="utf-8") as f:
                row = {"prompt": req.get("prompt"), "max_tokens": req.get("max_tokens"), "t": time.time()}
                f.write(json.dumps(row) + "\n")


_lock = threading.Lock()
_counts = {"requests": 0, "authorized": 0, "streamed": 0, "prompt_tokens": 0, "running": 0, "usage": 0, "per_chunk": 0}
_counts["waiting"] = 0


class FifoSlots:
    """At most ``slots`` holders at once; the others wait and are served strictly in arrival order."""

    def __init__(self, slots: int):
        self._free = slots
        self._waiters: deque[threading.Event] = deque()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take a slot, waiting behind every earlier arrival."""
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiters.append(turn)
        with _lock:
            _counts["waiting"] += 1
        turn.wait()
        with _lock:
            _counts["waiting"] -= 1

    def release(self) -> None:
        """Hand the slot to the longest waiter, or free it."""
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._free += 1


_slots = FifoSlots(SERVICE_SLOTS) if SERVICE_SLOTS > 0 else None


def _metrics_page() -> str:
    c = _counts
    return (
        "# TYPE fake:requests_total counter\n"
        f"fake:requests_total {c['requests']}\n"
        "# TYPE fake:authorized_requests_total counter\n"
        f"fake:authorized_requests_total {c['authorized']}\n"
        "# TYPE fake:streamed_requests_total counter\n"
        f"fake:streamed_requests_total {c['streamed']}\n"
        "# TYPE fake:include_usage_requests_total counter\n"
        f"fake:include_usage_requests_total {c['usage']}\n"
        "# TYPE fake:continuous_usage_requests_total counter\n"
        f"fake:continuous_usage_requests_total {c['per_chunk']}\n"
        "# TYPE vllm:prefix_cache_queries_total counter\n"
        f'vllm:prefix_cache_queries_total{{engine="0"}} {c["prompt_tokens"]}\n'
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        f'vllm:prefix_cache_hits_total{{engine="0"}} {c["prompt_tokens"] // 2}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0"}} {0.1 * c["running"]}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0"}} {c["running"]}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{engine="0"}} {c["waiting"]}\n'
    )


class Handler(BaseHTTPRequestHandler):
    """Answers the few routes the playbook and guidellm use."""

    protocol_version = "HTTP/1.0"

    def log_message(self, fmt: str, *args) -> None:  # quiet, and never logs headers
        pass

    def _authorized(self) -> bool:
        with _lock:
            _counts["requests"] += 1
        if KEY is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {KEY}":
            with _lock:
                _counts["authorized"] += 1
            return True
        self._send(401, "application/json", json.dumps({"error": "bad key"}).encode())
        return False

    def _send(self, code: int, ctype: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _hang_if_hung(self) -> None:
        """In ``hang_mid_point`` mode, once hung: never answer (the connection stays open)."""
        if _hung.is_set():
            threading.Event().wait()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        """Health, model list and metrics."""
        self._hang_if_hung()
        if self.path == "/health":
            self._send(503 if MODE == "never_healthy" else 200, "text/plain", b"")
        elif self.path == "/v1/models":
            if self._authorized():
                self._send(200, "application/json", json.dumps({"data": [{"id": "tiny-llama"}]}).encode())
        elif self.path == "/metrics":
            body = b"garbage{{{ not prometheus\n" if MODE == "bad_metrics" else _metrics_page().encode()
            self._send(200, "text/plain; version=0.0.4", body)
        else:
            self._send(404, "text/plain", b"not found")

    def do_POST(self) -> None:  # noqa: N802
        """``/v1/completions``: a JSON answer, or SSE chunks of one word per token when ``stream`` is true."""
        self._hang_if_hung()
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        if self.path == "/v1/chat/completions":
            if self._authorized():
                self._send(200, "application/json", json.dumps(_chat_body(req)).encode())
            return
        if self.path != "/v1/completions":
            self._send(404, "text/plain", b"not found")
            return
        if not self._authorized():
            return
        prompt_tokens = len(str(req.get("prompt", "")).split())
        out = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": out, "total_tokens": prompt_tokens + out}
        _capture(req, usage)
        with _lock:
            _counts["prompt_tokens"] += prompt_tokens
        if not req.get("stream"):
            if _slots is not None:
                _slots.acquire()
                time.sleep(out * TOKEN_DELAY_S)
                _slots.release()
            body = {"id": "c0", "object": "text_completion", "model": req.get("model"), "usage": usage}
            body["choices"] = [{"index": 0, "text": " w3" * out, "finish_reason": "length"}]
            self._send(200, "application/json", json.dumps(body).encode())
            return
        if _slots is None:
            self._stream(req, out, usage)
            return
        _slots.acquire()  # queued (counted as waiting) until a slot frees
        try:
            self._stream(req, out, usage)
        finally:
            _slots.release()

    def _stream(self, req: dict, out: int, usage: dict) -> None:
        """Write ``out`` SSE token chunks and the final usage chunk (paced from the slot's start when slots are set)."""
        began = time.monotonic()
        options = req.get("stream_options") or {}
        with _lock:
            _counts["streamed"] += 1
            streamed = _counts["streamed"]
            _counts["running"] += 1
            _counts["usage"] += bool(options.get("include_usage"))
            _counts["per_chunk"] += bool(options.get("continuous_usage_stats"))
        if MODE == "die_mid_point" and streamed > DIE_AFTER:
            print(f"fake engine: dying after {DIE_AFTER} streamed requests", flush=True)
            os._exit(3)
        if MODE == "hang_mid_point" and streamed > DIE_AFTER:
            print(f"fake engine: hanging after {DIE_AFTER} streamed requests", flush=True)
            _hung.set()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for i in range(out):
                self._hang_if_hung()  # requests in flight stop mid-stream
                chunk = {"id": "c1", "object": "text_completion", "model": req.get("model")}
                chunk["choices"] = [{"index": 0, "text": f" w{3 + i}", "finish_reason": None}]
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                if _slots is None:
                    time.sleep(TOKEN_DELAY_S)
                else:  # an absolute schedule: the service time is exactly out x delay
                    time.sleep(max(0.0, began + (i + 1) * TOKEN_DELAY_S - time.monotonic()))
            last = {"id": "c1", "object": "text_completion", "model": req.get("model"), "usage": usage}
            last["choices"] = [{"index": 0, "text": "", "finish_reason": "length"}]
            self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
        finally:
            with _lock:
                _counts["running"] -= 1


def _fail_start_out_of_memory() -> None:
    """``oom_at_start``: a start that dies of ``OOM_LINE`` in its EngineCore, the API server's traceback after it."""
    core, api = "(EngineCore pid=2) ERROR 12-01 16:05:31 [core.py:708]", "(APIServer pid=1)"
    print(f"{api} INFO 12-01 16:04:02 [api_server.py:1]  fake engine (oom_at_start)", flush=True)
    print(f"{core} EngineCore failed to start.\n{core} Traceback (most recent call last):", file=sys.stderr)
    print(f'{core}   File "fake/gpu_model_runner.py", line 1, in load_model', file=sys.stderr)
    print(f"{core} \x1b[1;31m{OOM_LINE}\x1b[0m", file=sys.stderr)
    print(f"{api} Traceback (most recent call last):", file=sys.stderr)
    for i in range(30):
        print(f'{api}   File "fake/engine/frame_{i}.py", line {i + 1}, in start\n{api}     start()', file=sys.stderr)
    print(f"{api} RuntimeError: Engine core initialization failed. See root cause above.", file=sys.stderr)
    sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """Parse ``--host``/``--port`` (ignoring the engine flags around them) and serve until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _unknown = parser.parse_known_args(argv)
    if MODE == "bad_flag":
        print("fake engine: error: unrecognized arguments: --max-num-seqs-typo", file=sys.stderr, flush=True)
        sys.exit(2)
    if MODE == "oom_at_start":
        _fail_start_out_of_memory()
    print(f"fake engine ({MODE}) on {args.host}:{args.port}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
