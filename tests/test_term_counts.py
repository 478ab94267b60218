"""Term counts of search candidates read from FTS5's own index equal the ones tokenizing the chunk text gives.

A search scores each candidate's keyword side from how often the query's terms occur in it. For rare
terms they are read from FTS5's index (``fts5vocab`` instance rows) instead of tokenizing every
candidate; the scores must not move by a bit either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sqlite_memory import add_filler, open_mem, write

from symi_memory.index import backend as backend_mod
from symi_memory.index.analysis import QueryAnalysis, counts_in, needles, term_string
from symi_memory.index.keyword import CJK_RUN_RE

NOTES = {
    "memory/a.md": "# Flights\n\nBooked flights to Lisbon; the flight leaves at 06:40. Flying again in May.\n\n"
                   "Relational databases, relate, relating: generalization generalizations.\n",
    "memory/b.md": "# Config\n\nSet SYMI_DEPLOY_TOKEN_PATH and db_host_2 before the deploy. Deploys deploy deployed.\n\n"
                   "An e-mail about emails, e-mails and the e.mail alias; hash a828e60 and v1.2.3.\n",
    "memory/c.md": "# Long\n\n" + "x" * 90 + " pneumonoultramicroscopicsilicovolcanoconiosis " + "ab" * 40 + "\n\n"
                   "Cafe CAFE cafe's caf\u00e9-free\n",
    "memory/d.md": "# \u65c5\u884c\n\n\u4eca\u5e74\u91d1\u94f6\u4ef7\u683c\u4e0a\u6da8 flights gold flights\n",
    "memory/e.md": "# Garden\n\nRoses, rose, rosy; watering watered waters water. Garden gardens gardening.\n",
    # Not ASCII, no CJK run: counted from the index too (accents folded, dashes and quotes as separators).
    "memory/g.md": "# Caf\u00e9s \u2014 r\u00e9sum\u00e9\n\nThe caf\u00e9\u2019s r\u00e9sum\u00e9s \u2192 na\u00efve "
                   "Stra\u00dfe \u0438\u0432\u0430\u043d \u03b1\u03b8\u03ae\u03bd\u03b1 \ufb01le "
                   "cafe\u0301 \u0130stanbul \U0001f600 flights \u201cflight\u201d\n",
}
QUERIES = ["flights to lisbon", "deploy token path", "db_host_2 deploy", "emails about mail", "garden roses water",
           "relational generalization", "a828e60 hash", "gold flights", "cafe resume naive", "istanbul file",
           "\u91d1\u94f6\u4ef7\u683c flights", "pneumonoultramicroscopicsilicovolcanoconiosis"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w, count=12)
    for rel, text in NOTES.items():
        write(w, rel, text)
    return w


def _vocabulary(store) -> list[str]:  # type: ignore[no-untyped-def]
    return [t for (t,) in store._read("SELECT term FROM chunks_vocab")]


def _chunks(store) -> dict[int, str]:  # type: ignore[no-untyped-def]
    return dict(store._read("SELECT rowid, text FROM chunks").fetchall())


def _assert_counts_match(store) -> int:  # type: ignore[no-untyped-def]
    """FTS5's counts of every index term equal term_string's in every chunk without a CJK run; returns how many
    chunks were compared."""
    terms = _vocabulary(store)
    chunks = {k: t for k, t in _chunks(store).items() if not CJK_RUN_RE.search(t)}
    assert any(not t.isascii() for t in chunks.values())
    got = store.term_counts(terms, chunks)
    assert got is not None
    wanted = needles(terms)
    for k, text in chunks.items():
        assert got.get(k, {}) == counts_in(term_string(text), wanted), text
    return len(chunks)


def test_counts_from_the_index_equal_tokenized_counts_after_rewrites_and_deletes(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        store = mem.backend.store
        assert _assert_counts_match(store) >= 15
        # Rewritten and removed files: FTS5 deletes their rows (contentless_delete) and SQLite reuses
        # their rowids for the new chunks; no count of a deleted chunk may leak into a new one.
        write(ws, "memory/e.md", "# Garden\n\nNothing about roses now: flights, flights and a flight.\n")
        (ws / "memory/a.md").unlink()
        write(ws, "memory/f.md", "# New\n\nWatering the garden; the roses bloom. Deploy deploys.\n")
        mem.sync()
        assert _assert_counts_match(store) >= 15


def test_search_scores_are_the_same_with_counts_from_the_index(tmp_path: Path, ws: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def answers() -> list[list[tuple[str, float, float | None, float | None]]]:
        with open_mem(tmp_path, ws) as mem:
            mem.sync()
            out = []
            for q in QUERIES:
                res = mem.backend.search(_query(q))
                out.append([(c.id, c.score, c.text_score, c.vector_score) for c in res.candidates])
            return out

    _always_from_index(monkeypatch)
    from_index = answers()
    monkeypatch.setattr(backend_mod, "FTS_COUNT_FIXED_CHARS", 10**12)  # never cheaper: every chunk tokenized
    tokenized = answers()
    assert from_index == tokenized
    assert any(from_index)


def test_backend_reads_rare_terms_from_the_index_for_chunks_without_cjk(tmp_path: Path, ws: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # This small index is cheaper to tokenize than to read from FTS5 by the measured costs: no fixed cost here.
    monkeypatch.setattr(backend_mod, "FTS_COUNT_FIXED_CHARS", 0)
    monkeypatch.setattr(backend_mod, "FTS_COUNT_CHARS_PER_TERM", 0)
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        backend = mem.backend
        store = backend.store
        gen = store.generation_key()
        chunks = _chunks(store)
        rows = store.candidate_rows(list(chunks))
        terms = QueryAnalysis.of("gold flights deploy").terms
        got = backend._indexed_term_counts(rows, terms, gen)
        plain = {k for k, t in chunks.items() if not CJK_RUN_RE.search(t)}
        # Rare terms: read from the index for every chunk without a CJK run; the CJK note is left to tokenizing.
        assert set(got) == plain and len(plain) < len(chunks)
        assert any(not chunks[k].isascii() for k in plain)
        for k in plain:
            assert got[k] == counts_in(term_string(chunks[k]), needles(terms))
        assert any(got.values())
        # The rows were read at another generation (a write landed meanwhile): nothing from the index.
        assert backend._indexed_term_counts(rows, terms, (gen[0], gen[1] - 1)) == {}
        # Terms whose occurrences cost more to read than counting in the text: tokenized instead.
        monkeypatch.setattr(backend_mod, "FTS_COUNT_CHARS_PER_OCCURRENCE", 10**6)
        assert backend._indexed_term_counts(rows, terms, gen) == {}


def _always_from_index(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FTS_COUNT_FIXED_CHARS", "FTS_COUNT_CHARS_PER_TERM", "FTS_COUNT_CHARS_PER_OCCURRENCE"):
        monkeypatch.setattr(backend_mod, name, 0)


def _query(text: str):  # type: ignore[no-untyped-def]
    from symi_memory.types import SearchQuery

    return SearchQuery(text=text, max_results=10, min_score=0.0, candidate_limit=40, sources=("memory",))


def test_a_term_without_cjk_is_counted_in_the_text_column_without_comparing_columns(tmp_path: Path, ws: Path) -> None:
    # The cjk column holds CJK bigrams only, so a term without a CJK character occurs in the text column alone:
    # its instances are read without comparing each one's column (a string compare per instance in SQLite). A
    # CJK term is in both columns (a two-character run is a text token and a bigram) and is still filtered.
    import apsw

    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        store = mem.backend.store
        chunks = _chunks(store)
        conn = store.reader()
        read: list[tuple[str | None, str | None]] = []

        def authorizer(op: int, a: str | None, b: str | None, db: str | None, trigger: str | None) -> int:
            if op == apsw.SQLITE_READ:
                read.append((a, b))
            return apsw.SQLITE_OK

        conn.authorizer = authorizer
        for term, filtered in (("flight", False), ("\u65c5\u884c", True)):  # 旅行: a heading of its own in d.md
            read.clear()
            got = store.term_docs(term, None)
            assert got is not None and got
            assert (("chunks_instances", "col") in read) is filtered, term
            # Counted in the text column only: a chunk with a CJK run too (d.md) counts as its text says.
            assert got == {k: n for k, text in chunks.items() if (n := text.count(term) if filtered else
                                                                   counts_in(term_string(text), needles([term])).get(term, 0))}


def test_counts_are_read_from_the_index_once_counting_in_the_candidates_costs_as_much(
        tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The read is chosen when counting in the candidates (each text's length; a chunk whose terms are kept costs
    # FTS_COUNT_CACHED_CHARS) costs the read's cost or more: at the cost exactly it is read, one character short
    # of it the counts are left to the text.
    monkeypatch.setattr(backend_mod, "FTS_COUNT_CHARS_PER_TERM", 0)
    monkeypatch.setattr(backend_mod, "FTS_COUNT_CHARS_PER_OCCURRENCE", 0)
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        backend = mem.backend
        store = backend.store
        gen = store.generation_key()
        chunks = {k: t for k, t in _chunks(store).items() if t.isascii()}
        rows = store.candidate_rows(list(chunks))
        terms = QueryAnalysis.of("gold flights deploy").terms
        kept = list(chunks)[:2]
        for cached in ((), kept):
            backend._terms = (gen, {k: ("", 0) for k in cached})
            chars = sum(backend_mod.FTS_COUNT_CACHED_CHARS if k in cached else len(t) for k, t in chunks.items())
            monkeypatch.setattr(backend_mod, "FTS_COUNT_FIXED_CHARS", chars)
            got = backend._indexed_term_counts(rows, terms, gen)
            assert set(got) == set(chunks) and any(got.values())
            for k in chunks:
                assert got[k] == counts_in(term_string(chunks[k]), needles(terms))
            monkeypatch.setattr(backend_mod, "FTS_COUNT_FIXED_CHARS", chars + 1)
            assert backend._indexed_term_counts(rows, terms, gen) == {}
