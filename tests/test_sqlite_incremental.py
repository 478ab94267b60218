"""builtin-sqlite incremental sync, embedding cache, schema version and fingerprint (issue 3, items 7 and 8)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.sqlite_memory import add_filler, open_mem, rebuilt_by_older_release, wait_for, write

from symi_memory.index.db import SCHEMA_VERSION

JOURNAL = "\n".join(f"- journal line {n}: the harbour ferry schedule changed again" for n in range(1, 161)) + "\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w, 10)
    write(w, "memory/journal.md", JOURNAL)
    return w


def rows(mem, sql: str) -> list:  # type: ignore[no-untyped-def]
    """Rows from the index through the store's own reader (sees the last commit, WAL included)."""
    return mem.backend.store._read(sql).fetchall()


def embedder(mem):  # type: ignore[no-untyped-def]
    """The live HashEmbedder behind the manager (it counts provider calls)."""
    p = mem.backend.choice.provider
    assert type(p).__name__ == "HashEmbedder"
    return p


def db_rows(mem, sql: str) -> list:  # type: ignore[no-untyped-def]
    con = sqlite3.connect(mem.status()["dbPath"])
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def index_vectors(mem) -> int:  # type: ignore[no-untyped-def]
    """How many distinct vectors the index refers to: each chunk's and each of its lines' (chunking.units)."""
    return int(rows(mem, "SELECT COUNT(*) FROM (SELECT vector FROM chunks UNION SELECT vector FROM chunk_units)")[0][0])


INDEXED_HASHES = ("SELECT hash FROM chunks UNION "
                  "SELECT e.hash FROM chunk_units u JOIN embedding_cache e ON e.id = u.vector")


def test_unchanged_files_are_not_reindexed(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        first = mem.sync()
        # Every chunk and every line worth a vector is embedded once (lines shared by overlapping chunks once).
        assert first.full and first.files_indexed == 11 and first.chunks_written > 11
        assert first.embeddings_computed == index_vectors(mem) > first.chunks_written
        calls = embedder(mem).calls
        again = mem.sync()
        assert (again.full, again.files_indexed, again.chunks_written, again.embeddings_computed) == (False, 0, 0, 0)
        assert embedder(mem).calls == calls
    # A new process (fresh manager) sees the same index as current.
    with open_mem(tmp_path, ws) as mem:
        assert mem.status()["dirty"] is False
        report = mem.sync()
        assert report.files_indexed == 0 and embedder(mem).calls == 0


def test_changed_file_embeds_only_its_new_chunks(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        journal_chunks = mem.status()["chunks"] - 10
        assert journal_chunks >= 4
        write(ws, "memory/journal.md", JOURNAL + "- journal line 161: moved the dentist appointment\n")
        calls = embedder(mem).calls
        report = mem.sync()
        assert report.files_indexed == 1
        assert report.chunks_written == journal_chunks
        # Only the tail chunk and the new line changed; the other chunks and lines come from the cache.
        assert report.embeddings_computed == 2
        assert report.embeddings_cached == journal_chunks - 1 + 160
        # One batch for the new chunk and line (the test provider has no synonym threshold: no word vectors).
        assert embedder(mem).calls == calls + 1
        assert [h.path for h in mem.search("dentist appointment").results][:1] == ["memory/journal.md"]


def test_touched_but_identical_file_is_not_reembedded(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        p = ws / "memory" / "journal.md"
        st = p.stat()
        import os

        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        assert mem.status()["dirty"] is True
        calls = embedder(mem).calls
        report = mem.sync()
        assert report.chunks_written == 0 and embedder(mem).calls == calls
        assert mem.status()["dirty"] is False


def test_forced_reindex_with_warm_cache_makes_no_embedding_calls(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        before = mem.search("harbour ferry schedule").results
    with open_mem(tmp_path, ws) as mem:
        report = mem.sync(force=True)
        assert report.full and report.files_indexed == 11
        assert report.embeddings_computed == 0 and report.embeddings_cached == index_vectors(mem)
        assert embedder(mem).calls == 0
        after = mem.search("harbour ferry schedule").results
        assert [(h.path, h.start_line, h.score) for h in after] == [(h.path, h.start_line, h.score) for h in before]


def test_cache_keeps_the_index_vectors_and_prunes_the_rest_to_max_entries(tmp_path: Path, ws: Path) -> None:
    # Schema 5 stores each vector once, in the cache: the index's own vectors are never pruned,
    # and maxEntries bounds the total by dropping vectors of text no longer indexed, oldest first.
    with open_mem(tmp_path, ws, {"cache": {"maxEntries": 10}}) as mem:
        first = mem.sync()
        assert first.chunks_written > 10
        indexed = len({h for (h,) in rows(mem, INDEXED_HASHES)})
        assert mem.status()["cache"] == {"enabled": True, "entries": indexed, "maxEntries": 10}
        old_journal = {h for (h,) in rows(mem, "SELECT hash FROM chunks WHERE path='memory/journal.md'")}
        write(ws, "memory/journal.md", JOURNAL.replace("ferry", "tram"))  # every chunk's text changes
        report = mem.sync()
        assert not report.full and report.files_indexed == 1
        now = {h for (h,) in rows(mem, INDEXED_HASHES)}
        cached = {r[0] for r in rows(mem, "SELECT hash FROM embedding_cache")}
        assert now <= cached, "every indexed chunk and line keeps its vector"
        assert cached == now, "vectors of text no longer indexed went, beyond maxEntries"
        assert old_journal - now, "the edit changed at least one chunk's text"
        assert mem.status()["cache"]["entries"] == len(now)


def test_cache_disabled_always_embeds(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"cache": {"enabled": False}}) as mem:
        mem.sync()
        # The vectors the index needs are stored (once); nothing else is kept.
        indexed = len({h for (h,) in rows(mem, INDEXED_HASHES)})
        assert mem.status()["cache"]["entries"] == indexed
        report = mem.sync(force=True)
        assert report.embeddings_computed == indexed > report.chunks_written > 0
        assert mem.status()["cache"]["entries"] == indexed


# ------------------------------------------------------------------- schema and identity


def test_older_schema_version_is_rebuilt(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        db = mem.status()["dbPath"]
    con = sqlite3.connect(db)
    # Schema 3 is migrated in place (tests/test_recall_defaults.py); anything older is dropped and rebuilt.
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", ("2",))
    con.commit()
    con.close()
    with open_mem(tmp_path, ws) as mem:
        st = mem.status()
        assert (st["files"], st["chunks"], st["dirty"]) == (0, 0, True)
        report = mem.sync()
        assert report.full and report.files_indexed == 11
        assert [h.path for h in mem.search("harbour ferry").results][:1] == ["memory/journal.md"]
        assert db_rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]


def test_foreign_old_layout_is_never_misread(tmp_path: Path, ws: Path) -> None:
    db = tmp_path / "state" / "memory" / "main.sqlite"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
        "INSERT INTO meta VALUES ('schema_version', '1');"
        "CREATE TABLE files (path TEXT PRIMARY KEY, hash TEXT);"
        "INSERT INTO files VALUES ('memory/journal.md', 'abc');"
        "CREATE TABLE chunks (id TEXT PRIMARY KEY, path TEXT, line INTEGER, body TEXT);"
        "INSERT INTO chunks VALUES ('x', 'memory/ghost.md', 1, 'ghost text about the harbour ferry');"
    )
    con.commit()
    con.close()
    with open_mem(tmp_path, ws) as mem:
        assert mem.status()["files"] == 0
        mem.sync()
        paths = {h.path for h in mem.search("harbour ferry").results}
        assert "memory/journal.md" in paths and "memory/ghost.md" not in paths


def test_newer_schema_version_is_rebuilt_too(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        db = mem.status()["dbPath"]
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with open_mem(tmp_path, ws) as mem:
        assert mem.status()["files"] == 0
        assert mem.sync().full


@pytest.mark.parametrize("change", [
    {"chunking": {"tokens": 200}},
    {"chunking": {"overlap": 10}},
    {"model": "hash-256"},
    {"provider": "none"},
])
def test_identity_change_forces_a_full_reindex(tmp_path: Path, ws: Path, change: dict) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        old_chunks = mem.status()["chunks"]
        assert mem.sync().full is False
    with open_mem(tmp_path, ws, change) as mem:
        assert mem.status()["dirty"] is True
        report = mem.sync()
        assert report.full and report.files_indexed == 11
        st = mem.status()
        if "chunking" in change and "tokens" in change["chunking"]:
            assert st["chunks"] > old_chunks
        if change.get("model") == "hash-256":
            assert st["vector"]["dims"] == 256 and report.embeddings_computed == index_vectors(mem)
            assert mem.search("harbour ferry schedule").mode == "hybrid"
        if change.get("provider") == "none":
            assert mem.search("harbour ferry schedule").mode == "fts-only"
        assert mem.search("harbour ferry schedule").results[0].path == "memory/journal.md"
        assert mem.sync().full is False


def test_a_rebuild_by_another_schema_version_never_reuses_a_generation(tmp_path: Path, ws: Path) -> None:
    """An open by another schema version drops and rebuilds the index: the numbering goes on from the old generation.

    Every cache of a search (rows, term counts, document frequencies, the scan copy) is kept for a generation:
    numbering again from 1 gave the rebuilt index a generation a running manager had cached other text for,
    and its searches answered with the text the files no longer hold."""
    def generation(mem) -> int:  # type: ignore[no-untyped-def]
        return int(rows(mem, "SELECT value FROM meta WHERE key='generation'")[0][0])

    with open_mem(tmp_path, ws) as running:
        running.sync()
        before = generation(running)
        assert any("harbour ferry" in h.snippet for h in running.search("harbour ferry").results)
        # As another version's open finds it (written through the index's own SQLite: a second SQLite library
        # in one process drops the first one's file locks when it closes the file).
        running.backend.store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        write(ws, "memory/journal.md", JOURNAL.replace("harbour ferry", "mountain railway"))
        with open_mem(tmp_path, ws) as other:  # its open drops every table
            assert other.sync().full
            assert generation(other) > before
        hits = running.search("mountain railway").results
        assert hits and all("harbour ferry" not in h.snippet for h in hits)
        assert any("mountain railway" in h.snippet for h in hits)


def _answers(mem, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.snippet for h in mem.search(query).results]


def _generation_of(mem) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    got = dict(rows(mem, "SELECT key, value FROM meta WHERE key IN ('generation', 'touches')"))
    return int(got.get("generation") or 0), int(got.get("touches") or 0)


def test_a_rebuild_by_an_older_release_numbering_from_1_never_reaches_a_cached_generation(
        tmp_path: Path, ws: Path) -> None:
    """An already released version drops and rebuilds the index numbering generations from 1 again, and knows
    no index id: a running manager's searches then read the new text, never its caches of the old index.

    Simulated by the state such a rebuild leaves once it reached the generation the running manager cached:
    every table dropped and the new text indexed (chunk rowids from 1 again), then no ``index_id`` in meta
    and the generation and touches reset (written by another connection, as the older release's would)."""

    with open_mem(tmp_path, ws) as running:
        running.sync()
        cached = _generation_of(running)
        first_id = rows(running, "SELECT value FROM meta WHERE key = 'index_id'")
        assert any("harbour ferry" in s for s in _answers(running, "harbour ferry"))
        assert any("harbour ferry" in s for s in _answers(running, "mountain railway harbour"))
        write(ws, "memory/journal.md", JOURNAL.replace("harbour ferry", "mountain railway"))
        running.backend.store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        with open_mem(tmp_path, ws) as other:  # drops every table and rebuilds
            assert other.sync().full
            path = other.status()["dbPath"]
        rebuilt_by_older_release(path, cached[0])
        assert cached[1] == 0 and _generation_of(running) == cached
        hits = _answers(running, "mountain railway")
        assert hits and all("harbour ferry" not in s for s in hits)
        assert any("mountain railway" in s for s in hits)
        # The running manager gives the index an id of its own (off the search's thread), another than the one
        # it cached the old text for; its searches go on answering from the file.
        given = wait_for(lambda: rows(running, "SELECT value FROM meta WHERE key = 'index_id'"))
        assert given != first_id
        hits = _answers(running, "mountain railway")
        assert hits and all("harbour ferry" not in s for s in hits)
        assert any("mountain railway" in s for s in hits)


def test_an_unreadable_index_set_aside_never_answers_from_the_old_files_caches(tmp_path: Path, ws: Path) -> None:
    """An open that finds the index file unreadable moves it aside and builds a fresh index, numbered from 1:
    a running manager's search on a new thread (serve's pool) opens the fresh file, and must answer from it,
    never from what it cached for the old file at the same generation number."""
    import os
    import threading

    with open_mem(tmp_path, ws) as running:
        running.sync()
        cached = _generation_of(running)
        assert any("harbour ferry" in s for s in _answers(running, "harbour ferry"))
        assert any("harbour ferry" in s for s in _answers(running, "mountain railway harbour"))
        path = running.status()["dbPath"]
        # Something (a file sync, a bad copy) replaced the index file with one that is not a database (and took
        # its write-ahead log: else SQLite reads every page from the log); this process keeps the old ones open.
        garbage = tmp_path / "garbage"
        garbage.write_bytes(b"not a database, " * 512)
        os.replace(garbage, path)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        write(ws, "memory/journal.md", JOURNAL.replace("harbour ferry", "mountain railway"))
        with open_mem(tmp_path, ws) as other:  # sets the file aside, indexes afresh
            assert list(Path(path).parent.glob("*.unreadable-*"))
            other.sync()
            n = 0
            while _generation_of(other) < cached:  # up to the generation the running manager cached
                n += 1
                write(ws, "memory/extra.md", f"- extra note {n}\n")
                other.sync()
            assert _generation_of(other) == cached
        got: list[list[str]] = []
        thread = threading.Thread(target=lambda: got.append(_answers(running, "mountain railway")))
        thread.start()
        thread.join()
        assert got and got[0] and all("harbour ferry" not in s for s in got[0])
        assert any("mountain railway" in s for s in got[0])



def test_giving_an_index_its_id_never_holds_up_the_close_while_another_process_writes(
        tmp_path: Path, ws: Path) -> None:
    """A running manager's search that finds an index without an id (an older release rebuilt it) gives it one
    on a thread of its own. While another process holds the write lock that thread must not hold the manager's
    own writer lock (which its syncs and its close take): closing the manager (serve's shutdown) does not wait
    for the other process's write. Once that write commits, the manager's next search gives the index its id."""
    import threading
    import time

    import apsw

    with open_mem(tmp_path, ws) as running:
        running.sync()
        store = running.backend.store
        other = apsw.Connection(running.status()["dbPath"])
        other.set_busy_timeout(10_000)
        try:
            with other:  # what the older release's rebuild leaves: no index id
                other.execute("DELETE FROM meta WHERE key = 'index_id'")
            other.execute("BEGIN IMMEDIATE")  # and its next write, a long one, holds the lock
            assert _answers(running, "harbour ferry")  # the search starts the thread giving the id
            time.sleep(0.5)
            free = store.lock.acquire(timeout=1)
            if free:
                store.lock.release()
            assert free
            other.execute("COMMIT")
            assert _answers(running, "harbour ferry")  # sees the other process's commit: gives the id now
            assert wait_for(lambda: rows(running, "SELECT value FROM meta WHERE key = 'index_id'"))
            with other:
                other.execute("DELETE FROM meta WHERE key = 'index_id'")
            other.execute("BEGIN IMMEDIATE")
            assert _answers(running, "harbour ferry")
            time.sleep(0.5)
            release = threading.Timer(6, lambda: other.execute("COMMIT"))
            release.start()
            started = time.monotonic()
            running.close()
            closed = time.monotonic() - started
            release.join()
        finally:
            other.close()
    assert closed < 3


def test_a_rebuild_after_another_process_dropped_the_index_stores_its_own_models_vectors(
        tmp_path: Path, ws: Path) -> None:
    """An open by another schema version drops every table, the embedders' too, and its syncs number the providers
    they meet from 1 again: a running manager that kept its provider's embedder id from the old index read another
    model's vectors as its own from the cache and stored them for its chunks (a 384-d model's index holding
    256-d vectors: status reported 256 dims and searches scored chunks by the other model's vectors). Its index
    must be the one a clean build gives."""

    def top(mem) -> list[tuple[str, int, float]]:  # type: ignore[no-untyped-def]
        return [(h.path, h.start_line, h.score) for h in mem.search("harbour ferry schedule").results]

    with open_mem(tmp_path / "clean", ws) as clean:
        clean.sync()
        expected = top(clean)
        assert clean.status()["vector"]["dims"] == 384
    with open_mem(tmp_path, ws) as running:
        running.sync()
        running.backend.store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        with open_mem(tmp_path, ws, {"model": "hash-256"}) as other:  # its open drops every table
            assert other.sync().full
            assert other.status()["vector"]["dims"] == 256
        report = running.sync()  # the index is another model's now: rebuilt with this manager's
        assert report.full
        assert running.status()["vector"]["dims"] == 384
        assert top(running) == expected
        assert report.embeddings_cached == 0  # the cache holds no vector of this model's in the new index
    with open_mem(tmp_path, ws) as fresh:
        assert fresh.sync().full is False
        assert fresh.status()["vector"]["dims"] == 384
        assert top(fresh) == expected


def test_the_first_open_of_an_index_from_before_ids_never_waits_for_another_processs_write(
        tmp_path: Path, ws: Path) -> None:
    """An index a release from before index ids built has none: this version's first open gives it one. While
    another process holds SQLite's write lock (an older release's long sync) that open must not wait for it, nor
    fail after the busy timeout ("the index is busy"): it opens at once and answers searches; the id is written
    once the write lock is free."""
    import time

    import apsw

    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        path = mem.status()["dbPath"]
    other = apsw.Connection(path)
    other.set_busy_timeout(10_000)
    try:
        with other:  # as a release from before ids left it
            other.execute("DELETE FROM meta WHERE key = 'index_id'")
        other.execute("BEGIN IMMEDIATE")  # and its next write, a long one, holds the lock
        started = time.monotonic()
        with open_mem(tmp_path, ws) as mem:
            opened = time.monotonic() - started
            assert any("harbour ferry" in s for s in _answers(mem, "harbour ferry"))
            assert not rows(mem, "SELECT value FROM meta WHERE key = 'index_id'")
            other.execute("COMMIT")
            assert any("harbour ferry" in s for s in _answers(mem, "harbour ferry"))
            given = wait_for(lambda: rows(mem, "SELECT value FROM meta WHERE key = 'index_id'"))
            assert any("harbour ferry" in s for s in _answers(mem, "harbour ferry"))
        assert opened < 3
        with open_mem(tmp_path, ws) as mem:  # kept: the next open writes nothing
            assert rows(mem, "SELECT value FROM meta WHERE key = 'index_id'") == given
    finally:
        other.close()
