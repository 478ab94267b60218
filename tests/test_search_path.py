"""The search path's pieces: one query analysis, candidate rows read with their mtime, term weights per generation."""

from __future__ import annotations

import contextlib
import inspect
import os
import random
from pathlib import Path

import apsw
import pytest

from symi_memory import load_config
from symi_memory.index.analysis import QueryAnalysis, content_words, query_terms
from symi_memory.index.keyword import ExactMatcher, identifier_tokens, query_tokens
from symi_memory.index.records import CandidateRow
from symi_memory.manager import open_memory
from symi_memory.types import SearchQuery


def _memory(tmp_path: Path, notes: dict[str, str]):  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    for rel, text in notes.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text, encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "s",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    return ws, open_memory(cfg, workspace=ws, start=False)


def test_query_analysis_is_what_each_step_computed_on_its_own() -> None:
    for text in ("What is the DEPLOY_TOKEN of flights?", "金银价格 e81f0b9", "the the of", "Café ÜBER naïve"):
        qa = QueryAnalysis.of(text)
        tokens = query_tokens(text)
        assert qa.tokens == tuple(tokens)
        assert qa.words == tuple(content_words(tokens))
        assert qa.terms == tuple(query_terms(tokens))
        assert qa.identifiers == tuple(identifier_tokens(text)) == tuple(identifier_tokens(tokens))
    assert QueryAnalysis.of("the the of").terms == ()


def test_holds_identifier_answers_as_classify_does() -> None:
    texts = ["saw ERR_42 once", "saw XERR_42 once", "err_42 lower case", "nothing here", "ERR_42", ""]
    for query in ("error ERR_42 happened", "café deploy", "commit e81f0b9 broke it"):
        full = ExactMatcher.for_query(query)
        only = ExactMatcher.for_tokens((), identifier_tokens(query))
        for text in texts + ["commit E81F0B9 fixed it"]:
            assert only.holds_identifier(text) == full.classify(text)[1] == full.holds_identifier(text), (query, text)


def test_identifiers_are_found_as_whole_tokens_in_every_candidate_at_once() -> None:
    # A letter or digit next to the identifier makes another token; punctuation, an underscore or the text's
    # start or end does not. identifier_holders answers for many candidates as holds_identifier does for one.
    texts = {1: "c12w3", 2: "xc12w3 and c12w31", 3: "(C12W3)", 4: "run_c12w3_now", 5: "c12w3s c12w30 ac12w3",
             6: "first c12w3", 7: "Fehler c12w3.", 8: "", 9: "ERR_42 saw", 10: "xERR_42", 11: "err_42x",
             12: "是c12w3吗"}
    matcher = ExactMatcher.for_tokens((), identifier_tokens("where is c12w3 or ERR_42"))
    holders = matcher.identifier_holders(texts)
    assert holders == {1, 3, 4, 6, 7, 9}  # 12: a CJK letter is a letter too
    assert holders == {k for k, text in texts.items() if matcher.holds_identifier(text)}
    assert ExactMatcher.for_tokens((), ()).identifier_holders(texts) == set()



def test_each_identifier_is_looked_for_only_in_the_texts_that_may_hold_it() -> None:
    # candidates names, for an identifier token, the only texts that may hold it: the others are not searched for
    # it (a text listed for neither token is not found even though it holds one), a token it does not name is
    # searched for in every text, and a key with no text is none. Found as written or in another case, at the
    # text's start or end, after an occurrence inside a longer word.
    texts = {1: "c12w3x then C12W3.", 2: "see ERR_42", 3: "c12w3 and err_42", 4: "xERR_42 ERR_42x", 5: "c12w3",
             6: "café c12w3", 7: "err_42é", 8: ""}
    matcher = ExactMatcher.for_tokens((), identifier_tokens("where is c12w3 or ERR_42"))
    everywhere = matcher.identifier_holders(texts)
    assert everywhere == {1, 2, 3, 5, 6}
    assert matcher.identifier_holders(texts, {"c12w3": [1, 4, 6, 9], "ERR_42": [2, 4, 7, 8]}) == {1, 2, 6}
    assert matcher.identifier_holders(texts, {"c12w3": [], "ERR_42": list(texts)}) == {2, 3}
    assert matcher.identifier_holders(texts, {"c12w3": list(texts)}) == everywhere  # ERR_42: every text
    for candidates in ({"c12w3": [], "ERR_42": []}, {"c12w3": [8], "ERR_42": [4, 7]}):
        assert matcher.identifier_holders(texts, candidates) == set()
    # A token with a CJK run (a substring there) is matched by its regex: the candidates narrow that search too.
    cjk = ExactMatcher.for_tokens((), identifier_tokens("where is 版本2024 or c12w3"))
    texts = {1: "新版本2024发布", 2: "c12w3 here", 3: "版本2024 and c12w3", 4: "nothing"}
    assert cjk.identifier_holders(texts) == {1, 2, 3}
    assert cjk.identifier_holders(texts, {"版本2024": [3], "c12w3": [2]}) == {2, 3}
    assert cjk.identifier_holders(texts, {"c12w3": []}) == {1, 3}


def test_ascii_candidates_holding_an_identifier_between_spaces_are_found_as_one_by_one() -> None:
    # ASCII candidates holding an identifier between two spaces are found in one pass; the others one by one. Over
    # random ASCII texts (the identifier inside longer tokens, in upper case, by punctuation, at either end, between
    # spaces), random candidate lists (repeats, keys without a text) and a text of another alphabet among them or
    # not, the holders are the texts holds_identifier finds it in.
    rng = random.Random(7)
    matcher = ExactMatcher.for_tokens((), identifier_tokens("where is c12w3 or ERR_42"))
    pieces = ["c12w3", "C12W3", "xc12w3", "c12w3s", "c12w31", "err_42", "ERR_42", "ERR_42x", "_err_42", "word", "42",
              " ", " ", ".", "-", "(", ")", "\n", "_", "caf\u00e9"]
    found = 0
    for _ in range(400):
        texts = {k: "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for k in range(12)}
        if rng.random() < 0.7:
            texts = {k: t.replace("caf\u00e9", "cafe") for k, t in texts.items()}
        keys = list(range(14))  # 12 and 13 have no text
        candidates = {"c12w3": rng.sample(keys, rng.randint(0, 14)) * rng.randint(1, 2),
                      "ERR_42": rng.sample(keys, rng.randint(0, 14))}
        want = {k for token, listed in candidates.items() for k in listed
                if k in texts and ExactMatcher.for_tokens((), [token]).holds_identifier(texts[k])}
        assert matcher.identifier_holders(texts, candidates) == want, (texts, candidates)
        found += len(want)
    assert found > 400


def test_ascii_candidates_are_folded_without_being_kept() -> None:
    # An ASCII text folds to its lower case: identifier_holders folds it again rather than keeping a folded copy
    # of every candidate's text (a look-up that hashes the text); other texts are still kept folded.
    import random

    from symi_memory.index.keyword import _fold_text

    rng = random.Random(13)
    parts = ["c12w3", "C12W3", "err_42", "ERR_42", "xc12w3", "c12w3x", "c12", "w3", "_", " ", "\n", ".", "é", "ç12w3",
             "c12w3é", "ß", "\t", "0", "a", "K"]
    texts = {k: "".join(rng.choice(parts) for _ in range(rng.randrange(0, 6))) for k in range(3000)}
    matcher = ExactMatcher.for_tokens((), identifier_tokens("where is c12w3 or ERR_42 or ç12w3"))
    _fold_text.cache_clear()
    holders = matcher.identifier_holders(texts)
    assert _fold_text.cache_info().currsize == sum(1 for text in set(texts.values()) if not text.isascii())
    assert holders == {k for k, text in texts.items() if matcher.holds_identifier(text)}
    assert 0 < len(holders) < len(texts)



def test_only_candidates_whose_term_counts_allow_an_identifier_are_searched_for_it(tmp_path: Path,
                                                                                  monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # An ASCII chunk lacking the index term of an identifier holds no such token: its text is not searched. One
    # with the term may still hold another word of that term (porter stems q123s to q123), or the identifier's
    # parts apart (ERR 42): it is searched, and so is every chunk with other characters. (err_42x makes the
    # terms err and 42x: no 42.)
    notes = {"memory/a.md": "deploy went fine after Q123 landed\n", "memory/b.md": "deploy of q123s and err_42x\n",
             "memory/c.md": "deploy notes without it\n", "memory/d.md": "café deploy (x_q123) ERR 42\n",
             "memory/e.md": "deploy ERR_42 again\n", "memory/f.md": "deploy again, ERR and 42 apart\n",
             "memory/g.md": "deploy naïve note\n", "memory/h.md": "deploy run_q123_now\n"}
    searched: list[set[str]] = []
    real = ExactMatcher.identifier_holders

    def watched(self, texts, candidates=None):  # type: ignore[no-untyped-def]
        # The texts searched for some identifier: each token's candidates (every text for a token not named).
        searched.append({texts[k] for p in self.idents
                         for k in (texts if candidates is None else candidates.get(p.token, texts)) if k in texts})
        return real(self, texts, candidates)

    monkeypatch.setattr(ExactMatcher, "identifier_holders", watched)
    ws, mem = _memory(tmp_path, notes)
    with mem:
        mem.sync()
        for query, holding, read in (
                ("deploy q123", {"memory/a.md", "memory/d.md", "memory/h.md"},
                 {"memory/a.md", "memory/b.md", "memory/d.md", "memory/g.md", "memory/h.md"}),
                ("deploy ERR_42", {"memory/e.md"}, {"memory/d.md", "memory/e.md", "memory/f.md", "memory/g.md"})):
            searched.clear()
            result = mem.backend.search(SearchQuery(text=query, max_results=10, min_score=0.0, candidate_limit=50))
            assert {c.path for c in result.candidates} == set(notes)
            assert {c.path for c in result.candidates if c.identifier_match} == holding
            texts = {c.text: c.path for c in result.candidates}
            assert len(searched) == 1 and {texts[t] for t in searched[0]} == read, query
            matcher = ExactMatcher.for_query(query)
            assert all(c.identifier_match == matcher.holds_identifier(c.text) for c in result.candidates)


def test_each_identifier_of_a_query_is_looked_for_only_in_the_chunks_counting_its_terms(tmp_path: Path,
                                                                                      monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Two identifiers: q123 is looked for in the ASCII chunks counting q123 (a, b) and in every chunk with other
    # characters (d), not in the chunk counting only err and 42 (e); ERR_42 in e and d, not in a or b. A new
    # ticket number no chunk counts (z999) is looked for in d alone. The answers are those of a search of every
    # text for every identifier.
    notes = {"memory/a.md": "deploy went fine after Q123 landed\n", "memory/b.md": "deploy of q123s\n",
             "memory/c.md": "deploy notes without it\n", "memory/d.md": "café deploy ERR_42 q123\n",
             "memory/e.md": "deploy ERR_42 again\n"}
    searched: list[dict[str, set[str]]] = []
    real = ExactMatcher.identifier_holders

    def watched(self, texts, candidates=None):  # type: ignore[no-untyped-def]
        searched.append({p.token: {texts[k] for k in (texts if candidates is None else candidates.get(p.token, texts))
                                   if k in texts} for p in self.idents})
        return real(self, texts, candidates)

    monkeypatch.setattr(ExactMatcher, "identifier_holders", watched)
    ws, mem = _memory(tmp_path, notes)
    with mem:
        mem.sync()
        searched.clear()
        query = "deploy q123 ERR_42 z999"
        result = mem.backend.search(SearchQuery(text=query, max_results=10, min_score=0.0, candidate_limit=50))
        paths = {c.text: c.path for c in result.candidates}
        assert set(paths.values()) == set(notes)
        assert [{token: {paths[t] for t in texts} for token, texts in asked.items()} for asked in searched] == [
            {"q123": {"memory/a.md", "memory/b.md", "memory/d.md"}, "ERR_42": {"memory/d.md", "memory/e.md"},
             "z999": {"memory/d.md"}}]
        assert {c.path for c in result.candidates if c.identifier_match} == {"memory/a.md", "memory/d.md",
                                                                            "memory/e.md"}
        matcher = ExactMatcher.for_query(query)
        assert all(c.identifier_match == matcher.holds_identifier(c.text) for c in result.candidates)


def test_a_write_landing_during_a_search_does_not_hide_an_identifier_its_candidate_now_holds(tmp_path: Path) -> None:
    # The last file's chunks get the highest rowids, so rewriting it gives the new chunk the old one's rowid. A
    # write landing after a search read the index generation and before it read its candidate rows (here while
    # the query is embedded) hands the search the new text under that rowid, while the term counts kept for the
    # generation are the old text's: those counts must not rule out the identifier the text now holds.
    from typing import Any

    from symi_memory import hookimpl
    from symi_memory.specs import ProviderSpec
    from symi_memory.testing.fakes import HashEmbedder

    armed: list[Any] = []

    class Racing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.id, self.model, self.fingerprint = "racing", inner.model, inner.fingerprint
            self.max_input_bytes = inner.max_input_bytes

        def embed_query(self, text: str) -> list[float]:
            while armed:
                armed.pop()()  # the write lands while the search waits for its query vector
            return self.inner.embed_query(text)  # type: ignore[no-any-return]

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.inner.embed_documents(texts)  # type: ignore[no-any-return]

        def close(self) -> None:
            pass

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Any) -> None:
            register(ProviderSpec(name="racing", factory=lambda ctx: Racing(HashEmbedder.from_context(ctx)),
                                  default_model="hash-384"))

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory/a.md").write_text("deploy notes of the week\n", encoding="utf-8")
    last = ws / "memory/z.md"
    last.write_text("deploy went fine\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "s",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "racing"}}}})
    query = SearchQuery(text="deploy ERR_42", max_results=10, min_score=0.0, candidate_limit=50)
    matcher = ExactMatcher.for_query(query.text)
    with open_memory(cfg, workspace=ws, start=False, plugins=[("racing", Plugin())]) as mem:
        mem.sync()
        assert {c.path for c in mem.backend.search(query).candidates} == {"memory/a.md", "memory/z.md"}
        # Same content, a new mtime: the candidate rows kept go, the term counts kept for the generation stay.
        os.utime(ws / "memory/a.md", (1_700_000_000, 1_700_000_000))
        mem.sync()

        def rewrite() -> None:
            last.write_text("deploy failed with ERR_42\n", encoding="utf-8")
            mem.sync()

        armed.append(rewrite)
        got = {c.path: c for c in mem.backend.search(query).candidates}
        assert not armed and got["memory/z.md"].text == "deploy failed with ERR_42\n"
        assert got["memory/z.md"].identifier_match
        assert all(c.identifier_match == matcher.holds_identifier(c.text) for c in got.values())


def test_candidate_rows_carry_the_current_mtime_and_filter_by_source(tmp_path: Path) -> None:
    ws, mem = _memory(tmp_path, {"memory/a.md": "# A\n\nalpha note about zebras\n", "MEMORY.md": "beta note\n"})
    with mem:
        mem.sync()
        store = mem.backend.store
        rowids = [r for r, _ in store.keyword_search("zebras note", 10)]
        rows = store.candidate_rows(rowids, ("memory",))
        assert rows and all(isinstance(r, CandidateRow) for r in rows.values())
        row = next(r for r in rows.values() if r.path == "memory/a.md")
        assert "zebras" in row.text and row.source == "memory" and row.start_line >= 1
        assert row.mtime == store.file_mtimes(["memory/a.md"])["memory/a.md"]
        assert store.candidate_rows(rowids, ("sessions",)) == {}
        # A file whose content did not change gets a new mtime only (no new generation): search sees it.
        st = (ws / "memory/a.md").stat()
        os.utime(ws / "memory/a.md", (st.st_atime, st.st_mtime + 100))
        mem.sync()
        again = store.candidate_rows([row.rowid])[row.rowid]
        assert again.mtime == row.mtime + 100
        assert "memory/a.md" in [h.path for h in mem.search("zebras", min_score=0).results]


def test_reading_any_number_of_candidate_rows_compiles_no_sql_again(tmp_path: Path) -> None:
    # A search reads as many candidate rows as it has candidates the rows cache lacks (any number up to 500): each
    # count written as its own statement (IN (?,?,...)) was compiled again and pushed the search's other statements
    # out of the connection's statement cache. The same rows come back, in rowid order, for every count.
    notes = {f"memory/n{i}.md": f"# Note {i}\n\nzebra note {i}\n" for i in range(12)}
    ws, mem = _memory(tmp_path, notes)
    with mem:
        mem.sync()
        store = mem.backend.store
        rowids = sorted(r for r, _ in store.keyword_search("zebra note", 50))
        ids = [r.id for r in store.candidate_rows(rowids).values()]
        assert len(rowids) >= 12
        conn = store.reader()
        compiled: list[tuple[int, str | None, str | None]] = []

        def authorizer(op: int, a: str | None, b: str | None, db: str | None, trigger: str | None) -> int:
            compiled.append((op, a, b))
            return apsw.SQLITE_OK

        conn.authorizer = authorizer  # expires the compiled statements: the first round compiles them again
        whole = store.candidate_rows(rowids, ("memory",), vectors=True, scored=rowids[:1])
        store.candidate_rows(rowids, ("memory",))
        store.candidate_rows_at(rowids)
        store.line_analysis_by_id(ids)
        store.search_epoch()
        assert compiled
        compiled.clear()
        for k in range(1, len(rowids)):
            part = rowids[::-1][:k]
            assert list(store.candidate_rows(part, ("memory",))) == sorted(part)
            got = store.candidate_rows(part, ("memory",), vectors=True, scored=rowids[:k])
            assert got == {r: whole[r]._replace(vector=None) if r in rowids[:k] else whole[r] for r in part}
            rows, epoch = store.candidate_rows_at(part)
            assert rows == {r: whole[r]._replace(vector=None) for r in part} and epoch == store.search_epoch()
            store.line_analysis_by_id(ids[:k])
        assert compiled == [], compiled
        # A rowid asked twice comes back once, in rowid order still; one no chunk has, not at all.
        again = rowids[::-1] + rowids[:3] + [max(rowids) + 1000]
        assert list(store.candidate_rows(again, ("memory",))) == rowids
        assert store.candidate_rows_at(again) == ({r: whole[r]._replace(vector=None) for r in rowids},
                                                  store.search_epoch())


def test_candidate_rows_come_with_the_epoch_they_were_read_at(tmp_path: Path) -> None:
    # The rows a long-running process keeps for an epoch must be that epoch's: the epoch is read in the rows'
    # own statement, so a write landing just before or after the read cannot pair them with another one.
    ws, mem = _memory(tmp_path, {"memory/a.md": "# A\n\nalpha note about zebras\n"})
    with mem:
        mem.sync()
        store = mem.backend.store
        rowid = store.keyword_search("zebras", 10)[0][0]
        rows, epoch = store.candidate_rows_at([rowid])
        assert epoch == store.search_epoch() and rows[rowid].text.endswith("zebras\n")
        (ws / "memory/b.md").write_text("another note\n", encoding="utf-8")
        mem.sync()  # a new generation
        _, after_write = store.candidate_rows_at([rowid])
        assert after_write == store.search_epoch() and after_write[0] > epoch[0]
        st = (ws / "memory/a.md").stat()
        os.utime(ws / "memory/a.md", (st.st_atime, st.st_mtime + 100))
        mem.sync()  # the same content, a new mtime: touches, not a generation
        again, after_touch = store.candidate_rows_at([rowid])
        assert after_touch == (after_write[0], after_write[1] + 1) == store.search_epoch()
        assert again[rowid].mtime == rows[rowid].mtime + 100
        assert store.candidate_rows_at([rowid + 1000]) == ({}, None)


def test_search_candidates_carry_the_current_mtime_and_text_after_their_rows_were_kept(tmp_path: Path) -> None:
    # A search keeps its candidates' rows for the index generation; a touched file (same content, new mtime, no
    # new generation) and a rewritten one are read again, and every source filter answers from the kept rows.
    ws, mem = _memory(tmp_path, {"memory/a.md": "# A\n\nalpha note about zebras\n", "MEMORY.md": "beta zebras\n"})
    with mem:
        mem.sync()
        backend = mem.backend

        def found() -> dict[str, tuple[float | None, str]]:
            res = backend.search(SearchQuery(text="zebras", max_results=10, min_score=0.0, candidate_limit=40))
            return {c.path: (c.mtime, c.text) for c in res.candidates}

        first = found()
        assert set(first) == {"memory/a.md", "MEMORY.md"} and backend._rows_kept[1]
        st = (ws / "memory/a.md").stat()
        os.utime(ws / "memory/a.md", (st.st_atime, st.st_mtime + 100))
        gen = backend.store.generation()
        mem.sync()
        assert backend.store.generation() == gen  # a touch: no new generation
        touched = found()
        assert touched["memory/a.md"][0] == first["memory/a.md"][0] + 100
        assert touched["MEMORY.md"] == first["MEMORY.md"]
        (ws / "MEMORY.md").write_text("beta zebras, and gamma\n", encoding="utf-8")
        mem.sync()
        assert found()["MEMORY.md"][1] == "beta zebras, and gamma\n"
        only = backend.search(SearchQuery(text="zebras", max_results=10, min_score=0.0, candidate_limit=40,
                                          sources=("sessions",)))
        assert only.candidates == ()


def test_term_weights_follow_each_write(tmp_path: Path) -> None:
    notes = {f"memory/n{i}.md": f"note {i} about the garden\n" for i in range(60)}
    ws, mem = _memory(tmp_path, notes)
    with mem:
        mem.sync()
        store = mem.backend.store
        before = store.term_weights(["zebra", "garden"])
        assert before["zebra"] > before["garden"]  # absent weighs the most
        for i in range(40):
            (ws / "memory" / f"z{i}.md").write_text(f"zebra {i} crossing\n", encoding="utf-8")
        mem.sync()
        after = store.term_weights(["zebra", "garden"])
        assert after["zebra"] < before["zebra"]  # now in 40 of 100 chunks: the remembered count was dropped
        assert store._weighty_tokens(["zebra", "garden"]) == ["zebra"]  # garden is in more than half


def test_identifier_tokens_are_matched_without_compiling_a_regex() -> None:
    # A query brings new identifiers; TokenPattern.found_in answers what token_pattern's regex answers, with no
    # compile (which cost more than testing every candidate): whole tokens only, where a letter or digit of any
    # script next to the token makes another token and an underscore or punctuation does not.
    import random

    from symi_memory.index.keyword import TokenPattern, fold, token_pattern

    token_pattern.cache_clear()
    texts = {1: "deploy k8s_v2 now", 2: "xk8s_v2", 3: "k8s_v2é", 4: "K8S_V2!", 5: "k8s_v2_k8s_v2", 6: "k8s_v2²",
             7: "٣k8s_v2", 8: "k8s_v2k8s_v2 k8s_v2", 9: "ḱ8s_v2", 10: "k8s_v2\u0301", 11: ""}
    matcher = ExactMatcher.for_tokens((), identifier_tokens("where is k8s_v2"))
    # 9: the accent is folded away; 10: a combining mark is no letter or digit.
    assert matcher.identifier_holders(texts) == {1, 4, 5, 8, 9, 10}
    assert token_pattern.cache_info().currsize == 0  # nothing compiled
    rng = random.Random(3)
    alphabet = ["a", "A", "1", "_", " ", "-", "é", "e\u0301", "ß", "²", "٣", "İ", "Σ", "ς", "中", "x9"]
    for token in ("a1b", "q12", "é1", "x_9", "ß2", "Σ1", "aa", "a", "٣a", "İ1"):
        pattern, regex = TokenPattern(token), token_pattern(token)
        for _ in range(3000):
            text = fold("".join(rng.choice([*alphabet, token, token]) for _ in range(rng.randint(0, 10))))
            assert pattern.found_in(text) == (regex.search(text) is not None), (token, text)


def test_a_searching_thread_reads_with_a_larger_page_cache(tmp_path: Path) -> None:
    import threading

    from symi_memory.index.store import SEARCH_CACHE_KIB

    ws, mem = _memory(tmp_path, {"memory/a.md": "# A\n\nalpha note about zebras\n"})
    with mem:
        mem.sync()
        store = mem.backend.store
        assert [h.path for h in mem.search("zebras", min_score=0).results] == ["memory/a.md"]
        assert store.reader().execute("PRAGMA cache_size").fetchone()[0] == -SEARCH_CACHE_KIB
        # A thread that only reads (the scan copy's load reads every vector once) keeps SQLite's default.
        other: list[int] = []
        thread = threading.Thread(target=lambda: other.append(store.reader().execute("PRAGMA cache_size").fetchone()[0]))
        thread.start()
        thread.join()
        assert other and other[0] != -SEARCH_CACHE_KIB



def test_a_warm_search_compiles_no_sql(tmp_path: Path) -> None:
    # Every statement of a search is compiled once per reading connection, FTS5's own included: FTS5 looks each
    # query term up in every segment with an internal statement whose plan could depend on the term bound to it,
    # and SQLite compiled it again for each term of each search (a third of a keyword lookup's CPU). The
    # authorizer is asked about every table and column a statement reads while SQLite compiles it, only then.
    notes = {f"memory/n{i}.md": f"# Note {i}\n\nzebra{i % 3} deploy c12w{i} ticket note {i}\n" for i in range(12)}
    ws, mem = _memory(tmp_path, notes)
    with mem:
        for i in range(4):  # several writes: FTS5 keeps several segments
            mem.sync()
            (ws / f"memory/extra{i}.md").write_text(f"zebra1 note {i} c12w3\n", encoding="utf-8")
        mem.sync()
        compiled: list[tuple[int, str | None, str | None]] = []

        def authorizer(op: int, a: str | None, b: str | None, db: str | None, trigger: str | None) -> int:
            compiled.append((op, a, b))
            return apsw.SQLITE_OK

        conn = mem.backend.store.reader()
        conn.authorizer = authorizer  # this expires the compiled statements: the first round compiles them again
        queries = ("zebra0 deploy c12w5", "zebra1 ticket c12w7", "note zebra2 c12w3")
        first = [mem.search(query, min_score=0).to_dict() for query in queries]
        assert compiled and all(r["results"] for r in first)
        compiled.clear()
        # The same queries again: every statement they run was compiled in the first round (without the query
        # planner stability guarantee, SQLite compiled FTS5's term lookup again whenever a term was bound to it).
        assert [mem.search(query, min_score=0).to_dict() for query in queries] == first
        assert compiled == [], compiled


def test_a_search_that_loads_the_scan_copy_keeps_the_vectors_out_of_its_page_cache(tmp_path: Path) -> None:
    # Below SYNC_LOAD_LIMIT chunks the first search after a sync loads the exact scan's copy itself. Read
    # through the searching connection, every stored vector landed in its page cache (up to 8 MB, about the whole
    # index, pages a search never reads again): the thread's memory grew by that for as long as it lives.
    import random
    import threading

    import apsw
    from support.sqlite_memory import open_mem, write

    rng = random.Random(1)
    words = [f"w{i}" for i in range(3000)]
    ws = tmp_path / "ws"
    for f in range(300):
        write(ws, f"memory/n{f:03d}.md", "\n\n".join(
            f"# H{s}\n\n" + "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(6)) for s in range(2)))
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        store = mem.backend.store
        vector_bytes = store.reader().execute("SELECT sum(length(embedding)) FROM embedding_cache").fetchone()[0]
        used: list[int] = []

        def search() -> None:
            assert mem.search("w12 w400 w77", min_score=0).results
            used.append(store.reader().status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0])

        thread = threading.Thread(target=search)
        thread.start()
        thread.join()
        assert used and vector_bytes > 4_000_000
        assert used[0] < vector_bytes / 4


def test_found_in_answers_what_the_regex_answers_for_every_class_of_character() -> None:
    # found_in's boundary test is str.isalnum where the regex says [^\W_]: the same for every code point. Then
    # tokens and texts the first comparison does not draw: regex metacharacters, CJK (the regex's fallback),
    # title case and signs that lower-case to ASCII (ǅ, the Kelvin sign), ligatures, digits outside the BMP,
    # marks and joiners on their own, and the token upper-cased or cut short beside itself.
    import random
    import re

    from symi_memory.index.keyword import TokenPattern, fold, token_pattern

    word = re.compile(r"[^\W_]")
    assert [c for c in range(0x110000) if (word.match(chr(c)) is not None) != chr(c).isalnum()] == []
    rng = random.Random(7)
    pieces = ["a", "1", "_", " ", ".", "+", "#", "@", "\n", "\u00a0", "é", "e\u0301", "\u0301", "\u200d", "ß", "ẞ",
              "İ", "ı", "ς", "中", "가", "ア", "ǅ", "Ⅰ", "ﬁ", "\u212a", "Å", "ü", "й", "\U0001d7d8", "𝐀"]
    for token in ("a.b", "c++", "v1.2.3", "foo_bar", "#123", "@user", "中文1", "ǅ1", "Ⅰ2", "ﬁ1", "\u212a1", "й1",
                  "x\u03011", "_", "a_", "1"):
        pattern, regex, folded = TokenPattern(token), token_pattern(token), fold(token)
        for _ in range(1500):
            text = fold("".join(rng.choice([*pieces, token, folded, folded, folded.upper(), folded[:-1] or folded])
                                for _ in range(rng.randint(0, 9))))
            assert pattern.found_in(text) == (regex.search(text) is not None), (token, text)


def test_candidates_made_slot_by_slot_are_the_candidates_init_makes() -> None:
    # A search makes its ~140 candidates by setting their slots a field at a time; each must be the Candidate
    # __init__ makes: equal, same hash and repr, every field set (the defaults too), evolvable.
    import attrs

    from symi_memory.index.backend import _make_candidates
    from symi_memory.types import Candidate

    rows = (("a", "memory/a.md", 1, 3, 0.5, "text", "memory", 0.25, None, 12.5, True),
            ("b", "sessions/s.jsonl", 7, 7, 0.0, "", "sessions", None, 0.75, None, False))
    names = ("id", "path", "start_line", "end_line", "score", "text", "source", "vector_score", "text_score",
             "mtime", "identifier_match")
    made = _make_candidates(*zip(*rows, strict=True))
    assert len(made) == 2
    for fast, args in zip(made, rows, strict=True):
        slow = Candidate(**dict(zip(names, args, strict=True)))
        assert type(fast) is Candidate and fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        assert attrs.asdict(fast) == attrs.asdict(slow)
        assert fast.superseded_by is None and fast.supersedes == ()
        assert attrs.evolve(fast, score=0.9) == attrs.evolve(slow, score=0.9)
    assert _make_candidates(*([] for _ in names)) == ()
    with pytest.raises(ValueError):  # a short column would leave slots unset
        _make_candidates(*(column[:1] if i == 3 else column for i, column in enumerate(zip(*rows, strict=True))))


def _candidate_variants() -> dict[str, type]:
    """``Candidate`` as a later change might make it: each is still an attrs class that __init__ builds right."""
    from typing import Any

    import attrs

    @attrs.frozen(kw_only=True)
    class FactoryDefault:  # a field whose default comes from a factory
        id: str
        path: str
        start_line: int
        end_line: int
        score: float
        text: str
        source: str = "memory"
        vector_score: float | None = None
        text_score: float | None = None
        mtime: float | None = None
        identifier_match: bool = False
        superseded_by: dict[str, Any] | None = None
        supersedes: tuple[dict[str, Any], ...] = attrs.field(factory=tuple)

    @attrs.frozen(kw_only=True, cache_hash=True)
    class CachedHash:  # __init__ also clears a hidden slot holding the hash
        id: str
        path: str
        start_line: int
        end_line: int
        score: float
        text: str
        source: str = "memory"
        vector_score: float | None = None
        text_score: float | None = None
        mtime: float | None = None
        identifier_match: bool = False
        superseded_by: dict[str, Any] | None = None
        supersedes: tuple[dict[str, Any], ...] = ()

    @attrs.frozen(kw_only=True)
    class Located:
        id: str
        path: str
        start_line: int
        end_line: int
        score: float
        text: str

    @attrs.frozen(kw_only=True)
    class Inherited(Located):  # the same fields, some of them from a base class
        source: str = "memory"
        vector_score: float | None = None
        text_score: float | None = None
        mtime: float | None = None
        identifier_match: bool = False
        superseded_by: dict[str, Any] | None = None
        supersedes: tuple[dict[str, Any], ...] = ()

    return {"factory default": FactoryDefault, "cached hash": CachedHash, "inherited fields": Inherited}


@pytest.mark.parametrize("label", ["factory default", "cached hash", "inherited fields"])
def test_candidates_are_what_init_makes_when_the_candidate_class_changes(monkeypatch, label: str) -> None:  # type: ignore[no-untyped-def]
    # The slot-by-slot maker must fall back to __init__ for any Candidate it cannot build the same: a search
    # would otherwise hand out a Factory object as `supersedes`, candidates that cannot be hashed, or fail
    # to import at all.
    import attrs

    from symi_memory.index import backend

    args = ("a", "memory/a.md", 1, 3, 0.5, "text", "memory", 0.25, None, 12.5, True)
    names = ("id", "path", "start_line", "end_line", "score", "text", "source", "vector_score", "text_score",
             "mtime", "identifier_match")
    cls = _candidate_variants()[label]
    monkeypatch.setattr(backend, "Candidate", cls)
    made = backend._candidates_maker()(*((a,) for a in args))[0]
    expected = cls(**dict(zip(names, args, strict=True)))
    assert type(made) is cls
    assert attrs.asdict(made) == attrs.asdict(expected)
    assert made == expected and hash(made) == hash(expected) and repr(made) == repr(expected)


def test_candidate_rows_read_alike_with_keys_bound_as_a_json_array(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Where SQLite lacks carray the key list is a JSON array, joined as json_each: the same rows, in rowid order.
    from symi_memory.index import chunks

    notes = {f"memory/n{i}.md": f"# Note {i}\n\nzebra note {i}\n" for i in range(6)}
    ws, mem = _memory(tmp_path, notes)
    with mem:
        mem.sync()
        store = mem.backend.store
        rowids = sorted(r for r, _ in store.keyword_search("zebra note", 50))
        asked = rowids[::-1] + rowids[:2]
        rows = store.candidate_rows(asked, ("memory",))
        at = store.candidate_rows_at(asked)
        monkeypatch.setattr(chunks, "CARRAY", False)
        monkeypatch.setattr(chunks, "_LISTED", "SELECT value FROM json_each(?)")
        monkeypatch.setattr(chunks, "_LISTED_TABLE", "json_each(?)")
        assert isinstance(chunks.bound_list(asked), str)
        assert store.candidate_rows(asked, ("memory",)) == rows and list(rows) == rowids
        assert store.candidate_rows_at(asked) == at and at[1] == store.search_epoch()


def test_a_search_paused_while_another_starts_the_kept_rows_again_gets_only_its_sources(tmp_path: Path) -> None:
    # A search whose rows are all kept checks the kept rows' sources before handing them out. Another thread's
    # search after a write starts the kept rows again (new epoch) between the first search's look-up and that
    # check: the first search must still judge its rows by their own sources, not by the new (empty) kept rows'.
    import sys
    import threading

    from symi_memory.index.backend import IndexedBackend

    ws, mem = _memory(tmp_path, {f"memory/n{i}.md": f"# N{i}\n\nzebras crossing {i}\n" for i in range(6)})
    with mem:
        mem.sync()
        backend = mem.backend
        wide = SearchQuery(text="zebras", max_results=10, min_score=0.0, candidate_limit=40)
        assert len(backend.search(wide).candidates) == 6 and backend._rows_kept[1]  # every row kept
        at_check, go = threading.Event(), threading.Event()
        code = IndexedBackend._rows.__code__

        def local(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "line" and not at_check.is_set():
                line = inspect.getsourcelines(code)[0][frame.f_lineno - code.co_firstlineno]
                if "issubset" in line:  # about to judge the kept rows by their sources
                    at_check.set()
                    go.wait(30)
            return local

        def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
            return local if frame.f_code is code else None

        got: list[tuple] = []

        def sessions_only() -> None:
            sys.settrace(tracer)
            try:
                got.extend(backend.search(SearchQuery(text="zebras", max_results=10, min_score=0.0,
                                                      candidate_limit=40, sources=("sessions",))).candidates)
            finally:
                sys.settrace(None)

        t = threading.Thread(target=sessions_only)
        t.start()
        assert at_check.wait(30)
        st = (ws / "memory/n0.md").stat()
        os.utime(ws / "memory/n0.md", (st.st_atime, st.st_mtime + 100))
        mem.sync()  # a new epoch: the next search starts the kept rows again
        assert backend.search(SearchQuery(text="qqqq", max_results=10, min_score=0.0, candidate_limit=40)
                              ).candidates == ()
        go.set()
        t.join(30)
        assert got == []  # no memory note answers a search of the sessions


@contextlib.contextmanager
def _zebra_chunk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """One synced chunk, "zebra crossing notes", as a search sees it: ``(backend, the generation key it read, the
    chunk's rowid, its row as read now, rewrite)``; ``rewrite()`` is the write that lands meanwhile, giving that
    rowid the text "okapi grazing notes" (the last file's chunks get their rowids back) in a new generation."""
    ws, mem = _memory(tmp_path, {"memory/a.md": "# A\n\nzebra crossing notes\n"})
    with mem:
        mem.sync()
        store = mem.backend.store
        before = store.generation_key()
        rowid = store.keyword_search("zebra", 5)[0][0]

        def rewrite() -> None:
            (ws / "memory/a.md").write_text("# A\n\nokapi grazing notes\n", encoding="utf-8")
            mem.sync()
            assert store.generation_key() != before

        yield mem.backend, before, rowid, store.candidate_rows([rowid])[rowid], rewrite


def test_term_counts_of_a_search_overtaken_by_a_write_are_not_kept_for_its_older_generation(tmp_path: Path) -> None:
    # A search reads the index generation; a write lands and gives a chunk's rowid new text, and the rows this search
    # reads after carry it. Their terms are not kept as the older generation's: another search of that generation,
    # its row read before the write, counted its words from them.
    with _zebra_chunk(tmp_path) as (backend, before, rowid, old, rewrite):
        backend._chunk_terms({}, before, [])  # the term cache kept for this generation, as a search of it leaves it
        rewrite()
        new = old._replace(text="okapi grazing notes")  # the row as read after the write
        assert backend._chunk_terms({rowid: new}, before, ["okapi"])[rowid][0] == {"okapi": 1}
        # Another search of the older generation, with the row it read before the write.
        assert backend._chunk_terms({rowid: old}, before, ["zebra"])[rowid][0] == {"zebra": 1}


def test_a_search_overtaken_by_a_write_counts_each_row_from_the_text_it_shows(tmp_path: Path) -> None:
    # A search reads the index generation; a write lands and gives a chunk's rowid new text, and the row this search
    # reads after carries it. The terms kept for the older generation are the older text's: counted from them, the
    # chunk now saying "okapi" held no okapi (and the length of the older text), so it ranked as if it lacked the
    # query words while its snippet showed them.
    with _zebra_chunk(tmp_path) as (backend, before, rowid, old, rewrite):
        assert backend._chunk_terms({rowid: old}, before, ["zebra"])[rowid] == ({"zebra": 1}, len(old.text))
        rewrite()
        new = backend.store.candidate_rows([rowid])[rowid]  # the row as this search reads it after the write
        assert "okapi" in new.text
        assert backend._chunk_terms({rowid: new}, before, ["okapi"])[rowid] == ({"okapi": 1}, len(new.text))
        # The row read before the write is still counted from the older text.
        assert backend._chunk_terms({rowid: old}, before, ["zebra"])[rowid] == ({"zebra": 1}, len(old.text))


def test_a_search_overtaken_by_a_write_after_its_vector_scan_scores_each_row_from_the_vector_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The last file's chunk gets its rowid back when the file is rewritten. A write landing after a search's vector
    # scan (of the scan copy loaded for the generation it read) and before it read its candidate rows handed it the
    # new text under that rowid with the old text's vector score: "zebra crossing" was answered first by a chunk
    # now saying "okapi grazing notes", scored 0.29 (vector score 0.65), where a search a moment later scores that
    # chunk 0.0058. Each row must be scored from the vector stored for the text it shows.
    from support.sqlite_memory import add_filler, open_mem, write

    from symi_memory.index.vectors import ExactVectors

    ws = tmp_path / "ws"
    add_filler(ws, 10)
    query = SearchQuery(text="zebra crossing", max_results=10, min_score=0.0, candidate_limit=50)

    def answers(mem) -> list[tuple[str, str, float, float | None]]:  # type: ignore[no-untyped-def]
        return [(c.path, c.text, c.score, c.vector_score) for c in mem.backend.search(query).candidates]

    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        write(ws, "memory/z.md", "# Z\n\nzebra crossing notes by the harbour\n")
        mem.sync()  # the last chunk written: the highest rowid
        armed = []
        scan = ExactVectors.search

        def scan_then_write(self, q, k):  # type: ignore[no-untyped-def]
            hits = scan(self, q, k)  # the real scan, then the write lands
            while armed:
                armed.pop()()
            return hits

        def rewrite() -> None:
            write(ws, "memory/z.md", "# Z\n\nokapi grazing notes by the harbour\n")
            mem.sync()

        monkeypatch.setattr(ExactVectors, "search", scan_then_write)
        armed.append(rewrite)
        overtaken = answers(mem)
        assert not armed
        now = answers(mem)
        assert [a for a in now if a[0] == "memory/z.md"][0][1].startswith("# Z\n\nokapi")
        assert overtaken == now


def test_a_search_whose_vector_scan_ran_after_a_write_on_the_scan_worker_scores_each_row_from_its_vector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A large scan copy is scanned beside the keyword side (the scan worker, or the searching thread when no core
    # is free), so it may run after the keyword candidates' rows were read and counted. A write landing between
    # the two hands the scan a copy reloaded for the newer generation (a copy of up to 20,000 chunks reloads at
    # once): a keyword candidate read before the write showed its old text ("zebra crossing") with the vector score
    # of the text that replaced it under its rowid, a score neither the search before the write nor the one after
    # gives it. Each row must be scored from the vector stored for the text it shows.
    import threading

    from support.sqlite_memory import open_mem, write

    from symi_memory.index import vectors as vectors_module
    from symi_memory.index.store import IndexStore
    from symi_memory.index.vectors import ExactVectors

    ws = tmp_path / "ws"
    # Every chunk holds a query word: the vector hits are all keyword candidates, their rows read before the scan.
    for n in range(10):
        write(ws, f"memory/notes/n{n:02}.md", f"# Note {n}\n\nthe river crossing log, day {n}: ferry on time\n")
    query = SearchQuery(text="zebra crossing", max_results=10, min_score=0.0, candidate_limit=50)

    def answers(mem) -> list[tuple[str, str, float, float | None]]:  # type: ignore[no-untyped-def]
        return [(c.path, c.text, c.score, c.vector_score) for c in mem.backend.search(query).candidates]

    # Every loaded copy is worth the scan worker (a test index is far below HAND_OFF_MIN_ROWS).
    monkeypatch.setattr(vectors_module, "HAND_OFF_MIN_ROWS", 1)
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        write(ws, "memory/z.md", "# Z\n\nzebra crossing notes by the harbour\n")
        mem.sync()  # the last chunk written: the highest rowid
        before = answers(mem)
        assert before[0][0] == "memory/z.md" and "zebra" in before[0][1]
        counted = threading.Event()
        armed: list[object] = []
        weights = IndexStore.term_weights
        scan = ExactVectors.search

        def weights_then_signal(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            got = weights(self, *args, **kwargs)  # the keyword side's rows are read and counted by now
            counted.set()
            return got

        def write_then_scan(self, q, k):  # type: ignore[no-untyped-def]
            if armed:
                assert counted.wait(30)
                armed.pop()
                write(ws, "memory/z.md", "# Z\n\nokapi grazing notes by the harbour\n")
                mem.sync()
            return scan(self, q, k)  # the real scan, of the copy as it is now

        monkeypatch.setattr(IndexStore, "term_weights", weights_then_signal)
        monkeypatch.setattr(ExactVectors, "search", write_then_scan)
        armed.append(True)
        overtaken = answers(mem)
        assert not armed
        now = answers(mem)
        assert [a for a in now if a[0] == "memory/z.md"][0][1].startswith("# Z\n\nokapi")
        # Each row's vector score is the one its text gets from a search that no write overtook (the keyword
        # side's BM25 may still be the older generation's: its FTS query ran before the write).
        vector_score = {(path, text): v for path, text, _, v in before + now}
        assert [(p, t, v) for p, t, _, v in overtaken] == [(p, t, vector_score[(p, t)]) for p, t, _, v in overtaken]


def test_a_search_overtaken_by_another_models_rebuild_scores_no_row_from_the_new_models_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another process configured with another model of the same width (an operator switching models while an agent
    # host serves) rebuilds the index after this search's vector scan. The overtaken search read its rows again
    # with their stored vectors, the other model's, and scored them against its own model's query vector: cosines
    # across two models' spaces, meaning nothing. A search after the rebuild answers by keyword (its vectors are
    # another model's until this host reindexes); an overtaken one must not rank by those cosines either.
    from collections.abc import Callable
    from typing import Any

    from support.sqlite_memory import add_filler, open_mem, write

    from symi_memory import hookimpl
    from symi_memory.index.vectors import ExactVectors
    from symi_memory.specs import ProviderSpec
    from symi_memory.testing import HashEmbedder

    class MirrorEmbedder(HashEmbedder):
        """Another model of the same width: the hash vectors with their dimensions in reverse order."""

        def __init__(self) -> None:
            super().__init__(id="mirror", model="mirror-384")

        @property
        def fingerprint(self) -> str:
            return "mirror:384"

        def _vector(self, text: str) -> list[float]:
            return super()._vector(text)[::-1]

    class MirrorPlugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
            register(ProviderSpec(name="mirror", factory=lambda ctx: MirrorEmbedder(), default_model="mirror-384"))

    ws = tmp_path / "ws"
    add_filler(ws, 10)
    write(ws, "memory/z.md", "# Z\n\nzebra crossing notes by the harbour\n")
    query = SearchQuery(text="zebra crossing harbour", max_results=10, min_score=0.0, candidate_limit=50)

    def answers(mem) -> list[tuple[str, str, float | None]]:  # type: ignore[no-untyped-def]
        return [(c.path, c.text, c.vector_score) for c in mem.backend.search(query).candidates]

    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        before = answers(mem)
        assert all(v is not None for _, _, v in before)
        armed = []
        scan = ExactVectors.search

        def scan_then_write(self, q, k):  # type: ignore[no-untyped-def]
            hits = scan(self, q, k)  # the real scan, then the other model's rebuild lands
            while armed:
                armed.pop()()
            return hits

        def rebuild_with_another_model() -> None:
            with open_mem(tmp_path, ws, {"provider": "mirror"}, plugins=[("mirror-test", MirrorPlugin())]) as other:
                assert other.sync().full

        monkeypatch.setattr(ExactVectors, "search", scan_then_write)
        armed.append(rebuild_with_another_model)
        overtaken = answers(mem)
        assert not armed
        now = answers(mem)
        assert all(v is None for _, _, v in now)  # keyword only until this host reindexes with its own model
        scored = {(path, text): v for path, text, v in before}
        # Each row is scored from this model's vector of its text, or not by vector at all.
        assert all(v is None or v == scored.get((path, text)) for path, text, v in overtaken), overtaken
