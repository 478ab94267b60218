"""Query words left out of the MATCH (absent from every chunk) must be exactly the ones that cannot match."""

from __future__ import annotations

from pathlib import Path

import apsw

from symi_memory import load_config, open_memory

NONE = {"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    for i in range(60):  # more than PRUNE_MIN_CHUNKS: the query's words are weighed before the MATCH
        (ws / "memory" / f"n{i}.md").write_text(f"# Note {i}\n\nthe note {i} about w{i % 7} and more\n",
                                                encoding="utf-8")
    (ws / "memory" / "sink.md").write_text("# Sink\n\nthe plumbing was leaking under the sink\n", encoding="utf-8")
    return ws


def test_a_keyword_table_of_the_old_tokenizer_still_finds_words_it_holds_unstemmed(tmp_path: Path) -> None:
    # An index migrated from schema 3 keeps its unstemmed keyword table until the background rebuild: its terms are
    # the words as written ("plumbing"), not the stems the current tokenizer makes of the query ("plumb"). Until
    # then a search must still find a chunk by the words it holds, as it did before the absent-word check.
    ws = _workspace(tmp_path)
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=NONE)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    conn = apsw.Connection(str(db))
    with conn:  # what a schema-3 index holds after its migration: the keyword table of the tokenizer before porter
        conn.execute("DROP TABLE chunks_vocab")
        conn.execute("DROP TABLE chunks_fts")
        conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(text, cjk, content='', contentless_delete=1, "
                     "tokenize='unicode61 remove_diacritics 2')")
        conn.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')")
        conn.execute("INSERT INTO chunks_fts(rowid, text, cjk) SELECT rowid, text, '' FROM chunks")
        conn.execute("DELETE FROM meta WHERE key = 'identity'")
    conn.close()
    with open_memory(cfg, workspace=ws, start=False) as mem:
        for query in ("plumbing leaking", "plumbing note"):
            hits = mem.search(query, min_score=0).results
            assert hits and hits[0].path == "memory/sink.md", (query, [h.path for h in hits])
