"""A small HTTP client for a running ``symi-memory serve`` (standard library only)."""

from __future__ import annotations

import json
import os
import socket

from .record import TOKEN_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:  # the one-shot CLI path imports this module: no typing, no urllib
    from typing import Any

__all__ = ["ServerClient", "ServerError", "ServerUnavailable"]


class ServerUnavailable(Exception):
    """No server answered (refused, timed out, wrong process): work in-process instead."""


class ServerError(Exception):
    """The server answered with an error status; ``status`` and ``message`` say which."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ServerClient:
    """``call(method, path, body)`` against the server at ``url``; the token comes from ``$SYMI_SERVE_TOKEN``."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0) -> None:
        netloc = url.split("://", 1)[-1].split("/", 1)[0]
        host, _, port = netloc.rpartition(":")
        self.host = host.strip("[]") or "127.0.0.1"
        self.port = int(port) if port.isdigit() else 80
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.timeout = timeout

    def agent_path(self, agent: str, action: str) -> str:
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "".join(f"%{b:02X}" for b in c.encode())
                       for c in agent)
        return f"/api/agents/{safe}/{action}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        # A plain HTTP/1.1 exchange on a socket: http.client would import the email package
        # and ssl, which costs more than the whole request on a one-shot CLI call.
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Accept: application/json",
                "Connection: close", f"Content-Length: {len(data)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        if self.token:
            head.append(f"Authorization: Bearer {self.token}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout) as sock:
                sock.sendall(request)
                chunks = []
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
        except OSError as exc:
            raise ServerUnavailable(str(exc)) from None
        status, headers, raw = _parse(b"".join(chunks))
        if headers.get("x-symi-memory") is None:
            raise ServerUnavailable("the process at the recorded port is not a symi-memory server")
        try:
            out = json.loads(raw)
        except ValueError:
            raise ServerError(status, f"unreadable answer from the server (HTTP {status})") from None
        if status >= 400:
            message = out.get("error") if isinstance(out, dict) else None
            raise ServerError(status, str(message or f"HTTP {status}"))
        return out if isinstance(out, dict) else {"value": out}


def _parse(response: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, lower-cased headers and body of a complete ``Connection: close`` HTTP/1.1 response."""
    head, sep, rest = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2) if lines and lines[0] else []
    if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ServerUnavailable("the process at the recorded port does not speak HTTP")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            body += rest[:size]
            rest = rest[size + 2:]
        return int(parts[1]), headers, bytes(body)
    if "content-length" in headers:
        rest = rest[: int(headers["content-length"])]
    return int(parts[1]), headers, rest
