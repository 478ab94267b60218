"""The faiss backend: same answers as builtin-sqlite, never stale, crash-safe saves, rebuilt when out of date."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")

from symi_memory import load_config  # noqa: E402
from symi_memory.errors import BackendError  # noqa: E402
from symi_memory.manager import open_memory  # noqa: E402
from symi_memory.testing.fakes import HashEmbedder  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEVMEM = REPO / "bench" / "datasets" / "devmem"


def _open(state: Path, workspace: Path, backend: str, *, sqlite_vec: bool = True, units: str = "lines",
          **faiss: Any) -> Any:
    store = {"faiss": faiss, "vector": {"enabled": sqlite_vec}}
    cfg = load_config(None, state_dir=state, overrides={
        "plugins": {"slots": {"memory": backend}},
        "agents": {"defaults": {"memorySearch": {"provider": "hash", "store": store, "chunking": {"units": units}}}}})
    return open_memory(cfg, workspace=workspace, start=False)


def _wait_loaded(mem: Any, seconds: float = 20) -> bool:
    """Searches start the rebuild in the background: wait for it to land."""
    deadline = time.monotonic() + seconds
    while not mem.status()["vector"]["exactLoaded"] and time.monotonic() < deadline:
        mem.backend.vectors.ready()
        time.sleep(0.02)
    return bool(mem.status()["vector"]["exactLoaded"])


def _top(mem: Any, query: str, n: int = 5) -> list[tuple[str, int, int, float]]:
    return [(h.path, h.start_line, h.end_line, h.score) for h in mem.search(query, max_results=n, min_score=0).results]


def test_flat_gives_the_same_top_results_as_builtin_sqlite(tmp_path: Path) -> None:
    # Chunk vectors only: faiss ranks chunk vectors, the builtin scan ranks lines too (chunking.units), so
    # with units their candidate sets differ by design (test_faiss_scores_hits_with_their_lines).
    queries = [json.loads(line)["query"] for line in (DEVMEM / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    with _open(tmp_path / "a", DEVMEM / "workspace", "builtin-sqlite", units="off") as ref, \
            _open(tmp_path / "b", DEVMEM / "workspace", "faiss", units="off", index="flat") as fa:
        ref.sync()
        fa.sync()
        assert fa.status()["backend"] == "faiss"
        for q in queries[::3]:
            want, got = _top(ref, q), _top(fa, q)
            assert [w[:3] for w in want] == [g[:3] for g in got], q
            assert all(abs(w[3] - g[3]) < 1e-4 for w, g in zip(want, got, strict=True)), q
        assert fa.status()["vector"]["exactLoaded"] is True  # answered by faiss, not the sqlite-vec stand-in


def test_faiss_scores_hits_with_their_lines(tmp_path: Path) -> None:
    # With unit vectors faiss finds candidates by chunk vector; each hit is then scored like the builtin
    # engine scores it (chunk and best line), so scores mean the same under both backends.
    queries = [json.loads(line)["query"] for line in (DEVMEM / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    with _open(tmp_path / "a", DEVMEM / "workspace", "builtin-sqlite") as ref, \
            _open(tmp_path / "b", DEVMEM / "workspace", "faiss", index="flat") as fa:
        ref.sync()
        fa.sync()
        assert fa.backend.store.unit_count() > 0
        compared = 0
        for q in queries[::5]:
            want = {(w[0], w[1], w[2]): w[3] for w in _top(ref, q, 10)}
            for g in _top(fa, q, 10):
                if g[:3] in want:
                    assert abs(want[g[:3]] - g[3]) < 1e-4, q
                    compared += 1
        assert compared > 50


def _write_notes(ws: Path, count: int) -> None:
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (ws / "memory" / f"topic-{i:03d}.md").write_text(
            f"# Topic {i}\n\nNote {i} about token{i} and the shared garden project, entry {i * 7}.\n", encoding="utf-8")


def _assert_vector_side_is_current(mem: Any, query: str) -> list[int]:
    """Every rowid faiss returns exists, and its score is the cosine with the vector stored now."""
    backend = mem.backend
    qvec = HashEmbedder().embed_query(query)
    hits = backend.vectors.search(qvec, 20)
    rows = backend.store.chunk_rows([r for r, _ in hits])
    assert set(rows) == {r for r, _ in hits}, "faiss returned a deleted chunk"
    exact = backend.vectors.cosine(qvec, {r: rows[r][6] for r in rows})
    for rowid, score in hits:
        assert abs(exact[rowid] - score) < 1e-4, "faiss scored a chunk with an outdated vector"
    return [r for r, _ in hits]


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_edits_and_deletes_never_return_stale_chunks(tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    _write_notes(ws, 60)
    with _open(tmp_path / "state", ws, "faiss", index=kind, tombstoneRatio=0.5) as mem:
        mem.sync()
        assert any(h.path == "memory/topic-059.md" for h in mem.search("token59", min_score=0).results)
        # The last file holds the highest rowids: rewriting it makes SQLite reuse them for new chunks.
        (ws / "memory" / "topic-059.md").write_text("# Topic 59\n\nNow about the walrus harbour survey.\n",
                                                    encoding="utf-8")
        for i in range(10, 20):
            (ws / "memory" / f"topic-{i:03d}.md").unlink()
        mem.sync()
        for query in ("token59 garden project", "token15 garden", "walrus harbour survey", "shared garden project"):
            _assert_vector_side_is_current(mem, query)
            for hit in mem.search(query, max_results=10, min_score=0).results:
                assert hit.path not in {f"memory/topic-{i:03d}.md" for i in range(10, 20)}
                assert "token59" not in hit.snippet
        top = mem.search("walrus harbour survey", min_score=0).results[0]
        assert top.path == "memory/topic-059.md"
        status = mem.status()["vector"]
        assert status["exactLoaded"] is True and status["exactRows"] == 50
        if kind == "hnsw":
            assert status["exactTombstones"] == 11  # 10 deleted files + the rewritten one, under the 0.5 ratio
            for i in range(20, 45):
                (ws / "memory" / f"topic-{i:03d}.md").unlink()
            mem.sync()
            _assert_vector_side_is_current(mem, "shared garden project")
            status = mem.status()["vector"]
            assert status["exactTombstones"] == 0 and status["exactRows"] == 25  # ratio exceeded: rebuilt


CHILD = textwrap.dedent("""
    import sys, time
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    cfg = load_config(None, state_dir=sys.argv[1], overrides={
        "plugins": {"slots": {"memory": "faiss"}},
        "agents": {"defaults": {"memorySearch": {"provider": "hash", "store": {"faiss": {"index": "hnsw"}}}}}})
    mem = open_memory(cfg, workspace=sys.argv[2], start=False)
    vectors = mem.backend.vectors
    assert mem.status()["vector"]["exactLoaded"]
    print("ready", flush=True)
    while True:
        vectors._dirty = True
        vectors.save()
""")


def test_sigkill_during_save_leaves_the_previous_index_loadable(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write_notes(ws, 400)
    with _open(state, ws, "faiss", index="hnsw") as mem:
        mem.sync()
        before = _top(mem, "token123 garden")
    faiss_file = state / "memory" / "main.sqlite.faiss"
    assert faiss_file.is_file()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(state), str(ws)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        tmp = faiss_file.with_name(f"{faiss_file.name}.tmp{child.pid}")
        deadline = time.monotonic() + 20
        while not (tmp.exists() and tmp.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.0005)
        assert tmp.exists(), "the child never started a save"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    with _open(state, ws, "faiss", index="hnsw") as mem:
        # Loaded from the file at open (a rebuild would only start with the first search).
        assert mem.status()["vector"]["exactLoaded"] is True
        assert _top(mem, "token123 garden") == before
    assert not tmp.exists(), "the dead writer's temp file is cleaned up"


def test_an_index_that_no_longer_matches_is_rebuilt(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write_notes(ws, 30)
    with _open(state, ws, "faiss") as mem:
        mem.sync()
    faiss_file = state / "memory" / "main.sqlite.faiss"
    saved = faiss_file.read_bytes()
    # Another process (here builtin-sqlite) changes the index; the saved faiss file is now behind.
    (ws / "memory" / "topic-005.md").write_text("# Topic 5\n\nThe pelican ferry timetable.\n", encoding="utf-8")
    with _open(state, ws, "builtin-sqlite") as other:
        other.sync()
    with _open(state, ws, "faiss") as mem:
        assert mem.status()["vector"]["exactLoaded"] is False  # not trusted
        assert mem.search("pelican ferry timetable", min_score=0).results[0].path == "memory/topic-005.md"
        _assert_vector_side_is_current(mem, "pelican ferry timetable")
        assert _wait_loaded(mem)
        _assert_vector_side_is_current(mem, "pelican ferry timetable")
    assert faiss_file.read_bytes() != saved  # rewritten for the new generation
    # A damaged file and a changed index type are rebuilt too.
    faiss_file.write_bytes(faiss_file.read_bytes()[:200])
    with _open(state, ws, "faiss") as mem:
        assert mem.status()["vector"]["exactLoaded"] is False
        _assert_vector_side_is_current(mem, "pelican ferry timetable")
    with _open(state, ws, "faiss", index="hnsw") as mem:
        assert mem.status()["vector"]["exactLoaded"] is False
        _assert_vector_side_is_current(mem, "pelican ferry timetable")
        assert _wait_loaded(mem) and mem.status()["vector"]["exactIndex"] == "hnsw"
    with _open(state, ws, "faiss", index="hnsw") as mem:
        assert mem.status()["vector"]["exactLoaded"] is True  # same settings, same store: loaded as saved


@pytest.mark.parametrize("sqlite_vec", [True, False])
def test_a_search_never_builds_and_gets_exact_answers_meanwhile(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sqlite_vec: bool
) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write_notes(ws, 40)
    with _open(state, ws, "faiss", index="hnsw", sqlite_vec=sqlite_vec) as mem:
        mem.sync()
    (ws / "memory" / "topic-007.md").write_text("# Topic 7\n\nThe pelican ferry timetable.\n", encoding="utf-8")
    (ws / "memory" / "topic-008.md").unlink()
    with _open(state, ws, "builtin-sqlite", sqlite_vec=sqlite_vec) as other:  # another process writes
        other.sync()
    caplog.set_level(logging.INFO, logger="symi_memory.faiss")
    with _open(state, ws, "faiss", index="hnsw", sqlite_vec=sqlite_vec) as mem:
        assert mem.status()["vector"]["exactLoaded"] is False
        assert mem.search("pelican ferry timetable", min_score=0).results[0].path == "memory/topic-007.md"
        hits = _assert_vector_side_is_current(mem, "pelican ferry timetable")
        assert hits, "no vector results while the index is rebuilt"
        assert _wait_loaded(mem)
        assert _assert_vector_side_is_current(mem, "pelican ferry timetable")[0] == hits[0]
    builds = [r for r in caplog.records if r.getMessage().startswith("built faiss")]
    assert builds and all(r.threadName == "symi-faiss-build" for r in builds)  # never on the search thread


def test_close_does_not_wait_long_for_a_running_build(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write_notes(ws, 20)
    with _open(state, ws, "builtin-sqlite") as other:
        other.sync()
    mem = _open(state, ws, "faiss", index="flat")
    vectors = mem.backend.vectors
    with vectors._lock:  # holds the build at its last step, as a slow HNSW build would
        assert vectors.ready() is False
        started = time.monotonic()
        mem.close()
        assert time.monotonic() - started < 30  # generous for a loaded machine; without the cap it waited 600 s
    vectors._thread.join(5)
    assert not vectors._thread.is_alive() and vectors.status()["loaded"] is False


def test_missing_faiss_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # what an environment without faiss-cpu looks like
    with pytest.raises(BackendError, match=r'pip install "symi-memory\[faiss\]"'):
        _open(tmp_path / "state", tmp_path, "faiss")


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_indexes_find_the_exact_neighbours(kind: str) -> None:
    import numpy as np

    from symi_memory_faiss.indexes import build_index
    from symi_memory_faiss.settings import FaissSettings

    rng = np.random.default_rng(7)
    centres = rng.normal(size=(40, 64))
    data = (centres[rng.integers(0, 40, 8000)] + 0.3 * rng.normal(size=(8000, 64))).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    rowids = np.arange(1, 8001, dtype=np.int64) * 3
    index = build_index(FaissSettings(kind=kind, nprobe=8), 64, rowids, data)
    queries = data[rng.integers(0, 8000, 50)] + 0.05 * rng.normal(size=(50, 64)).astype(np.float32)
    found = 0
    for q in queries:
        q = (q / np.linalg.norm(q)).astype(np.float32).reshape(1, -1)
        exact = set(rowids[np.argsort(-(data @ q[0]))[:10]].tolist())
        found += len(exact & {r for r, _ in index.search(q, 10)})
    assert found / 500 >= 0.9


def test_a_save_in_progress_never_holds_up_a_search(tmp_path: Path) -> None:
    # A save of a large index takes seconds (1.8 GB at 1M HNSW); searches must not wait for it.
    # The save's temp file is a FIFO here, so the save blocks in open() until the test reads it.
    import threading

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "notes.md").write_text("".join(f"- note {i}: the marmot crossed ridge {i}\n" for i in range(60)))
    with _open(tmp_path / "s", ws, "faiss", index="hnsw") as mem:
        mem.sync()
        assert _wait_loaded(mem)
        vectors = mem.backend.vectors
        vectors._dirty = True  # the sync's own save is coalesced on a timer; ask for one now
        fifo = vectors.path.with_name(f"{vectors.path.name}.tmp{os.getpid()}")
        os.mkfifo(fifo)
        saver = threading.Thread(target=vectors.save, daemon=True)
        saver.start()
        time.sleep(0.2)
        assert saver.is_alive(), "the save is blocked on the FIFO"
        answered: list[Any] = []
        searcher = threading.Thread(target=lambda: answered.append(mem.search("marmot ridge 7").results), daemon=True)
        searcher.start()
        try:
            searcher.join(timeout=30)
            assert answered and answered[0], "the search answered while the save was still writing"
            assert saver.is_alive()
        finally:
            with open(fifo, "rb") as fh:  # let the save finish
                while fh.read(1 << 20):
                    pass
            saver.join(timeout=30)
        assert not saver.is_alive()


def test_the_configured_thread_count_holds_on_every_searching_thread(tmp_path: Path) -> None:
    """``store.faiss.threads`` is OpenMP's per-thread setting: a search from another thread than the one that
    opened the backend (serve's workers, an integrator's thread pool) runs with it too, not OpenMP's default."""
    import threading

    import faiss

    with _open(tmp_path / "s", DEVMEM / "workspace", "faiss", units="off", index="flat", threads=3) as mem:
        mem.sync()
        deadline = time.monotonic() + 20
        while not mem.backend.vectors.ready() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert mem.backend.vectors.ready()
        seen: list[Any] = []

        def search() -> None:
            hits = mem.backend.vectors.search([1.0] * mem.backend.store.vec_dims, 3)
            seen.append((len(hits), faiss.omp_get_max_threads()))

        worker = threading.Thread(target=search)
        worker.start()
        worker.join(30)
        assert seen == [(3, 3)]


def _journal_workspace(tmp_path: Path) -> tuple[Path, Path, str]:
    """A workspace of 10 filler notes and a 160-line journal of harbour ferry schedules: (workspace, state dir,
    the journal's text)."""
    from support.sqlite_memory import add_filler, write

    journal = "\n".join(f"- journal line {n}: the harbour ferry schedule changed again" for n in range(1, 161)) + "\n"
    ws = tmp_path / "ws"
    add_filler(ws, 10)
    write(ws, "memory/journal.md", journal)
    return ws, tmp_path / "state", journal


def test_a_rebuild_by_an_older_release_is_never_answered_from_the_old_faiss_index(tmp_path: Path) -> None:
    """The faiss index is kept for the store's (index id, generation): an already released version that drops and
    rebuilds the index numbers generations from 1 again and writes no index id, and reaching the generation a
    running manager built its faiss index at, that index (the old text's vectors under the same rowids) must not
    answer. The running manager's answers are a fresh process's."""
    from support.sqlite_memory import rebuilt_by_older_release, wait_for, write

    from symi_memory.index.db import SCHEMA_VERSION

    ws, state, journal = _journal_workspace(tmp_path)
    query = "mountain railway schedule"
    with _open(state, ws, "faiss", units="off", index="flat") as running:
        running.sync()
        wait_for(running.backend.vectors.ready)
        cached = running.backend.store.generation()
        _top(running, query)
        write(ws, "memory/journal.md", journal.replace("harbour ferry", "mountain railway"))
        running.backend.store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        with _open(state, ws, "faiss", units="off", index="flat") as other:  # drops every table, rebuilds
            assert other.sync().full
            path = other.status()["dbPath"]
        rebuilt_by_older_release(path, cached)
        assert running.backend.store.generation() == cached
        _top(running, query)  # answered exactly while the faiss index is rebuilt
        wait_for(running.backend.vectors.ready)
        got = _top(running, query)
    with _open(state, ws, "faiss", units="off", index="flat") as fresh:
        wait_for(fresh.backend.vectors.ready)
        assert got == _top(fresh, query)
        assert got[0][0] == "memory/journal.md"


@pytest.mark.parametrize("replaced_by", ["older-release", "unreadable", "rebuilt-in-place"])
def test_a_saved_faiss_index_is_never_loaded_for_another_index_at_its_generation(
        tmp_path: Path, replaced_by: str) -> None:
    """The saved faiss file is kept for its SQLite index by the store id in its header (meta ``faiss_store_uid``),
    beside the generation: every way the SQLite index becomes another one (an older release's drop and rebuild,
    numbering generations from 1 and writing no index id; a fresh index in place of an unreadable file) starts a
    new meta, so a saved file never matches it, even at the same generation, chunk count and rowids. A store id
    that outlived its index in place (meta kept, the index id gone) is bound to the old index id: never taken."""
    from support.sqlite_memory import rebuilt_by_older_release, wait_for, write

    from symi_memory.index.db import SCHEMA_VERSION

    ws, state, journal = _journal_workspace(tmp_path)
    query = "canal railway schedule"
    with _open(state, ws, "faiss", units="off", index="flat") as first:
        first.sync()
        wait_for(first.backend.vectors.ready)
        saved_at = first.backend.store.generation()
        path = first.status()["dbPath"]
    faiss_file = state / "memory" / "main.sqlite.faiss"
    header = json.loads(faiss_file.read_bytes().split(b"\n", 2)[1])
    assert header["generation"] == saved_at
    write(ws, "memory/journal.md", journal.replace("harbour ferry", "canal railway"))  # as long: as many chunks
    if replaced_by == "older-release":
        with _open(state, ws, "builtin-sqlite", units="off") as other:
            other.backend.store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        with _open(state, ws, "builtin-sqlite", units="off") as other:  # its open drops every table
            assert other.sync().full
        rebuilt_by_older_release(path, saved_at)
    elif replaced_by == "rebuilt-in-place":
        # Rebuilt without a drop (same rowids, as many vectors), then renumbered under no index id as an older
        # release's rebuild leaves it: the store id in meta outlives the index it was claimed for.
        with _open(state, ws, "builtin-sqlite", units="off") as other:
            assert other.sync(force=True).full
        rebuilt_by_older_release(path, saved_at)
        assert _meta(path)["faiss_store_uid"] == header["store"]
    else:
        Path(path).write_bytes(b"not a database, " * 512)
        for suffix in ("-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
        with _open(state, ws, "builtin-sqlite", units="off") as other:  # sets the file aside, indexes afresh
            other.sync()
            n = 0
            while other.backend.store.generation() < saved_at:
                n += 1
                write(ws, "memory/notes/n00.md", f"# Note\n\nfiller {n}\n" + "project meeting notes\n" * 8)
                other.sync()
            assert other.backend.store.generation() == saved_at
    with _open(state, ws, "faiss", units="off", index="flat") as reopened:
        store = reopened.backend.store
        assert store.generation() == saved_at
        assert store.vector_stats(header["dims"]) == (header["live"], header["rowidSum"])  # only the store id differs
        assert reopened.status()["vector"]["exactLoaded"] is False
        wait_for(reopened.backend.vectors.ready)
        got = _top(reopened, query)
        _assert_vector_side_is_current(reopened, query)
    with _open(tmp_path / "clean", ws, "faiss", units="off", index="flat") as clean:
        clean.sync()
        wait_for(clean.backend.vectors.ready)
        assert got == _top(clean, query)
        assert got[0][0] == "memory/journal.md"


def _hold_write(db_path: str) -> subprocess.Popen[str]:
    """Another process holding SQLite's write lock on the index (an open ``BEGIN IMMEDIATE`` with a write in it)
    until its stdin closes."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, apsw
        conn = apsw.Connection(sys.argv[1])
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('held_by_test', '1')")
        print("held", flush=True)
        sys.stdin.read()
        conn.execute("COMMIT")
        """), db_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def _meta(db_path: str) -> dict[str, str]:
    import apsw

    conn = apsw.Connection(db_path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()


def test_the_first_faiss_open_beside_another_processs_long_write_answers_and_claims_its_store_id_later(
        tmp_path: Path) -> None:
    """Switching an index to faiss writes the store id its saved file is kept for (meta ``faiss_store_uid``): with
    another process holding SQLite's write lock, the open must not wait for it nor fail "database is locked"; it
    answers (exactly, from the store) and claims the id once the write lock is free, for the index id it read."""
    from support.sqlite_memory import wait_for

    ws, state, _ = _journal_workspace(tmp_path)
    with _open(state, ws, "builtin-sqlite", units="off") as first:
        first.sync()
        path = first.status()["dbPath"]
    assert "faiss_store_uid" not in _meta(path)
    holder = _hold_write(path)
    try:
        started = time.monotonic()
        with _open(state, ws, "faiss", units="off", index="flat") as fa:
            hits = _top(fa, "harbour ferry schedule")
            took = time.monotonic() - started
            assert hits and hits[0][0] == "memory/journal.md"
            assert took < 8, f"the open and first search took {took:.1f} s beside another process's write"
            wait_for(fa.backend.vectors.ready)  # built from the store meanwhile
            assert _top(fa, "harbour ferry schedule") == hits
            assert "faiss_store_uid" not in _meta(path)  # not claimed: the write lock was never free
            holder.communicate("", timeout=30)
        # Closing saved the index, claiming the store id first (the lock is free now), bound to the index id.
        meta = _meta(path)
        assert meta["faiss_store_uid"] and meta["faiss_store_index"] == meta["index_id"], meta
        header = json.loads((state / "memory" / "main.sqlite.faiss").read_bytes().split(b"\n", 2)[1])
        assert header["store"] == meta["faiss_store_uid"]
        with _open(state, ws, "faiss", units="off", index="flat") as again:
            assert again.status()["vector"]["exactLoaded"] is True  # the saved file, loaded at open
            assert _top(again, "harbour ferry schedule") == hits
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate(timeout=30)


def test_a_store_id_from_before_binding_keeps_its_saved_faiss_file(tmp_path: Path) -> None:
    """An index whose store id a release before binding wrote (no ``faiss_store_index``) loads its saved file at
    the next open, as before: an upgrade rebuilds no faiss index."""
    import apsw

    ws, state, _ = _journal_workspace(tmp_path)
    with _open(state, ws, "faiss", units="off", index="flat") as first:
        first.sync()
        path = first.status()["dbPath"]
    conn = apsw.Connection(path)
    with conn:
        conn.execute("DELETE FROM meta WHERE key = 'faiss_store_index'")
    conn.close()
    with _open(state, ws, "faiss", units="off", index="flat") as again:
        assert again.status()["vector"]["exactLoaded"] is True
        _assert_vector_side_is_current(again, "harbour ferry schedule")


def test_a_faiss_index_that_cannot_be_saved_says_why_in_status(tmp_path: Path) -> None:
    """A save that fails (here a folder in the way of the file; a full disk the same) leaves every later open
    rebuilding from SQLite. It was logged once and status showed nothing."""
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write_notes(ws, 20)
    faiss_file = state / "memory" / "main.sqlite.faiss"
    faiss_file.mkdir(parents=True)
    with _open(state, ws, "faiss") as mem:
        mem.sync()
        assert mem.backend.vectors.save() is False  # what the timed save after a sync does
        st = mem.status()
        assert st["vector"]["exactError"] and str(faiss_file) in st["vector"]["exactError"]
        assert st["lastError"] == st["vector"]["exactError"]
        faiss_file.rmdir()
        assert mem.backend.vectors.save() is True
        st = mem.status()
        assert st["vector"]["exactError"] is None and st["lastError"] is None
    with _open(state, ws, "faiss") as mem:
        assert mem.status()["vector"]["exactLoaded"] is True


SYNC_THEN_KILLED = textwrap.dedent("""
    import os, signal, sys
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    cfg = load_config(None, state_dir=sys.argv[1], overrides={
        "plugins": {"slots": {"memory": "faiss"}},
        "agents": {"defaults": {"memorySearch": {"provider": "hash"}}}})
    mem = open_memory(cfg, workspace=sys.argv[2], start=False)
    mem.sync()
    os.kill(os.getpid(), signal.SIGKILL)  # committed to SQLite; the faiss save (a timer, or close) never ran
""")


def test_the_next_sync_repairs_a_faiss_file_left_behind_by_a_killed_process(tmp_path: Path) -> None:
    """A process killed after its sync committed but before the faiss save leaves a file that no longer matches.
    The next `index` found nothing to write and left it so: every later process answered from the exact scan and
    started a rebuild it then abandoned at exit."""
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write_notes(ws, 40)
    with _open(state, ws, "faiss") as mem:
        mem.sync()
    (ws / "memory" / "topic-003.md").write_text("# Topic 3\n\nThe pelican ferry timetable.\n", encoding="utf-8")
    child = subprocess.run([sys.executable, "-c", SYNC_THEN_KILLED, str(state), str(ws)], timeout=120)
    assert child.returncode == -signal.SIGKILL
    with _open(state, ws, "faiss") as mem:
        assert mem.status()["vector"]["exactLoaded"] is False  # the file is behind the store
        assert mem.sync().files_indexed == 0  # nothing left to write: the killed sync committed it all
        assert mem.status()["vector"]["exactLoaded"] is True
    with _open(state, ws, "faiss") as mem:
        assert mem.status()["vector"]["exactLoaded"] is True  # loaded as saved: no rebuild in this process
        _assert_vector_side_is_current(mem, "pelican ferry timetable")
