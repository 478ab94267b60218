"""Keyword-side details: common-word pruning, the exact-match check, folding."""

from __future__ import annotations

from pathlib import Path

from symi_memory import load_config
from symi_memory.index.keyword import ExactMatcher, fold
from symi_memory.manager import open_memory


def test_words_in_most_chunks_are_left_out_without_changing_the_ranking(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(60):
        extra = " zebra crossing" if i == 7 else ""
        (ws / "memory" / f"n{i}.md").write_text(f"the note number {i} is about the day{extra}\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "s", overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        store = mem.backend.store
        assert store._weighty_tokens(["the", "zebra", "is"]) == ["zebra"]
        assert store._weighty_tokens(["the", "is"]) in (["the"], ["is"])  # all common: the rarest stays
        assert store._weighty_tokens(["the", "absentword"]) == ["absentword", "the"]  # never only absent words
        hits = mem.search("is the zebra", min_score=0).results
        assert hits[0].path == "memory/n7.md"


def test_exact_matcher_follows_the_tokenizer() -> None:
    assert fold("Café ÜBER naïve") == "cafe uber naive"
    m = ExactMatcher.for_query("cafe uber")
    assert m.classify("Das Café über alles") == (True, False)
    assert m.classify("a cafeteria über") == (False, False)  # whole tokens only
    m = ExactMatcher.for_query("DEPLOY_TOKEN")
    assert m.classify("needs DEPLOY_TOKEN from the vault") == (True, True)
    assert m.classify("deploy the token") == (False, False)
    assert ExactMatcher.for_query("金银价格").classify("今天金银价格上涨") == (True, False)
    assert ExactMatcher.for_query("e81f0b9").classify("commit e81f0b9 fixed it")[1] is True


def test_tiny_workspace_keeps_every_token(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("- commit a828e60 fixed the flaky deploy\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "s", overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        hits = mem.search("which commit fixed a828e60").results
        assert hits and hits[0].path == "MEMORY.md"


def test_rrf_keeps_identifier_hits_above_the_default_min_score(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(20):
        (ws / "memory" / f"n{i}.md").write_text(f"- routine note {i} about deploys and reviews\n", encoding="utf-8")
    (ws / "memory" / "fix.md").write_text("- the flaky deploy was fixed by commit c0ffee42\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "s", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "query": {"hybrid": {"fusion": "rrf"}}}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        hits = mem.search("c0ffee42").results  # default minScore 0.35
        assert hits and hits[0].path == "memory/fix.md" and hits[0].score >= 0.5


def test_words_no_chunk_holds_are_left_out_of_the_match_with_the_same_ranks(tmp_path: Path) -> None:
    # A query word no chunk holds matches nothing and adds 0.0 to every bm25, but FTS5 looked it up in every segment
    # of its index twice: it is left out of the MATCH, and the same chunks come back with the same ranks, in order.
    import apsw

    from symi_memory.index.analysis import QueryAnalysis
    from symi_memory.index.keyword import match_tokens

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(60):
        words = " ".join(f"w{(i * 7 + j) % 23}" for j in range(i % 5 + 1))
        (ws / "memory" / f"n{i}.md").write_text(f"the note {i} about {words} running\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "s", overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        store = mem.backend.store
        matched: list[str] = []

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if "MATCH" in sql and isinstance(bindings, tuple):
                matched.append(bindings[0])
            return True

        store.reader().exec_trace = trace
        for query in ("w3 zqxv w5", "qqqq w7 runs", "w1 w2 ERR_4411 frobnicated", "金银价格 w4", "zqxv qqqq"):
            qa = QueryAnalysis.of(query)
            matched.clear()
            got = store.keyword_search(query, 40, analysis=qa)
            searched = list(matched)  # the MATCH keyword_search ran (none when no word can match)
            full = match_tokens(store._weighty_tokens(list(qa.words)))
            assert full is not None
            ranked = store.reader().execute("SELECT rowid, bm25(chunks_fts) AS r FROM chunks_fts WHERE chunks_fts "
                                            "MATCH ? ORDER BY r, rowid LIMIT 40", (full,)).fetchall()
            assert got == [(rowid, float(rank)) for rowid, rank in ranked]
            for absent in ("zqxv", "qqqq", "frobnicated"):
                assert all(absent not in m.lower() for m in searched), (query, searched)
            if "ERR" in query:
                assert "ERR_4411" in searched[0]  # two index terms (err, 4411): a phrase, kept
            if "金" in query:
                assert "金" in searched[0]  # a CJK word is matched by its bigrams in another column: kept
        assert store.keyword_search("zqxv qqqq", 40) == []
