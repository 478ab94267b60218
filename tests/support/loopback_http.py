"""A real HTTP server on 127.0.0.1 for provider tests: scripted replies, recorded requests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LoopbackServer", "Recorded", "Reply", "Sleeps"]


@dataclass
class Reply:
    """One scripted answer. ``delay`` seconds pass before it is sent (for timeouts)."""

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def multipart(self) -> dict[str, tuple[str | None, bytes]]:
        """``{field: (filename, content)}`` of a multipart/form-data body."""
        head = f"Content-Type: {self.headers['content-type']}\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + self.body)
        return {
            part.get_param("name", header="content-disposition"): (
                part.get_filename(),
                part.get_payload(decode=True),
            )
            for part in message.iter_parts()
        }


Responder = Reply | Callable[[Recorded], Reply]


class LoopbackServer:
    """``add(method, path, *replies)`` scripts a route; replies are used in order, the last repeats."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._routes: dict[tuple[str, str], list[Responder]] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                req = Recorded(
                    method=self.command,
                    path=parts.path,
                    query=parts.query,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                reply = server._next(req)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.json is not None:
                    payload = json.dumps(reply.json).encode()
                    ctype = "application/json"
                else:
                    raw = reply.body or b""
                    payload = raw.encode() if isinstance(raw, str) else raw
                    ctype = "text/plain"
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.headers.get("Content-Type", ctype))
                    for name, value in reply.headers.items():
                        if name != "Content-Type":
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def add(self, method: str, path: str, *replies: Responder) -> None:
        self._routes[(method, path)] = list(replies)

    def _next(self, req: Recorded) -> Reply:
        with self._lock:
            self.requests.append(req)
            queue = self._routes.get((req.method, req.path))
            if not queue:
                return Reply(status=599, body=f"no route for {req.method} {req.path}")
            responder = queue.pop(0) if len(queue) > 1 else queue[0]
        return responder(req) if callable(responder) else responder

    def paths(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.requests]

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Sleeps(list):
    """An injectable ``sleep`` that records the requested delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
