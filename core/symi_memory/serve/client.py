"""A small HTTP client for a running ``symi-memory serve`` (standard library only)."""

from __future__ import annotations

import http.client
import json
import os
from typing import Any
from urllib.parse import quote, urlsplit

from .record import TOKEN_ENV

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
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.timeout = timeout

    def agent_path(self, agent: str, action: str) -> str:
        return f"/api/agents/{quote(agent, safe='')}/{action}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        headers = {"Accept": "application/json", "Host": f"{self.host}:{self.port}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ServerUnavailable(str(exc)) from None
        finally:
            conn.close()
        if resp.getheader("X-Symi-Memory") is None:
            raise ServerUnavailable("the process at the recorded port is not a symi-memory server")
        try:
            out = json.loads(raw)
        except ValueError:
            raise ServerError(resp.status, f"unreadable answer from the server (HTTP {resp.status})") from None
        if resp.status >= 400:
            message = out.get("error") if isinstance(out, dict) else None
            raise ServerError(resp.status, str(message or f"HTTP {resp.status}"))
        return out if isinstance(out, dict) else {"value": out}
