"""Helpers of the postgres tests: the throwaway server and the config selecting the backend.

(A module of its own, not conftest.py: the repository's tests/conftest.py is also
collected in the same session, and both cannot be imported as ``conftest``.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest

HERE = Path(__file__).resolve().parent
CONTRIB = HERE.parent
REPO = CONTRIB.parents[1]
SCRIPT = REPO / ".ci" / "start-postgres.sh"
if str(REPO / "tests") not in sys.path:  # the repository's shared test helpers (``support``), when run on their own
    sys.path.append(str(REPO / "tests"))


def unavailable(reason: str) -> None:
    if os.environ.get("SYMI_REQUIRE_POSTGRES", "").strip() in ("1", "true", "yes"):
        pytest.fail(f"SYMI_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@attrs.define
class PgServer:
    """A throwaway server: ``dsn`` reaches it; ``kill()`` crashes it, ``restart()`` brings it back."""

    dir: Path
    port: int

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _run(self, action: str) -> str:
        proc = subprocess.run(["bash", str(SCRIPT), action, str(self.dir)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip() or f"start-postgres.sh {action} failed")
        return proc.stdout.strip()

    def kill(self) -> None:
        self._run("kill")

    def restart(self) -> None:
        self._run("restart")

    def stop(self) -> None:
        self._run("stop")

    @classmethod
    def running(cls, directory: str) -> PgServer:
        """The server ``.ci/start-postgres.sh start DIR`` started (``.ci/run`` exports DIR as SYMI_TEST_PG_DIR)."""
        d = Path(directory)
        try:
            port = int((d / "port").read_text().strip())
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"SYMI_TEST_PG_DIR={directory} holds no running server ({exc})") from None
        return cls(dir=d, port=port)

    @classmethod
    def start(cls) -> PgServer:
        d = Path(tempfile.mkdtemp(prefix="symi-pg-"))
        proc = subprocess.run(["bash", str(SCRIPT), "start", str(d)], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            subprocess.run(["bash", str(SCRIPT), "stop", str(d)], capture_output=True, timeout=120)
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "start failed")
        return cls(dir=d, port=int(proc.stdout.strip().splitlines()[-1]))


def pg_config(server: PgServer, schema: str, **postgres: Any) -> dict[str, Any]:
    """Config selecting the postgres backend on ``server`` in ``schema``."""
    return {
        "plugins": {"slots": {"memory": "postgres"}},
        "agents": {"defaults": {"memorySearch": {"store": {"postgres": {"dsn": server.dsn, "schema": schema,
                                                                          "connectTimeout": 3.0, **postgres}}}}},
    }


class Blackhole:
    """A TCP relay on loopback to ``port`` that can stop relaying: a network path that drops every packet.

    While ``cut()`` is in force nothing passes, yet both sides' sockets stay open (no RST, no FIN): the
    client waits for an answer that never comes, and the server's session lives on, as across a real
    partition. The connections open during a cut stay dead after ``mend()``; new ones pass again.
    """

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self.target = port
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._dead: list[Any] = []  # (client, upstream) pairs cut off for good
        self._live: list[Any] = []
        self._cutting = False
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def cut(self) -> None:
        with self._lock:
            self._cutting = True
            self._dead += self._live
            self._live = []

    def mend(self) -> None:
        with self._lock:
            self._cutting = False

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for pair in self._dead + self._live:
                for s in pair:
                    s.close()

    def _accept(self) -> None:
        import socket
        import threading

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            pair = (client, upstream)
            with self._lock:
                (self._dead if self._cutting else self._live).append(pair)
            threading.Thread(target=self._relay, args=(pair,), daemon=True).start()

    def _relay(self, pair: Any) -> None:
        import select

        client, upstream = pair
        other = {client: upstream, upstream: client}
        while not self._closed:
            with self._lock:
                dead = pair in self._dead
            if dead:
                return  # nothing passes any more; the sockets stay open
            try:
                ready, _, _ = select.select([client, upstream], [], [], 0.05)
            except (OSError, ValueError):
                return
            for s in ready:
                with self._lock:
                    if pair in self._dead:
                        return
                try:
                    data = s.recv(65536)
                    if not data:
                        other[s].shutdown(1)
                        return
                    other[s].sendall(data)
                except OSError:
                    return


class Pooler:
    """A session pooler on loopback in front of the server on ``port``, as pgbouncer (session mode) or Odyssey run.

    Each client gets a server session of its own while it is connected; when it goes, the session is rolled back,
    reset (``DISCARD ALL``) and kept, and the next client to connect gets that same session: the same backend
    pid and backend_start. As pgbouncer does, the session is given that client's ``application_name``. ``cut()``
    stops passing anything for the clients connected now, yet their sockets stay open (a network path between
    client and pooler that drops every packet); once such a client closes its socket, its session is reset and
    kept like any other. ``full()`` opens no more server sessions (pgbouncer's pool_size reached): clients wait,
    first come first served, for one to be kept. The server must accept the user without a password (trust).
    """

    SSL, GSSENC, CANCEL = 80877103, 80877104, 80877102

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self.target = port
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._idle: list[tuple[Any, bytes, int]] = []  # (server socket, its greeting, backend pid)
        self._live: dict[Any, bool] = {}  # client socket: cut
        self.cut_pids: set[int] = set()  # server sessions whose client was cut off
        self.released: list[int] = []  # server sessions reset and kept, in order
        self._closed = False
        self._sessions = 0  # server sessions open
        self._limit: int | None = None
        self._queue: list[object] = []  # clients waiting for a session, first first
        self._turn = threading.Condition(self._lock)
        threading.Thread(target=self._accept, daemon=True).start()

    def full(self, on: bool = True) -> None:
        """Open no server session beyond those open now (``on``), or as many as clients ask for again."""
        with self._lock:
            self._limit = self._sessions if on else None
            self._turn.notify_all()

    def dsn(self, **extra: str) -> str:
        return " ".join([f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres sslmode=disable "
                         "gssencmode=disable", *(f"{k}={v}" for k, v in extra.items())])

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def cut(self) -> None:
        with self._lock:
            for client in self._live:
                self._live[client] = True

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for client in self._live:
                client.close()
            for server, _, _ in self._idle:
                server.close()

    def _accept(self) -> None:
        import threading

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    @staticmethod
    def _exactly(sock: Any, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    @classmethod
    def _message(cls, sock: Any, buffer: bytearray) -> tuple[bytes, bytes]:
        """The server's next message (type, whole message bytes), reading ``sock`` into ``buffer`` as needed."""
        while True:
            if len(buffer) >= 5:
                size = int.from_bytes(buffer[1:5], "big") + 1
                if len(buffer) >= size:
                    whole = bytes(buffer[:size])
                    del buffer[:size]
                    return whole[:1], whole
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed")
            buffer += chunk

    @staticmethod
    def _query(sql: str) -> bytes:
        body = sql.encode() + b"\0"
        return b"Q" + (len(body) + 4).to_bytes(4, "big") + body

    def _serve(self, client: Any) -> None:
        import socket

        try:
            while True:  # SSL / GSS requests are refused ('N'), then comes the startup packet
                size = int.from_bytes(self._exactly(client, 4), "big")
                packet = self._exactly(client, size - 4)
                code = int.from_bytes(packet[:4], "big")
                if code in (self.SSL, self.GSSENC):
                    client.sendall(b"N")
                    continue
                break
            if code == self.CANCEL:  # the keys are the server's own: pass it on
                with socket.create_connection(("127.0.0.1", self.target)) as up:
                    up.sendall(size.to_bytes(4, "big") + packet)
                client.close()
                return
            fields = packet[4:].split(b"\0")
            params = dict(zip(fields[0::2], fields[1::2], strict=False))
            buffer = bytearray()
            me = object()
            with self._lock:
                self._queue.append(me)
                while self._queue[0] is not me or not (self._idle or self._limit is None or self._sessions < self._limit):
                    self._turn.wait(0.1)
                self._queue.pop(0)
                reused = self._idle.pop(0) if self._idle else None
                if reused is None:
                    self._sessions += 1
                self._turn.notify_all()
            if reused is not None:
                server, greeting, pid = reused
                name = params.get(b"application_name")
                if name:  # as pgbouncer does: the session takes this client's application_name
                    server.sendall(self._query("SET application_name = '" + name.decode().replace("'", "''") + "'"))
                    while self._message(server, buffer)[0] != b"Z":
                        pass
                client.sendall(b"R" + (8).to_bytes(4, "big") + (0).to_bytes(4, "big") + greeting
                               + b"Z" + (5).to_bytes(4, "big") + b"I")
                buffer.clear()
            else:
                server = socket.create_connection(("127.0.0.1", self.target))
                server.sendall(size.to_bytes(4, "big") + packet)
                greeting, pid = b"", 0
                while True:
                    kind, whole = self._message(server, buffer)
                    client.sendall(whole)
                    if kind == b"R":
                        assert whole[5:9] == b"\0\0\0\0", "the pooler only knows trust authentication"
                    elif kind in (b"S", b"K"):
                        greeting += whole
                        if kind == b"K":
                            pid = int.from_bytes(whole[5:9], "big")
                    elif kind in (b"Z", b"E"):
                        break
                if kind == b"E":
                    client.close()
                    self._gone(server)
                    return
            with self._lock:
                self._live[client] = False
            self._relay(client, server, buffer, greeting, pid)
        except (OSError, ConnectionError):
            client.close()

    @staticmethod
    def _whole(buffer: bytearray) -> bytes:
        """The complete messages at the start of ``buffer``, taken out of it (a partial one stays)."""
        end = 0
        while len(buffer) - end >= 5:
            size = int.from_bytes(buffer[end + 1:end + 5], "big") + 1
            if len(buffer) - end < size:
                break
            end += size
        whole = bytes(buffer[:end])
        del buffer[:end]
        return whole

    def _relay(self, client: Any, server: Any, buffer: bytearray, greeting: bytes, pid: int) -> None:
        import select

        asked = bytearray()  # the client's messages, passed on whole: its Terminate ('X') is the pooler's
        while not self._closed:
            ready, _, _ = select.select([client, server], [], [], 0.05)
            with self._lock:
                cut = self._live.get(client, True)
            if cut:
                self.cut_pids.add(pid)
            if client in ready:
                data = client.recv(65536)
                if not data:
                    break  # the client went: its session is reset and kept
                asked += data
                whole = self._whole(asked)
                leaving = len(whole) - 5 if whole[-5:] == b"X\0\0\0\4" else -1
                if leaving >= 0:
                    whole = whole[:leaving]
                if whole and not cut:
                    server.sendall(whole)
                if leaving >= 0:
                    break
            if server in ready:
                data = server.recv(65536)
                if not data:
                    client.close()
                    self._gone(server)
                    return
                buffer += data
            whole = self._whole(buffer)  # whole messages only, so that a cut leaves the rest at a message's start
            if whole and not cut:
                client.sendall(whole)
        with self._lock:
            self._live.pop(client, None)
        client.close()
        self._reset(server, buffer, greeting, pid)

    def _reset(self, server: Any, buffer: bytearray, greeting: bytes, pid: int) -> None:
        """Roll back and reset the session (its locks go with it), then keep it for the next client."""
        import time

        # Answers the client never got may still be on their way: skip whole messages up to the marker's row.
        marker = b"symi-pooler-reset-" + str(time.monotonic_ns()).encode()
        server.sendall(self._query("ROLLBACK") + self._query("DISCARD ALL")
                       + self._query("SELECT '" + marker.decode() + "'"))
        try:
            seen = False
            while True:
                kind, whole = self._message(server, buffer)
                if kind == b"D" and marker in whole:
                    seen = True
                elif kind == b"Z" and seen:
                    break
        except (OSError, ConnectionError):
            self._gone(server)
            return
        with self._lock:
            self._idle.append((server, greeting, pid))
            self.released.append(pid)
            self._turn.notify_all()

    def _gone(self, server: Any) -> None:
        server.close()
        with self._lock:
            self._sessions -= 1
            self._turn.notify_all()
