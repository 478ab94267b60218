"""Issue 10: what a user gets with the default config (calibrated scores, minScore, stop words, migration)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from symi_memory import hookimpl, load_config, open_memory
from symi_memory.index.db import FTS_TOKENIZER, SCHEMA_VERSION
from symi_memory.specs import DEFAULT_CALIBRATION, ProviderSpec, ScoreCalibration
from symi_memory.testing import HashEmbedder
from symi_memory.types import SearchQuery

REPO = Path(__file__).resolve().parents[1]
FIVE = REPO / "bench" / "datasets" / "fivequestions"


def _mem(tmp_path: Path, ws: Path, plugins: Any = None, **ms: Any):
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": ms}}})
    return open_memory(cfg, workspace=ws, start=False, plugins=plugins)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(FIVE / "workspace", ws)
    (ws / "memory" / "2026-03-11.md").write_text(
        "# 2026-03-11\n\n- Merged the parser fix in commit 9f3c2ab1, which closes the flaky test.\n"
        "- Lunch with Marta on Friday.\n", encoding="utf-8")
    return ws


@pytest.mark.parametrize("query", ["the", "what is it", "What is it?", "the the of"])
def test_a_stop_word_query_returns_nothing(tmp_path: Path, query: str) -> None:
    with _mem(tmp_path, _workspace(tmp_path), provider="hash") as mem:
        mem.sync()
        assert mem.search(query, min_score=0).results == ()


def test_cli_search_the_exits_0_with_nothing(tmp_path: Path, cli: Callable[..., Any]) -> None:
    ws = _workspace(tmp_path)
    code, out, err = cli("--workspace", str(ws), "search", "the", "--json", json_out=True)
    assert code == 0, err
    assert out["results"] == []


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_commit_hash_query_returns_its_line_and_no_noise_above_min_score(tmp_path: Path, fusion: str) -> None:
    ws = _workspace(tmp_path)
    with _mem(tmp_path, ws, provider="hash", query={"hybrid": {"fusion": fusion}}) as mem:
        mem.sync()
        results = mem.search("9f3c2ab1").results
        assert results, "the hash is in the notes"
        assert results[0].path == "memory/2026-03-11.md"
        assert all("9f3c2ab1" in r.snippet for r in results)
        # Without the threshold the other chunks are still ranked, below minScore.
        ranked = mem.search("9f3c2ab1", min_score=0, max_results=10).results
        assert len(ranked) > len(results)
        assert max(r.score for r in ranked if "9f3c2ab1" not in r.snippet) < 0.05 <= results[0].score


def test_scores_do_not_depend_on_the_size_of_the_index(tmp_path: Path) -> None:
    small = _workspace(tmp_path)
    big = tmp_path / "big"
    shutil.copytree(small, big)
    for i in range(60):
        (big / "memory" / f"2025-01-{i:02d}-x.md").write_text(
            f"# note {i}\n\n- Grocery list number {i}: apples, bread, oat milk.\n", encoding="utf-8")
    scores = []
    for ws, state in ((small, "s1"), (big, "s2")):
        with _mem(tmp_path / state, ws, provider="none") as mem:
            mem.sync()
            hit = mem.search("Lisbon flights", min_score=0).results[0]
            assert hit.path == "memory/2026-03-02.md"
            scores.append(hit.score)
    assert scores[0] == pytest.approx(scores[1], abs=0.02)


class _Plain:
    """A third-party provider that declares no calibration."""

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        register(ProviderSpec(name="plain", factory=lambda ctx: HashEmbedder(id="plain", model="plain-1")))


def test_third_party_provider_without_calibration_uses_the_documented_default(tmp_path: Path) -> None:
    spec = ProviderSpec(name="x", factory=lambda ctx: HashEmbedder())
    assert spec.calibration_for("anything") == DEFAULT_CALIBRATION
    declared = ProviderSpec(name="y", factory=lambda ctx: HashEmbedder(), calibration={"m": ScoreCalibration(2.0, 0.3)})
    assert declared.calibration_for("m") == ScoreCalibration(2.0, 0.3)
    assert declared.calibration_for("other") == DEFAULT_CALIBRATION
    with _mem(tmp_path, _workspace(tmp_path), plugins=[("plain-test", _Plain())], provider="plain") as mem:
        mem.sync()
        resp = mem.search("kitchen tap plumber", min_score=0)
        assert resp.results[0].path == "memory/2026-03-09.md"
        top = resp.results[0]
        assert 0.0 <= top.score <= 1.0


class _TwoFits:
    """A provider declaring one fit for line-aware scores and another for chunk vectors alone."""

    LINES = ScoreCalibration(2.0, 0.3)
    CHUNKS = ScoreCalibration(50.0, 0.99)  # so strict that any chunk-only vector score reads ~0

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        register(ProviderSpec(name="twofit", factory=lambda ctx: HashEmbedder(id="twofit", model="m"),
                              calibration={"m": self.LINES}, chunk_calibration={"m": self.CHUNKS}))


@pytest.mark.parametrize("units", ["lines", "off"])
def test_chunk_only_scores_use_the_providers_chunk_calibration(tmp_path: Path, units: str) -> None:
    spec = ProviderSpec(name="z", factory=lambda ctx: HashEmbedder(), calibration={"m": _TwoFits.LINES})
    assert spec.calibration_for("m", line_aware=False) == _TwoFits.LINES  # none declared: the one fit serves both
    with _mem(tmp_path, _workspace(tmp_path), plugins=[("twofit-test", _TwoFits())], provider="twofit",
              chunking={"units": units}) as mem:
        mem.sync()
        expected = _TwoFits.LINES if units == "lines" else _TwoFits.CHUNKS
        assert mem.backend.calibration() == expected
        cands = mem.backend.search(SearchQuery(text="kitchen tap plumber", max_results=5, min_score=0.0,
                                               candidate_limit=20)).candidates
        vec = [c.vector_score for c in cands if c.vector_score is not None]
        assert vec
        if units == "off":
            assert max(vec) < 1e-6
        else:
            assert max(vec) > 0.3


def _v3_index(tmp_path: Path, ws: Path) -> Path:
    """A real index, turned back into what schema 3 wrote: old tokenizer, a vector column in chunks, version 3.

    (Keyword-only, so there are no vectors to move; tests/test_vector_storage.py covers that part.)
    """
    with _mem(tmp_path, ws, provider="none") as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    conn = apsw.Connection(str(db))
    with conn:
        conn.execute("DROP TABLE chunks_vocab")
        conn.execute("DROP TABLE chunks_fts")
        conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(text, cjk, content='', contentless_delete=1, "
                     "tokenize='unicode61 remove_diacritics 2')")
        conn.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')")
        conn.execute("INSERT INTO chunks_fts(rowid, text, cjk) SELECT rowid, text, '' FROM chunks")
        conn.execute("CREATE TABLE chunks_v3 (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, path TEXT NOT NULL, "
                     "source TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL, "
                     "text TEXT NOT NULL, embedding BLOB)")
        conn.execute("INSERT INTO chunks_v3 SELECT rowid, id, path, source, start_line, end_line, hash, text, NULL "
                     "FROM chunks")
        conn.execute("CREATE TABLE cache_v3 (provider TEXT NOT NULL, model TEXT NOT NULL, fingerprint TEXT NOT NULL, "
                     "hash TEXT NOT NULL, dims INTEGER NOT NULL, embedding BLOB NOT NULL, used_at REAL NOT NULL, "
                     "PRIMARY KEY (provider, model, fingerprint, hash))")
        for table in ("chunks", "embedding_cache", "embedders"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("ALTER TABLE chunks_v3 RENAME TO chunks")
        conn.execute("ALTER TABLE cache_v3 RENAME TO embedding_cache")
        conn.execute("CREATE INDEX chunks_path ON chunks(path)")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    return db


def test_an_old_schema_index_answers_then_is_rebuilt_with_stemming(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    db = _v3_index(tmp_path, ws)
    with _mem(tmp_path, ws, provider="none") as mem:
        # Before any sync: the old rows still answer (unstemmed, so the exact word).
        before = mem.search("plumber", min_score=0).results
        assert before and before[0].path == "memory/2026-03-09.md"
        assert mem.status()["dirty"] is True
        mem.sync()
        # After the rebuild the FTS table stems: "flight" finds "flights".
        after = mem.search("flight", min_score=0).results
        assert after and after[0].path == "memory/2026-03-02.md"
    conn = apsw.Connection(str(db))
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0]
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    conn.close()
    assert FTS_TOKENIZER in sql and version == str(SCHEMA_VERSION)


def test_eval_reports_empty_shares_in_both_views(tmp_path: Path, cli: Callable[..., Any]) -> None:
    code, out, err = cli("eval", str(FIVE), "--json", env={"SYMI_MEMORY_PLUGINS": "symi_memory.testing.plugin"},
                         json_out=True)
    assert code == 0, err
    assert out["search"]["view"] == "as-configured" and out["search"]["min_score"] == 0.015
    assert out["per_type"]["negative"]["negative_empty"] == 1.0  # no provider available offline here: keyword-only
    code, ranking, err = cli("eval", str(FIVE), "--json", "--min-score", "0", json_out=True)
    assert code == 0, err
    assert ranking["search"] == {"view": "ranking", "min_score": 0.0, "max_results": 10}
    assert ranking["overall"]["positive_empty"] <= out["overall"]["positive_empty"]


def _has_local() -> bool:
    try:
        from symi_memory_local.hooks import available  # noqa: F401
        from symi_memory_local.integrity import bundled_tokenizer  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_local(), reason="needs the local extra (pip install 'symi-memory[local]')")
def test_five_reworded_questions_with_the_default_config(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (FIVE / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    with _mem(tmp_path, FIVE / "workspace", provider="local") as mem:
        mem.sync()
        if mem.status()["provider"] != "local":
            pytest.skip("the local model is not installed")
        found, ranked = {}, {}
        for row in rows[:5]:
            res = mem.search(row["query"]).results
            found[row["query"]] = res[0].path if res else None
            ranked[row["query"]] = mem.search(row["query"], min_score=0).results[0].path
        want = {row["query"]: row["gold"][0]["path"] for row in rows[:5]}
        assert ranked == want
        # Issue 10 asks 5/5 with no flags; under minScore 0.35 it was 0/5. With line vectors and the
        # log-odds fusion each is found first under the default minScore (0.015; docs/search-scores.md).
        assert found == want


def test_keyword_side_prefers_the_short_note_that_says_it_over_a_long_one_that_mentions_it(tmp_path: Path) -> None:
    # The old IDF-coverage score gave both files the same keyword score (each holds "kayak" once);
    # BM25's length normalisation ranks the note about the kayak first, and the score still passes minScore.
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    filler = " ".join(f"Errand {i}: groceries, laundry, post office, bank, pharmacy." for i in range(25))
    (ws / "memory" / "2026-04-01.md").write_text(f"# 2026-04-01\n\n{filler} Saw a kayak on a roof rack.\n",
                                                 encoding="utf-8")
    (ws / "memory" / "2026-04-02.md").write_text("# 2026-04-02\n\n- Bought a sea kayak, stored in the garage.\n",
                                                 encoding="utf-8")
    with _mem(tmp_path, ws, provider="none") as mem:
        mem.sync()
        res = mem.search("where is my kayak").results
        assert [r.path for r in res][:2] == ["memory/2026-04-02.md", "memory/2026-04-01.md"]
        assert res[0].score > res[1].score
