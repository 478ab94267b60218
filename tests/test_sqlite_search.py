"""builtin-sqlite search: modes, keyword needles, CJK, a broken sqlite-vec (issue 3, items 1, 2, 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sqlite_memory import add_filler, open_mem, write

from symi_memory.types import SearchQuery

HASH_LINE = 150
LONG_MEMORY = "\n".join(
    "- The deploy of the billing service went out with commit a828e60 after review." if n == HASH_LINE
    else "- Set SYMI_DEPLOY_TOKEN_PATH before running the release script." if n == 40
    else f"- routine entry {n}: weekly planning, groceries and a walk in the park"
    for n in range(1, 201)
) + "\n"
CJK_NOTE = "# 旅行\n\n今年金银价格上涨，买了一点黄金。\n\n京都のぎをん小松屋で昼ご飯を食べた。\n\n서울특별시에서 회의가 있었다.\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w)
    write(w, "MEMORY.md", LONG_MEMORY)
    write(w, "memory/2026-01-05.md", CJK_NOTE)
    return w


def hit_text(mem, hit) -> str:  # type: ignore[no-untyped-def]
    """The lines a hit cites, read back through memory_get (snippets are cut at 700 characters)."""
    return mem.read_file(hit.path, from_line=hit.start_line, lines=hit.end_line - hit.start_line + 1).text


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), start=1) if needle in line)


@pytest.mark.parametrize("provider, mode", [("hash", "hybrid"), ("none", "fts-only")])
def test_mode_follows_the_provider(tmp_path: Path, ws: Path, provider: str, mode: str) -> None:
    with open_mem(tmp_path, ws, {"provider": provider}) as mem:
        mem.sync()
        res = mem.search("routine entry weekly planning")
        assert res.mode == mode
        assert res.provider == provider
        assert mem.status()["provider"] == provider
        assert res.results, "plain words must find something in both modes"


def test_fts_only_finds_the_commit_hash_line(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        res = mem.search("a828e60")
        assert res.mode == "fts-only"
        top = res.results[0]
        assert top.path == "MEMORY.md"
        # The chunk is a window of the file, and it holds the hash line.
        assert top.start_line <= HASH_LINE <= top.end_line
        assert top.end_line - top.start_line < 100
        # Every hit is a chunk around that line (the snippet itself is cut to 700 characters).
        for hit in res.results:
            got = mem.read_file(hit.path, from_line=hit.start_line, lines=hit.end_line - hit.start_line + 1)
            assert "a828e60" in got.text


@pytest.mark.parametrize("provider", ["none", "hash"])
@pytest.mark.parametrize("query, needle", [("金银价格", "金银价格上涨"), ("小松屋", "ぎをん小松屋"), ("특별시", "서울특별시에서")])
def test_cjk_substrings_are_found(tmp_path: Path, ws: Path, provider: str, query: str, needle: str) -> None:
    with open_mem(tmp_path, ws, {"provider": provider}) as mem:
        mem.sync()
        res = mem.search(query)
        assert res.results, f"{query!r} found nothing"
        top = res.results[0]
        assert top.path == "memory/2026-01-05.md"
        assert needle in top.snippet
        assert top.start_line <= line_of(CJK_NOTE, needle) <= top.end_line


def test_cjk_query_is_a_substring_match_not_a_bag_of_characters(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        # Same characters, other order: no substring of the note, so no hit.
        assert mem.search("价格金银").results == ()
        assert mem.search("屋小松").results == ()


@pytest.mark.parametrize("query, needle", [("a828e60", "a828e60"), ("SYMI_DEPLOY_TOKEN_PATH", "SYMI_DEPLOY_TOKEN_PATH")])
def test_keyword_only_hit_passes_default_min_score_in_hybrid(tmp_path: Path, ws: Path, query: str, needle: str) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        q = mem.agent.memory_search["query"]
        assert (q["minScore"], q["hybrid"]["vectorWeight"], q["hybrid"]["textWeight"]) == (0.015, 0.45, 0.55)
        res = mem.search(query)
        assert res.mode == "hybrid"
        assert res.results
        top = res.results[0]
        assert needle in mem.read_file(top.path, from_line=top.start_line, lines=top.end_line - top.start_line + 1).text
        # An identifier match keeps at least its keyword probability, whatever the vector side says.
        raw = mem.backend.search(SearchQuery(text=query, max_results=6, min_score=0.0, candidate_limit=24))
        cand = next(c for c in raw.candidates if needle in c.text)
        assert cand.identifier_match and cand.score >= (cand.text_score or 0.0) >= 0.5
        assert res.results[0].score >= 0.5


def test_semantic_query_without_shared_rare_words_uses_vectors(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        raw = mem.backend.search(SearchQuery(text="billing service deploy", max_results=6, min_score=0.0,
                                             candidate_limit=24))
        assert raw.mode == "hybrid"
        assert all(c.vector_score is not None for c in raw.candidates)
        assert "a828e60" in raw.candidates[0].text


def test_broken_sqlite_vec_leaves_search_working(tmp_path: Path, ws: Path) -> None:
    fake = tmp_path / "vec0.so"
    fake.write_text("not a shared library\n")
    with open_mem(tmp_path, ws, {"store": {"vector": {"extensionPath": str(fake)}}}) as mem:
        report = mem.sync()
        assert report.files_indexed == 32
        vec = mem.status()["vector"]
        assert vec["available"] is False
        assert vec["loadError"] and "sqlite-vec" in vec["loadError"]
        assert vec["extensionPath"] == str(fake)
        res = mem.search("billing service deploy")
        assert res.mode == "hybrid"
        assert "a828e60" in hit_text(mem, res.results[0])
        assert "a828e60" in hit_text(mem, mem.search("a828e60").results[0])


def test_missing_sqlite_vec_path(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"store": {"vector": {"extensionPath": str(tmp_path / "nope" / "vec0")}}}) as mem:
        mem.sync()
        vec = mem.status()["vector"]
        assert vec["available"] is False and vec["loadError"]
        assert "a828e60" in hit_text(mem, mem.search("billing service deploy").results[0])


def test_vector_store_disabled(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"store": {"vector": {"enabled": False}}}) as mem:
        mem.sync()
        vec = mem.status()["vector"]
        assert vec["enabled"] is False and vec["available"] is False
        res = mem.search("billing service deploy")
        assert res.results and "a828e60" in hit_text(mem, res.results[0])
        assert "金银价格上涨" in mem.search("金银价格").results[0].snippet  # short chunk: whole text


def test_reopening_with_sqlite_vec_after_running_without(tmp_path: Path, ws: Path) -> None:
    fake = tmp_path / "vec0.so"
    fake.write_text("garbage")
    with open_mem(tmp_path, ws, {"store": {"vector": {"extensionPath": str(fake)}}}) as mem:
        mem.sync()
    with open_mem(tmp_path, ws) as mem:
        assert mem.status()["vector"]["available"] is True
        assert mem.sync().files_indexed == 0
        assert "a828e60" in hit_text(mem, mem.search("billing service deploy").results[0])


@pytest.mark.parametrize("provider", ["none", "hash"])
def test_single_file_workspace_finds_its_needles(tmp_path: Path, provider: str) -> None:
    # One file, one chunk: FTS5's IDF is ~0 here, yet an exact needle must still be returned.
    w = tmp_path / "ws"
    write(w, "MEMORY.md", "# Memory\n\n- Rolled back to commit a828e60.\n- Needs SYMI_DEPLOY_TOKEN_PATH set.\n- 金银价格上涨\n")
    with open_mem(tmp_path, w, {"provider": provider}) as mem:
        mem.sync()
        for q in ("a828e60", "SYMI_DEPLOY_TOKEN_PATH", "金银价格", "rolled back commit"):
            hits = mem.search(q).results
            assert [h.path for h in hits] == ["MEMORY.md"], q
            assert hits[0].score >= 0.35
        assert mem.search("zebra").results == ()


def test_exact_scan_matches_every_stored_vector(tmp_path: Path, ws: Path) -> None:
    """The scan matrix, filled row by row from the store, ranks exactly as the stored vectors do."""
    import numpy as np

    for i in range(40):
        write(ws, f"memory/n{i:02d}.md", f"# Note {i}\n\nitem{i} garden harbour {'router ' * (i % 7)} backup {i * 13}\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        backend = mem.backend
        ids, blobs = backend.store.all_vectors()
        assert len(ids) >= 40 and backend.store.vector_count() == len(ids)
        matrix = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])
        matrix /= np.linalg.norm(matrix, axis=1)[:, None]
        query = backend.choice.provider.embed_query("router backup garden")
        q = np.asarray(query, dtype=np.float32)
        q = q / np.linalg.norm(q)
        scores = dict(zip(ids, (matrix @ q).tolist(), strict=True))
        # A chunk scores its own cosine blended with its best line's (store.vector.unitWeight).
        w = backend.vectors.unit_weight
        units = backend.store.unit_vectors_by_rowid(ids)
        assert w > 0 and units
        for rowid, blobs in units.items():
            unit_rows = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs])
            norms = np.linalg.norm(unit_rows, axis=1)
            norms[norms == 0] = np.inf  # a zero vector scores 0
            best = float(((unit_rows @ q) / norms).max())
            scores[rowid] = (1 - w) * scores[rowid] + w * max(scores[rowid], best)
        got = backend.vectors.search(query, 10)
        assert len(got) == 10
        for rowid, score in got:  # each hit carries its stored vector's cosine
            assert score == pytest.approx(scores[rowid], abs=1e-5)
        best = sorted(scores.values(), reverse=True)[:10]  # and the hits are the ten best (ties aside)
        assert [s for _, s in got] == pytest.approx(best, abs=1e-5)
        assert backend.vectors.status()["rows"] == len(ids) + sum(map(len, units.values()))


@pytest.mark.parametrize("provider, hybrid, mode", [("hash", True, "hybrid"), ("hash", False, "vector"),
                                                    ("none", True, "fts-only")])
def test_stop_word_query_answers_in_a_mode_the_tool_output_names(tmp_path: Path, ws: Path, provider: str,
                                                                 hybrid: bool, mode: str) -> None:
    # behaviour §5: mode is hybrid, fts-only, vector or qmd. A query of stop words only finds nothing; it said
    # mode "none", a value an integrator switching on the mode does not know.
    from symi_memory import tools

    with open_mem(tmp_path, ws, {"provider": provider, "query": {"hybrid": {"enabled": hybrid}}}) as mem:
        mem.sync()
        for query in ("what is it", "the", "\x00", '"', "*"):
            out = tools.memory_search(mem, {"query": query})
            assert out["results"] == [] and out["mode"] == mode, (query, out)
