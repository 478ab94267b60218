"""A query with tens of thousands of distinct words (an agent pasting a document as its query) answers, and fast.

Before: past SQLite's 32,766 bound variables the term statistics query failed. With local synonyms on, the whole
search failed ("too many SQL variables"); without them, the keyword side fell back to matching every word, and one
search took 15-40 s. Now only the first 1,024 distinct content words are looked up, and term statistics are read in
batches.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from support.sqlite_memory import add_filler, open_local, open_mem, write

from symi_memory import tools


def _pasted(count: int, *, needle_first: bool = True) -> str:
    rng = random.Random(7)
    words = " ".join(sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(8)) for _ in range(count)}))
    return f"porcupine {words}" if needle_first else f"{words} porcupine"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w, count=60)
    write(w, "memory/2026-02-01.md", "# Feb\n\n- The porcupine enclosure was repaired.\n")
    return w


def test_keyword_search_with_40k_distinct_words(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        # How long it takes (15-40 s before, about 1 s now on a busy 2-core host) is not asserted here: timings
        # belong in bench/, and the suite's timeout guards against a hang.
        out = tools.memory_search(mem, {"query": _pasted(40_000), "minScore": 0})
        assert "error" not in out, out
        assert out["results"] and out["results"][0]["path"] == "memory/2026-02-01.md"
        # The cut is said (it was silent): a needle past it is not looked up.
        assert len(out["warnings"]) == 1 and "only its first 1,024 were searched for" in out["warnings"][0]
        assert "warnings" not in tools.memory_search(mem, {"query": "porcupine enclosure", "minScore": 0})


def test_the_cut_query_holds_the_words_builtin_sqlite_looks_up() -> None:
    # Every backend is handed the query cut by capped_query: builtin-sqlite looks up the same words in it as in the
    # whole query (stop words and case variants do not count towards the 1,024, as QueryAnalysis counts them).
    from symi_memory.index.analysis import MAX_QUERY_WORDS, QueryAnalysis, capped_query

    rng = random.Random(3)
    words = [f"w{i:05d}" for i in range(3_000)]
    text = " ".join(f"{w} the {w.upper()} of {rng.choice(words[:50])}" for w in words)
    cut, warning = capped_query(text)
    assert warning is not None and len(cut) < len(text)
    assert QueryAnalysis.of(cut).words == QueryAnalysis.of(text).words
    assert len({w.lower() for w in QueryAnalysis.of(cut).words}) == MAX_QUERY_WORDS
    assert capped_query(" ".join(words[:MAX_QUERY_WORDS])) == (" ".join(words[:MAX_QUERY_WORDS]), None)


def test_local_synonyms_with_40k_distinct_words(tmp_path: Path) -> None:
    ws = tmp_path / "small"
    add_filler(ws, count=3)
    write(ws, "memory/2026-02-01.md", "# Feb\n\n- The porcupine enclosure was repaired.\n")
    with open_local(tmp_path, ws) as mem:
        mem.sync()
        out = tools.memory_search(mem, {"query": _pasted(40_000), "minScore": 0})
        assert "error" not in out, out  # "too many SQL variables" before
        assert any(r["path"] == "memory/2026-02-01.md" for r in out["results"])


def test_term_statistics_of_more_words_than_sqlite_binds(tmp_path: Path, ws: Path) -> None:
    # The store answers for any number of terms (a caller other than search may ask for many).
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        store = mem.backend.store
        generation, _ = store._index_size(None)
        terms = [f"zz{i}" for i in range(40_000)] + ["porcupin"]
        counts = store.term_occurrences(terms, generation)
        assert counts is not None and counts["porcupin"] == 1 and counts["zz7"] == 0


def test_history_says_its_query_was_cut(tmp_path: Path, ws: Path) -> None:
    # Seam of the query cap (every search's query cut to 1,024 distinct words, said in its warnings) and history's
    # warnings (the stages skipped while finding the fact): history cut the query too, but said nothing, so a
    # document pasted as a history query lost its tail silently where the same query as a search said so.
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        found = mem.history(_pasted(5_000), min_score=0)
        assert found and found[-1]["path"] == "memory/2026-02-01.md"
        assert len(found.warnings) == 1 and "only its first 1,024 were searched for" in found.warnings[0]
        assert found.to_dict()["warnings"] == list(found.warnings)
        assert not mem.history("porcupine enclosure", min_score=0).warnings
