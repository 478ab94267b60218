"""Unit vectors (issue 10): a chunk is also scored by its best line, so one line of a long chunk is found."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.sqlite_memory import add_filler, open_mem, write

from symi_memory.index.db import SCHEMA_VERSION
from symi_memory.index.indexer import chunk_units

TOPICS = [
    "Quarterly budget review moved to the second floor meeting room",
    "The garden hose needs a new brass connector before summer",
    "Backup server rotates its disks every second Sunday night",
    "Grandmother's recipe uses brown sugar and a pinch of cardamom",
    "The bicycle chain squeaks; oil it after the rainy commute",
    "Printer toner is ordered through the facilities portal",
    "Weekend hike: start at the north trailhead, bring two litres of water",
    "Dentist appointment confirmation arrives by text message",
    "Library books are due back on the fifteenth of the month",
    "The office plants get watered on Mondays and Thursdays",
    "Insurance renewal letter asks for the new car registration",
    "Team lunch vote picked the noodle place near the station",
    "The thermostat schedule drops to eighteen degrees at night",
    "Old laptop charger is kept in the hallway drawer",
    "Piano tuner visits every spring, call two weeks ahead",
    "The ferry to Lisbon leaves Tuesday at nine from pier four",
    "Neighbours borrowed the ladder and returned it scratched",
    "Electricity meter reading is due at the end of each quarter",
    "Winter tyres are stored at the garage on Elm street",
    "Conference badge pickup opens at eight in the lobby",
    "The cat's vaccination booster is due in October",
    "Spare house keys are with the neighbour at number twelve",
    "Coffee grinder burrs should be cleaned every month",
    "Parking permit for the street expires in December",
]
NEEDLE = "ferry to Lisbon leaves Tuesday at nine"
# A short note sharing some of the question's words: on chunk vectors alone it beats the long
# note, whose vector is the average of two dozen topics.
DECOY = "# Lisbon\n\nLisbon photos: shared album, Lisbon 2025.\n"
VECTOR_ONLY = {"query": {"hybrid": {"enabled": False}}}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w, 10)
    write(w, "memory/long.md", "# Everything\n\n" + "\n".join(f"- {t}" for t in TOPICS) + "\n")
    write(w, "memory/lisbon.md", DECOY)
    return w


def rows(mem, sql: str) -> list:  # type: ignore[no-untyped-def]
    return mem.backend.store._read(sql).fetchall()


def top_paths(mem, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.path for h in mem.search(query, min_score=0).results]


def test_one_line_of_a_long_chunk_ranks_first_with_unit_vectors(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path / "off", ws, {**VECTOR_ONLY, "chunking": {"units": "off"}}) as mem:
        mem.sync()
        assert rows(mem, "SELECT COUNT(*) FROM chunks WHERE path='memory/long.md'") == [(1,)], "one multi-topic chunk"
        assert top_paths(mem, NEEDLE)[0] == "memory/lisbon.md", "chunk vectors alone miss the line"
    for scan in ("float32", "float16", "int8"):
        with open_mem(tmp_path / scan, ws, {**VECTOR_ONLY, "store": {"vector": {"scan": scan}}}) as mem:
            mem.sync()
            assert mem.status()["vector"]["exactScan"] in ("none", "float32", "float16+float32-rescoring",
                                                           "int8+float32-rescoring")
            hits = mem.search(NEEDLE, min_score=0).results
            assert hits[0].path == "memory/long.md", scan
            assert mem.status()["vector"]["exactUnits"] >= len(TOPICS)
            # sqlite-vec's in-database KNN (what answers while a large scan loads) ranks the same way.
            backend = mem.backend
            from symi_memory.index.store import pack_vector

            q = backend.choice.provider.embed_query(NEEDLE)
            in_db = backend.store.vec_knn(pack_vector(q), 3, backend.vectors.unit_weight)
            scanned = backend.vectors.search(q, 3)
            assert [r for r, _ in in_db] == [r for r, _ in scanned]
            assert all(abs(a[1] - b[1]) < 1e-5 for a, b in zip(in_db, scanned, strict=True))


def test_unit_weight_zero_is_chunk_vectors_alone(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {**VECTOR_ONLY, "store": {"vector": {"unitWeight": 0}}}) as mem:
        mem.sync()
        assert rows(mem, "SELECT COUNT(*) FROM chunk_units")[0][0] > 0  # stored, not used
        assert top_paths(mem, NEEDLE)[0] == "memory/lisbon.md"
        assert mem.status()["vector"]["exactUnits"] == 0


def downgrade_to_schema_5(db: Path) -> None:
    """Rewrite a schema-6 index as schema 5 wrote it: no unit table, no unit vectors in the cache."""
    con = apsw.Connection(str(db))
    with con:
        con.execute("DELETE FROM embedding_cache WHERE id IN (SELECT vector FROM chunk_units) "
                    "AND id NOT IN (SELECT vector FROM chunks WHERE vector IS NOT NULL)")
        con.execute("DROP TABLE chunk_units")
        con.execute("DELETE FROM meta WHERE key='units'")
        con.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    con.close()


def test_schema_5_index_stays_searchable_and_gains_its_units_on_the_next_sync(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, VECTOR_ONLY) as mem:
        mem.sync()
        chunks = mem.status()["chunks"]
        units = rows(mem, "SELECT COUNT(*) FROM chunk_units")[0][0]
        db = Path(mem.status()["dbPath"])
    downgrade_to_schema_5(db)
    with open_mem(tmp_path, ws, VECTOR_ONLY) as mem:
        st = mem.status()
        assert rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        assert st["chunks"] == chunks and rows(mem, "SELECT COUNT(*) FROM chunk_units") == [(0,)]
        assert st["dirty"] is True, "the unit vectors are still to be filled"
        # Searchable at once, by chunk vectors (no keyword-only fallback while the units are missing).
        resp = mem.search(NEEDLE, min_score=0)
        assert resp.mode == "vector" and resp.results[0].path == "memory/lisbon.md"
        report = mem.sync()
        # A rebuild in the background of searches: chunk vectors come from the cache, only lines are embedded.
        assert report.full and report.embeddings_computed == units
        assert rows(mem, "SELECT COUNT(*) FROM chunk_units") == [(units,)]
        assert mem.status()["dirty"] is False
        assert top_paths(mem, NEEDLE)[0] == "memory/long.md"
        assert mem.sync().files_indexed == 0


def test_turning_units_off_rebuilds_without_them(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert rows(mem, "SELECT COUNT(*) FROM chunk_units")[0][0] > 0
    with open_mem(tmp_path, ws, {"chunking": {"units": "off"}}) as mem:
        assert mem.status()["dirty"] is True
        report = mem.sync()
        assert report.full and report.embeddings_computed == 0
        assert rows(mem, "SELECT COUNT(*) FROM chunk_units") == [(0,)]
        assert mem.search(NEEDLE).mode == "hybrid"


def test_incremental_sync_keeps_units_in_step(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, VECTOR_ONLY) as mem:
        mem.sync()
        write(ws, "memory/long.md", "# Everything\n\n" + "\n".join(f"- {t}" for t in TOPICS if "ferry" not in t) + "\n")
        report = mem.sync()
        assert not report.full and report.files_indexed == 1
        # Units of the replaced chunk went with it; no unit points at a missing chunk.
        assert rows(mem, "SELECT COUNT(*) FROM chunk_units u LEFT JOIN chunks c ON c.rowid = u.chunk "
                         "WHERE c.rowid IS NULL") == [(0,)]
        assert top_paths(mem, NEEDLE)[0] == "memory/lisbon.md"


def test_which_lines_get_a_vector() -> None:
    text = "# Plans\n\n- cello\n- Practise the cello scales every evening\n\n## Travel\nRenew the passport before May"
    lines = tuple(range(1, 8))
    got = chunk_units(text, lines, "lines")
    # Bare one-word lines and blanks get none; a heading of two words does.
    assert [(a, b) for a, b, _ in got] == [(4, 4), (7, 7)]
    assert got[0][2] == "- Practise the cello scales every evening"
    pairs = chunk_units(text, lines, "pairs")
    assert [(a, b) for a, b, _ in pairs] == [(4, 7)]
    assert chunk_units(text, lines, "off") == []
    assert chunk_units("Renew the passport before May", (3,), "lines") == [], "a one-line chunk is its own unit"
    assert [u[:2] for u in chunk_units("金银价格今年上涨了很多很多\n好", (1, 2), "lines")] == [(1, 1)]


def test_auto_int8_with_kept_rows_answers_as_float32_with_units(tmp_path: Path, ws: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A mid-sized index (KEPT_INT8_MIN to 50,000 vectors) scans int8 and rescores chunk and unit rows from the
    # float32 rows it keeps: every search answers exactly as the float32 scan does, scores included.
    pytest.importorskip("faiss")
    from symi_memory.index import vectors as vectors_mod

    monkeypatch.setattr(vectors_mod, "KEPT_INT8_MIN", 1)  # as if the index held 8,192 vectors
    questions = [NEEDLE, "Lisbon photos", *TOPICS[:6]]
    answers = {}
    for scan in ("auto", "float32"):
        with open_mem(tmp_path / scan, ws, {"store": {"vector": {"scan": scan}}}) as mem:
            mem.sync()
            answers[scan] = [mem.search(q, min_score=0).to_dict() for q in questions]
            status = mem.status()["vector"]
            assert status["exactUnits"] >= len(TOPICS)
            if scan == "auto":
                assert status["exactScan"] == "int8+float32-rescoring"
                assert mem.backend.vectors._quant.rows is not None
    assert answers["auto"] == answers["float32"]
