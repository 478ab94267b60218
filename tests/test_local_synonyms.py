"""Local synonyms: a query word no chunk holds is matched through the index's words of like meaning.

Real SQLite/FTS5 index and the real local model (all-MiniLM-L6-v2), as a user runs them.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from symi_memory import hookimpl, load_config, open_memory
from symi_memory.specs import ProviderSpec
from symi_memory.testing import HashEmbedder
from symi_memory.types import SearchQuery

REPO = Path(__file__).resolve().parents[1]
FIVE = REPO / "bench" / "datasets" / "fivequestions"

pytest.importorskip("symi_memory_local")


def _mem(tmp_path: Path, ws: Path, *, synonyms: bool = True, state: str = "state") -> Any:
    ms = {"provider": "local", "query": {"hybrid": {"synonyms": {"enabled": synonyms}}}}
    cfg = load_config(None, state_dir=tmp_path / state, overrides={"agents": {"defaults": {"memorySearch": ms}}})
    return open_memory(cfg, workspace=ws, start=False)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(FIVE / "workspace", ws)
    return ws


def _top(mem: Any, query: str) -> Any:
    """The best candidate of the backend's ranking, with each side's score (``text_score``: the keyword side)."""
    cands = mem.backend.search(SearchQuery(text=query, max_results=10, min_score=0.0, candidate_limit=40)).candidates
    assert cands, query
    return cands[0]


def test_a_word_memory_never_uses_finds_the_note_by_keyword_too(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws, synonyms=False, state="off") as mem:
        mem.sync()
        off = _top(mem, "trip to Portugal")
    with _mem(tmp_path, ws) as mem:
        mem.sync()
        on = _top(mem, "trip to Portugal")
    assert on.path == off.path == "memory/2026-03-02.md"
    assert on.score > 1.5 * off.score
    # No chunk holds "Portugal" or "trip": the keyword side had nothing to say; Lisbon now stands in for Portugal.
    assert not off.text_score
    assert on.text_score and on.text_score > 0


def test_the_reworded_beverage_question_clears_min_score_with_room(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws, synonyms=False, state="off") as mem:
        mem.sync()
        off = _top(mem, "favourite beverage")
    with _mem(tmp_path, ws) as mem:
        mem.sync()
        results = mem.search("favourite beverage").results  # the default config: minScore applied
        assert results and results[0].path == "MEMORY.md"
        assert results[0].score > 3 * off.score  # "tea" and "coffee" stand in for "beverage"
        # A question about something memory never held still returns nothing.
        assert mem.search("quarterly tax filing deadline").results == ()


def test_queries_whose_words_are_in_the_index_score_as_without_synonyms(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    scores = []
    for state, on in (("off", False), ("on", True)):
        with _mem(tmp_path, ws, synonyms=on, state=state) as mem:
            mem.sync()
            scores.append([(r.path, r.start_line, round(r.score, 9))
                           for r in mem.search("Lisbon flights hotel", min_score=0).results])
    assert scores[0] == scores[1]


def test_words_of_notes_written_later_stand_in_and_removed_ones_stop(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Facts\n\n- Allergic to peanuts.\n- Plays the cello on Sundays.\n",
                                  encoding="utf-8")
    note = ws / "memory" / "2026-03-02.md"
    with _mem(tmp_path, ws) as mem:
        mem.sync()
        assert not _top(mem, "trip to Portugal").text_score  # nothing about it yet
        note.write_text("# 2026-03-02\n\n- Booked flights to Lisbon for the May long weekend.\n", encoding="utf-8")
        mem.sync()
        hit = _top(mem, "Portugal")
        assert hit.path == "memory/2026-03-02.md" and hit.text_score
        note.write_text("# 2026-03-02\n\n- Booked a table for the May long weekend.\n", encoding="utf-8")
        mem.sync()
        cands = mem.backend.search(SearchQuery(text="Portugal", max_results=10, min_score=0.0,
                                               candidate_limit=40)).candidates
        assert not any(c.text_score for c in cands)


def test_an_index_without_word_vectors_gets_them_on_its_next_sync(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws) as mem:
        mem.sync()
        store = mem.backend.store
        with store.write():  # as an index built before local synonyms: no vocabulary
            store.conn.execute("DROP TABLE vocab_vectors")
            store.conn.execute("DELETE FROM meta WHERE key = 'vocab_embedder'")
    with _mem(tmp_path, ws) as mem:
        (ws / "memory" / "2026-03-20.md").write_text("# 2026-03-20\n\n- Dentist on Tuesday.\n", encoding="utf-8")
        mem.sync()  # an incremental sync of one new note fills the vocabulary from the whole index
        assert _top(mem, "trip to Portugal").text_score


@attrs.define
class _StallingWords(HashEmbedder):
    """A third-party provider whose endpoint stops answering document requests (queries still answer)."""

    stall: threading.Event = attrs.field(factory=threading.Event)
    release: threading.Event = attrs.field(factory=threading.Event)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.stall.is_set():
            self.release.wait(30)
        return super().embed_documents(texts)


class _StallingPlugin:
    def __init__(self) -> None:
        self.provider = _StallingWords(id="stall", model="stall-1")

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        register(ProviderSpec(name="stall", factory=lambda ctx: self.provider))


def test_a_hung_endpoint_does_not_hold_a_search_with_an_unknown_word(tmp_path: Path) -> None:
    plugin = _StallingPlugin()
    ws = _workspace(tmp_path)
    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "stall"}}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("stall-test", plugin)]) as mem:
        mem.sync()
        plugin.provider.stall.set()
        try:
            for _ in range(2):  # the second search does not wait on the hung call again
                started = time.monotonic()
                results = mem.search("Lisbon flights to Portugal", min_score=0).results
                assert results and results[0].path == "memory/2026-03-02.md"
                assert time.monotonic() - started < 10
            assert time.monotonic() - started < 1.5
        finally:
            plugin.provider.release.set()


@attrs.define
class _StallingEndpoint(HashEmbedder):
    """A third-party provider whose endpoint stops answering altogether (queries and documents)."""

    stall: threading.Event = attrs.field(factory=threading.Event)
    release: threading.Event = attrs.field(factory=threading.Event)

    def embed_query(self, text: str) -> list[float]:
        if self.stall.is_set():
            self.release.wait(30)
        return super().embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.stall.is_set():
            self.release.wait(30)
        return super().embed_documents(texts)


def test_a_search_with_an_unknown_word_does_not_wait_on_an_endpoint_already_known_to_hang(tmp_path: Path) -> None:
    plugin = _StallingPlugin()
    plugin.provider = _StallingEndpoint(id="stall", model="stall-1")
    ws = _workspace(tmp_path)
    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "stall"}}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("stall-test", plugin)]) as mem:
        mem.sync()
        plugin.provider.stall.set()
        try:
            # Every word is in the index: only the query embedding is asked for, and it misses its deadline.
            assert mem.search("Lisbon flights", min_score=0).results
            # The endpoint is known to hang: the next search answers by keyword at once, unknown word or not.
            started = time.monotonic()
            results = mem.search("Lisbon flights to Portugal", min_score=0).results
            assert results and results[0].path == "memory/2026-03-02.md"
            assert time.monotonic() - started < 1.5
        finally:
            plugin.provider.release.set()


@attrs.define
class _RefusingWords(HashEmbedder):
    """A third-party provider whose endpoint turns down requests made of single words while ``refuse`` is set
    (a rate limit hit by the vocabulary's batch after the chunks' own)."""

    refuse: bool = False

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.refuse and all(" " not in t for t in texts):
            from symi_memory.errors import EmbeddingError

            raise EmbeddingError("429 too many requests", provider=self.id)
        return super().embed_documents(texts)


def test_words_whose_vectors_failed_once_get_them_on_the_next_sync(tmp_path: Path) -> None:
    plugin = _StallingPlugin()
    provider = plugin.provider = _RefusingWords(id="refusing", model="refusing-1")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Facts\n\n- Allergic to peanuts.\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "stall"}}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("refusing-test", plugin)]) as mem:
        mem.sync()
        provider.refuse = True  # the note's chunk is embedded, its words' vectors are turned down
        (ws / "memory" / "2026-03-02.md").write_text("# 2026-03-02\n\n- Booked flights to Lisbon for May.\n",
                                                     encoding="utf-8")
        mem.sync()
        provider.refuse = False
        (ws / "memory" / "2026-03-20.md").write_text("# 2026-03-20\n\n- Dentist on Tuesday.\n", encoding="utf-8")
        mem.sync()
        # "Lisbonne" is in no chunk; "lisbon" stands in for it only if it got its vector.
        hit = _top(mem, "Lisbonne")
        assert hit.path == "memory/2026-03-02.md" and hit.text_score


def test_an_identifier_memory_does_not_hold_gets_no_stand_in(tmp_path: Path) -> None:
    # A ticket or a commit memory never saw is not "like" one it did: PROJ4822 is not PROJ4821.
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Facts\n\n- Allergic to peanuts.\n- Plays the cello on Sundays.\n",
                                  encoding="utf-8")
    (ws / "memory" / "2026-03-02.md").write_text(
        "# 2026-03-02\n\n- Deploy of build a3f9c21 failed, rolled back to a3f9c20.\n"
        "- Ticket PROJ4821 is about the login page.\n", encoding="utf-8")
    scores = []
    for state, on in (("off", False), ("on", True)):
        with _mem(tmp_path, ws, synonyms=on, state=state) as mem:
            mem.sync()
            scores.append([[(r.path, r.start_line, round(r.score, 9)) for r in mem.search(q, min_score=0).results]
                           for q in ("PROJ4822", "build a3f9c22", "b7e1d09")])
    assert scores[0] == scores[1]



def test_a_hyphenated_word_does_not_stand_in_through_its_first_letter(tmp_path: Path) -> None:
    # The index splits "e-mail" into "e" and "mail". A query word memory does not hold ("emails") must not
    # count every "e" of the index (vitamin E) as if it were the e-mail.
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Facts\n\n- Takes vitamin E with breakfast.\n", encoding="utf-8")
    (ws / "memory" / "2026-03-02.md").write_text("# 2026-03-02\n\n- Sent the e-mail to the landlord.\n",
                                                 encoding="utf-8")
    with _mem(tmp_path, ws) as mem:
        mem.sync()
        cands = mem.backend.search(SearchQuery(text="emails", max_results=10, min_score=0.0,
                                               candidate_limit=40)).candidates
        assert not any(c.text_score for c in cands if c.path == "MEMORY.md")
