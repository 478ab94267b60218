"""uvicorn's HTTP/1.1 protocol (h11), closing connections whose request head does not arrive in time.

uvicorn waits for a request's head (the request line and headers) without
limit: a client that connects and sends nothing, or a byte now and then, holds
its connection and a file descriptor for as long as it likes, and a few
hundred such clients leave the server unable to accept anyone else. The Guard
cannot see them (it runs once the head is in). Here a connection whose head is
not complete ``head_seconds`` (``serve.clientTimeoutSeconds``) after it
opened, or after the previous answer, is closed. The body's own deadline is
the Guard's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["protocol"]

log = logging.getLogger("symi_memory.serve")


def protocol(head_seconds: float) -> type[asyncio.Protocol]:
    """The protocol class to hand uvicorn (``uvicorn.Config(http=...)``)."""

    class HeadTimedProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's head (the keep-alive timeout closes a connection that sends nothing)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(head_seconds, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
                log.info("closed a connection from %s: no complete request head within %g s", peer, head_seconds)
                self.transport.close()

    return HeadTimedProtocol
