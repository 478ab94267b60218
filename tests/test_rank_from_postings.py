"""Keyword search ranked from its rare terms' counts gives what FTS5's MATCH ranked by ``bm25()`` gives, bit for bit.

A query whose words are each one index term occurring rarely is ranked in Python from the counts the search
reads anyway (``KeywordSearch._rank_from_postings``); every rank, and the order of equal ranks, must be the
ones FTS5 computes, on any index (rewrites, deletes, words in many chunks, repeated words, accents).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import add_filler, open_mem, write

from symi_memory.index import fts as fts_mod
from symi_memory.index.analysis import QueryAnalysis
from symi_memory.index.meta import Generation

FAMILIES = ["flight flights flying", "deploy deploys deployed", "garden gardens gardening", "rose roses rosy",
            "caf\u00e9 cafe CAFE", "r\u00e9sum\u00e9 resume", "a828e60", "db_host_2", "v1.2.3", "zebra zebras",
            "okapi", "lisbon", "water watering watered", "token tokens", "q17", "ticket-4411", "na\u00efve"]


def _notes(ws: Path, rng: random.Random, count: int) -> None:
    words = " ".join(FAMILIES).split()
    for i in range(count):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(3, 60)))
        write(ws, f"memory/n{i}.md", f"# Note {i}\n\n{body}\n")


def _compare(mem: Any, rng: random.Random, rounds: int) -> int:
    """Ask random queries both ways; returns how many the postings ranked (the rest fell back to FTS5)."""
    store = mem.backend.store
    gen = store.generation_key()
    postings = mem.backend._whole_postings  # what a search passes: the counts it keeps for the generation
    words = " ".join(FAMILIES).split() + ["absent", "nowhere9"]
    ranked = 0
    taken: list[bool] = []
    original = fts_mod.KeywordSearch._rank_from_postings

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        got = original(self, *a, **k)
        taken.append(got is not None)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fts_mod.KeywordSearch, "_rank_from_postings", spy)
        for _ in range(rounds):
            q = " ".join(rng.sample(words, rng.randint(1, 5)))
            qa = QueryAnalysis.of(q)
            limit = rng.choice([1, 3, 10, 40, 120])
            # Each with no document frequency known: the postings side learns them from the counts it reads.
            store._local.df = None
            taken.clear()
            by_postings = store.keyword_search(q, limit, analysis=qa, generation=gen, postings=postings)
            learnt = dict(store._local.df[1])
            store._local.df = None
            by_fts = store.keyword_search(q, limit, analysis=qa, generation=gen)
            # The frequencies learnt from the counts are the ones chunks_vocab holds.
            assert learnt == store._term_stats(list(learnt), gen)
            assert by_postings == by_fts, q
            assert [type(r) for _, r in by_postings] == [float] * len(by_postings)
            ranked += any(taken)
    return ranked


def test_ranks_from_postings_equal_fts5_bm25_after_rewrites_and_deletes(tmp_path: Path) -> None:
    rng = random.Random(7)
    ws = tmp_path / "ws"
    add_filler(ws, count=20)
    _notes(ws, rng, 60)
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        assert _compare(mem, rng, 150) >= 100
        # Chunk sizes kept for fewer chunks than a query matches: each search's own are kept again.
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fts_mod, "DOC_SIZES_MAX", 5)
            mem.backend.store._local.length_norms = None  # none kept yet
            assert _compare(mem, rng, 60) >= 30
        # Rewrites and deletes: FTS5 deletes rows (contentless_delete), rowids come back, totals change.
        for i in range(0, 60, 3):
            (ws / f"memory/n{i}.md").unlink()
        _notes(ws, random.Random(8), 20)
        mem.sync()
        assert _compare(mem, rng, 150) >= 100


def test_a_write_meanwhile_or_common_terms_fall_back_to_fts5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    ws = tmp_path / "ws"
    _notes(ws, rng, 30)
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        store = mem.backend.store
        gen = store.generation_key()
        qa = QueryAnalysis.of("zebras okapi")

        def postings(terms: list[str], generation: Generation, cap: int | None) -> dict[str, dict[int, int]] | None:
            return {t: store.term_docs(t, None) for t in terms}

        assert store._rank_from_postings(["zebras", "okapi"], 10, gen, postings) is not None
        # Counts read for another generation than the one the index is at now (or another index's): not used.
        assert store._rank_from_postings(["zebras", "okapi"], 10, (gen[0], gen[1] + 1), postings) is None
        assert store._rank_from_postings(["zebras", "okapi"], 10, ("another-index", gen[1]), postings) is None
        # A token of two index terms (a phrase) or terms occurring too often: FTS5 ranks them.
        assert store._rank_from_postings(["db_host_2"], 10, gen, postings) is None
        monkeypatch.setattr(fts_mod, "RANK_FROM_POSTINGS_MAX", 0)
        assert store._rank_from_postings(["zebras", "okapi"], 10, gen, postings) is None
        assert store.keyword_search("zebras okapi", 10, analysis=qa, generation=gen, postings=postings) == \
            store.keyword_search("zebras okapi", 10, analysis=qa, generation=gen)


def test_varints_decode_sqlite_varints() -> None:
    def encode(v: int) -> bytes:
        if v > (1 << 56) - 1:
            out = [v & 0xFF]
            v >>= 8
            for _ in range(8):
                out.append((v & 0x7F) | 0x80)
                v >>= 7
            return bytes(reversed(out))
        parts = [v & 0x7F]
        v >>= 7
        while v:
            parts.append((v & 0x7F) | 0x80)
            v >>= 7
        return bytes(reversed(parts))

    values = [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**35 + 5, 2**56 - 1, 2**56, 2**63 - 1]
    assert fts_mod._varints(b"".join(map(encode, values))) == values
    assert fts_mod._varints(encode(300)[:1]) is None
