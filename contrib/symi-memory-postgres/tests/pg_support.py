"""Helpers of the postgres tests: the throwaway server and the config selecting the backend.

(A module of its own, not conftest.py: the repository's tests/conftest.py is also
collected in the same session, and both cannot be imported as ``conftest``.)
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest

HERE = Path(__file__).resolve().parent
CONTRIB = HERE.parent
REPO = CONTRIB.parents[1]
SCRIPT = REPO / ".ci" / "start-postgres.sh"


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
