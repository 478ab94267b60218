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
