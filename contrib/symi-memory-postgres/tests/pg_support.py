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
