"""MCP sessions of ``symi-memory serve``, bounded: at most ``serve.mcpMaxSessions`` live at once.

Each MCP session the SDK keeps costs ~40 KB (its server task, streams and
buffers) until its client ends it (DELETE) or it is idle for
``serve.mcpSessionIdleMinutes``. A client that never ends its sessions (a
crashing agent loop, a script that initializes per call) would pile them up.
At the limit, a client opening one more closes the session idle longest (its
client, if it comes back, is answered 404 and starts a new one, as the MCP
spec says); when every session is busy the new one is refused 503.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["McpSessions"]

log = logging.getLogger("symi_memory.serve")

_SESSION_HEADER = b"mcp-session-id"


@attrs.define
class _Session:
    last_used: float
    in_flight: int = 0


class McpSessions:
    """ASGI front of the SDK's ``StreamableHTTPSessionManager`` that keeps count of its sessions."""

    def __init__(self, manager: Any, *, max_sessions: int, idle_seconds: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.manager = manager
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._live: dict[str, _Session] = {}
        self._opening = 0  # requests without a session id in flight: each may open one
        self.closed_idle = 0

    def stats(self) -> dict[str, Any]:
        self._forget_expired()
        return {"open": len(self._live), "max": self.max_sessions, "closedIdle": self.closed_idle}

    async def handle_request(self, scope: Any, receive: Any, send: Any) -> None:
        sid = dict(scope.get("headers") or []).get(_SESSION_HEADER)
        if sid is None:
            await self._open(scope, receive, send)
            return
        session_id = sid.decode("latin-1")
        session = self._live.get(session_id)
        if session is not None:
            session.in_flight += 1
        status: int | None = None

        async def seen(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.manager.handle_request(scope, receive, seen)
        finally:
            if session is not None:
                session.in_flight -= 1
                session.last_used = self.clock()
            # Gone: the client ended it, or the SDK had closed it for idleness.
            if status == 404 or (scope.get("method") == "DELETE" and status is not None and status < 300):
                self._live.pop(session_id, None)

    async def _open(self, scope: Any, receive: Any, send: Any) -> None:
        self._forget_expired()
        victim = None
        if len(self._live) + self._opening >= self.max_sessions:
            victim = self._idlest()
            if victim is None:
                log.warning("refused a new MCP session: all %d (serve.mcpMaxSessions) are in use", self.max_sessions)
                await _refuse(send, 503, f"too many MCP sessions in use (serve.mcpMaxSessions = {self.max_sessions}); "
                                         "end one (DELETE /mcp) or try again later")
                return
            idle = self.clock() - self._live.pop(victim).last_used
            self.closed_idle += 1
            log.info("closing MCP session %s, idle %.0f s: serve.mcpMaxSessions (%d) reached", victim[:12], idle,
                     self.max_sessions)
        self._opening += 1  # counted before any await, so concurrent openers see it
        session_id: str | None = None

        async def seen(message: Any) -> None:
            nonlocal session_id
            if message["type"] == "http.response.start" and message["status"] < 400:
                for key, value in message.get("headers") or []:
                    if key.lower() == _SESSION_HEADER:
                        session_id = value.decode("latin-1")
                        self._live[session_id] = _Session(last_used=self.clock(), in_flight=1)
            await send(message)

        try:
            if victim is not None:
                await self._end(scope, victim)
            await self.manager.handle_request(scope, receive, seen)
        finally:
            self._opening -= 1
            session = self._live.get(session_id) if session_id is not None else None
            if session is not None:
                session.in_flight -= 1
                session.last_used = self.clock()

    def _idlest(self) -> str | None:
        idle = [(s.last_used, sid) for sid, s in self._live.items() if not s.in_flight]
        return min(idle)[1] if idle else None

    def _forget_expired(self) -> None:
        """Forget the sessions the SDK has closed for idleness by now (it says nothing when it does)."""
        if self.idle_seconds is None:
            return
        now = self.clock()
        for sid, s in list(self._live.items()):
            if not s.in_flight and now - s.last_used > self.idle_seconds:
                del self._live[sid]

    async def _end(self, scope: Any, session_id: str) -> None:
        """End a session as its client would: a DELETE with its id, through the SDK (``scope``: the request
        that needs its place)."""
        delete = {**scope, "method": "DELETE", "query_string": b"",
                  "headers": [(_SESSION_HEADER, session_id.encode("latin-1"))]}
        sent = False

        async def receive() -> Any:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Any) -> None:
            pass

        try:
            await self.manager.handle_request(delete, receive, discard)
        except Exception as exc:  # the SDK has closed it already, or is shutting down
            log.debug("ending MCP session %s: %s", session_id[:12], exc)


async def _refuse(send: Any, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
