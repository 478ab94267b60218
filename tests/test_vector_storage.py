"""Each vector stored once (schema 5), and indexes written by schema 3/4 migrated in place on open."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.sqlite_memory import add_filler, open_mem, write

from symi_memory import hookimpl
from symi_memory.index.db import SCHEMA_VERSION, load_vec_extension
from symi_memory.specs import ProviderSpec
from symi_memory.testing import HashEmbedder

JOURNAL = "\n".join(f"- journal line {n}: the harbour ferry schedule changed again" for n in range(1, 161)) + "\n"

# The tables schema 3 and 4 wrote: a vector in chunks.embedding, in chunks_vec and in the cache.
OLD_LAYOUT = """
CREATE TABLE chunks_v3 (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, path TEXT NOT NULL, source TEXT NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL, embedding BLOB);
CREATE TABLE cache_v3 (provider TEXT NOT NULL, model TEXT NOT NULL, fingerprint TEXT NOT NULL, hash TEXT NOT NULL,
    dims INTEGER NOT NULL, embedding BLOB NOT NULL, used_at REAL NOT NULL, PRIMARY KEY (provider, model, fingerprint, hash));
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w, 10)
    write(w, "memory/journal.md", JOURNAL)
    return w


def rows(mem, sql: str) -> list:  # type: ignore[no-untyped-def]
    return mem.backend.store._read(sql).fetchall()


def downgrade_to_old_layout(db: Path, version: str, *, extra_cache: bool = True) -> int:
    """Rewrite a schema-5 index as schema 3/4 laid it out (three copies of each vector); returns chunk count."""
    con = apsw.Connection(str(db))
    assert load_vec_extension(con, None).available
    with con:
        con.execute(OLD_LAYOUT)
        con.execute("INSERT INTO chunks_v3 SELECT c.rowid, c.id, c.path, c.source, c.start_line, c.end_line, c.hash, "
                    "c.text, v.embedding FROM chunks c LEFT JOIN embedding_cache v ON v.id = c.vector")
        con.execute("INSERT INTO cache_v3 SELECT e.provider, e.model, e.fingerprint, v.hash, length(v.embedding) / 4, "
                    "v.embedding, v.used_at FROM embedding_cache v JOIN embedders e ON e.id = v.embedder")
        if extra_cache:  # a cached vector of text no longer indexed survives the migration
            con.execute("INSERT INTO cache_v3 SELECT provider, model, fingerprint, 'gone-text-hash', dims, embedding, 0 "
                        "FROM cache_v3 LIMIT 1")
        dims = con.execute("SELECT length(embedding) / 4 FROM chunks_v3 WHERE embedding IS NOT NULL").fetchone()[0]
        con.execute(f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{dims}] distance_metric=cosine)")
        con.execute("INSERT INTO chunks_vec(rowid, embedding) SELECT rowid, embedding FROM chunks_v3 "
                    "WHERE embedding IS NOT NULL")
        con.execute("DROP TABLE chunks")
        con.execute("DROP TABLE embedding_cache")
        con.execute("DROP TABLE embedders")
        con.execute("ALTER TABLE chunks_v3 RENAME TO chunks")
        con.execute("ALTER TABLE cache_v3 RENAME TO embedding_cache")
        con.execute("CREATE INDEX chunks_path ON chunks(path)")
        con.execute("CREATE INDEX embedding_cache_used ON embedding_cache(used_at)")
        con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (version,))
        count = con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    con.close()
    return int(count)


def test_each_vector_is_stored_once(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        tables = {r[0] for r in rows(mem, "SELECT name FROM sqlite_master WHERE type='table'")}
        assert "chunks_vec" not in tables
        assert "embedding" not in {r[1] for r in rows(mem, "PRAGMA table_info(chunks)")}
        with_vector = rows(mem, "SELECT COUNT(vector) FROM chunks")[0][0]
        assert with_vector == mem.status()["chunks"] > 0
        # Unit (line) vectors live in the same cache: each distinct text's vector once, for chunks and lines alike.
        referenced = rows(mem, "SELECT COUNT(*) FROM (SELECT vector FROM chunks UNION SELECT vector FROM chunk_units)")[0][0]
        units = rows(mem, "SELECT COUNT(*) FROM chunk_units")[0][0]
        assert units > 0
        assert 0 < rows(mem, "SELECT COUNT(*) FROM embedding_cache")[0][0] == referenced <= with_vector + units
        assert rows(mem, "SELECT COUNT(*) FROM (SELECT embedder, hash FROM embedding_cache GROUP BY 1, 2 "
                         "HAVING COUNT(*) > 1)")[0][0] == 0
        assert mem.search("harbour ferry schedule").results[0].path == "memory/journal.md"


def test_in_database_knn_reads_the_one_copy(tmp_path: Path, ws: Path) -> None:
    # sqlite-vec answers exactly what the numpy scan answers, from the stored vectors.
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        backend = mem.backend
        assert backend.store.vec_dims
        q = backend.choice.provider.embed_query("harbour ferry schedule")
        from symi_memory.index.store import pack_vector

        in_db = backend.store.vec_knn(pack_vector(q), 5, backend.vectors.unit_weight)
        scanned = backend.vectors.search(q, 5)
        assert [r for r, _ in in_db] == [r for r, _ in scanned]
        assert all(abs(a[1] - b[1]) < 1e-5 for a, b in zip(in_db, scanned, strict=True))


# Schema 3/4 indexes had no unit vectors: this test is about the chunk vectors' layout, so units stay off
# (test_unit_vectors.py covers an old index gaining its units).
NO_UNITS = {"chunking": {"units": "off"}}


@pytest.mark.parametrize("version", ["3", "4"])
def test_old_layout_is_migrated_in_place_and_stays_searchable(tmp_path: Path, ws: Path, version: str) -> None:
    with open_mem(tmp_path, ws, NO_UNITS) as mem:
        mem.sync()
        before = [(h.path, h.start_line, round(h.score, 6)) for h in mem.search("harbour ferry schedule").results]
        db = Path(mem.status()["dbPath"])
    chunks = downgrade_to_old_layout(db, version)
    old_size = db.stat().st_size
    with open_mem(tmp_path, ws, NO_UNITS) as mem:
        # Compacted once after the migration: the dropped copies do not stay in the file.
        assert rows(mem, "SELECT COUNT(*) FROM meta WHERE key='compact_pending'") == [(0,)]
        assert db.stat().st_size < old_size
        assert rows(mem, "PRAGMA journal_mode") == [("wal",)]
        st = mem.status()
        assert (st["chunks"], st["dirty"]) == (chunks, False), "migrated, not dropped: nothing to reindex"
        assert st["vector"]["dims"] and st["cache"]["entries"] == chunks + 1 - _dupes(mem)
        after = [(h.path, h.start_line, round(h.score, 6)) for h in mem.search("harbour ferry schedule").results]
        assert after == before
        assert rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        tables = {r[0] for r in rows(mem, "SELECT name FROM sqlite_master")}
        assert not tables & {"chunks_vec", "chunks_old", "embedding_cache_old"}
        assert rows(mem, "SELECT COUNT(*) FROM chunks WHERE vector IS NULL") == [(0,)]
        report = mem.sync()
        assert report.embeddings_computed == 0 and report.files_indexed == 0
        # The migrated cache still serves a forced rebuild: nothing is embedded again.
        assert mem.sync(force=True).embeddings_computed == 0


def _dupes(mem) -> int:  # type: ignore[no-untyped-def]
    """Chunks sharing a text (and so one stored vector)."""
    return int(rows(mem, "SELECT COUNT(*) - COUNT(DISTINCT hash) FROM chunks")[0][0])


def test_plugins_reach_the_index_only_through_the_store_api() -> None:
    # Issue 12: no plugin issues SQL against the core's tables; they use IndexStore's public methods.
    # Only packages built on the SQLite index (they import symi_memory.index) are held to it: a backend
    # with its own server-side tables (contrib/symi-memory-postgres) may well name them chunks.
    import re

    root = Path(__file__).resolve().parent.parent
    on_index = re.compile(r"^\s*(?:from|import)\s+symi_memory\.index[.\s]", re.M)
    offenders = []
    packages = [p for folder in ("plugins", "contrib") for p in (root / folder).iterdir() if p.is_dir()]
    sqlite_based = [p for p in packages if any(on_index.search(f.read_text(encoding="utf-8")) for f in p.rglob("*.py"))]
    assert {p.name for p in sqlite_based} >= {"symi_memory_sqlite", "symi_memory_faiss"}
    for package in sqlite_based:
        for path in package.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for needle in (".reader()", "._read(", "store.conn", "FROM chunks", "embedding_cache"):
                if needle in text:
                    offenders.append(f"{path.relative_to(root)}: {needle}")
    assert offenders == []


def _random_store(path: Path, n: int, dims: int = 64):  # type: ignore[no-untyped-def]
    """A real IndexStore holding ``n`` clustered vectors (close neighbours, so float16 rounding matters)."""
    import numpy as np

    rng = np.random.default_rng(7)
    centres = rng.normal(size=(20, dims)).astype(np.float32)
    vecs = centres[rng.integers(0, 20, n)] + 0.05 * rng.normal(size=(n, dims)).astype(np.float32)
    return _store_of(path, vecs), vecs, rng


def _store_of(path: Path, vecs):  # type: ignore[no-untyped-def]
    """A real IndexStore holding these vectors, a chunk each, in rowid order."""
    import json

    from symi_memory.index.store import ChunkRow, FileRow, IndexStore

    n = len(vecs)
    store = IndexStore.open(path)
    ident = json.dumps({"provider": "test", "model": "m", "fingerprint": "f"})
    files = []
    for f in range(0, n, 100):
        rows = [ChunkRow(id=f"c{i}", path=f"memory/{f}.md", source="memory", start_line=i, end_line=i, hash=f"h{i}",
                         text=f"chunk {i}", embedding=vecs[i].tobytes()) for i in range(f, min(n, f + 100))]
        files.append((FileRow(path=f"memory/{f}.md", source="memory", hash=str(f), mtime=0.0, size=0), rows))
    store.replace_files(files, meta={"identity": ident})
    return store


QUANTIZED_SCANS = {"float16": "float16+float32-rescoring", "int8": "int8+float32-rescoring"}


@pytest.mark.parametrize("scan", sorted(QUANTIZED_SCANS))
def test_quantized_scan_answers_exactly_what_float32_answers(tmp_path: Path, scan: str) -> None:
    pytest.importorskip("faiss")
    from symi_memory.index.vectors import ExactVectors

    store, vecs, rng = _random_store(tmp_path / "i.sqlite", 3000)
    try:
        quant, full = ExactVectors(store, scan=scan), ExactVectors(store, scan="float32")
        assert quant.status()["scan"] == "none"
        queries = vecs[rng.integers(0, len(vecs), 40)] + 0.02 * rng.normal(size=(40, vecs.shape[1]))
        for k in (1, 10, 80):
            for q in queries:
                a, b = quant.search(q.tolist(), k), full.search(q.tolist(), k)
                assert {r for r, _ in a} == {r for r, _ in b}, (scan, k)
                assert all(abs(x[1] - y[1]) < 1e-5 for x, y in zip(a, b, strict=True)), "rescored: float32 scores"
            # Keyword candidates beyond the scan's: their float32 scores, read by stored id.
            others = [int(r) for r in rng.integers(1, len(vecs), 20)]
            got, want = quant.rescore(q.tolist(), others), full.rescore(q.tolist(), others)
            assert got.keys() == want.keys() and all(abs(got[r] - want[r]) < 1e-5 for r in want)
        assert quant.status()["scan"] == QUANTIZED_SCANS[scan]
        assert full.status()["scan"] == "float32"
    finally:
        store.close()


def test_int8_scan_stays_exact_when_later_rows_exceed_its_codes(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The int8 codes' range comes from the first block of rows: with blocks of 16 rows, most later rows
    # reach beyond it and are clipped. Clipping must widen the rescoring, never change the answer.
    pytest.importorskip("faiss")
    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.vectors import ExactVectors

    monkeypatch.setattr(vectors_mod, "HALF_BLOCK", 16)
    store, vecs, rng = _random_store(tmp_path / "i.sqlite", 1500)
    try:
        quant, full = ExactVectors(store, scan="int8"), ExactVectors(store, scan="float32")
        for q in vecs[rng.integers(0, len(vecs), 30)] + 0.02 * rng.normal(size=(30, vecs.shape[1])):
            a, b = quant.search(q.tolist(), 10), full.search(q.tolist(), 10)
            assert {r for r, _ in a} == {r for r, _ in b}
            assert all(abs(x[1] - y[1]) < 1e-5 for x, y in zip(a, b, strict=True))
        assert quant._quant.err_dim.max() > 0.05, "rows were clipped"
    finally:
        store.close()


@pytest.mark.parametrize("scan", sorted(QUANTIZED_SCANS))
def test_the_first_search_after_a_load_is_exact(tmp_path: Path, scan: str) -> None:
    # Near-identical vectors: the scan's order says little, the rescoring band decides. The search that
    # loaded the copy took the stale-copy path (its candidates rescored by chunk, no band) and missed the best.
    pytest.importorskip("faiss")
    import numpy as np

    from symi_memory.index.vectors import ExactVectors

    rng = np.random.default_rng(1)
    centre = rng.normal(size=64).astype(np.float32)
    store = _store_of(tmp_path / "n.sqlite", centre + 1e-4 * rng.normal(size=(3000, 64)).astype(np.float32))
    try:
        full = ExactVectors(store, scan="float32")
        for q in centre + 0.5 * rng.normal(size=(20, 64)):
            for k in (1, 10):
                got = ExactVectors(store, scan=scan).search(q.tolist(), k)  # loads, then searches
                assert got == full.search(q.tolist(), k), (scan, k)
    finally:
        store.close()


@pytest.mark.parametrize("scan", sorted(QUANTIZED_SCANS))
def test_ties_go_to_the_lower_rowid_in_every_scan(tmp_path: Path, scan: str) -> None:
    # Duplicated notes hold the same vector: the float32 scan answered with whichever copy argpartition put
    # first, the quantized scans (auto from 50k vectors) with the first by rowid.
    pytest.importorskip("faiss")
    import numpy as np

    from symi_memory.index.vectors import ExactVectors

    rng = np.random.default_rng(1)
    centres = rng.normal(size=(30, 64)).astype(np.float32)
    store = _store_of(tmp_path / "d.sqlite", centres[rng.integers(0, 30, 3000)])
    try:
        quant, full = ExactVectors(store, scan=scan), ExactVectors(store, scan="float32")
        for q in centres[rng.integers(0, 30, 10)] + 0.3 * rng.normal(size=(10, 64)):
            for k in (1, 10, 80):
                a, b = quant.search(q.tolist(), k), full.search(q.tolist(), k)
                assert [r for r, _ in a] == [r for r, _ in b], (scan, k)
                assert all(x[0] < y[0] for x, y in zip(b, b[1:], strict=False) if x[1] == y[1]), "ties by rowid"
    finally:
        store.close()


@pytest.mark.parametrize("scan", sorted(QUANTIZED_SCANS))
def test_quantized_scan_stays_exact_when_a_stored_vector_is_not_finite(tmp_path: Path, scan: str) -> None:
    # A provider's NaN or inf output is stored as is. The float32 scan never ranks it; in a quantized copy it
    # made the recorded error NaN, so no band was rescored and every search answered from the scan's order.
    pytest.importorskip("faiss")
    import json

    import numpy as np

    from symi_memory.index.store import ChunkRow, FileRow
    from symi_memory.index.vectors import ExactVectors

    store, vecs, rng = _random_store(tmp_path / "i.sqlite", 1500)
    try:
        bad = np.full(vecs.shape[1], np.nan, dtype=np.float32), np.full(vecs.shape[1], np.inf, dtype=np.float32)
        rows = [ChunkRow(id=f"bad{i}", path="memory/bad.md", source="memory", start_line=i, end_line=i,
                         hash=f"bad{i}", text="bad", embedding=v.tobytes()) for i, v in enumerate(bad)]
        store.replace_files([(FileRow(path="memory/bad.md", source="memory", hash="b", mtime=0.0, size=0), rows)],
                            meta={"identity": json.dumps({"provider": "test", "model": "m", "fingerprint": "f"})})
        quant, full = ExactVectors(store, scan=scan), ExactVectors(store, scan="float32")
        for q in vecs[rng.integers(0, len(vecs), 20)] + 0.02 * rng.normal(size=(20, vecs.shape[1])):
            for k in (1, 10):
                a, b = quant.search(q.tolist(), k), full.search(q.tolist(), k)
                assert [r for r, _ in a] == [r for r, _ in b], (scan, k)
    finally:
        store.close()


@pytest.mark.parametrize("scan", sorted(QUANTIZED_SCANS))
def test_quantized_scan_follows_deletes_and_writes(tmp_path: Path, scan: str) -> None:
    pytest.importorskip("faiss")
    import json

    from symi_memory.index.vectors import ExactVectors

    store, vecs, _ = _random_store(tmp_path / "i.sqlite", 500)
    try:
        quant = ExactVectors(store, scan=scan)
        target = vecs[42].tolist()
        first = quant.search(target, 3)[0]
        store.replace_files([], remove=["memory/0.md"], meta={"identity": json.dumps(
            {"provider": "test", "model": "m", "fingerprint": "f"})})
        after = quant.search(target, 3)
        assert first[0] not in {r for r, _ in after} and len(after) == 3
    finally:
        store.close()


def test_new_index_files_use_pages_that_vectors_fill(tmp_path: Path, ws: Path) -> None:
    # 1.5 KB vectors left a quarter of every 4 KB page empty; 8 KB pages hold five.
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert rows(mem, "PRAGMA page_size") == [(8192,)]


class _OwnQueryEmbedder(HashEmbedder):
    """HashEmbedder vectors through an ``embed_query`` of its own: not answered at once, so asked on the worker."""

    def embed_query(self, text: str) -> list[float]:
        return super().embed_query(text)


class _OwnQueryPlugin:
    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        register(ProviderSpec(name="own-query", factory=lambda ctx: _OwnQueryEmbedder(id="own-query", model="h"),
                              default_model="h"))


def test_searches_share_one_query_embedding_thread(tmp_path: Path, ws: Path) -> None:
    import threading

    # A provider that cannot give query vectors at once (EmbedsQueriesAtOnce) is asked on the worker thread.
    with open_mem(tmp_path, ws, {"provider": "own-query"}, plugins=[("own-query", _OwnQueryPlugin())]) as mem:
        mem.sync()
        mem.search("harbour ferry")
        before = {t.ident for t in threading.enumerate() if t.name == "symi-query-embed"}
        for _ in range(5):
            mem.search("harbour ferry schedule")
        after = {t.ident for t in threading.enumerate() if t.name == "symi-query-embed"}
        assert before, "the query embedding runs on its worker thread"
        assert after - before == set(), "no new thread per search"


def test_compaction_waits_for_a_later_open_when_another_process_holds_the_file(tmp_path: Path, ws: Path) -> None:
    import time

    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    downgrade_to_old_layout(db, "3")
    other = apsw.Connection(str(db))  # another process's reader, in the middle of a read
    other.execute("BEGIN")
    other.execute("SELECT COUNT(*) FROM meta").fetchall()
    try:
        started = time.monotonic()
        with open_mem(tmp_path, ws) as mem:
            assert time.monotonic() - started < 8, "the open does not wait out the busy timeout for it"
            assert rows(mem, "SELECT value FROM meta WHERE key='compact_pending'") == [("1",)]
            assert mem.search("harbour ferry schedule").results  # migrated and searchable all the same
    finally:
        other.execute("COMMIT")
        other.close()
    with open_mem(tmp_path, ws) as mem:
        assert rows(mem, "SELECT COUNT(*) FROM meta WHERE key='compact_pending'") == [(0,)]


def test_auto_scan_is_int8_for_large_indexes_and_status_says_so(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("faiss")
    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.vectors import ExactVectors

    store, vecs, _ = _random_store(tmp_path / "i.sqlite", 600)
    try:
        small = ExactVectors(store)  # 600 vectors: below the threshold, float32
        small.search(vecs[3].tolist(), 5)
        assert small.status()["scan"] == "float32"
        monkeypatch.setattr(vectors_mod, "HALF_AUTO_MIN", 500)  # as if the index held 50,000
        large = ExactVectors(store)
        top = large.search(vecs[3].tolist(), 5)
        assert large.status()["scan"] == "int8+float32-rescoring"
        # The codes and their residual codes (an int8 each, plus a float32 scale a row): about half of float32's.
        assert large.status()["bytes"] == 600 * vecs.shape[1] * 2 + 600 * 4
        assert small.status()["bytes"] == 600 * vecs.shape[1] * 4
        assert top == small.search(vecs[3].tolist(), 5) or {r for r, _ in top} == {
            r for r, _ in small.search(vecs[3].tolist(), 5)}
    finally:
        store.close()


@pytest.fixture
def kept_copy(tmp_path: Path, monkeypatch):  # type: ignore[no-untyped-def]
    """A 3,000-vector store searched as an index of 8,192 vectors is (an int8 copy that keeps its float32 rows),
    with an auto-scan vector side and a float32 one: ``(store, vecs, rng, auto, full)``."""
    pytest.importorskip("faiss")
    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.vectors import ExactVectors

    monkeypatch.setattr(vectors_mod, "KEPT_INT8_MIN", 1000)  # as if the index held 8,192
    store, vecs, rng = _random_store(tmp_path / "k.sqlite", 3000)
    try:
        yield store, vecs, rng, ExactVectors(store), ExactVectors(store, scan="float32")
    finally:
        store.close()


def test_auto_scan_of_a_mid_sized_index_is_int8_rescored_from_memory_with_float32_answers(kept_copy,
                                                                                          monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # From KEPT_INT8_MIN (8,192) to HALF_AUTO_MIN vectors the int8 copy keeps the float32 rows beside it and
    # rescores from them: the same answers, bit for bit, as the float32 scan, and no vector read from SQLite.
    store, vecs, rng, auto, full = kept_copy
    auto.search(vecs[0].tolist(), 1)
    assert auto.status()["scan"] == "int8+float32-rescoring"
    assert auto._quant is not None and auto._quant.rows is not None and auto._quant.rows.shape == (3000, 64)
    # status says what the copy holds: int8 codes plus the kept float32 rows, 1.25x the float32 scan's.
    full.search(vecs[0].tolist(), 1)
    assert full.status()["bytes"] == 3000 * 64 * 4
    assert auto.status()["bytes"] == 3000 * 64 * 5
    reads = []
    real = type(store).vector_rows
    monkeypatch.setattr(type(store), "vector_rows", lambda self, *a: reads.append(a) or real(self, *a))
    queries = vecs[rng.integers(0, len(vecs), 30)] + 0.02 * rng.normal(size=(30, vecs.shape[1]))
    for q in queries:
        for k in (1, 10, 80):
            assert auto.search(q.tolist(), k) == full.search(q.tolist(), k), k
        others = [int(r) for r in rng.integers(1, len(vecs), 20)]
        assert auto.rescore(q.tolist(), others) == full.rescore(q.tolist(), others)
    assert reads == []


def test_a_kept_copy_rescores_the_chunks_its_band_scored_and_others_as_the_float32_scan(kept_copy) -> None:  # type: ignore[no-untyped-def]
    # A search of an int8 copy that keeps its float32 rows leaves the band it rescored for rescore: keyword
    # candidates near the query (most are in that band) take their score from it, the others from their kept rows.
    # Random queries, each rescoring the float32 scan's next best chunks (in the band) with chunks far down the
    # ranking and rowids the index lacks: every score, and their order, is the float32 scan's, bit for bit.
    import numpy as np

    _store, vecs, rng, auto, full = kept_copy
    base = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = vecs[rng.integers(0, len(vecs), 25)] + 0.03 * rng.normal(size=(25, vecs.shape[1]))
    in_band = 0
    for i, q in enumerate(queries):
        k = (1, 10, 80)[i % 3]
        ranking = [int(r) + 1 for r in np.argsort(-(base @ (q / np.linalg.norm(q))), kind="stable")]  # rowid = row + 1
        asked = q.tolist()
        assert auto.search(asked, k) == full.search(asked, k), k
        band = auto._last.exact[2]
        near = ranking[k : k + 60]
        wanted = [*near, *(int(r) for r in rng.integers(1, len(vecs) + 1, 15)), len(vecs) + 5, near[0]]
        rng.shuffle(wanted)
        got, want = auto.rescore(asked, wanted), full.rescore(asked, wanted)
        assert list(got.items()) == list(want.items())
        in_band += sum(r in band for r in set(wanted))
    assert in_band > 25 * 20, "the band scored few of the chunks asked: the test would not test it"


def test_faiss_search_called_directly_answers_as_its_wrapper() -> None:
    # The scan calls faiss's search with the result arrays it made (no wrapper): the same rows and scores as
    # faiss's Python wrapper gives, for an int8 and a float16 copy, with a probe faiss would convert as well.
    faiss = pytest.importorskip("faiss")
    import numpy as np

    from symi_memory.index.vectors import _faiss_search

    rng = np.random.default_rng(11)
    rows = rng.normal(size=(500, 32)).astype(np.float32)
    for qtype in (faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.ScalarQuantizer.QT_fp16):
        index = faiss.IndexScalarQuantizer(32, qtype, faiss.METRIC_INNER_PRODUCT)
        index.train(np.clip(np.rint(rows * 20), -127, 127))
        index.add(np.clip(np.rint(rows * 20), -127, 127))
        for k in (1, 7, 500, 600):
            probe = np.rint(rng.normal(size=(1, 32)) * 30).astype(np.float32)
            want = index.search(probe, k)
            for p in (probe, probe.astype(np.float64), np.asfortranarray(np.repeat(probe, 2, axis=0))[:1]):
                got = _faiss_search(index, p, k)
                assert got[0].dtype == np.float32 and got[1].dtype == np.int64
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), k


def test_a_kept_copy_s_rescoring_follows_a_query_list_changed_since_and_lets_a_replaced_copy_go(
        kept_copy) -> None:  # type: ignore[no-untyped-def]
    # A search of an int8 copy that keeps its float32 rows leaves that copy (by weak reference) for rescore, and
    # the query list it was asked with, so that rescoring the same list needs no conversion. A list changed in
    # place since is another query: its chunks are scored for it, not from the last scan's query. A copy replaced
    # since (the index changed) is not kept alive by what a thread's last search left, and rescore still scores
    # each chunk, as the float32 scan of the index as it is now scores it.
    import gc
    import json
    import weakref

    store, vecs, rng, auto, full = kept_copy
    others = sorted({int(r) for r in rng.integers(101, len(vecs), 30)})  # chunks of files other than memory/0.md
    asked = vecs[5].tolist()
    auto.search(asked, 10)
    full.search(asked, 10)
    assert auto.rescore(asked, others) == full.rescore(asked, others)
    asked[:] = (vecs[9] + 0.3).tolist()  # the same list object, another query
    full.search(asked, 10)
    got, want = auto.rescore(asked, others), full.rescore(asked, others)
    assert got.keys() == want.keys() == set(others)
    assert all(abs(got[r] - want[r]) < 1e-5 for r in others), "scored for the query the list holds now"

    query = vecs[7].tolist()
    auto.search(query, 80)
    first = weakref.ref(auto._quant)
    store.replace_files([], remove=["memory/0.md"], meta={"identity": json.dumps(
        {"provider": "test", "model": "m", "fingerprint": "f"})})
    assert auto.ready() and auto._quant is not first()  # a new copy, loaded at once (a small index)
    gc.collect()
    assert first() is None, "the last search's state kept the replaced copy alive"
    full.search(query, 80)
    assert auto.rescore(query, others) == full.rescore(query, others)


def test_a_kept_copy_replaced_since_the_search_is_not_rescored_from_even_while_another_search_holds_it(
        kept_copy) -> None:  # type: ignore[no-untyped-def]
    # A write lands between a search of an int8 copy that keeps its float32 rows and the rescoring of its keyword
    # candidates, and the next search loads a new copy. Another thread still searching the old copy keeps it alive
    # (held here). The last file's chunks got their rowids back (SQLite reuses the highest rowids): the old copy's
    # row for such a rowid is a deleted chunk's vector. The keyword candidates are scored as the float32 scan of the
    # index as it is now scores them, whether or not something else still holds the old copy (vec10k scored every
    # chunk the old copy held from it while it lived, from the new copy once it was freed; 0670d98 scored the
    # search's rescoring band from the old copy).
    import json
    import threading

    import numpy as np

    from symi_memory.index.store import ChunkRow, FileRow

    store, vecs, _rng, auto, full = kept_copy
    query = vecs[7].tolist()
    auto.search(query, 10)
    held = auto._quant  # as another thread's search of that copy holds it
    assert held is not None and held.rows is not None
    fresh = (-vecs[2900:]).astype(np.float32)  # the last file, written again with other vectors
    rows = [ChunkRow(id=f"n{i}", path="memory/2900.md", source="memory", start_line=i, end_line=i, hash=f"n{i}",
                     text=f"chunk {i}", embedding=fresh[i].tobytes()) for i in range(len(fresh))]
    store.replace_files([(FileRow(path="memory/2900.md", source="memory", hash="new", mtime=0.0, size=0), rows)],
                        meta={"identity": json.dumps({"provider": "test", "model": "m", "fingerprint": "f"})})
    # The next search, on another thread, loads the new copy.
    loader = threading.Thread(target=auto.search, args=(vecs[3].tolist(), 10))
    loader.start()
    loader.join()
    assert auto._quant is not held and auto._quant is not None
    reused = list(range(2901, 3001))
    assert store.vectors_by_rowid(reused[:1]) == {2901: fresh[0].tobytes()}  # the rowids hold the new chunks
    full.search(query, 10)
    got, want = auto.rescore(query, reused), full.rescore(query, reused)
    assert got.keys() == want.keys() == set(reused)
    assert got == want, "scored from the replaced copy's rows (deleted chunks' vectors)"


def test_a_kept_copy_s_rescoring_follows_a_query_whose_elements_changed_in_place(kept_copy) -> None:  # type: ignore[no-untyped-def]
    # The same list object asked again, holding the same element objects, is the same query only when those
    # elements cannot change: a list of 0-d numpy arrays written in place since the search asks about another
    # vector, and its candidates are scored for that one.
    import numpy as np

    _store, vecs, _rng, auto, full = kept_copy
    asked = [np.array(x, dtype=np.float64) for x in vecs[5]]
    assert auto.search(asked, 10) == full.search(vecs[5].tolist(), 10)
    for element, value in zip(asked, vecs[9], strict=True):
        element[()] = value  # the same objects, another query
    others = list(range(200, 260))
    got, want = auto.rescore(asked, others), full.rescore(vecs[9].tolist(), others)
    assert got.keys() == want.keys() == set(others)
    assert all(abs(got[r] - want[r]) < 1e-5 for r in others), "scored for the query the list held at the search"


def test_the_bound_s_rounding_margin_grows_with_the_dimensions() -> None:
    # A d-term float32 dot product can be off by about d * 2**-24 on each side: 1e-4 is not enough at 1,536-d.
    from symi_memory.index.vectors import BOUND_SLACK, slack

    assert slack(384) == BOUND_SLACK
    assert slack(1536) >= 2 * 1536 * 2.0 ** -24 > BOUND_SLACK


def test_int8_scan_with_residual_codes_reads_fewer_stored_vectors(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # From HALF_AUTO_MIN vectors the int8 copy keeps a residual code per value: the rescoring band is narrowed in
    # memory, so a search reads far fewer stored vectors than the int8 bound's band (here, clusters this tight,
    # the band is a whole cluster), and answers the float32 scan's answer, bit for bit.
    pytest.importorskip("faiss")
    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.vectors import ExactVectors

    monkeypatch.setattr(vectors_mod, "HALF_AUTO_MIN", 1000)  # as if the index held 50,000
    store, vecs, rng = _random_store(tmp_path / "i.sqlite", 3000)
    try:
        full = ExactVectors(store, scan="float32")
        reads: list[int] = []
        real = type(store).vector_rows
        monkeypatch.setattr(type(store), "vector_rows",
                            lambda self, ids, *a: reads.append(len(ids)) or real(self, ids, *a))
        queries = vecs[rng.integers(0, len(vecs), 30)] + 0.02 * rng.normal(size=(30, vecs.shape[1]))
        read: dict[tuple[bool, int], int] = {}
        for fine in (True, False):
            # Above FINE_MAX_ROWS no residual is kept: the rescoring reads the int8 bound's band.
            monkeypatch.setattr(vectors_mod, "FINE_MAX_ROWS", 262_144 if fine else 2000)
            auto = ExactVectors(store)
            auto.search(vecs[0].tolist(), 1)
            assert auto.status()["scan"] == "int8+float32-rescoring"
            assert auto._quant is not None and auto._quant.rows is None and (auto._quant.fine is not None) == fine
            # The codes, and the residual codes (an int8 each plus a float32 scale a row) when kept.
            assert auto.status()["bytes"] == 3000 * 64 * (2 if fine else 1) + (3000 * 4 if fine else 0)
            for k in (1, 10, 80):
                reads.clear()
                for q in queries:
                    assert auto.search(q.tolist(), k) == full.search(q.tolist(), k), k
                read[fine, k] = sum(reads)
            for q in queries[:5]:
                assert auto.search(q.tolist(), 10) == full.search(q.tolist(), 10)
                others = [int(r) for r in rng.integers(1, len(vecs), 20)]
                assert auto.rescore(q.tolist(), others) == full.rescore(q.tolist(), others)
        assert read[True, 1] == len(queries), "the best chunk alone"
        assert read[True, 10] * 4 < read[False, 10]
        assert read[True, 80] < read[False, 80]
    finally:
        store.close()


@pytest.mark.parametrize("clip", [False, True])
def test_int8_scan_with_residual_codes_answers_as_float32_with_units(tmp_path: Path, monkeypatch, clip: bool) -> None:  # type: ignore[no-untyped-def]
    # Chunks scored with their unit (line) vectors: the residual's refined scores combine chunk and units as the
    # float32 scan does; with clipped rows (codes' range from a first block of 16 rows) the answer stays exact.
    pytest.importorskip("faiss")
    import json

    import numpy as np

    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.store import ChunkRow, FileRow, IndexStore, UnitRow
    from symi_memory.index.vectors import ExactVectors

    if clip:
        monkeypatch.setattr(vectors_mod, "HALF_BLOCK", 16)
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(15, 48)).astype(np.float32)
    n = 800
    vecs = centres[rng.integers(0, 15, n)] + 0.1 * rng.normal(size=(n, 48)).astype(np.float32)
    store = IndexStore.open(tmp_path / "u.sqlite")
    try:
        files = []
        for f in range(0, n, 100):
            rows = []
            for i in range(f, f + 100):
                units = tuple(UnitRow(start_line=j + 1, end_line=j + 1, hash=f"{i}u{j}", embedding=(
                    vecs[i] + 0.3 * rng.normal(size=48)).astype(np.float32).tobytes()) for j in range(i % 4))
                rows.append(ChunkRow(id=f"c{i}", path=f"memory/{f}.md", source="memory", start_line=i - f + 1,
                                     end_line=i - f + 1, hash=f"h{i}", text=f"chunk {i}", embedding=vecs[i].tobytes(),
                                     units=units))
            files.append((FileRow(path=f"memory/{f}.md", source="memory", hash=str(f), mtime=0.0, size=0), rows))
        store.replace_files(files, meta={"identity": json.dumps({"provider": "test", "model": "m", "fingerprint": "f"}),
                                         "units": "lines"})
        quant, full = ExactVectors(store, scan="int8", unit_weight=0.7), ExactVectors(store, scan="float32",
                                                                                     unit_weight=0.7)
        for q in vecs[rng.integers(0, n, 25)] + 0.05 * rng.normal(size=(25, 48)):
            for k in (1, 10, 80):
                assert quant.search(q.tolist(), k) == full.search(q.tolist(), k), k
        assert quant._quant is not None and quant._quant.fine is not None and quant._quant.offsets is not None
        assert not clip or quant._quant.err_dim.max() > 0.05, "rows were clipped"
    finally:
        store.close()


@pytest.mark.parametrize("scan", ["int8", "float16"])
def test_a_quantized_scan_split_across_two_threads_answers_as_float32(tmp_path: Path, monkeypatch, scan: str) -> None:  # type: ignore[no-untyped-def]
    # store.vector.scanThreads = 2: a large quantized copy is held in two halves, searched at once on the
    # searching thread and a worker; the merged candidates give the float32 scan's answer, and status says so.
    pytest.importorskip("faiss")
    import os

    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.vectors import ExactVectors

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the copy is never split")
    monkeypatch.setattr(vectors_mod, "SPLIT_MIN_ROWS", 1000)  # as if the index held 50,000
    monkeypatch.setattr(vectors_mod, "HALF_BLOCK", 256)  # blocks straddle the halves
    store, vecs, rng = _random_store(tmp_path / "i.sqlite", 3001)
    try:
        split, full = ExactVectors(store, scan=scan, scan_threads=2), ExactVectors(store, scan="float32")
        one = ExactVectors(store, scan=scan)
        for q in vecs[rng.integers(0, len(vecs), 20)] + 0.02 * rng.normal(size=(20, vecs.shape[1])):
            for k in (1, 10, 80):
                want = full.search(q.tolist(), k)
                assert split.search(q.tolist(), k) == one.search(q.tolist(), k)
                assert [r for r, _ in split.search(q.tolist(), k)] == [r for r, _ in want], (scan, k)
        assert split.status()["parts"] == 2 and one.status()["parts"] == 1
        assert split.status()["residual"] == (scan == "int8") and split.status()["rows"] == 3001
        assert [int(p.ntotal) for p in split._quant.index.parts] == [1501, 1500]
    finally:
        store.close()


SEARCH_WHILE_EXITING = """
import sys, threading, time
sys.path.insert(0, sys.argv[2])
import json
from pathlib import Path
from test_vector_storage import _random_store
from symi_memory.index import vectors as vectors_mod
from symi_memory.index.vectors import ExactVectors

vectors_mod.SPLIT_MIN_ROWS = 1000  # as if the index held 50,000
store, vecs, _ = _random_store(Path(sys.argv[1]), 3001)
split = ExactVectors(store, scan="int8", scan_threads=2)
first = split.search(vecs[5].tolist(), 10)
assert split.status()["parts"] == 2


def late() -> None:  # a request thread still answering while the main thread returns
    time.sleep(0.5)
    try:
        again = split.search(vecs[5].tolist(), 10)
        print("same" if again == first else "different")
    except Exception as exc:
        print("failed:", type(exc).__name__, exc)


threading.Thread(target=late).start()
"""


def test_a_split_scan_answers_while_the_interpreter_exits(tmp_path: Path) -> None:
    # scanThreads = 2: a search on a (non-daemon) thread still running while the main thread returns cannot hand
    # its second half to the worker (Python refuses new work once it starts exiting): it scans both halves itself
    # instead of failing with "cannot schedule new futures after shutdown".
    pytest.importorskip("faiss")
    import os
    import subprocess
    import sys

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the copy is never split")
    proc = subprocess.run([sys.executable, "-c", SEARCH_WHILE_EXITING, str(tmp_path / "i.sqlite"),
                           str(Path(__file__).parent)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "same", proc.stdout + proc.stderr


@pytest.mark.parametrize("scan", ["int8", "float16"])
def test_a_chunk_with_a_non_finite_unit_vector_ranks_as_in_the_float32_scan(tmp_path: Path, scan: str) -> None:
    # A provider's bad output for one line (NaN) makes its chunk's score NaN in the float32 scan: the chunk never
    # ranks. The quantized scan's rescoring dropped the bad line and scored the chunk from its other vectors, so
    # the chunk closest to the query came first there and nowhere in the float32 scan's answer.
    pytest.importorskip("faiss")
    import json

    import numpy as np

    from symi_memory.index.store import ChunkRow, FileRow, IndexStore, UnitRow
    from symi_memory.index.vectors import ExactVectors

    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(300, 48)).astype(np.float32)
    store = IndexStore.open(tmp_path / "u.sqlite")
    try:
        rows = []
        for i in range(len(vecs)):
            units = []
            for j in range(2):
                line = (vecs[i] + 0.3 * rng.normal(size=48)).astype(np.float32)
                if i == 0 and j == 1:
                    line[0] = np.nan
                units.append(UnitRow(start_line=j + 1, end_line=j + 1, hash=f"{i}u{j}", embedding=line.tobytes()))
            rows.append(ChunkRow(id=f"c{i}", path="memory/a.md", source="memory", start_line=i + 1, end_line=i + 1,
                                 hash=f"h{i}", text=f"chunk {i}", embedding=vecs[i].tobytes(), units=tuple(units)))
        store.replace_files([(FileRow(path="memory/a.md", source="memory", hash="a", mtime=0.0, size=0), rows)],
                            meta={"identity": json.dumps({"provider": "test", "model": "m", "fingerprint": "f"}),
                                  "units": "lines"})
        quant = ExactVectors(store, scan=scan, unit_weight=0.7)
        full = ExactVectors(store, scan="float32", unit_weight=0.7)
        bad = int(store._read("SELECT rowid FROM chunks WHERE id = 'c0'").fetchone()[0])
        for k in (1, 10):
            want = full.search(vecs[0].tolist(), k)
            assert bad not in dict(want)
            assert quant.search(vecs[0].tolist(), k) == want, k
    finally:
        store.close()


SEARCH_IN_A_FORKED_CHILD = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
import json
from pathlib import Path
from test_vector_storage import _random_store
from symi_memory.index import vectors as vectors_mod
from symi_memory.index.vectors import ExactVectors

vectors_mod.SPLIT_MIN_ROWS = 1000  # as if the index held 50,000
store, vecs, _ = _random_store(Path(sys.argv[1]), 3001)
split = ExactVectors(store, scan="int8", scan_threads=2)
first = split.search(vecs[5].tolist(), 10)  # the worker thread exists now
assert split.status()["parts"] == 2
pid = os.fork()
if pid == 0:  # a prefork server's worker, say
    signal.alarm(20)
    print("same" if split.search(vecs[5].tolist(), 10) == first else "different", flush=True)
    os._exit(0)
print("child exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


def test_a_split_scan_answers_in_a_forked_child(tmp_path: Path) -> None:
    # scanThreads = 2 in a process forked after a search (a prefork server): the parent's worker thread does not
    # exist in the child, so a second half handed to it was never searched and the child's search waited forever.
    pytest.importorskip("faiss")
    import os
    import subprocess
    import sys

    if not hasattr(os, "fork") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("no fork, or one CPU: the copy is never split")
    proc = subprocess.run([sys.executable, "-c", SEARCH_IN_A_FORKED_CHILD, str(tmp_path / "i.sqlite"),
                           str(Path(__file__).parent)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["same", "child", "exit", "0"], proc.stdout + proc.stderr


def test_a_copy_older_than_the_index_never_scores_a_reused_rowid_from_its_deleted_chunk(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A large index reloads its float32 scan copy in the background, the old copy answering meanwhile. SQLite
    # gives a chunk written after the last ones were deleted their rowids again: the old copy's row of a
    # reused rowid is the deleted chunk's vector, and must not score the new chunk (nor answer for it).
    import json
    import time

    import numpy as np

    from symi_memory.index import vectors as vectors_mod
    from symi_memory.index.store import ChunkRow, FileRow
    from symi_memory.index.vectors import ExactVectors

    monkeypatch.setattr(vectors_mod, "SYNC_LOAD_LIMIT", 100)  # as if the index held more than 20,000 chunks
    store, vecs, rng = _random_store(tmp_path / "i.sqlite", 500)
    try:
        side = ExactVectors(store, scan="float32")
        target = vecs[450].tolist()
        for _ in range(200):  # the first searches answer from sqlite-vec while the copy loads
            side.search(target, 3)
            if side.status()["scan"] == "float32" and not side._loading:
                break
            time.sleep(0.01)
        before = {r for r, _ in side.search(target, 3)}
        assert 451 in before  # vecs[450] is rowid 451's vector
        # The last file's 100 chunks deleted; a new file's 100 chunks take their rowids, far from the target.
        far = -vecs[400:500]
        ident = {"identity": json.dumps({"provider": "test", "model": "m", "fingerprint": "f"})}
        store.replace_files([], remove=["memory/400.md"], meta=ident)
        rows = [ChunkRow(id=f"n{i}", path="memory/new.md", source="memory", start_line=i, end_line=i, hash=f"n{i}",
                         text=f"new {i}", embedding=far[i].astype(np.float32).tobytes()) for i in range(100)]
        store.replace_files([(FileRow(path="memory/new.md", source="memory", hash="n", mtime=0.0, size=0), rows)],
                            meta=ident)
        assert store.vectors_by_rowid([451]), "the new chunk took rowid 451 again"
        got = side.search(target, 3)  # answered by the old copy while the new one loads
        want = sorted(side.cosine(target, dict(store.vectors_by_rowid([r for r, _ in got]))).items(),
                      key=lambda kv: -kv[1])
        assert all(abs(s - dict(want)[r]) < 1e-5 for r, s in got), "each score is the chunk's own vector's"
        assert 451 not in {r for r, _ in got}
        rescored = side.rescore(target, [451])
        assert rescored[451] < 0, "a keyword candidate with a reused rowid is scored from its own vector"
    finally:
        store.close()


_OPENER = """
import json, logging, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
from support.sqlite_memory import open_mem
print("opening", flush=True)
with open_mem(Path(sys.argv[1]), Path(sys.argv[2]), {"chunking": {"units": "off"}}) as mem:
    st = mem.status()
    hits = mem.search("harbour ferry schedule").results
    print(json.dumps({"chunks": st["chunks"], "dirty": st["dirty"], "top": hits[0].path if hits else None}))
"""


def test_two_processes_opening_an_old_index_beside_a_long_write_migrate_it_once(tmp_path: Path, ws: Path) -> None:
    # Another process (an older release's sync) holds the write lock longer than SQLite's busy timeout (10 s) while
    # two processes of this version open a schema 4 index at once: both wait for it (they used to fail "database
    # is locked"), one migrates, the other finds it migrated; both answer from every chunk.
    # The holder keeps the lock until both openers say they are waiting past the busy timeout (not for a fixed
    # time: on a loaded machine an opener can take longer than that to start, and would never need to wait).
    import subprocess
    import sys
    import threading
    import time

    with open_mem(tmp_path, ws, NO_UNITS) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    chunks = downgrade_to_old_layout(db, "4")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, apsw\n"
        "conn = apsw.Connection(sys.argv[1])\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "conn.execute(\"INSERT OR REPLACE INTO meta(key, value) VALUES ('held_by_test', '1')\")\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n"
        "conn.execute('COMMIT')\n"), str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    openers: list[subprocess.Popen[str]] = []
    try:
        assert holder.stdout.readline().strip() == "held"
        held = time.monotonic()
        support = str(Path(__file__).resolve().parent)
        outs = [tmp_path / f"opener{i}.out" for i in range(2)]
        for out in outs:
            with out.open("w") as f:
                openers.append(subprocess.Popen([sys.executable, "-c", _OPENER, str(tmp_path), str(ws), support],
                                                stdout=f, stderr=subprocess.PIPE, text=True))
        errs: list[list[str]] = [[] for _ in openers]
        waiting = [threading.Event() for _ in openers]

        def read_err(i: int) -> None:
            stream = openers[i].stderr
            assert stream is not None
            for line in stream:
                errs[i].append(line)
                if "holds its write lock: waiting for it" in line:
                    waiting[i].set()

        readers = [threading.Thread(target=read_err, args=(i,), daemon=True) for i in range(len(openers))]
        for r in readers:
            r.start()
        for i, p in enumerate(openers):
            # Generous for a loaded machine (interpreter start, imports, the 10 s busy timeout), but bounded.
            deadline = time.monotonic() + 180
            while not waiting[i].wait(0.1):
                assert p.poll() is None, "".join(errs[i])  # gave up instead of waiting for the lock
                assert time.monotonic() < deadline, "".join(errs[i])
        # Both waited past the busy timeout and neither gave up: still running while the lock is held.
        assert [p.poll() for p in openers] == [None, None], errs
        assert time.monotonic() - held >= 10
        holder.stdin.write("done\n")
        holder.stdin.flush()
        for p in openers:
            p.wait(timeout=240)
        for r in readers:
            r.join(timeout=60)
        holder.communicate(timeout=60)
    finally:
        for proc in [holder, *openers]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    results = [(out.read_text(), "".join(err)) for out, err in zip(outs, errs, strict=True)]
    for p, (out, err) in zip(openers, results, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out.splitlines()[-1]) == {"chunks": chunks, "dirty": False, "top": "memory/journal.md"}, err
    migrated = [err for _, err in results if "index schema 4 -> " in err]
    assert len(migrated) == 1, [err for _, err in results]
    with open_mem(tmp_path, ws, NO_UNITS) as mem:
        assert rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        assert rows(mem, "SELECT value FROM meta WHERE key='held_by_test'") == [("1",)]
        assert rows(mem, "SELECT COUNT(*) FROM chunks WHERE vector IS NULL") == [(0,)]
        assert mem.status()["chunks"] == chunks
        assert rows(mem, "PRAGMA integrity_check") == [("ok",)]
