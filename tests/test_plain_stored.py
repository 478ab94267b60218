"""Supersession's plain-chunk answer stored at index time (``chunks.plain``): what ``plain_chunk`` says of each
chunk's text, read by a search instead of telling the text again, never read when other rules told it, and
filled in (without a rebuild) for an index written before the column, which answers at once meanwhile."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.sqlite_memory import open_mem, write

from symi_memory import tools
from symi_memory.index.db import SCHEMA_VERSION
from symi_memory.supersession import _LINES, _PLAIN, PLAIN_FACT, plain_chunk, plain_fact, plain_of_fact

ON = {"query": {"hybrid": {"supersession": {"enabled": True}}}}
QUERIES = ("what car do I drive?", "which bike do I ride", "dentist", "garden coffee")


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n")
    write(ws, "memory/2026-06-01.md", "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n"
                                      "- Bought running shoes.\n")
    write(ws, "memory/bike.md", "The bike is a green gravel bike.\n")
    write(ws, "memory/garden.md", "Garden notes: coffee grounds on the roses, water the basil.\n")
    write(ws, "memory/zürich.md", "Café in Zürich: the car park is behind the station.\n")  # not ASCII: never plain
    return ws


def _rows(mem, sql: str, params: tuple = ()) -> list:  # type: ignore[no-untyped-def]
    return list(mem.backend.store.reader().execute(sql, params))


def _answers(mem) -> list:  # type: ignore[no-untyped-def]
    _LINES.clear()  # what an earlier search told or analysed must not answer for the index
    _PLAIN.clear()
    return [tools.memory_search(mem, {"query": q, "minScore": 0})["results"] for q in QUERIES]


def _set_plain(mem, fact: int | None) -> None:  # type: ignore[no-untyped-def]
    """Every chunk's stored answer set to ``fact``, the rows a running search keeps read again (as after a touch)."""
    with mem.backend.store.write():
        conn = mem.backend.store.conn
        conn.execute("UPDATE chunks SET plain = ?", (fact,))
        conn.execute("INSERT INTO meta(key, value) VALUES ('touches', '1') "
                     "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")


def _march(answers: list) -> dict:
    return next(h for h in answers[0] if h["path"] == "memory/2026-03-01.md")


def test_the_stored_fact_reads_back_as_plain_chunk_says() -> None:
    for text in ("Garden notes: coffee grounds on the roses.", "The car was a blue hatchback until May.",
                 "Moved the dentist to 07-15.", "Ran 5 km.", "Café in Zürich.", ""):
        assert plain_of_fact(plain_fact(text)) is plain_chunk(text)
    assert plain_of_fact(None) is None
    assert plain_of_fact(PLAIN_FACT + 2) is None  # told by other rules: not read
    assert plain_of_fact(PLAIN_FACT - 2 | 1) is None


def test_the_index_stores_each_chunks_answer_and_search_reads_it(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        write(ws, "memory/2026-07-01.md", "# 2026-07-01\n\n- Washed the red SUV.\n")  # an incremental write too
        assert mem.sync().files_indexed == 1
        stored = _rows(mem, "SELECT text, plain FROM chunks")
        assert len(stored) == 6 and all(fact == plain_fact(text) for text, fact in stored)
        assert {plain_of_fact(fact) for _, fact in stored} == {True, False}
        answers = _answers(mem)
        assert _march(answers)["supersededBy"] == {"path": "memory/2026-06-01.md", "startLine": 3, "endLine": 3}
        # Without stored answers (a backend without the capability, an index not filled yet) the texts are told:
        # the same answers.
        _set_plain(mem, None)
        assert _answers(mem) == answers
        # Answers told by other rules are not read: one calling every chunk plain changes nothing.
        _set_plain(mem, PLAIN_FACT + 3)
        assert _answers(mem) == answers
        # The stored answer is what a search reads: calling the two car notes plain (by this version's rules)
        # leaves the March note unmarked, as no pair can be made of plain chunks.
        _set_plain(mem, PLAIN_FACT | 1)
        assert "supersededBy" not in _march(_answers(mem))


def _downgrade_to_schema_7(db: Path) -> None:
    """Rewrite the index as schema 7 (main before stored plain answers) wrote it: chunks without ``plain``, no
    meta of it."""
    con = apsw.Connection(str(db))
    with con:
        con.execute("ALTER TABLE chunks DROP COLUMN plain")
        con.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
        con.execute("DELETE FROM meta WHERE key IN ('plain_version', 'plain_pending')")
    con.close()


def test_a_schema_7_index_answers_at_once_and_gains_its_plain_answers_on_the_next_sync(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        before = _answers(mem)
        chunks = mem.status()["chunks"]
        db = Path(mem.status()["dbPath"])
        index_id = _rows(mem, "SELECT value FROM meta WHERE key='index_id'")
    _downgrade_to_schema_7(db)
    with open_mem(tmp_path, ws, ON) as mem:
        # Migrated in place on open: every row kept (the same index, no rebuild), the new column empty.
        assert _rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        assert _rows(mem, "SELECT value FROM meta WHERE key='index_id'") == index_id
        assert _rows(mem, "SELECT COUNT(*) FROM chunks WHERE plain IS NULL") == [(chunks,)]
        assert mem.status()["chunks"] == chunks
        assert _answers(mem) == before  # told from the text meanwhile
        report = mem.sync()
        assert report.files_indexed == 0  # filled in place
        stored = _rows(mem, "SELECT text, plain FROM chunks")
        assert len(stored) == chunks and all(fact == plain_fact(text) for text, fact in stored)
        assert _rows(mem, "SELECT COUNT(*) FROM meta WHERE key IN ('plain_pending', 'lines_pending')") == [(0,)]
        assert _rows(mem, "SELECT value FROM meta WHERE key='plain_version'") == [(str(PLAIN_FACT >> 1),)]
        assert _answers(mem) == before
        # A sync with nothing to fill leaves the rows alone.
        assert mem.sync().files_indexed == 0
        assert _rows(mem, "SELECT text, plain FROM chunks") == stored


def test_answers_told_by_other_rules_are_refilled_by_the_next_sync(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        before = _answers(mem)
        _set_plain(mem, (PLAIN_FACT >> 1) - 1 << 1 | 1)  # an older version's answers, all "plain"
        mem.backend.store.set_meta("plain_version", str((PLAIN_FACT >> 1) - 1))
        assert _answers(mem) == before
        assert mem.sync().files_indexed == 0
        stored = _rows(mem, "SELECT text, plain FROM chunks")
        assert stored and all(fact == plain_fact(text) for text, fact in stored)
        assert _answers(mem) == before


def test_a_full_reindex_stores_the_answers_too(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        before = _answers(mem)
        mem.sync(force=True)
        stored = _rows(mem, "SELECT text, plain FROM chunks")
        assert stored and all(fact == plain_fact(text) for text, fact in stored)
        assert _answers(mem) == before


#: A third-party post-processor's glossary: the notes keep a shorthand, the processor hands the search its meaning.
_GLOSSARY = {"Car notes: blue hatchback.": "The car is a blue hatchback.",
             "Car notes: red SUV.": "Sold the hatchback; now the car is a red SUV."}


class _Glossary:
    """Runs before supersession (order 300) and changes candidates' text (keeping their ids), as the hook allows."""

    def process(self, candidates, ctx):  # type: ignore[no-untyped-def]
        import attrs

        return [attrs.evolve(c, text=_GLOSSARY.get(c.text.strip(), c.text)) for c in candidates]


def test_a_text_an_earlier_processor_changed_is_told_from_that_text(tmp_path: Path) -> None:
    """The answer stored for a chunk is of the text the index holds: when an earlier post-processor hands
    supersession another text for that candidate, supersession judges the text it is given (as it does without
    stored answers), not the stored answer of the shorthand, which is plain."""
    from typing import Any

    from symi_memory import hookimpl
    from symi_memory.specs import PostProcessorSpec

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="glossary", order=300, factory=lambda hybrid: _Glossary()))

    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "Car notes: blue hatchback.\n")
    write(ws, "memory/2026-06-01.md", "Car notes: red SUV.\n")
    assert all(plain_chunk(t) for t in _GLOSSARY) and not all(plain_chunk(t) for t in _GLOSSARY.values())
    with open_mem(tmp_path, ws, ON, plugins=[("glossary", Plugin())]) as mem:
        mem.sync()
        assert {plain_of_fact(fact) for (fact,) in _rows(mem, "SELECT plain FROM chunks")} == {True}
        _LINES.clear()
        _PLAIN.clear()
        hits = tools.memory_search(mem, {"query": "what car do I drive?", "minScore": 0})["results"]
        march = next(h for h in hits if h["path"] == "memory/2026-03-01.md")
        assert march.get("supersededBy") == {"path": "memory/2026-06-01.md", "startLine": 1, "endLine": 1}


def test_a_running_process_answers_after_an_older_release_rebuilt_the_index_at_its_schema(tmp_path: Path) -> None:
    """A release from before the column opens the index (an older CLI or host left installed) and, seeing a schema it
    does not know, rebuilds it at its own, without ``chunks.plain``. A process of this release that had it open
    answers its next searches (it brings the index up to its schema again, as an open does), where every search
    failed with 'no such column: c.plain' until it was restarted."""
    ws = _ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        before = _answers(mem)
        db = Path(mem.status()["dbPath"])
        _downgrade_to_schema_7(db)  # what the older release's rebuild leaves, as tables go
        con = apsw.Connection(str(db))
        con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")  # rebuilt
        con.close()
        assert _answers(mem) == before
        assert _rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        write(ws, "memory/2026-07-01.md", "# 2026-07-01\n\n- Washed the red SUV.\n")
        assert mem.sync().files_indexed == 1


def test_a_running_process_syncs_after_an_older_release_rebuilt_the_index_at_its_schema(tmp_path: Path) -> None:
    """As above, but the process's next sync (a watcher's, an append's) comes before any search: it failed with
    'table chunks has no column named plain', and every sync after it, while status said nothing was wrong, until
    a search brought the index up to this schema. A sync does that first, as a search does."""
    ws = _ws(tmp_path)
    with open_mem(tmp_path, ws, ON) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
        _downgrade_to_schema_7(db)
        con = apsw.Connection(str(db))
        con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")  # rebuilt
        con.close()
        write(ws, "memory/2026-07-01.md", "# 2026-07-01\n\n- Washed the red SUV.\n")
        assert mem.sync().files_indexed == 1
        assert _rows(mem, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
        hits = tools.memory_search(mem, {"query": "washed the red SUV", "minScore": 0})["results"]
        assert hits and hits[0]["path"] == "memory/2026-07-01.md", hits
