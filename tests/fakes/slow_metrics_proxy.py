"""A reverse proxy in front of an engine that forwards everything but answers ``/metrics`` late (or never).

``python slow_metrics_proxy.py --port P --upstream http://127.0.0.1:Q [--delay-s 30]``: every request
is forwarded to the upstream engine and its answer streamed back as it arrives (SSE included);
``/metrics`` is forwarded only after ``--delay-s`` seconds, so a scraper with a shorter timeout sees
a ``/metrics`` that times out while the engine itself serves normally. Point the playbook's
``endpoint`` launcher at the proxy's URL. It prints ``proxy ready`` once it listens.
"""

from __future__ import annotations

import argparse
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


def make_handler(upstream: str, delay_s: float) -> type[BaseHTTPRequestHandler]:
    """A handler class that forwards to ``upstream`` and delays ``/metrics`` by ``delay_s``."""
    target = urlsplit(upstream)
    stop = threading.Event()

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the answer ends when the connection closes: no re-chunking needed

        def log_message(self, fmt: str, *args) -> None:
            pass

        def _forward(self) -> None:
            if self.path.startswith("/metrics"):
                stop.wait(delay_s)
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=3600)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("Connection", "close")
                self.end_headers()
                while chunk := resp.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (OSError, http.client.HTTPException):
                pass  # the client or the engine went away
            finally:
                conn.close()

        do_GET = _forward  # noqa: N815 - http.server's naming
        do_POST = _forward  # noqa: N815

    return Proxy


def main(argv: list[str] | None = None) -> None:
    """Serve the proxy until killed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--delay-s", type=float, default=30.0)
    args = ap.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.upstream, args.delay_s))
    server.daemon_threads = True
    print(f"proxy ready on 127.0.0.1:{args.port} -> {args.upstream} (/metrics delayed {args.delay_s:g} s)", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
