"""The postgres backend under hostile inputs, bad configuration and a server that goes away (a real server)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import PgServer, pg_config
from test_postgres_backend import make_workspace, open_pg, paths, rows

from symi_memory import load_config
from symi_memory.config.fields import deep_merge
from symi_memory.errors import BackendError
from symi_memory.manager import open_memory

pytestmark = pytest.mark.postgres


def test_a_nul_byte_in_one_file_never_stops_indexing_the_others(tmp_path: Path, pg_server: PgServer,
                                                                 pg_schema: str) -> None:
    # PostgreSQL text refuses NUL: the file's chunk failed the COPY, and with it the whole sync.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    (ws / "memory").mkdir()
    (ws / "memory" / "nul.md").write_bytes(b"# N\n\na nul \x00 byte beside the heron\n")
    (ws / "memory" / "latin1.md").write_bytes(b"# L\n\ninvalid \xff\xfe bytes beside the ibis\n")
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        report = mem.sync()
        assert report.errors == () and report.files_indexed == 3
        assert paths(mem, "pelican")[0] == "MEMORY.md"
        hits = mem.search("heron", min_score=0).results
        assert hits[0].path == "memory/nul.md" and "\ufffd byte beside the heron" in hits[0].snippet
        assert paths(mem, "ibis")[0] == "memory/latin1.md"
        st = mem.status()
        assert (st["files"], st["invalidUtf8Files"], st["lastError"], st["dirty"]) == (3, 1, None, False)
    assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE text LIKE %s", ("%\ufffd%",)) == [(2,)]


def _waiting_on_lock(server: PgServer, schema: str) -> list[int]:
    return [r[0] for r in rows(server, "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                       "AND application_name LIKE 'symi-memory%%' AND position(%s in query) > 0", (schema,))]


def test_a_search_never_hangs_behind_a_lock_and_survives_its_connection_being_killed(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # A VACUUM FULL, REINDEX or ALTER TABLE holds the table: the search waited for as long as it lasted.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, searchTimeout=1.5) as mem:
        mem.sync()
        locker = psycopg.connect(pg_server.dsn)
        try:
            locker.execute(f"LOCK TABLE {pg_schema}.chunks IN ACCESS EXCLUSIVE MODE")
            answers: list[Any] = []
            search = threading.Thread(target=lambda: answers.append(mem.search("pelican", min_score=0)))
            search.start()
            search.join(8)
            assert answers, "the search still waits for the lock"
            resp = answers[0]
            assert resp.results == () and resp.mode == "unavailable"
            assert "did not answer within 1.5 s" in resp.fallback.reason and "searchTimeout" in resp.fallback.reason
            assert "\n" not in resp.fallback.reason
            st = mem.status()
            assert st["server"]["available"] is False and "searchTimeout" in st["server"]["error"]
        finally:
            locker.close()
        assert paths(mem, "pelican")[0] == "MEMORY.md"
    # The search's connection killed while it waits (pg_terminate_backend): it answers on a fresh one.
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        locker = psycopg.connect(pg_server.dsn)
        got: list[Any] = []
        try:
            locker.execute(f"LOCK TABLE {pg_schema}.chunks IN ACCESS EXCLUSIVE MODE")
            search = threading.Thread(target=lambda: got.append(mem.search("pelican", min_score=0)))
            search.start()
            deadline = time.monotonic() + 5
            while not (waiting := _waiting_on_lock(pg_server, pg_schema)):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            rows(pg_server, "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (waiting,))
            time.sleep(0.3)
        finally:
            locker.close()
        search.join(15)
        assert not search.is_alive() and got[0].mode == "hybrid" and got[0].results[0].path == "MEMORY.md"


@pytest.mark.parametrize("how", ["agentId", "agent id"])
def test_an_agent_id_naming_a_shared_scope_is_refused(tmp_path: Path, pg_server: PgServer, pg_schema: str,
                                                      how: str) -> None:
    # "@team" owns the shared scope team's rows: an agent scoped by it synced its private notes over the
    # team's runbook (deleting it), and every agent sharing the scope read them.
    shared = make_workspace(tmp_path / "shared" / "team", {"memory/runbook.md": "# R\n\nthe pelican drill\n"})
    scopes = {"shared": ["team"], "root": str(shared.parent)}
    spy = make_workspace(tmp_path / "spy", {"MEMORY.md": "# Private\n\nthe spy's private osprey note\n"})
    with open_pg(tmp_path, pg_server, pg_schema, make_workspace(tmp_path / "alice", {"MEMORY.md": "# A\n\nalice\n"}),
                 agent_id="alice", scopes=scopes) as alice:
        alice.sync()
        ids: dict[str, Any] = {"agent_id": "spy", "agentId": "@team"} if how == "agentId" else {"agent_id": "@team"}
        with pytest.raises(BackendError) as err, open_pg(tmp_path / "s", pg_server, pg_schema, spy, **ids) as mem:
            mem.sync()
        assert "'@team'" in str(err.value) and "agentId" in str(err.value) and "\n" not in str(err.value)
        alice.sync()
        assert paths(alice, "pelican drill")[0] == "@team/memory/runbook.md"
        assert all("osprey" not in r.snippet for r in alice.search("osprey", min_score=0).results)


@pytest.mark.parametrize("schema", ["user", "order", "pg_memory"])
def test_a_schema_name_sql_cannot_take_is_refused_with_what_to_set(tmp_path: Path, pg_server: PgServer,
                                                                  schema: str) -> None:
    # They passed the identifier check, then every sync and search failed with 'syntax error at or near "user"'.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican\n"})
    with pytest.raises(BackendError) as err, open_pg(tmp_path, pg_server, schema, ws) as mem:
        mem.sync()
    said = str(err.value)
    assert f"schema '{schema}'" in said and "memorySearch.store.postgres.schema" in said and "\n" not in said
    assert "syntax error" not in said


def test_an_hnsw_build_killed_midway_is_rebuilt_by_the_next_sync(tmp_path: Path, pg_server: PgServer,
                                                                  pg_schema: str) -> None:
    # The killed CREATE INDEX CONCURRENTLY left an invalid index: searches scanned exactly for good (until some
    # sync wrote vectors again) while status said vector.index = "hnsw".
    ws = make_workspace(tmp_path / "ws", {f"memory/n-{i:02d}.md": f"# n {i}\n\nnote {i} on topic {i}\n"
                                          for i in range(30)})
    valid = (f"SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
             f"WHERE i.indrelid = '{pg_schema}.chunks'::regclass AND c.relname = 'chunks_hnsw_384'")
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()  # creates the tables; drop the index to build it again below
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP INDEX {pg_schema}.chunks_hnsw_384")
        (ws / "memory" / "n-00.md").write_text("# n 0\n\nnote zero rewritten\n", encoding="utf-8")
        # An open snapshot makes the concurrent build wait once its index exists (invalid): kill it there.
        snapshot = psycopg.connect(pg_server.dsn)
        failed: list[BaseException] = []

        def sync() -> None:
            try:
                mem.sync()
            except BackendError as exc:
                failed.append(exc)

        try:
            snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            snapshot.execute("SELECT count(*) FROM pg_class")
            syncing = threading.Thread(target=sync)
            syncing.start()
            deadline = time.monotonic() + 20
            while not (building := [r[0] for r in rows(
                    pg_server, "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                               "'CREATE INDEX CONCURRENTLY%%' AND position(%s in query) > 0", (pg_schema,))]):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            rows(pg_server, "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (building,))
            syncing.join(30)
        finally:
            snapshot.close()
        assert failed and rows(pg_server, valid) == [(False,)]
        assert mem.status()["vector"]["index"] == "exact"
        report = mem.sync()  # nothing changed on disk
        assert report.files_indexed == 0
        assert rows(pg_server, valid) == [(True,)]
        st = mem.status()
        assert st["vector"]["index"] == "hnsw" and st["lastError"] is None


def test_searches_and_syncs_answer_as_soon_as_a_restarted_server_is_back(tmp_path: Path, pg_schema: str) -> None:
    # The pool retries with exponential backoff: after an outage of 20 s, a sync and a search right after the
    # restart failed with "couldn't get a connection" (and kept failing for ~15 s more) though the server was up.
    server = PgServer.start()
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
        with open_pg(tmp_path, server, pg_schema, ws, connectTimeout=1.0) as mem:
            mem.sync()
            server.kill()
            down = time.monotonic()
            while time.monotonic() - down < 20:
                resp = mem.search("pelican", min_score=0)
                assert resp.mode == "unavailable" and "unreachable" in resp.fallback.reason
            server.restart()
            started = time.monotonic()
            (ws / "MEMORY.md").write_text("# M\n\nthe pelican roosts on the pier\nthe heron too\n", encoding="utf-8")
            assert mem.sync().files_indexed == 1
            resp = mem.search("heron", min_score=0)
            assert resp.mode == "hybrid" and resp.results[0].path == "MEMORY.md"
            assert time.monotonic() - started < 8
            st = mem.status()
            assert st["server"]["available"] is True and st["lastError"] is None
    finally:
        server.stop()


def test_a_chunk_too_big_for_a_tsvector_never_stops_indexing_the_others(tmp_path: Path, pg_server: PgServer,
                                                                         pg_schema: str) -> None:
    # Large chunks of CJK text (each distinct bigram a term) passed PostgreSQL's 1 MB tsvector limit: "string is
    # too long for tsvector" failed the whole sync, and no file was indexed.
    import random

    rng = random.Random(7)
    text = "\n".join("".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(60)) + "。" for _ in range(6000))
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                          "memory/zh.md": "# zh\n\nosprey 鱼鹰在湖边筑巢\n" + text + "\n"})
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "none", "sync": {"watch": False}, "chunking": {"tokens": 100_000, "overlap": 0}}}}})
    with open_memory(load_config(None, state_dir=tmp_path / "state", overrides=overrides), workspace=ws,
                     start=False) as mem:
        report = mem.sync()
        assert report.files_indexed == 2 and report.errors == ()
        assert paths(mem, "pelican") == ["MEMORY.md"]
        assert paths(mem, "osprey")[0] == "memory/zh.md" and paths(mem, "鱼鹰")[0] == "memory/zh.md"
        assert mem.status()["lastError"] is None


def _server_processes(server: PgServer) -> list[int]:
    """The postmaster of ``server`` and its children (the backends)."""
    master = int((server.dir / "data" / "postmaster.pid").read_text().split()[0])
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            kids.append(int(stat.parent.name))
    return [master, *kids]


def test_a_search_never_hangs_on_a_server_that_stopped_answering(tmp_path: Path, pg_schema: str) -> None:
    # A paused or frozen server enforces no statement_timeout: the search waited until it came back.
    import os
    import signal

    server = PgServer.start()
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
        with open_pg(tmp_path, server, pg_schema, ws, searchTimeout=1.0, connectTimeout=1.0) as mem:
            mem.sync()
            assert mem.search("pelican", min_score=0).mode == "hybrid"
            frozen = _server_processes(server)
            answers: list[Any] = []
            try:
                for pid in frozen:
                    os.kill(pid, signal.SIGSTOP)
                search = threading.Thread(target=lambda: answers.extend(
                    [mem.search("pelican", min_score=0), mem.search("pelican", min_score=0)]))
                search.start()
                search.join(20)
            finally:
                for pid in frozen:
                    os.kill(pid, signal.SIGCONT)
            search.join(20)
            assert len(answers) == 2, "a search still waits for the frozen server"
            assert answers[0].mode == "unavailable" and "did not answer within 1 s" in answers[0].fallback.reason
            assert answers[1].mode == "unavailable" and "\n" not in answers[1].fallback.reason
            assert paths(mem, "pelican")[0] == "MEMORY.md"
    finally:
        server.stop()


def test_a_path_too_long_for_an_index_entry_never_stops_indexing_the_others(tmp_path: Path, pg_server: PgServer,
                                                                            pg_schema: str) -> None:
    # A path past ~2.7 KB (incompressible) broke the btree limit: "index row size 2800 exceeds btree version 4
    # maximum 2704 for index chunks_owner_path" failed the whole sync.
    import random
    import string

    rng = random.Random(3)
    deep = "memory/" + "/".join("".join(rng.choice(string.ascii_letters) for _ in range(250)) for _ in range(11))
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                          deep + "/deep.md": "# D\n\nthe deep heron\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        report = mem.sync()
        assert report.files_indexed == 1
        assert paths(mem, "pelican")[0] == "MEMORY.md"
        st = mem.status()
        assert [s["reason"] for s in st["skipped"]] == ["path longer than 2400 bytes, the most this index stores"]
        assert st["skipped"][0]["path"].startswith(deep[:100]) and st["skipped"][0]["path"].endswith("...")
        assert (st["files"], st["lastError"], st["dirty"]) == (1, None, False)


def test_busy_searches_never_open_more_connections_than_pool_size(tmp_path: Path, pg_server: PgServer,
                                                                  pg_schema: str) -> None:
    # The direct connection meant for a pool waiting out its reconnect backoff was also opened when the pool was
    # merely busy: with poolSize 2, eight searches held up behind a lock held eight server connections (a server
    # under load, answering slowly, got one connection more per request until max_connections).
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, poolSize=2, connectTimeout=1.0, searchTimeout=5.0) as mem:
        mem.sync()
        locker = psycopg.connect(pg_server.dsn)
        answers: list[Any] = []
        try:
            locker.execute(f"LOCK TABLE {pg_schema}.chunks IN ACCESS EXCLUSIVE MODE")
            searches = [threading.Thread(target=lambda: answers.append(mem.search("pelican", min_score=0)))
                        for _ in range(8)]
            for search in searches:
                search.start()
            time.sleep(2.5)  # past connectTimeout: the searches the pool could not serve have answered or connected
            held = len(_waiting_on_lock(pg_server, pg_schema))
        finally:
            locker.close()
        for search in searches:
            search.join(15)
        assert held <= 2, f"{held} server connections for poolSize 2"
        busy = [a for a in answers if a.mode == "unavailable"]
        assert len(answers) == 8 and len(busy) == 6
        assert all("poolSize" in a.fallback.reason and "unreachable" not in a.fallback.reason for a in busy)
        assert paths(mem, "pelican")[0] == "MEMORY.md"
        assert mem.status()["server"]["available"] is True


def test_status_and_searches_during_a_sync_never_break_it(tmp_path: Path, pg_server: PgServer,
                                                          pg_schema: str) -> None:
    # status() (and a search's staleness check) pointed the syncing Indexer's store at their own pooled connection:
    # the sync then wrote through a connection it did not own and failed, "postgres server unreachable (...): the
    # connection is closed", though the server was fine.
    files = {f"memory/n-{i:04d}.md": f"# n {i}\n\nnote {i} " + "filler words here " * 40 + "\n" for i in range(1000)}
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n", **files})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()
        for i in range(1000):
            (ws / f"memory/n-{i:04d}.md").write_text(f"# n {i}\n\nrewritten heron {i} " + "other words " * 40 + "\n",
                                                    encoding="utf-8")
        outcome: list[Any] = []

        def sync() -> None:
            try:
                outcome.append(mem.sync())
            except BackendError as exc:
                outcome.append(exc)

        syncing = threading.Thread(target=sync)
        syncing.start()
        rounds = 0
        while syncing.is_alive():
            mem.status()
            assert paths(mem, "pelican")[0] == "MEMORY.md"
            rounds += 1
        syncing.join()
        assert rounds > 0
        assert not isinstance(outcome[0], BackendError), outcome[0]
        assert outcome[0].files_indexed == 1000 and outcome[0].errors == ()
        st = mem.status()
        assert (st["files"], st["dirty"], st["lastError"]) == (1001, False, None)
    assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE text LIKE %s", ("%rewritten heron%",)) \
        == [(1000,)]


def test_status_while_another_process_commits_a_sync_never_says_clean_with_the_counts_from_before(
        tmp_path: Path, pg_server: PgServer, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`status` counted the rows in one transaction and compared the files on disk with the rows in another: a sync
    in another process committing in between made it say `files: 21, dirty: false` with 31 notes on disk and 31
    rows on the server. Both now read one snapshot (REPEATABLE READ)."""
    import json
    import subprocess
    import sys
    import textwrap

    from symi_memory_postgres.backend import PostgresBackend

    notes = {f"memory/n{i:02d}.md": f"# n {i}\n\nnote {i} about the weir\n" for i in range(30)}
    first = dict(list(notes.items())[:20])
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n", **first})
    overrides = deep_merge(pg_config(pg_server, pg_schema),
                           {"agents": {"defaults": {"memorySearch": {"provider": "hash", "sync": {"watch": False}}}}})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as host:
        host.sync()
        assert (host.status()["files"], host.status()["dirty"]) == (21, False)
        make_workspace(ws, notes)
        counted = PostgresBackend._live_status
        synced: list[str] = []

        def another_process_syncs_after_the_counts(self: PostgresBackend, conn: Any, scans: Any) -> Any:
            live = counted(self, conn, scans)
            if not synced:
                proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
                    import json, sys
                    from symi_memory import load_config
                    from symi_memory.manager import open_memory
                    cfg = load_config(None, state_dir=sys.argv[1], overrides=json.loads(sys.argv[2]))
                    with open_memory(cfg, workspace=sys.argv[3], start=False) as mem:
                        print(mem.sync().files_indexed)
                """), str(tmp_path / "state-other"), json.dumps(overrides), str(ws)],
                    capture_output=True, text=True, timeout=120)
                assert proc.returncode == 0, proc.stderr
                synced.append(proc.stdout.strip())
            return live

        monkeypatch.setattr(PostgresBackend, "_live_status", another_process_syncs_after_the_counts)
        st = host.status()
        assert synced == ["10"]
        # One snapshot: from before the other sync (21 rows, 31 notes on disk: dirty) or after it; never a mix.
        assert (st["files"], st["dirty"]) in ((21, True), (31, False)), st
        monkeypatch.undo()
        st = host.status()
        assert (st["files"], st["chunks"], st["dirty"]) == (31, 31, False)
