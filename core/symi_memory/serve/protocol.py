"""Closing connections whose request head does not arrive in time.

uvicorn waits for a request's head (the request line and headers) without
limit: a client that connects and sends nothing, or a byte now and then, holds
its connection and a file descriptor for as long as it likes, and a few
hundred such clients leave the server unable to accept anyone else. The Guard
cannot see them (the ASGI app runs once the head is in). Here a connection
whose head is not complete ``seconds`` (``serve.clientTimeoutSeconds``) after
it opened, or after the previous answer, is closed. The body's own deadline is
the Guard's.

Nothing private of uvicorn's is used: the protocol class handed to
``uvicorn.Config(http=...)`` is uvicorn's own h11 protocol with only the
asyncio ``Protocol`` methods ``connection_made`` and ``connection_lost``
extended (to arm the timer and forget the connection). The head's arrival is
learnt at the ASGI layer: the Guard, called once a head is complete, tells
:class:`HeadDeadlines` by the connection's two addresses (``scope["client"]``,
which uvicorn must then take from the socket: ``proxy_headers`` is off, and
``scope["server"]``), and again when the answer is sent, which arms the timer
for the next head. The client's address alone does not name one connection: a
client may use one port for connections to two addresses of a server listening
on all of them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import ConfigError

__all__ = ["READ_MIN_RATE", "HeadDeadlines", "TESTED_UVICORN", "h11_protocol_class"]

log = logging.getLogger("symi_memory.serve")

#: A client must read an answer the server holds for it at this many bytes a second at least (else it is cut off).
READ_MIN_RATE = 1024

#: The uvicorn releases this module is tested with (pyproject's ``mcp`` extra says the same).
TESTED_UVICORN = ">=0.31.1,<1"


def h11_protocol_class() -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 (h11) protocol class, or a ConfigError naming the fix when this uvicorn has none."""
    try:
        import uvicorn
        from uvicorn.protocols.http.h11_impl import H11Protocol
    except ImportError as exc:
        raise ConfigError(f"serve cannot limit slow clients with this uvicorn ({exc}): install a tested one, "
                          f"pip install 'uvicorn{TESTED_UVICORN}'") from None
    if not (isinstance(H11Protocol, type) and issubclass(H11Protocol, asyncio.Protocol)):
        raise ConfigError(f"serve cannot limit slow clients with uvicorn {getattr(uvicorn, '__version__', '?')}: its "
                          f"h11 protocol is not an asyncio protocol; install a tested one, "
                          f"pip install 'uvicorn{TESTED_UVICORN}'")
    return H11Protocol


def _peer(address: Any) -> tuple[str, int] | None:
    """A socket address as uvicorn puts it in ``scope["client"]`` and ``scope["server"]`` (host, port)."""
    if not address or len(address) < 2:
        return None
    return str(address[0]), int(address[1])


def _key(client: Any, server: Any) -> tuple[tuple[str, int], tuple[str, int]] | None:
    """What names one TCP connection: its client's and its server's address."""
    peer, local = _peer(client), _peer(server)
    return None if peer is None or local is None else (peer, local)


def _unsent(transport: Any) -> int:
    """Bytes of an answer the client has not taken yet: those in the transport's buffer, plus (on Linux, where the
    kernel says) those in the socket's send queue. The kernel takes up to megabytes of an answer and asks the
    transport for more only once much of it has gone, so the transport's buffer alone stays still for a long
    while under a client reading steadily."""
    try:
        waiting = int(transport.get_write_buffer_size())
    except Exception:  # a transport without one: nothing is known to wait
        return 0
    try:
        import fcntl
        import struct
        import termios

        sock = transport.get_extra_info("socket")
        if sock is not None:
            waiting += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    except (ImportError, AttributeError, OSError, ValueError):  # not Linux, or the socket is gone
        pass
    return waiting


class _Connection:
    """One open connection's head timer, and after an answer the check that its client reads it.

    An answer is written into the transport's buffer at once, and ``transport.close()`` waits for that buffer to
    drain: a client that asked for a large answer and never read it held the connection, a file descriptor and
    the answer's bytes (up to ``serve.maxResponseBytes``) for ever, and a few hundred such clients could take
    gigabytes. So when the deadline comes with part of the answer still unread, the client must have taken at
    least :data:`READ_MIN_RATE` bytes a second of it meanwhile; else the connection is aborted.
    """

    def __init__(self, deadlines: HeadDeadlines, transport: Any, peer: tuple[str, int] | None, key: Any) -> None:
        self.deadlines = deadlines
        self.transport = transport
        self.peer = peer
        self.key = key
        self.request = 0  # requests whose head came in on this connection
        self.timer: asyncio.TimerHandle | None = None
        self.open = True
        self.unsent = 0  # bytes of the last answer in the buffer at the last check

    def head_in(self) -> int:
        """A request's head came in: no timer until it is answered. Returns the request's number."""
        self.request += 1
        self.unsent = 0
        self.disarm()
        return self.request

    def answered(self, request: int) -> None:
        """Request ``request`` was answered: the next head must come within the deadline (unless one did already)."""
        if self.open and request == self.request and self.timer is None:
            self.unsent = _unsent(self.transport)
            self.arm()

    def arm(self) -> None:
        self.disarm()
        self.timer = asyncio.get_running_loop().call_later(self.deadlines.seconds, self._late)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _late(self) -> None:
        self.timer = None
        if not self.open:
            return
        peer = f"{self.peer[0]}:{self.peer[1]}" if self.peer else "?"
        left = _unsent(self.transport)
        if left:
            if self.unsent - left >= READ_MIN_RATE * self.deadlines.seconds:  # it reads on, if slowly
                self.unsent = left
                self.arm()
                return
            log.info("closed a connection from %s: it read under %d bytes/s of its answer for %g s (%d bytes unread)",
                     peer, READ_MIN_RATE, self.deadlines.seconds, left)
            self.transport.abort()
            return
        if self.unsent:  # the answer was read since the last check: the next head's deadline starts now
            self.unsent = 0
            self.arm()
            return
        if not self.transport.is_closing():
            log.info("closed a connection from %s: no complete request head within %g s", peer, self.deadlines.seconds)
            self.transport.close()


class HeadDeadlines:
    """The open connections of one server and the deadline of the request head each waits for."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._open: dict[tuple[tuple[str, int], tuple[str, int]], _Connection] = {}

    def __len__(self) -> int:
        return len(self._open)

    def head_in(self, client: Any, server: Any) -> tuple[_Connection, int] | None:
        """Called by the ASGI layer as a request starts, with its ``scope["client"]`` and ``scope["server"]``: what
        to call ``answered`` on."""
        key = _key(client, server)
        conn = self._open.get(key) if key is not None else None
        if conn is None:
            return None
        return conn, conn.head_in()

    def protocol(self) -> type[asyncio.Protocol]:
        """The protocol class to hand uvicorn (``uvicorn.Config(http=...)``)."""
        base: Any = h11_protocol_class()
        deadlines = self

        class HeadTimedProtocol(base):  # type: ignore[misc,valid-type]
            _head: _Connection | None = None

            def connection_made(self, transport: Any) -> None:
                super().connection_made(transport)
                peer = _peer(transport.get_extra_info("peername"))
                key = _key(peer, transport.get_extra_info("sockname"))
                self._head = _Connection(deadlines, transport, peer, key)
                if key is not None:
                    deadlines._open[key] = self._head
                self._head.arm()

            def connection_lost(self, exc: Exception | None) -> None:
                head = self._head
                if head is not None:
                    head.open = False
                    head.disarm()
                    if head.key is not None and deadlines._open.get(head.key) is head:
                        del deadlines._open[head.key]
                super().connection_lost(exc)

        return HeadTimedProtocol
