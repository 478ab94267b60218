"""Syncs and reads against a server that stops answering, and reads racing a model switch (a real server)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import Blackhole, PgServer, Pooler, pg_config
from test_postgres_backend import make_workspace, open_pg, paths, rows
from test_postgres_hostile import _server_processes

from symi_memory import load_config
from symi_memory.config.fields import deep_merge
from symi_memory.errors import BackendError
from symi_memory.hookspecs import hookimpl
from symi_memory.manager import MemoryManager, open_memory
from symi_memory.specs import ProviderSpec
from symi_memory.testing.fakes import HashEmbedder

pytestmark = pytest.mark.postgres


def _notes(n: int, word: str) -> dict[str, str]:
    return {f"memory/n-{i:03d}.md": f"# n {i}\n\n{word} note {i} about topic {i}\n" for i in range(n)}


def _sync_in_thread(mem: MemoryManager, **kw: Any) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        try:
            outcome.append(mem.sync(**kw))
        except BackendError as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_a_sync_against_a_server_frozen_midway_fails_within_sync_timeout_and_the_next_one_finishes(
        tmp_path: Path, pg_schema: str) -> None:
    # A sync waited forever on a paused server (SIGSTOP): statement_timeout is the server's to enforce. It held the
    # sync lock meanwhile, so every later sync (and close()) waited behind it too.
    server = PgServer.start()
    frozen: list[int] = []
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                              **_notes(40, "first")})
        with open_pg(tmp_path, server, pg_schema, ws, syncTimeout=1.0, searchTimeout=1.0, connectTimeout=1.0) as mem:
            mem.sync()
            make_workspace(ws, _notes(40, "second"))

            def freeze(p: Any) -> None:  # in the sync's thread, once it read the files: its writes meet a frozen server
                if p.phase != "scan" and not frozen:
                    frozen.extend(_server_processes(server))
                    for pid in frozen:
                        os.kill(pid, signal.SIGSTOP)

            syncing, outcome = _sync_in_thread(mem, progress=freeze)
            syncing.join(20)
            assert frozen, "the sync never got past its scan"
            assert not syncing.is_alive(), "the sync still waits for the frozen server"
            err, took = outcome
            assert isinstance(err, BackendError), err
            said = str(err)
            assert "did not answer within 1 s" in said and "syncTimeout" in said and "port=" in said
            assert "last synced state stays searchable" in said and "\n" not in said
            assert took < 8
            st = mem.status()  # still frozen: bounded too, and says so
            assert st["server"]["available"] is False and "syncTimeout" in st["lastError"]
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
            frozen.clear()
            st = mem.status()
            assert st["server"]["available"] is True and st["dirty"] is True and "syncTimeout" in st["lastError"]
            report = mem.sync()
            assert report.files_indexed == 40 and report.errors == ()
            st = mem.status()
            assert (st["files"], st["dirty"], st["lastError"], st["pendingFiles"]) == (41, False, None, 0)
            assert paths(mem, "second note 7")[0] == "memory/n-007.md"
        assert rows(server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE text LIKE '%%first%%'") == [(0,)]
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        server.stop()


def test_a_sync_over_a_network_path_that_drops_packets_fails_in_time_and_the_next_one_finishes(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # Across a partition the server keeps the sync's session (its owner lock, its transaction's row locks): once
    # the path was back, the next sync waited up to 15 minutes for the lock its own lost session held.
    hole = Blackhole(pg_server.port)
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                              **_notes(30, "first")})
        with open_pg(tmp_path, pg_server, pg_schema, ws, dsn=hole.dsn(), syncTimeout=1.0, searchTimeout=1.0,
                     connectTimeout=1.0) as mem:
            mem.sync()
            make_workspace(ws, _notes(30, "second"))
            cut: list[bool] = []

            def partition(p: Any) -> None:
                if p.phase != "scan" and not cut:
                    cut.append(True)
                    hole.cut()

            syncing, outcome = _sync_in_thread(mem, progress=partition)
            syncing.join(20)
            assert cut and not syncing.is_alive(), "the sync still waits across the partition"
            err, took = outcome
            assert isinstance(err, BackendError) and "syncTimeout" in str(err) and took < 8
            resp = mem.search("pelican", min_score=0)
            assert resp.mode == "unavailable" and "\n" not in resp.fallback.reason
            hole.mend()
            # The server still holds the lost session and its locks.
            assert rows(pg_server, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")[0][0] >= 1
            syncing, outcome = _sync_in_thread(mem)
            syncing.join(30)
            assert not syncing.is_alive(), "the sync after the partition waits for its own lost session's locks"
            report, took = outcome
            assert not isinstance(report, BaseException), report
            assert report.files_indexed == 30 and took < 10
            st = mem.status()
            assert (st["files"], st["dirty"], st["lastError"]) == (31, False, None)
            assert paths(mem, "second note 7")[0] == "memory/n-007.md"
    finally:
        hole.close()



def test_the_lost_sync_session_is_ended_only_while_it_is_still_ours_behind_a_pooler(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # A sync whose connection was lost had its server session ended by (pid, backend_start) at the next sync.
    # Behind a session pooler that session, same pid and backend_start, goes to the next client once ours is
    # gone (rolled back and reset): the next sync ended another program's session.
    pooler = Pooler(pg_server.port)
    others: list[Any] = []

    def another_program() -> None:  # waits for a server session, as clients of a full pooler do
        others.append(psycopg.connect(pooler.dsn(application_name="another-program"), autocommit=True))

    waiting = [threading.Thread(target=another_program, daemon=True) for _ in range(3)]
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n",
                                              **_notes(30, "first")})
        with open_pg(tmp_path, pg_server, pg_schema, ws, dsn=pooler.dsn(), syncTimeout=1.0, searchTimeout=1.0,
                     connectTimeout=1.0) as mem:
            mem.sync()
            make_workspace(ws, _notes(30, "second"))
            cut: list[bool] = []

            def partition(p: Any) -> None:
                if p.phase != "scan" and not cut:
                    cut.append(True)
                    pooler.full()  # the other program's clients are first in line for the next sessions kept
                    pooler.cut()
                    for t in waiting:
                        t.start()

            syncing, outcome = _sync_in_thread(mem, progress=partition)
            syncing.join(20)
            assert cut and not syncing.is_alive() and isinstance(outcome[0], BackendError), outcome
            time.sleep(2.0)  # the pooler resets the sessions whose clients went and hands them to the first in line
            reused = pooler.cut_pids & set(pooler.released)
            pooler.full(False)
            for t in waiting:
                t.join(15)
            theirs = {c.execute("SELECT pg_backend_pid()").fetchone()[0] for c in others}
            # The lost sync's session among them: the other program has it now.
            assert len(others) == 3 and reused and reused <= theirs, (pooler.cut_pids, pooler.released, theirs)
            report = mem.sync()
            assert report.files_indexed == 30
            for conn in others:  # every other program's session lives on
                assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] in theirs
            st = mem.status()
            assert (st["files"], st["dirty"], st["lastError"]) == (31, False, None)
            assert paths(mem, "second note 7")[0] == "memory/n-007.md"
    finally:
        for conn in others:
            conn.close()
        pooler.close()


class _Mirrored(HashEmbedder):
    """The hash embedder with its dimensions reversed: another model, of the same width."""

    def _vector(self, text: str) -> list[float]:
        return super()._vector(text)[::-1]


class MirroredPlugin:
    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Any) -> None:
        register(ProviderSpec(name="mirrored", factory=lambda ctx: _Mirrored(id="mirrored", model="mirrored-384"),
                              default_model="mirrored-384", description="hash, reversed (tests)"))


def test_vectors_of_a_model_another_process_just_switched_to_are_never_compared(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # Which owners' vectors match the query's model was re-read every 5 s: for that long after another process
    # rebuilt an agent with another model of the same width, searches scored its vectors against this model's
    # query vector (and supersession compared them), ranking by noise.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe osprey nests by the lake\n",
                                          "memory/a.md": "# A\n\nthe heron fishes at dawn\n"})
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "mirrored", "sync": {"watch": False}}}}})
    with open_pg(tmp_path / "a", pg_server, pg_schema, ws) as mem:
        mem.sync()
        assert mem.search("osprey nests", min_score=0).mode == "hybrid"
        got = mem.backend.search(_query("osprey nests"))
        cid = got.candidates[0].id
        assert got.candidates[0].vector_score is not None and mem.backend.candidate_vectors([cid])
        with open_memory(load_config(None, state_dir=tmp_path / "b", overrides=overrides), workspace=ws,
                         plugins=[("mirrored", MirroredPlugin())], start=False) as other:
            assert other.sync().full
        # At once, not 5 s later.
        assert mem.search("osprey nests", min_score=0).mode == "fts-only"
        got = mem.backend.search(_query("osprey nests"))
        assert got.candidates and all(c.vector_score is None for c in got.candidates)
        assert mem.backend.candidate_vectors([cid]) == {}
        assert mem.backend.candidate_line_vectors([cid]) == {}
        assert mem.sync().full  # this process's model again
        assert mem.search("osprey nests", min_score=0).mode == "hybrid"


def _query(text: str) -> Any:
    from symi_memory.types import SearchQuery

    return SearchQuery(text=text, max_results=5, min_score=0.0, candidate_limit=20)


def test_a_read_whose_statements_each_answer_in_time_is_never_cut(tmp_path: Path, pg_server: PgServer,
                                                                  pg_schema: str) -> None:
    # The watchdog timed the whole read (every statement of status(), a search's scoring in Python) against one
    # statement's bound: a read of many statements, each well within searchTimeout, had its socket shut down
    # midway (or just as a statement completed, the next one failing) and answered "did not answer".
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, searchTimeout=0.2) as mem:
        mem.sync()
        backend = mem.backend

        def work(conn: Any) -> int:
            for _ in range(25):  # 25 x 0.1 s: each statement half its bound, in all past bound + grace
                conn.execute("SELECT pg_sleep(0.1)")
            return int(conn.execute("SELECT 1").fetchone()[0])

        assert backend._with_conn(work) == 1
        assert paths(mem, "pelican") == ["MEMORY.md"]


def test_a_wait_cut_as_it_completes_never_breaks_the_next_statement(pg_server: PgServer) -> None:
    # The watchdog firing in the instant a read completed shut the socket of a connection that went back to the
    # pool looking healthy: the next statement on it (another search's, a sync's) failed. Here the bound and the
    # server's answer race on purpose, 600 times, the bound swept in 10 us steps across the answer's arrival.
    from symi_memory_postgres.guard import GuardedConnection, ServerSilent, Watchdog

    dog = Watchdog()
    outcomes = {"answered": 0, "cut": 0}
    try:
        for i in range(600):
            with GuardedConnection.connect(pg_server.dsn, autocommit=True) as conn:
                conn.watchdog, conn.setting = dog, "test"
                conn.answer_within = 0.002 + (i % 300) * 0.00001  # 2.00 to 4.99 ms; the answer takes ~3.2 ms
                try:
                    got = conn.execute("SELECT 1 FROM pg_sleep(0.003)").fetchone()
                except ServerSilent:
                    assert conn.closed, "a cut connection stayed open"
                    outcomes["cut"] += 1
                    continue
                except psycopg.OperationalError as exc:
                    pytest.fail(f"a cut surfaced as {exc!r}, not as ServerSilent")
                assert got == (1,)
                conn.answer_within = None
                assert conn.execute("SELECT 2").fetchone() == (2,), "the statement after an answered wait failed"
                outcomes["answered"] += 1
    finally:
        dog.stop()
    assert outcomes["answered"] and outcomes["cut"], outcomes


def test_an_index_build_waiting_past_sync_timeout_on_a_live_server_is_not_cut(tmp_path: Path, pg_server: PgServer,
                                                                              pg_schema: str) -> None:
    # The HNSW build may rightly take minutes (or wait for other sessions' snapshots): it is exempt from
    # syncTimeout while the server answers a fresh connection, and lands.
    ws = make_workspace(tmp_path / "ws", _notes(20, "first"))
    valid = (f"SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
             f"WHERE i.indrelid = '{pg_schema}.chunks'::regclass AND c.relname = 'chunks_hnsw_384'")
    with open_pg(tmp_path, pg_server, pg_schema, ws, syncTimeout=0.5) as mem:
        mem.sync()
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP INDEX {pg_schema}.chunks_hnsw_384")
        make_workspace(ws, _notes(1, "second"))
        snapshot = psycopg.connect(pg_server.dsn)  # a concurrent build waits for it to end
        try:
            snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            snapshot.execute("SELECT count(*) FROM pg_class")
            syncing, outcome = _sync_in_thread(mem)
            time.sleep(4.0)  # the build waits, past syncTimeout + the watchdog's grace
            assert syncing.is_alive()
        finally:
            snapshot.close()
        syncing.join(20)
        report, _ = outcome
        assert not isinstance(report, BaseException), report
        assert report.files_indexed == 1 and rows(pg_server, valid) == [(True,)]
        assert mem.status()["lastError"] is None


def test_an_index_build_on_a_server_that_freezes_is_cut_off_and_the_next_sync_builds_it(
        tmp_path: Path, pg_schema: str) -> None:
    # Exempt from syncTimeout while the server answers, the HNSW build must still end when it stops answering.
    server = PgServer.start()
    frozen: list[int] = []
    snapshot: Any = None
    try:
        ws = make_workspace(tmp_path / "ws", _notes(20, "first"))
        valid = (f"SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                 f"WHERE i.indrelid = '{pg_schema}.chunks'::regclass AND c.relname = 'chunks_hnsw_384'")
        with open_pg(tmp_path, server, pg_schema, ws, syncTimeout=0.5, connectTimeout=1.0) as mem:
            mem.sync()
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute(f"DROP INDEX {pg_schema}.chunks_hnsw_384")
            make_workspace(ws, _notes(1, "second"))
            snapshot = psycopg.connect(server.dsn)  # the build waits for it
            snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            snapshot.execute("SELECT count(*) FROM pg_class")
            syncing, outcome = _sync_in_thread(mem)
            deadline = time.monotonic() + 20
            while not rows(server, "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                                   "'CREATE INDEX CONCURRENTLY%%'"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(3.0)  # past syncTimeout + grace: the server answered the probe, the build goes on
            assert syncing.is_alive()
            frozen.extend(_server_processes(server))
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            stopped = time.monotonic()
            syncing.join(20)
            assert not syncing.is_alive(), "the index build still waits for the frozen server"
            assert time.monotonic() - stopped < 8
            err, _ = outcome
            assert isinstance(err, BackendError) and "syncTimeout" in str(err), err
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
            frozen.clear()
            snapshot.close()
            report = mem.sync()
            assert report.errors == ()
            assert rows(server, valid) == [(True,)]
            st = mem.status()
            assert (st["lastError"], st["dirty"], st["vector"]["index"]) == (None, False, "hnsw")
            assert paths(mem, "second note 0")[0] == "memory/n-000.md"
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        if snapshot is not None:
            snapshot.close()
        server.stop()


def test_a_sync_writing_many_rows_each_in_time_is_never_cut(tmp_path: Path, pg_server: PgServer,
                                                            pg_schema: str) -> None:
    # executemany sends its statements in one pipeline, read back in one wait: the watchdog timed the whole batch
    # (thousands of line vectors) against one statement's bound and cut a healthy sync off ("did not answer within
    # 1 s"), though the server answered every statement in a few milliseconds, well within syncTimeout.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, syncTimeout=1.0) as mem:
        mem.sync()
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:  # a server writing each line vector in ~2 ms
            conn.execute(f"CREATE FUNCTION {pg_schema}.slow() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN PERFORM pg_sleep(0.002); RETURN NEW; END $$")
            conn.execute(f"CREATE TRIGGER slow BEFORE INSERT ON {pg_schema}.chunk_units FOR EACH ROW "
                         f"EXECUTE FUNCTION {pg_schema}.slow()")
        make_workspace(ws, {f"memory/long-{i:02d}.md": "".join(f"line {j} of note {i}: walrus {i * 100 + j}\n\n"
                                                               for j in range(60)) for i in range(30)})
        started = time.monotonic()
        report = mem.sync()
        took = time.monotonic() - started
        units = rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunk_units WHERE path LIKE 'memory/long-%%'")[0][0]
        assert units >= 1500, units  # the batch's line vectors took ~3 s or more on the server, in all
        assert report.files_indexed == 30 and took > 3.0, (report, took)
        assert paths(mem, "walrus 1207")[:1] == ["memory/long-12.md"]
