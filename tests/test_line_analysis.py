"""Supersession's line analysis stored at index time (``chunks.lines``): the same lines as analysing at query
time, read instead of it, correct when only an mtime changes, and filled in for an index from before it."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import apsw
import pytest
from support.sqlite_memory import open_mem, write

from symi_memory import tools
from symi_memory.index.db import SCHEMA_VERSION
from symi_memory.supersession import (
    _LINES,
    LINE_ANALYSIS_VERSION,
    _split,
    line_analysis,
    lines_from_analysis,
    split_lines,
)

ON = {"query": {"hybrid": {"supersession": {"enabled": True}}}}
DEVMEM = Path(__file__).resolve().parents[1] / "bench" / "datasets" / "devmem" / "workspace"

TEXTS = [
    ("memory/2026-03-01.md", 1, "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday."),
    ("memory/2026-06-01.md", 5, "- Sold the hatchback; now the car is a red SUV.\n\n- Bought running shoes, 2 pairs."),
    ("MEMORY.md", 10, "## Setup\nRouter at 10.20.0.1, since 2026-06-20.\n## History\nPreviously the router was at "
                      "192.168.1.1 (until 2026-06-20).\n- 2026-05-01: kickoff, standup at 09:45"),
    ("notes/plans.md", 3, "Grandpa Tomasz is visiting from 2026-10-02, expected 2026-10-15.\n"
                          "Vitamin D raised to 2000 IU; 13.6 kg, 76% of carriers on 07-15.\n\n   \n"
                          "Deploy kessler-backups-eu2 v0.4.2 in 380 ms. CT_105 moved to Thursday."),
    ("memory/2026-12-10.md", 2, "- Grandpa plans to stay from 01-05 until 01-20.\n- Zürich café: Ünïcode ok, 第一 İstanbul"),
    ("sessions/a.jsonl", 1, "User: The visit is on 07-15.\nAssistant: noted, moved to 07-28."),
]


def _same(a: list, b: list) -> None:
    assert a == b
    assert [ln.quantities for ln in a] == [ln.quantities for ln in b]  # not part of Line equality


@pytest.mark.parametrize(("path", "start", "text"), TEXTS)
@pytest.mark.parametrize("mtime", [None, 1_780_000_000.0])
def test_stored_analysis_gives_the_lines_a_fresh_analysis_gives(path: str, start: int, text: str,
                                                                mtime: float | None) -> None:
    stored = line_analysis(path, start, text)
    _same(lines_from_analysis(stored, path, start, text, mtime), _split(path, start, text, mtime, None))
    # A transcript chunk's message times replace every moment and decide which days were still ahead.
    written = (1_752_000_000.0, 1_752_500_000.0)
    _same(lines_from_analysis(stored, path, start, text, mtime, written), _split(path, start, text, mtime, written[1]))


def test_every_devmem_chunk_reads_back_as_analysed() -> None:
    from symi_memory.chunking import chunk_text

    count = 0
    for f in sorted(DEVMEM.rglob("*.md")):
        rel = f.relative_to(DEVMEM).as_posix()
        for c in chunk_text(f.read_text(encoding="utf-8"), 400, 80):
            stored = line_analysis(rel, c.start_line, c.text)
            _same(lines_from_analysis(stored, rel, c.start_line, c.text, 1_770_000_000.0),
                  _split(rel, c.start_line, c.text, 1_770_000_000.0, None))
            count += 1
    assert count > 50


def test_an_analysis_of_another_version_or_text_is_not_read() -> None:
    path, start, text = TEXTS[0]
    stored = line_analysis(path, start, text)
    assert stored[0] == LINE_ANALYSIS_VERSION
    assert lines_from_analysis(bytes((LINE_ANALYSIS_VERSION + 1,)) + stored[1:], path, start, text, None) is None
    assert lines_from_analysis(stored[:1] + b"not zlib", path, start, text, None) is None
    assert lines_from_analysis(stored, path, start, text + "\n- One more line.", None) is None
    # Made for another text with the same lines, another path (a dated note's date) or start line: not read.
    assert lines_from_analysis(stored, path, start, text.replace("blue", "green"), None) is None
    assert lines_from_analysis(stored, "memory/2026-03-02.md", start, text, None) is None
    assert lines_from_analysis(stored, path, start + 1, text, None) is None
    assert lines_from_analysis(b"not json", path, start, text, None) is None
    _LINES.clear()
    # split_lines then analyses the text itself.
    _same(split_lines(path, start, text + "\n- One more line.", None, None, stored),
          _split(path, start, text + "\n- One more line.", None, None))


def _car_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n")
    write(ws, "memory/2026-06-01.md", "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n"
                                      "- Bought running shoes.\n")
    write(ws, "memory/2026-02-01.md", "# 2026-02-01\n\n- The bike is a green gravel bike.\n")
    return ws


def _decode(blob: bytes) -> list:
    return json.loads(zlib.decompress(blob[1:]))


def _encode(rows: list) -> bytes:
    return bytes((LINE_ANALYSIS_VERSION,)) + zlib.compress(json.dumps(rows).encode())


def _rows(mem, sql: str, params: tuple = ()) -> list:  # type: ignore[no-untyped-def]
    return list(mem.backend.store.reader().execute(sql, params))


def _answers(mem) -> list:  # type: ignore[no-untyped-def]
    _LINES.clear()  # what an earlier search analysed must not answer for the index
    return [tools.memory_search(mem, {"query": q, "minScore": 0})["results"]
            for q in ("what car do I drive?", "which bike do I ride", "dentist")]


def test_the_index_stores_each_chunks_analysis_and_search_reads_it(tmp_path: Path) -> None:
    ws = _car_ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        # A file written after the first (full) build goes in incrementally, with its analysis too.
        write(ws, "memory/2026-07-01.md", "# 2026-07-01\n\n- Washed the red SUV.\n")
        assert mem.sync().files_indexed == 1
        stored = _rows(mem, "SELECT path, start_line, text, lines FROM chunks")
        assert len(stored) == 4 and all(blob == line_analysis(p, s, t) for p, s, t, blob in stored)
        with_stored = _answers(mem)
        march = next(h for h in with_stored[0] if h["path"] == "memory/2026-03-01.md")
        assert march["supersededBy"] == {"path": "memory/2026-06-01.md", "startLine": 3, "endLine": 3}
        # Without stored analyses (a backend without the capability), the text is analysed: same answers.
        with mem.backend.store.write():
            mem.backend.store.conn.execute("UPDATE chunks SET lines = NULL")
        assert _answers(mem) == with_stored
        # The stored analysis is what a search reads: one that dates the June line before March (its moment)
        # leaves March unmarked. (Its change flag alone no longer does: a line saying the hatchback was sold
        # supersedes from its text too, by the disposal rule.)
        path = "memory/2026-06-01.md"
        start, text = _rows(mem, "SELECT start_line, text FROM chunks WHERE path = ?", (path,))[0]
        rows = _decode(line_analysis(path, start, text))
        assert rows[1][3] == 2 and rows[1][2] > 1_772_000_000  # the "Sold ...; now ..." line states a change, in June
        rows[1][2] = 1_767_225_600.0  # 2026-01-01
        blob = _encode(rows)
        with mem.backend.store.write():
            mem.backend.store.conn.execute("UPDATE chunks SET lines = ? WHERE path = ?", (blob, path))
        assert all("supersededBy" not in h for h in _answers(mem)[0])


def test_an_mtime_change_without_a_text_change_reorders_undated_notes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    old = write(ws, "memory/car.md", "The car is a blue hatchback.\n")
    new = write(ws, "memory/car-update.md", "Sold the hatchback; now the car is a red SUV.\n")
    os.utime(old, (1_770_000_000, 1_770_000_000))
    os.utime(new, (1_780_000_000, 1_780_000_000))
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        hits = _answers(mem)[0]
        assert next(h for h in hits if h["path"] == "memory/car.md")["supersededBy"]["path"] == "memory/car-update.md"
        stored = _rows(mem, "SELECT lines FROM chunks WHERE path = 'memory/car.md'")
        # The hatchback note is edited later without changing its text: now it is the newer one.
        os.utime(old, (1_790_000_000, 1_790_000_000))
        report = mem.sync()
        assert report.files_indexed == 0
        assert _rows(mem, "SELECT lines FROM chunks WHERE path = 'memory/car.md'") == stored  # nothing to re-analyse
        hits = tools.memory_search(mem, {"query": "what car do I drive?", "minScore": 0})["results"]
        assert all("supersededBy" not in h for h in hits), hits


def _downgrade_to_schema_6(db: Path) -> None:
    """Rewrite the index as schema 6 wrote it: chunks without the ``lines`` column, no index id."""
    con = apsw.Connection(str(db))
    with con:
        con.execute("ALTER TABLE chunks DROP COLUMN lines")
        con.execute("UPDATE meta SET value='6' WHERE key='schema_version'")
        con.execute("DELETE FROM meta WHERE key='index_id'")
    con.close()


def test_a_schema_6_index_answers_at_once_and_gains_its_analyses_on_the_next_sync(tmp_path: Path) -> None:
    ws = _car_ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        before = _answers(mem)
        chunks = mem.status()["chunks"]
        db = Path(mem.status()["dbPath"])
    _downgrade_to_schema_6(db)
    with open_mem(tmp_path, ws, ON) as mem:
        assert _rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        assert len(_rows(mem, "SELECT value FROM meta WHERE key='index_id'")) == 1  # given in the migration
        assert _rows(mem, "SELECT COUNT(*) FROM chunks WHERE lines IS NULL") == [(chunks,)]
        assert mem.status()["chunks"] == chunks
        assert _answers(mem) == before  # analysed at query time meanwhile
        report = mem.sync()
        assert report.files_indexed == 0  # no rebuild: the analyses are filled in place
        stored = _rows(mem, "SELECT path, start_line, text, lines FROM chunks")
        assert all(blob == line_analysis(p, s, t) for p, s, t, blob in stored)
        assert _rows(mem, "SELECT COUNT(*) FROM meta WHERE key='lines_pending'") == [(0,)]
        assert _answers(mem) == before


def test_analyses_of_an_older_version_are_refilled_by_the_next_sync(tmp_path: Path) -> None:
    """An index filled by an older analysis (version 1 stored the bare JSON) gets this version's analyses at
    the next sync, without a rebuild; meanwhile search analyses the text and answers the same."""
    ws = _car_ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        before = _answers(mem)
        with mem.backend.store.write():
            conn = mem.backend.store.conn
            for rowid, blob in list(conn.execute("SELECT rowid, lines FROM chunks")):
                rows = _decode(blob)
                rows[0][0] = 1
                conn.execute("UPDATE chunks SET lines = ? WHERE rowid = ?",
                             (json.dumps(rows, separators=(",", ":")).encode(), rowid))
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('lines_version', '1')")
        assert _answers(mem) == before  # the old analyses are not read: the text is analysed
        report = mem.sync()
        assert report.files_indexed == 0
        stored = _rows(mem, "SELECT path, start_line, text, lines FROM chunks")
        assert stored and all(blob == line_analysis(p, s, t) for p, s, t, blob in stored)
        assert _rows(mem, "SELECT value FROM meta WHERE key='lines_version'") == [(str(LINE_ANALYSIS_VERSION),)]
        assert _rows(mem, "SELECT COUNT(*) FROM meta WHERE key='lines_pending'") == [(0,)]
        assert _answers(mem) == before


def test_a_reindex_keeps_the_stored_analysis_of_every_chunk_whose_text_and_place_are_unchanged(tmp_path: Path) -> None:
    """A full reindex (or an edit further down a file) writes unchanged chunks again: their stored analysis
    is kept instead of analysing their lines again (what a keyword-only or cached-vector rebuild spent most of
    its time on). Shown by a stored analysis the index could not have made: it survives the reindex, while
    an edited chunk and one of another version get a fresh analysis."""
    ws = _car_ws(tmp_path)
    write(ws, "memory/notes.md", "# Notes\n\n" + "".join(f"- Item {i}: the hatchback needs {i} litres.\n"
                                                        for i in range(120)))
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        store = mem.backend.store
        path = "memory/2026-06-01.md"
        (start, text), = _rows(mem, "SELECT start_line, text FROM chunks WHERE path = ?", (path,))
        rows = _decode(line_analysis(path, start, text))
        rows[1][3] = 0  # "Sold the hatchback; now ..." stored as stating no change
        marked = _encode(rows)
        with store.write():
            store.conn.execute("UPDATE chunks SET lines = ? WHERE path = ?", (marked, path))
            # The bike note's analysis is of another version: analysed again.
            store.conn.execute("UPDATE chunks SET lines = X'01' WHERE path = 'memory/2026-02-01.md'")
        assert len(_rows(mem, "SELECT 1 FROM chunks WHERE path = 'memory/notes.md'")) > 2
        report = mem.sync(force=True)
        assert report.full
        assert _rows(mem, "SELECT lines FROM chunks WHERE path = ?", (path,)) == [(marked,)]
        stored = _rows(mem, "SELECT path, start_line, text, lines FROM chunks WHERE path != ?", (path,))
        assert all(blob == line_analysis(p, s, t) for p, s, t, blob in stored)
        # An edit at the end of a file: its earlier chunks keep their analyses, the edited one is analysed anew.
        notes = {s: blob for s, blob in _rows(mem, "SELECT start_line, lines FROM chunks WHERE path = 'memory/notes.md'")}
        first = min(notes)
        (ftext,), = _rows(mem, "SELECT text FROM chunks WHERE path = 'memory/notes.md' AND start_line = ?", (first,))
        first_rows = _decode(notes[first])
        first_rows[1][1] = "kept"  # the first chunk's first line, with terms no analysis gives
        with store.write():
            store.conn.execute("UPDATE chunks SET lines = ? WHERE path = 'memory/notes.md' AND start_line = ?",
                               (_encode(first_rows), first))
        with (ws / "memory/notes.md").open("a", encoding="utf-8") as f:
            f.write("- Sold the hatchback.\n")
        assert mem.sync().files_indexed == 1
        after = {s: (t, blob) for s, t, blob in
                 _rows(mem, "SELECT start_line, text, lines FROM chunks WHERE path = 'memory/notes.md'")}
        assert after[first] == (ftext, _encode(first_rows))
        last = max(after)
        assert after[last][1] == line_analysis("memory/notes.md", last, after[last][0])
        assert "Sold the hatchback" in after[last][0]
