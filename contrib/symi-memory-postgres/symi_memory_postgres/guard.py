"""A client-side bound on every wait for the server: what a paused, frozen or unreachable server cannot enforce.

``statement_timeout`` and ``lock_timeout`` bound what the server does; a server that stopped answering
altogether (its processes paused, a network path that drops packets) enforces neither, and a read waits
for an answer forever. Every wait of a :class:`GuardedConnection` on its socket (a statement, a fetch, a
``COPY`` block, a ``COMMIT``) is registered with one :class:`Watchdog` thread; one during which the server
stays silent for longer than its bound (each answer it sends starts the bound again: a pipeline of many
statements is one wait) has its socket shut down, so that the wait returns, and fails with :class:`ServerSilent`.

Race-free by construction: arming, disarming and cutting take one lock, and a wait is only cut while it is
still registered. A wait that completed is never cut afterwards (the connection goes on serving the next
statement), and a cut connection is always closed: it never returns to the pool half-broken, whether the
cut landed mid-read or in the instant the read completed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import psycopg

__all__ = ["GuardedConnection", "ServerSilent", "Watchdog"]

log = logging.getLogger("symi_memory.postgres")

class ServerSilent(psycopg.OperationalError):
    """The server did not answer one wait within its bound: the connection was shut down and closed."""

    def __init__(self, seconds: float, setting: str) -> None:
        super().__init__(f"the server did not answer within {seconds:g} s ({setting})")
        self.seconds = seconds
        self.setting = setting


@attrs.define(eq=False)
class _Wait:
    fd: int
    deadline: float
    seconds: float
    #: Called (off the watchdog thread) when the deadline passes: True means the server still answers, the
    #: wait goes on for another ``seconds``; None means cut at once.
    alive: Callable[[], bool] | None
    cut: bool = False
    probing: bool = False


@attrs.define(eq=False)
class Watchdog:
    """One daemon thread cutting the waits that outlast their bound (shared by one backend's connections).

    It sleeps until the earliest deadline armed, or for the shortest bound it has seen when none is: a wait
    armed meanwhile (with a bound at least that long) expires after the thread wakes, so arming it needs no
    wake-up, and a busy process pays a dict insertion per wait, not a thread switch.
    """

    _cond: threading.Condition = attrs.field(factory=threading.Condition)
    _armed: dict[int, _Wait] = attrs.field(factory=dict)
    _thread: threading.Thread | None = None
    _horizon: float = 60.0
    _target: float = float("inf")  # when the thread wakes next
    _stopped: bool = False

    def arm(self, fd: int, seconds: float, alive: Callable[[], bool] | None = None) -> _Wait:
        wait = _Wait(fd=fd, deadline=time.monotonic() + seconds, seconds=seconds, alive=alive)
        with self._cond:
            self._armed[id(wait)] = wait
            if seconds < self._horizon:
                self._horizon = seconds
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="symi-pg-watchdog", daemon=True)
                self._thread.start()
            elif wait.deadline < self._target:
                self._cond.notify()
        return wait

    def disarm(self, wait: _Wait) -> bool:
        """Unregister ``wait``; True when it was cut (its connection is unusable)."""
        with self._cond:
            self._armed.pop(id(wait), None)
            return wait.cut

    def progress(self, wait: _Wait) -> None:
        """The server answered part of ``wait`` (a pipeline's statement, a block of rows): its bound starts again."""
        with self._cond:
            if id(wait) in self._armed and not wait.probing:
                wait.deadline = time.monotonic() + wait.seconds

    def stop(self) -> None:
        """End the thread (waits armed meanwhile are no longer cut)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                for wait in list(self._armed.values()):
                    if wait.deadline > now or wait.probing:
                        continue
                    if wait.alive is None:
                        self._cut(wait)
                    else:
                        wait.probing = True
                        threading.Thread(target=self._probe, args=(wait,), name="symi-pg-probe", daemon=True).start()
                self._target = min((w.deadline for w in self._armed.values() if not w.probing),
                                   default=now + self._horizon)
                self._cond.wait(max(0.0, self._target - now))

    def _probe(self, wait: _Wait) -> None:
        assert wait.alive is not None
        try:
            alive = wait.alive()
        except Exception:
            alive = False
        with self._cond:
            wait.probing = False
            if id(wait) not in self._armed:
                return
            if alive:
                wait.deadline = time.monotonic() + wait.seconds
                self._cond.notify()
            else:
                self._cut(wait)

    def _cut(self, wait: _Wait) -> None:
        """Shut the socket down (not close: the thread waiting on it owns the descriptor), so that its wait returns.

        Called with the condition's lock held and the wait armed: its thread is inside the wait, the descriptor is open.
        """
        self._armed.pop(id(wait), None)
        wait.cut = True
        try:
            sock = socket.socket(fileno=os.dup(wait.fd))
        except OSError:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()


def _on_progress(gen: Any, dog: Watchdog, armed: _Wait) -> Any:
    """``gen``, telling ``dog`` each time the socket was ready (the server sent or took data): the bound is on the
    server's silence, not on the whole wait. One wait may span many statements (``executemany`` sends them in a
    pipeline, one wait for all), each answering in time: timed as one, a healthy batch was cut off. (The server
    sends a pipeline's answers as its output buffer fills, every 8 kB: a few hundred statements' answers at most
    come at once.)"""
    try:
        state = next(gen)
        while True:
            ready = yield state
            if ready:
                dog.progress(armed)
            state = gen.send(ready)
    except StopIteration as done:
        return done.value


class GuardedConnection(psycopg.Connection[Any]):
    """A psycopg connection each of whose waits for the server is bounded by :attr:`answer_within` seconds.

    ``watchdog`` None (or ``answer_within`` None) leaves the waits unbounded. ``alive``, when set, is asked
    before a wait past its bound is cut (a statement that may rightly run for minutes, such as an index
    build): the wait goes on while the server answers it.
    """

    watchdog: Watchdog | None = None
    answer_within: float | None = None
    setting: str = ""
    alive: Callable[[], bool] | None = None

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        dog, seconds = self.watchdog, self.answer_within
        if dog is None or seconds is None:
            return super().wait(gen, *args, **kwargs)
        armed = dog.arm(self.pgconn.socket, seconds, self.alive)
        try:
            got = super().wait(_on_progress(gen, dog, armed), *args, **kwargs)
        except BaseException:
            if dog.disarm(armed):
                self._silenced(armed)
            raise
        if dog.disarm(armed):  # cut in the instant the answer arrived: the socket is shut all the same
            self._silenced(armed)
        return got

    def _silenced(self, armed: _Wait) -> None:
        self.pgconn.finish()  # closed: the pool discards it, and nothing reads a half-shut socket again
        raise ServerSilent(armed.seconds, self.setting) from None
