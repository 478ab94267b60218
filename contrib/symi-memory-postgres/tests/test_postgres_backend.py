"""The postgres backend against a real server: scoping, sharing, concurrency, failures, status."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import PgServer, pg_config

from symi_memory import load_config
from symi_memory.config.fields import deep_merge
from symi_memory.errors import BackendError
from symi_memory.manager import MemoryManager, open_memory
from symi_memory.types import SearchQuery

pytestmark = pytest.mark.postgres


def make_workspace(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def open_pg(tmp_path: Path, server: PgServer, schema: str, workspace: Path, *, agent_id: str = "main",
            provider: str = "hash", model: str | None = None, **pg: Any) -> MemoryManager:
    ms: dict[str, Any] = {"provider": provider, "sync": {"watch": False}}
    if model:
        ms["model"] = model
    overrides = deep_merge(pg_config(server, schema, **pg), {"agents": {"defaults": {"memorySearch": ms}}})
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=overrides)
    return open_memory(cfg, workspace=workspace, agent_id=agent_id, start=False)


def paths(mem: MemoryManager, query: str) -> list[str]:
    return [r.path for r in mem.search(query, min_score=0).results]


def sync_at_once(mems: list[MemoryManager]) -> None:
    """Every manager's ``sync`` run at the same time, each in a thread of its own: none may raise."""
    errors: list[BaseException] = []

    def run(mem: MemoryManager) -> None:
        try:
            mem.sync()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in mems]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []


def rows(server: PgServer, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def test_search_finds_by_keyword_and_vector_and_reports_hybrid(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\n- The deploy key rotates every 90 days.\n",
                                          "memory/2026-01-01.md": "# Jan\n\nquokka sighting at the harbour\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        from symi_memory.specs import MemoryBackend, NotifiesSyncs, StalenessAware

        assert all(isinstance(mem.backend, p) for p in (MemoryBackend, NotifiesSyncs, StalenessAware))
        seen: list[Any] = []
        mem.backend.on_synced = seen.append
        report = mem.sync()
        assert report.full and report.files_indexed == 2 and report.chunks_written == 2 and seen == [report]
        resp = mem.search("quokka harbour", min_score=0)
        assert resp.mode == "hybrid" and resp.provider == "hash"
        assert resp.results[0].path == "memory/2026-01-01.md" and resp.results[0].start_line == 1
        assert "quokka" in resp.results[0].snippet


def test_keyword_side_stems_and_skips_stop_words_like_builtin(tmp_path: Path, pg_server: PgServer,
                                                              pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\nBooked two flights to Lisbon in May.\n",
                                          "memory/a.md": "# Notes\n\nThe kettle was descaled.\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync()
        assert paths(mem, "flight")[:1] == ["MEMORY.md"]  # "flight" finds "flights" (porter, as builtin-sqlite)
        assert paths(mem, "descaling kettles")[:1] == ["memory/a.md"]
        assert mem.search("what is it", min_score=0).results == ()  # only stop words: nothing to look for
        assert mem.search("what is it").mode == "fts-only"  # a mode behaviour §5 names, not "none"
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()
        assert mem.search("what is it").mode == "hybrid"


def test_a_version_1_schema_is_rebuilt_with_stemmed_terms(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\nBooked two flights to Lisbon in May.\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync()
    # What version 1 wrote: unstemmed terms, and the version mark.
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {pg_schema}.chunks SET terms = to_tsvector('simple', 'booked')")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '1' WHERE key = 'schemaVersion'")
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        assert mem.status()["dirty"] is True  # the identity is forgotten: the next sync rebuilds
        report = mem.sync()
        assert report.full and paths(mem, "flight")[:1] == ["MEMORY.md"]
    assert rows(pg_server, f"SELECT value FROM {pg_schema}.meta WHERE key = 'schemaVersion'") == [("5",)]


def test_keyword_only_without_a_provider(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\nRouter admin on port 8443.\n",
                                          "memory/a.md": "# Notes\n\nNothing about networks here.\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync()
        resp = mem.search("router 8443", min_score=0)
        assert resp.mode == "fts-only" and resp.provider == "none"
        assert [r.path for r in resp.results] == ["MEMORY.md"]
        assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE embedding IS NOT NULL") == [(0,)]


def test_cjk_substring_and_accents(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", {"memory/cn.md": "# 市场\n\n今天金银价格上涨了很多\n",
                                          "memory/fr.md": "# Café\n\nRéunion à l'hôtel de ville\n",
                                          "memory/en.md": "# Other\n\nplain english words only\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync()
        assert paths(mem, "金银价格") == ["memory/cn.md"]
        assert paths(mem, "价") == ["memory/cn.md"]
        assert paths(mem, "reunion hotel") == ["memory/fr.md"]


def test_two_agents_never_see_each_other(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    a = make_workspace(tmp_path / "alice", {"MEMORY.md": "# A\n\nalice keeps the narwhal ledger\n"})
    b = make_workspace(tmp_path / "bob", {"MEMORY.md": "# B\n\nbob tends the walrus garden\n"})
    with open_pg(tmp_path, pg_server, pg_schema, a, agent_id="alice") as alice, \
            open_pg(tmp_path, pg_server, pg_schema, b, agent_id="bob") as bob:
        alice.sync()
        bob.sync()
        assert paths(alice, "narwhal ledger") == ["MEMORY.md"]
        assert paths(bob, "narwhal ledger") == [] or all("narwhal" not in r.snippet
                                                        for r in bob.search("narwhal ledger", min_score=0).results)
        assert all("walrus" not in r.snippet for r in alice.search("walrus garden", min_score=0).results)
        assert any("walrus" in r.snippet for r in bob.search("walrus garden", min_score=0).results)
        assert alice.status()["chunks"] == 1 and bob.status()["chunks"] == 1
        # Same path in both workspaces: two rows, one per owner.
        assert sorted(rows(pg_server, f"SELECT owner, path FROM {pg_schema}.files")) == [
            ("alice", "MEMORY.md"), ("bob", "MEMORY.md")]


def test_one_agent_id_with_two_workspaces_keeps_each_workspace_whole(tmp_path: Path, pg_server: PgServer,
                                                                     pg_schema: str) -> None:
    # Two hosts (or one host serving several) run agent "main" on different folders: neither sync may
    # delete the other's files, and each search answers from its own workspace only.
    a = make_workspace(tmp_path / "laptop", {"MEMORY.md": "# A\n\nthe narwhal ledger lives here\n",
                                              "memory/2026-03-01.md": "narwhal audit on Monday\n"})
    b = make_workspace(tmp_path / "server", {"MEMORY.md": "# B\n\nthe walrus garden lives here\n"})
    with open_pg(tmp_path / "s1", pg_server, pg_schema, a) as first, \
            open_pg(tmp_path / "s2", pg_server, pg_schema, b) as second:
        first.sync()
        second.sync()
        first.sync()
        assert sorted(paths(first, "narwhal")) == ["MEMORY.md", "memory/2026-03-01.md"]
        assert all("narwhal" not in r.snippet for r in second.search("narwhal", min_score=0).results)
        assert any("walrus" in r.snippet for r in second.search("walrus garden", min_score=0).results)
        assert all("walrus" not in r.snippet for r in first.search("walrus garden", min_score=0).results)
        assert first.status()["files"] == 2 and second.status()["files"] == 1
        owners = dict(rows(pg_server, f"SELECT owner, count(*) FROM {pg_schema}.files GROUP BY owner"))
        assert owners["main"] == 2
        [(other, n)] = [(o, n) for o, n in owners.items() if o != "main"]
        assert other.startswith("main-ws-") and n == 1
        assert second.status()["agentId"] == other

    # The same folder opened again (another process, or a restart) finds its own rows, not new ones.
    with open_pg(tmp_path / "s3", pg_server, pg_schema, b) as again:
        assert again.status()["agentId"] == other
        assert any("walrus" in r.snippet for r in again.search("walrus garden", min_score=0).results)


def test_a_moved_workspace_takes_over_its_old_rows(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    old = make_workspace(tmp_path / "old", {"MEMORY.md": "# A\n\nthe narwhal ledger lives here\n"})
    with open_pg(tmp_path / "s1", pg_server, pg_schema, old) as mem:
        mem.sync()
    new = tmp_path / "new"
    old.rename(new)
    with open_pg(tmp_path / "s2", pg_server, pg_schema, new) as mem:
        assert mem.status()["agentId"] == "main"
        mem.sync()
        assert paths(mem, "narwhal ledger") == ["MEMORY.md"]
    assert rows(pg_server, f"SELECT DISTINCT owner FROM {pg_schema}.files") == [("main",)]


def test_a_workspace_with_rows_of_its_own_keeps_them_when_the_first_one_is_removed(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # The second workspace of agent "main" syncs into main-ws-<hash>; once the first one's folder is
    # removed, the second must not take over "main" (re-indexing everything and leaving its rows behind).
    first = make_workspace(tmp_path / "first", {"MEMORY.md": "# A\n\nthe narwhal ledger lives here\n"})
    second = make_workspace(tmp_path / "second", {"MEMORY.md": "# B\n\nthe walrus garden lives here\n"})
    with open_pg(tmp_path / "s1", pg_server, pg_schema, first) as mem:
        mem.sync()
    with open_pg(tmp_path / "s2", pg_server, pg_schema, second) as mem:
        mem.sync()
        own = mem.status()["agentId"]
    assert own.startswith("main-ws-")
    shutil.rmtree(first)
    with open_pg(tmp_path / "s3", pg_server, pg_schema, second) as mem:
        assert mem.status()["agentId"] == own
        mem.sync()
        assert paths(mem, "walrus garden") == ["MEMORY.md"]
    assert dict(rows(pg_server, f"SELECT owner, count(*) FROM {pg_schema}.files GROUP BY owner")) == {
        "main": 1, own: 1}


def test_shared_scope_is_visible_only_to_agents_that_opt_in(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    shared = make_workspace(tmp_path / "shared" / "team", {"memory/runbook.md": "# Runbook\n\nthe pelican failover drill\n"})
    scopes = {"shared": ["team"], "root": str(shared.parent)}
    a = make_workspace(tmp_path / "alice", {"MEMORY.md": "# A\n\nalice notes\n"})
    b = make_workspace(tmp_path / "bob", {"MEMORY.md": "# B\n\nbob notes\n"})
    c = make_workspace(tmp_path / "carol", {"MEMORY.md": "# C\n\ncarol notes\n"})
    with open_pg(tmp_path, pg_server, pg_schema, a, agent_id="alice", scopes=scopes) as alice, \
            open_pg(tmp_path, pg_server, pg_schema, b, agent_id="bob", scopes=scopes) as bob, \
            open_pg(tmp_path, pg_server, pg_schema, c, agent_id="carol") as carol:
        alice.sync()
        bob.sync()
        carol.sync()
        for mem in (alice, bob):
            hits = mem.search("pelican failover", min_score=0).results
            assert hits[0].path == "@team/memory/runbook.md"
            assert mem.read_file(hits[0].path, from_line=3, lines=1).text == "the pelican failover drill"
        assert all("pelican" not in r.snippet for r in carol.search("pelican failover", min_score=0).results)
        # One copy of the scope's rows, whoever synced it.
        assert rows(pg_server, f"SELECT owner, count(*) FROM {pg_schema}.chunks WHERE owner LIKE '@%%' GROUP BY owner") == [
            ("@team", 1)]
        assert alice.status()["owners"]["@team"]["chunks"] == 1


def test_a_shared_copy_of_a_note_keeps_its_own_identity_and_vector(tmp_path: Path, pg_server: PgServer,
                                                                    pg_schema: str) -> None:
    """The same file in the agent's folder and in a shared scope: two candidates, each with its stored vector."""
    note = {"memory/2026-05-05.md": "# May\n\nthe heron census starts at dawn\n"}
    shared = make_workspace(tmp_path / "shared" / "team", note)
    own = make_workspace(tmp_path / "alice", note)
    scopes = {"shared": ["team"], "root": str(shared.parent)}
    with open_pg(tmp_path, pg_server, pg_schema, own, agent_id="alice", scopes=scopes) as alice:
        alice.sync()
        cands = alice.backend.search(SearchQuery(text="heron census", max_results=4, min_score=0.0,
                                                 candidate_limit=8)).candidates
        assert sorted(c.path for c in cands) == ["@team/memory/2026-05-05.md", "memory/2026-05-05.md"]
        assert len({c.id for c in cands}) == 2
        vecs = alice.backend.candidate_vectors([c.id for c in cands])
        assert set(vecs) == {c.id for c in cands} and all(len(v) == 384 for v in vecs.values())
        assert alice.backend.candidate_vectors(["no-such-id"]) == {}


def test_embedding_cache_is_shared_across_agents(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    text = {"MEMORY.md": "# Same\n\nidentical text in two agents' memories\n"}
    a = make_workspace(tmp_path / "alice", text)
    b = make_workspace(tmp_path / "bob", text)
    with open_pg(tmp_path, pg_server, pg_schema, a, agent_id="alice") as alice, \
            open_pg(tmp_path, pg_server, pg_schema, b, agent_id="bob") as bob:
        first = alice.sync()
        second = bob.sync()
    # The chunk and its one line (chunking.units: the line vector supersession compares) are two texts.
    assert (first.embeddings_computed, first.embeddings_cached) == (2, 0)
    assert (second.embeddings_computed, second.embeddings_cached) == (0, 2)
    assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.embedding_cache") == [(2,)]


def _many_files(ws: Path, n: int, tag: str) -> dict[str, str]:
    return {f"memory/{tag}-{i:04d}.md": f"# {tag} {i}\n\nnote {i} about {tag} topic number {i}\n" for i in range(n)}


def _count_check(server: PgServer, schema: str, owner: str, ws: Path) -> None:
    on_disk = {p.relative_to(ws).as_posix() for p in ws.rglob("*.md")}
    files = {r[0] for r in rows(server, f"SELECT path FROM {schema}.files WHERE owner = %s", (owner,))}
    assert files == on_disk
    # One chunk per small file, none duplicated.
    total, distinct = rows(server, f"SELECT count(*), count(DISTINCT (path, start_line, end_line, hash)) "
                                   f"FROM {schema}.chunks WHERE owner = %s", (owner,))[0]
    assert total == distinct == len(on_disk)


def test_killing_the_server_mid_sync_loses_nothing(tmp_path: Path, pg_schema: str, caplog: pytest.LogCaptureFixture) -> None:
    server = PgServer.start()
    try:
        ws = make_workspace(tmp_path / "ws", _many_files(tmp_path, 20, "old"))
        with open_pg(tmp_path, server, pg_schema, ws) as mem:
            mem.sync()
            make_workspace(ws, _many_files(tmp_path, 700, "new"))
            killed = []

            def progress(p: Any) -> None:
                if p.phase == "index" and p.done >= 450 and not killed:
                    server.kill()
                    killed.append(p.done)

            with pytest.raises(BackendError) as err:
                mem.sync(progress=progress)
            assert killed and "\n" not in str(err.value) and "last synced state stays searchable" in str(err.value)
            down = mem.status()
            assert down["server"]["available"] is False and "sync failed" in down["lastError"]
            resp = mem.search("old topic", min_score=0)
            assert resp.results == () and resp.fallback is not None and "unreachable" in resp.fallback.reason
            server.restart()
            # The previous state (and every batch committed before the crash) is searchable again.
            assert any(r.path.startswith("memory/old-") for r in mem.search("old topic", min_score=0).results)
            mem.sync()
            _count_check(server, pg_schema, "main", ws)
            st = mem.status()
            assert st["files"] == 720 and st["chunks"] == 720 and st["lastError"] is None and st["dirty"] is False
    finally:
        server.stop()


def test_a_search_notices_a_new_file_without_the_watcher(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """A long-lived manager's staleness check (the safety net for lost watcher events) syncs a new file."""
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe kettle is descaled monthly\n"})
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "sync": {"watch": False, "onSessionStart": False}}}}})
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=overrides)
    with open_memory(cfg, workspace=ws, start=True) as mem:
        mem.sync()
        make_workspace(ws, {"memory/2026-02-02.md": "# Feb\n\nthe albatross ringing permit arrived\n"})
        deadline = time.monotonic() + 20
        while "memory/2026-02-02.md" not in paths(mem, "albatross permit"):
            assert time.monotonic() < deadline, mem.status()
            time.sleep(0.3)
        assert mem.status()["lastError"] is None


def test_two_processes_syncing_one_agent_do_not_duplicate(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", _many_files(tmp_path, 300, "n"))
    mems = [open_pg(tmp_path / f"p{i}", pg_server, pg_schema, ws) for i in range(2)]
    try:
        sync_at_once(mems)
        _count_check(pg_server, pg_schema, "main", ws)
        # Edits synced by both again: still exactly one row each.
        (ws / "memory" / "n-0000.md").write_text("# changed\n\nthe heron moved\n", encoding="utf-8")
        (ws / "memory" / "n-0001.md").unlink()
        sync_at_once(mems)
        _count_check(pg_server, pg_schema, "main", ws)
    finally:
        for m in mems:
            m.close()


def test_full_reindex_is_atomic_for_readers(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", _many_files(tmp_path, 300, "n"))
    with open_pg(tmp_path, pg_server, pg_schema, ws) as writer, open_pg(tmp_path / "r", pg_server, pg_schema, ws) as reader:
        writer.sync()
        seen: list[int] = []

        def progress(p: Any) -> None:
            if p.phase == "index":
                seen.append(reader.status()["chunks"])
                assert reader.search("topic number 7", min_score=0).results

        writer.sync(force=True, progress=progress)
        assert seen and set(seen) == {300}
        assert reader.status()["chunks"] == 300


def test_model_change_rebuilds_with_a_message(tmp_path: Path, pg_server: PgServer, pg_schema: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe osprey nests by the lake\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()
    with open_pg(tmp_path, pg_server, pg_schema, ws, model="hash-64") as mem:
        # Until the rebuild lands, the old 384-d vectors are not compared with a 64-d query.
        assert mem.search("osprey", min_score=0).mode == "fts-only"
        with caplog.at_level(logging.WARNING, logger="symi_memory.postgres"):
            report = mem.sync()
        assert report.full
        assert any("rebuilding" in r.getMessage() and "hash-384" in r.getMessage() for r in caplog.records)
        assert mem.status()["vector"]["dims"] == 64
        assert mem.search("osprey", min_score=0).mode == "hybrid"


def test_status_reports_server_extension_counts_and_indexes(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = make_workspace(tmp_path / "ws", _many_files(tmp_path, 5, "s"))
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()
        st = mem.status()
    assert st["backend"] == "postgres" and st["server"]["available"] is True
    assert st["server"]["version"].startswith("17")
    assert st["vector"]["pgvector"] == "0.8.2" and st["vector"]["index"] == "hnsw" and st["vector"]["dims"] == 384
    assert isinstance(st["vector"]["hnswUsed"], bool)
    assert st["fts"]["index"] == "gin"
    assert (st["files"], st["chunks"], st["pendingFiles"], st["dirty"]) == (5, 5, 0, False)
    assert st["cache"]["entries"] == 10  # each chunk and its one line (chunking.units)


def test_server_down_at_start(tmp_path: Path, pg_schema: str, caplog: pytest.LogCaptureFixture) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    down = PgServer(dir=tmp_path, port=port)
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nanything\n"})
    with open_pg(tmp_path, down, pg_schema, ws, connectTimeout=1.0,
                 dsn=f"postgresql://postgres:hunter2secret@127.0.0.1:{port}/postgres") as mem:
        with caplog.at_level(logging.WARNING):
            resp = mem.search("anything", min_score=0)
        assert resp.results == () and resp.mode == "unavailable"
        assert "unreachable" in resp.fallback.reason and "\n" not in resp.fallback.reason
        with pytest.raises(BackendError) as err:
            mem.sync()
        st = mem.status()
        assert st["server"]["available"] is False and "sync failed" in st["lastError"]
        everything = " ".join([str(err.value), resp.fallback.reason, repr(st), caplog.text])
        assert "hunter2secret" not in everything
        assert "user=postgres" in st["dsn"] and "password" not in st["dsn"]


def test_pgvector_missing_names_create_extension(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    db = "novec_" + pg_schema
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'plain') THEN "
                     "CREATE ROLE plain LOGIN; END IF; END $$")
        conn.execute(f"REVOKE CREATE ON DATABASE {db} FROM PUBLIC")
    try:
        ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nanything\n"})
        dsn = f"host=127.0.0.1 port={pg_server.port} user=plain dbname={db}"
        with open_pg(tmp_path, pg_server, pg_schema, ws, dsn=dsn) as mem:
            with pytest.raises(BackendError) as err:
                mem.sync()
            assert "CREATE EXTENSION vector" in str(err.value) and "\n" not in str(err.value)
            assert "CREATE EXTENSION vector" in mem.search("anything", min_score=0).fallback.reason
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def test_many_agents_first_syncing_at_once_all_succeed(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """The first vectors create the HNSW index; agents writing meanwhile must neither deadlock nor fail."""
    spaces = [make_workspace(tmp_path / f"a{i}", _many_files(tmp_path, 40, f"a{i}")) for i in range(6)]
    mems = [open_pg(tmp_path / f"s{i}", pg_server, pg_schema, ws, agent_id=f"a{i}") for i, ws in enumerate(spaces)]
    try:
        sync_at_once(mems)
        for i, ws in enumerate(spaces):
            _count_check(pg_server, pg_schema, f"a{i}", ws)
        assert mems[0].status()["vector"]["index"] == "hnsw"
    finally:
        for m in mems:
            m.close()


def test_a_rare_word_outranks_a_common_one_repeated(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """Keyword ranking weighs words by rarity (BM25, as builtin-sqlite), not by how often any query word occurs."""
    files = {f"memory/filler-{i:02d}.md": f"# Filler {i}\n\nthe project meeting notes, the project again\n"
             for i in range(60)}
    files["memory/answer.md"] = "# Answer\n\nthe project codename is zephyrine\n"
    ws = make_workspace(tmp_path / "ws", files)
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync()
        # Neither holds every query word, so the exact-match floor does not decide: word weights do.
        assert paths(mem, "project meeting zephyrine")[0] == "memory/answer.md"


def test_the_plugin_imports_only_public_names() -> None:
    """No underscore names and nothing from symi_memory.index (the SQLite engine's internals)."""
    import ast

    package = Path(__file__).resolve().parents[1] / "symi_memory_postgres"
    offenders = []
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("symi_memory") and node.level == 0:
                mod = node.module or ""
                if mod.startswith("symi_memory_postgres"):
                    continue
                if mod.startswith("symi_memory.index") and mod != "symi_memory.indexing" or any(
                        part.startswith("_") for part in mod.split(".")):
                    offenders.append(f"{source.name}: {mod}")
                offenders += [f"{source.name}: {mod}.{a.name}" for a in node.names if a.name.startswith("_")]
            elif isinstance(node, ast.Import):
                offenders += [f"{source.name}: {a.name}" for a in node.names
                              if a.name.startswith("symi_memory.") and not a.name.startswith("symi_memory_postgres")]
    assert offenders == []


SUPERSESSION = {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"supersession": {"enabled": True}}}}}}}
CAR_NOTES = {"memory/2026-03-01.md": "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n",
             "memory/2026-06-01.md": "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n"
                                     "- Bought running shoes.\n",
             "memory/notes.md": "# Notes\n\n" + "".join(f"- Item {i}: the hatchback needs {i} litres of fuel.\n"
                                                       for i in range(120))}


def _car_answer(mem: MemoryManager) -> dict[str, Any]:
    from symi_memory import tools
    from symi_memory.supersession import forget_lines

    forget_lines()  # what an earlier search analysed must not answer for the index
    hits = tools.memory_search(mem, {"query": "what car do I drive?", "minScore": 0})["results"]
    return next(h for h in hits if h["path"] == "memory/2026-03-01.md")


def test_line_analyses_are_stored_read_by_search_filled_after_an_upgrade_and_kept_on_rewrite(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """Supersession's line analysis of each chunk is stored at index time (``StoredLineAnalysis``) and is
    what a search reads; a schema-3 index answers at once and gains them at its next sync, without a rebuild;
    a full reindex, and a file rewritten further down, keep the analyses of the unchanged chunks."""
    import json
    import zlib

    from symi_memory.supersession import LINE_ANALYSIS_VERSION, line_analysis

    ws = make_workspace(tmp_path / "ws", CAR_NOTES)

    def stored() -> dict[tuple[str, int], tuple[str, bytes | None]]:
        return {(p, s): (t, None if b is None else bytes(b)) for p, s, t, b in
                rows(pg_server, f"SELECT path, start_line, text, lines FROM {pg_schema}.chunks")}

    def open_one() -> MemoryManager:
        overrides = deep_merge(deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
            "provider": "hash", "sync": {"watch": False}}}}}), SUPERSESSION)
        return open_memory(load_config(None, state_dir=tmp_path / "state", overrides=overrides), workspace=ws,
                           agent_id="main", start=False)

    with open_one() as mem:
        mem.sync()
        before = stored()
        assert len(before) > 3 and all(blob == line_analysis(p, s, t) for (p, s), (t, blob) in before.items())
        answer = _car_answer(mem)
        assert answer["supersededBy"]["path"] == "memory/2026-06-01.md"
        # The stored analysis is what the search reads: one dating the June line before March (its moment)
        # leaves March unmarked. (Its change flag alone no longer does: the disposal rule reads "Sold the
        # hatchback" from the text.)
        (_text, blob), = [v for (p, _s), v in before.items() if p == "memory/2026-06-01.md"]
        analysis = json.loads(zlib.decompress(blob[1:]))
        assert analysis[1][3] == 2 and analysis[1][2] > 1_772_000_000
        analysis[1][2] = 1_767_225_600.0  # 2026-01-01
        tampered = blob[:1] + zlib.compress(json.dumps(analysis).encode())
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"UPDATE {pg_schema}.chunks SET lines = %s WHERE path = 'memory/2026-06-01.md'", (tampered,))
        assert "supersededBy" not in _car_answer(mem)
        # A full reindex writes every chunk again: unchanged ones keep their stored analyses (this one too).
        assert mem.sync(force=True).full
        assert [blob for (p, _s), (_t, blob) in stored().items() if p == "memory/2026-06-01.md"] == [tampered]
        # An edit at the end of the long note: its first chunk keeps the analysis stored for it (here one no
        # analysis gives), the edited last chunk is analysed anew.
        first = min(s for p, s in before if p == "memory/notes.md")
        ftext, fblob = before[("memory/notes.md", first)]
        rows_ = json.loads(zlib.decompress(fblob[1:]))
        rows_[1][1] = "kept"
        marked = fblob[:1] + zlib.compress(json.dumps(rows_).encode())
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"UPDATE {pg_schema}.chunks SET lines = %s WHERE path = 'memory/notes.md' AND start_line = %s",
                         (marked, first))
        with (ws / "memory/notes.md").open("a", encoding="utf-8") as f:
            f.write("- Washed the hatchback.\n")  # a neutral edit: selling it would now supersede March
        assert mem.sync().files_indexed == 1
        after = stored()
        assert after[("memory/notes.md", first)] == (ftext, marked)
        last = max(s for p, s in after if p == "memory/notes.md")
        ltext, lblob = after[("memory/notes.md", last)]
        assert "Washed the hatchback" in ltext and lblob == line_analysis("memory/notes.md", last, ltext)
    # What schema version 3 wrote: no lines column.
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {pg_schema}.chunks DROP COLUMN lines")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '3' WHERE key = 'schemaVersion'")
        conn.execute(f"DELETE FROM {pg_schema}.owner_meta WHERE key = 'linesVersion'")
    with open_one() as mem:
        assert mem.status()["dirty"] is False  # no rebuild: the column is added and filled in place
        assert all(blob is None for _, blob in stored().values())
        assert _car_answer(mem)["supersededBy"]["path"] == "memory/2026-06-01.md"  # analysed at query time
        report = mem.sync()
        assert report.files_indexed == 0 and not report.full
        filled = stored()
        assert all(blob == line_analysis(p, s, t) for (p, s), (t, blob) in filled.items())
        assert _car_answer(mem)["supersededBy"]["path"] == "memory/2026-06-01.md"
    assert rows(pg_server, f"SELECT value FROM {pg_schema}.meta WHERE key = 'schemaVersion'") == [("5",)]
    assert rows(pg_server, f"SELECT value FROM {pg_schema}.owner_meta WHERE key = 'linesVersion'") == [
        (str(LINE_ANALYSIS_VERSION),)]
    # Analyses of an older LINE_ANALYSIS_VERSION (2: before ratios were a quantity kind) are not read, and the
    # next sync refills them.
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        for (p, s), (_t, blob) in filled.items():
            old_rows = json.loads(zlib.decompress(blob[1:]))
            old_rows[0][0] = 2
            conn.execute(f"UPDATE {pg_schema}.chunks SET lines = %s WHERE path = %s AND start_line = %s",
                         (bytes((2,)) + zlib.compress(json.dumps(old_rows).encode()), p, s))
        conn.execute(f"UPDATE {pg_schema}.owner_meta SET value = '2' WHERE key = 'linesVersion'")
    with open_one() as mem:
        assert all(blob is not None and blob[0] == 2 for _, blob in stored().values())
        assert _car_answer(mem)["supersededBy"]["path"] == "memory/2026-06-01.md"  # analysed at query time
        mem.sync()
        assert all(blob == line_analysis(p, s, t) for (p, s), (t, blob) in stored().items())
    assert rows(pg_server, f"SELECT value FROM {pg_schema}.owner_meta WHERE key = 'linesVersion'") == [
        (str(LINE_ANALYSIS_VERSION),)]


def test_the_schema_4_upgrade_does_not_hold_up_searches_behind_an_older_process_transaction(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """Adding ``chunks.lines`` takes an ACCESS EXCLUSIVE lock. While an older (schema 3) process is in a
    transaction on the table (a full rebuild of a large agent), the upgrade waits for it, and every search
    of the table queued behind the waiting upgrade: searches of every agent hung until the rebuild ended.
    The upgrade now lets go of the lock it waits for every second and tries again."""
    ws = make_workspace(tmp_path / "ws", CAR_NOTES)
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "sync": {"watch": False}}}}})

    def open_one() -> MemoryManager:
        return open_memory(load_config(None, state_dir=tmp_path / "state", overrides=overrides), workspace=ws,
                           agent_id="main", start=False)

    with open_one() as mem:
        mem.sync()
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:  # what schema version 3 wrote
        conn.execute(f"ALTER TABLE {pg_schema}.chunks DROP COLUMN lines")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '3' WHERE key = 'schemaVersion'")
        conn.execute(f"DELETE FROM {pg_schema}.owner_meta WHERE key = 'linesVersion'")
    older = psycopg.connect(pg_server.dsn)  # an older process, mid-way through rebuilding another agent
    older.execute(f"DELETE FROM {pg_schema}.chunks WHERE owner = 'another-agent'")
    upgraded: list[MemoryManager] = []

    def start_upgraded() -> None:
        upgraded.append(open_one())
        upgraded[0].status()  # its first use of the server upgrades the schema

    upgrade = threading.Thread(target=start_upgraded, daemon=True)
    try:
        upgrade.start()
        time.sleep(1.5)  # the upgrade is waiting for the older process's transaction
        with psycopg.connect(pg_server.dsn, autocommit=True) as search:
            search.execute("SET statement_timeout = '8s'")
            for _ in range(3):  # a search of the table (as any process's, old or new, makes) answers
                assert search.execute(f"SELECT count(*) FROM {pg_schema}.chunks WHERE owner = 'main'"
                                      ).fetchone()[0] > 0
                time.sleep(0.4)
        assert upgrade.is_alive()  # still waiting: the older transaction is open
    finally:
        older.rollback()
        older.close()
        upgrade.join(30)
    assert not upgrade.is_alive()
    with upgraded[0] as mem:
        mem.sync()
        assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE lines IS NULL") == [(0,)]
    assert rows(pg_server, f"SELECT value FROM {pg_schema}.meta WHERE key = 'schemaVersion'") == [("5",)]


def test_a_non_finite_query_vector_answers_by_keyword(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # pgvector refuses NaN and infinity in a vector: such a query vector (a provider's bug) made the search
    # answer nothing at all, as if the server were down.
    import math

    from symi_memory import hookimpl
    from symi_memory.specs import ProviderSpec
    from symi_memory.testing.fakes import HashEmbedder

    class Poisoned(HashEmbedder):
        def embed_query(self, text: str):  # type: ignore[no-untyped-def]
            vec = list(super().embed_query(text))
            if text.startswith("poisoned"):
                vec[2] = math.nan
            return vec

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register):  # type: ignore[no-untyped-def]
            register(ProviderSpec(name="poisoned", factory=lambda ctx: Poisoned()))

    ws = make_workspace(tmp_path / "ws", {"memory/2026-01-01.md": "# Jan\n\nquokka sighting at the harbour\n"})
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "poisoned", "sync": {"watch": False}}}}})
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=overrides)
    with open_memory(cfg, workspace=ws, start=False, plugins=[("poisoned", Plugin())]) as mem:
        mem.sync()
        resp = mem.search("poisoned quokka harbour", min_score=0)
        assert resp.mode == "fts-only" and [r.path for r in resp.results] == ["memory/2026-01-01.md"]
        assert mem.search("quokka harbour", min_score=0).mode == "hybrid"


def test_a_third_party_provider_raising_its_own_error_at_query_time_answers_by_keyword(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # docs/plugin-authors.md: a provider's call that raises any exception makes that search answer by keyword, on
    # every backend: on this one the search failed with the provider's KeyError.
    from symi_memory import hookimpl
    from symi_memory.specs import ProviderSpec
    from symi_memory.testing.fakes import HashEmbedder

    class Parser(HashEmbedder):
        def embed_query(self, text: str):  # type: ignore[no-untyped-def]
            if text.startswith("broken"):
                raise KeyError("data")  # its own response parser, on an unexpected body
            return super().embed_query(text)

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register):  # type: ignore[no-untyped-def]
            register(ProviderSpec(name="parser", factory=lambda ctx: Parser()))

    ws = make_workspace(tmp_path / "ws", {"memory/2026-01-01.md": "# Jan\n\nquokka sighting at the harbour\n"})
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "parser", "sync": {"watch": False}}}}})
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=overrides)
    with open_memory(cfg, workspace=ws, start=False, plugins=[("parser-plugin", Plugin())]) as mem:
        mem.sync()
        resp = mem.search("broken quokka harbour", min_score=0)
        assert resp.mode == "fts-only" and [r.path for r in resp.results] == ["memory/2026-01-01.md"]
        assert mem.search("quokka harbour", min_score=0).mode == "hybrid"


def test_a_long_transcript_stays_searchable_with_its_newest_messages(tmp_path: Path, pg_server: PgServer,
                                                                       pg_schema: str) -> None:
    import json

    def msg(text: str) -> str:
        return json.dumps({"type": "message", "message": {"role": "user", "content": text}})

    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\n- the otter lives by the weir\n"})
    lines = [msg(f"note {n}: remember token word{n:03d}x for later please") for n in range(100)]
    lines.insert(50, json.dumps({"type": "tool_result", "output": "ls output\n" * 2000}))  # 20 KB of tool output
    make_workspace(tmp_path / "state" / "agents" / "main" / "sessions", {"s.jsonl": "\n".join(lines) + "\n"})
    ms = {"provider": "none", "experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
          "sync": {"watch": False, "maxFileBytes": 3000}}
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": ms}}})
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=overrides)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        assert paths(mem, "word099x") == ["sessions/s.jsonl"]  # the file is 7x the limit: still searchable
        assert paths(mem, "word000x") == []  # its oldest messages are left out, and status says so
        st = mem.status()
        assert st["skipped"] == [], st
        (part,) = st["partial"]
        assert part["path"] == "sessions/s.jsonl" and "of 100 are searchable" in part["reason"]


def test_a_workspace_away_keeps_its_rows_and_an_extra_path_away_does_not_hold_up_a_rebuild(
        tmp_path: Path, pg_server: PgServer, pg_schema: str, caplog: pytest.LogCaptureFixture) -> None:
    # The report of a postgres sync dropped the indexer's warnings (the manager added the roots' again, logging
    # each a second time; a rebuild waiting or leaving an extra path out was said nowhere).
    def paths(mem: MemoryManager, word: str) -> list[str]:
        return sorted(r.path for r in mem.search(word, min_score=0).results if word in r.snippet)

    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe osprey nests by the lake\n"})
    notes = make_workspace(tmp_path / "notes", {"trip.md": "the ferry leaves at 0710\n"})
    extra = {"extraPaths": [str(notes)]}
    with open_pg(tmp_path, pg_server, pg_schema, ws, **{}) as mem:
        mem.agent.memory_search.update(extra)
        mem.sync()
        os.rename(ws, tmp_path / "unmounted")
        with caplog.at_level(logging.WARNING, logger="symi_memory"):
            report = mem.sync()
        assert [r.getMessage() for r in caplog.records if "does not exist" in r.getMessage()] == list(report.warnings)
        assert report.files_removed == 0 and report.warnings and "does not exist" in report.warnings[0], report
        assert paths(mem, "osprey") == ["MEMORY.md"]
        forced = mem.sync(force=True)
        assert not forced.full and "waits until the workspace" in forced.errors[0], forced
        assert paths(mem, "osprey") == ["MEMORY.md"]
    with open_pg(tmp_path, pg_server, pg_schema, ws, model="hash-64") as mem:
        # A model change while the workspace is away: the rebuild waits, and says so once, not "rebuilding" at
        # every sync (a server syncs before each search while the index needs a rebuild).
        mem.agent.memory_search.update(extra)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="symi_memory"):
            for _ in range(3):
                assert not mem.sync().full
        said = [r.getMessage() for r in caplog.records]
        assert sum("rebuilding" in m for m in said) <= 1 and sum("rebuild of the index waits" in m for m in said) == 1, said
    os.rename(tmp_path / "unmounted", ws)
    shutil.rmtree(notes)  # for good, still in extraPaths; then a model change needs a full rebuild
    (ws / "memory").mkdir()
    (ws / "memory" / "boat.md").write_text("a yacht named Pelican\n", encoding="utf-8")
    with open_pg(tmp_path, pg_server, pg_schema, ws, model="hash-64") as mem:
        mem.agent.memory_search.update(extra)
        report = mem.sync()
        assert report.full and report.errors == (), report
        assert paths(mem, "Pelican") == ["memory/boat.md"] and paths(mem, "ferry") == []
        assert any("left out the 1 files indexed from" in w for w in report.warnings), report.warnings


def test_status_names_the_provider_that_built_the_rows_after_a_switch(tmp_path: Path, pg_server: PgServer,
                                                                     pg_schema: str) -> None:
    """After switching provider, status said only the new one (and dirty): not that the rows were built by the old
    one, which builtin-sqlite's `index` shows."""
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\nquokka sighting at the harbour\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync(reason="cli")
        assert mem.status()["index"] == {"provider": "none", "model": None, "lastSync": "cli"}
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        st = mem.status()
        assert (st["provider"], st["dirty"], st["index"]["provider"]) == ("hash", True, "none")
        mem.sync(reason="cli")
        st = mem.status()
        assert (st["dirty"], st["index"]["provider"], st["index"]["model"]) == (False, "hash", st["model"])


def test_a_document_pasted_as_the_query_is_cut_to_its_first_1024_words_with_a_warning(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    # 40,000 distinct words: each was a document-frequency probe of its own, and the search took minutes (or ran
    # into the server's statement limits). Now the core cuts every backend's query as builtin-sqlite cuts its own.
    import random
    import string

    rng = random.Random(7)
    pasted = " ".join(sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(8)) for _ in range(40_000)}))
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# Memory\n\nNothing of note.\n",
                                          "memory/2026-02-01.md": "# Feb\n\n- The porcupine enclosure was repaired.\n"})
    with open_pg(tmp_path, pg_server, pg_schema, ws, provider="none") as mem:
        mem.sync()
        resp = mem.search(f"porcupine {pasted}", min_score=0)
        assert [r.path for r in resp.results][:1] == ["memory/2026-02-01.md"]
        assert len(resp.warnings) == 1 and "first 1,024 were searched for" in resp.warnings[0], resp.warnings
        # A needle past the cut is not looked up (as on builtin-sqlite): the warning is what says so.
        assert mem.search(f"{pasted} porcupine", min_score=0).results == ()
