"""The postgres backend attacked: restarts, a crowded pool, limited roles, a foreign schema, huge files (a real server)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import PgServer
from test_postgres_backend import make_workspace, open_pg, paths, rows

from symi_memory.errors import BackendError

pytestmark = pytest.mark.postgres


def _notes(n: int, word: str) -> dict[str, str]:
    return {f"memory/n-{i:03d}.md": f"# n {i}\n\n{word} note {i} about topic {i}\n" for i in range(n)}


def _fill_pool(mem: Any, n: int) -> None:
    """Leave ``n`` idle connections in the pool (n searches at once)."""
    gate = threading.Barrier(n)

    def search() -> None:
        gate.wait()
        mem.search("pelican", min_score=0)

    threads = [threading.Thread(target=search) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_first_sync_after_a_server_restart_succeeds_though_the_pool_held_dead_connections(
        tmp_path: Path, pg_schema: str) -> None:
    # The pool's idle connections die with the server but look idle: the first sync after the restart took one
    # and failed ("server closed the connection unexpectedly"); only a search (which retries) got past it.
    server = PgServer.start()
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                              **_notes(30, "first")})
        with open_pg(tmp_path, server, pg_schema, ws, poolSize=4) as mem:
            mem.sync()
            _fill_pool(mem, 4)
            server.kill()
            server.restart()
            make_workspace(ws, _notes(30, "second"))
            report = mem.sync()
            assert report.files_indexed == 30
            st = mem.status()
            assert (st["files"], st["dirty"], st["lastError"]) == (31, False, None)
            assert paths(mem, "second note 7")[0] == "memory/n-007.md"
    finally:
        server.stop()


def test_a_server_restarted_mid_sync_loses_nothing_and_the_next_sync_finishes(tmp_path: Path, pg_schema: str) -> None:
    server = PgServer.start()
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                              **_notes(300, "first")})
        with open_pg(tmp_path, server, pg_schema, ws, poolSize=3) as mem:
            mem.sync()
            _fill_pool(mem, 3)
            make_workspace(ws, _notes(300, "second"))
            restarted: list[int] = []

            def restart(p: Any) -> None:
                if p.phase == "index" and p.done >= 200 and not restarted:
                    server.kill()
                    server.restart()
                    restarted.append(p.done)

            with pytest.raises(BackendError) as err:
                mem.sync(progress=restart)
            assert restarted and "\n" not in str(err.value)
            assert mem.status()["lastError"] is not None
            report = mem.sync()
            assert report.errors == () and report.files_indexed > 0
            st = mem.status()
            assert (st["files"], st["dirty"], st["lastError"]) == (301, False, None)
        assert rows(server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE text LIKE '%%first%%'") == [(0,)]
        assert rows(server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE text LIKE '%%second%%'") == [(300,)]
    finally:
        server.stop()


def test_many_concurrent_searches_on_a_small_pool_all_answer(tmp_path: Path, pg_server: PgServer,
                                                            pg_schema: str) -> None:
    # 24 searches at once through poolSize 2, with a sync running: each waits its turn for a connection
    # (connectTimeout) instead of failing, and none opens a connection past poolSize.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                          **_notes(200, "first")})
    with open_pg(tmp_path, pg_server, pg_schema, ws, poolSize=2, connectTimeout=5.0) as mem:
        mem.sync()
        make_workspace(ws, _notes(200, "second"))
        answers: list[Any] = []
        peak = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                n = rows(pg_server, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'symi-memory%%' "
                                    "AND datname = current_database()")[0][0]
                peak[0] = max(peak[0], n)
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        syncing = threading.Thread(target=mem.sync)
        syncing.start()
        searches = [threading.Thread(target=lambda: answers.append(mem.search("pelican", min_score=0)))
                    for _ in range(24)]
        for s in searches:
            s.start()
        for s in searches:
            s.join(30)
        syncing.join(60)
        done.set()
        watcher.join()
        assert len(answers) == 24
        assert all(a.mode == "hybrid" and a.results[0].path == "MEMORY.md" for a in answers), \
            [a.fallback.reason for a in answers if a.mode != "hybrid"][:2]
        assert peak[0] <= 2, peak[0]


def _role(server: PgServer, name: str, *grants: str) -> str:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN "
                     f"CREATE ROLE {name} LOGIN; END IF; END $$")
        for g in grants:
            conn.execute(g)
    return f"host=127.0.0.1 port={server.port} user={name} dbname=postgres"


def test_a_role_granted_only_the_rows_syncs_and_searches_a_schema_another_role_made(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # A fleet role with DML on the tables (no CREATE, not their owner) could not build the HNSW index for a new
    # vector width (CREATE INDEX needs ownership): its every sync failed after writing its rows.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as admin:
        admin.sync()  # the owner role creates the schema (384-d)
    s = pg_schema
    dsn = _role(pg_server, "fleet", f"GRANT USAGE ON SCHEMA {s} TO fleet",
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO fleet",
                f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO fleet")
    other = make_workspace(tmp_path / "other", {"MEMORY.md": "# M\n\nthe heron fishes at dawn\n"})
    with open_pg(tmp_path / "f", pg_server, pg_schema, other, agent_id="fleet-agent", model="hash-64", dsn=dsn) as mem:
        report = mem.sync()
        assert report.files_indexed == 1 and report.errors == ()
        resp = mem.search("heron", min_score=0)
        assert resp.mode == "hybrid" and resp.results[0].path == "MEMORY.md"
        st = mem.status()
        assert st["lastError"] is None and st["vector"]["index"] == "exact"


def test_a_role_without_temporary_tables_is_told_what_to_grant(tmp_path: Path, pg_server: PgServer,
                                                               pg_schema: str) -> None:
    # A database with TEMPORARY revoked from PUBLIC (a hardening guide's advice) failed every sync with
    # "permission denied to create temporary tables" and the hint "grant the role CREATE on the database".
    db = "notemp_" + pg_schema
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute(f"REVOKE TEMPORARY ON DATABASE {db} FROM PUBLIC")
    _role(pg_server, "notemp", f"GRANT CREATE ON DATABASE {db} TO notemp")
    with psycopg.connect(f"host=127.0.0.1 port={pg_server.port} user=postgres dbname={db}", autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
        dsn = f"host=127.0.0.1 port={pg_server.port} user=notemp dbname={db}"
        with open_pg(tmp_path, pg_server, pg_schema, ws, dsn=dsn) as mem:
            with pytest.raises(BackendError) as err:
                mem.sync()
            said = str(err.value)
            assert "TEMPORARY" in said and "grant the role CREATE" not in said and "\n" not in said
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def test_a_schema_of_the_same_name_holding_another_applications_tables_is_left_alone(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # A schema called like ours that another application (or something else entirely) uses: the first sync added
    # a column to its `chunks` table, then failed with "column owner does not exist".
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {pg_schema}")
        conn.execute(f"CREATE TABLE {pg_schema}.chunks (id serial PRIMARY KEY, body text)")
        conn.execute(f"INSERT INTO {pg_schema}.chunks (body) VALUES ('theirs')")
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        with pytest.raises(BackendError) as err:
            mem.sync()
        said = str(err.value)
        assert f"schema {pg_schema}" in said and "memorySearch.store.postgres.schema" in said and "\n" not in said
        assert mem.search("pelican", min_score=0).mode == "unavailable"
    cols = rows(pg_server, "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                           "AND table_name = 'chunks' ORDER BY ordinal_position", (pg_schema,))
    assert cols == [("id",), ("body",)]
    assert rows(pg_server, f"SELECT body FROM {pg_schema}.chunks") == [("theirs",)]


def test_a_huge_file_is_indexed_whole_within_a_short_sync_timeout(tmp_path: Path, pg_server: PgServer,
                                                                 pg_schema: str) -> None:
    # Thousands of chunks in one file: every statement writes at most 500 rows (INSERT_BATCH), so each stays well
    # within its bound however big the file. A file's chunks went in one COPY and one INSERT: a big enough file
    # outlasted any syncTimeout (a 60 000-line one a 5 s one on a busy host). A trigger costing 3 ms a row makes
    # that plain on any host: the file's ~2 000 rows in one statement take over 5 s, 500 of them 1.5 s.
    from symi_memory_postgres.store import ensure_schema

    lines = [f"line {i} about the subject numbered {i} " + "filler " * 10 for i in range(24_000)]
    lines[18_000] = "the albatross glides past line eighteen thousand"
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                          "memory/huge.md": "# Huge\n\n" + "\n".join(lines) + "\n"})
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        ensure_schema(conn, pg_schema)  # the tables, for the trigger; the HNSW index comes after the first writes
        # One sleep a statement (not one a row: a busy host wakes each late), as long as its rows ask.
        conn.execute(f"CREATE FUNCTION {pg_schema}.slow_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "PERFORM pg_sleep(0.003 * (SELECT count(*) FROM written)); RETURN NULL; END $$")
        conn.execute(f"CREATE TRIGGER slow_rows AFTER INSERT ON {pg_schema}.chunks REFERENCING NEW TABLE AS "
                     f"written FOR EACH STATEMENT EXECUTE FUNCTION {pg_schema}.slow_rows()")
    with open_pg(tmp_path, pg_server, pg_schema, ws, syncTimeout=5.0) as mem:
        report = mem.sync()
        assert report.files_indexed == 2 and report.errors == ()
        assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE path = 'memory/huge.md'")[0][0] > 1700
        assert paths(mem, "albatross glides")[0] == "memory/huge.md"
        assert mem.status()["lastError"] is None
