"""The planner's statistics right after a sync: a first sync analyses what it wrote, never failing for it.

Before, the server had none until autovacuum's next round (about a minute): searches in that window probed each
query word by a scan of the agent's rows instead of the GIN index (a 200-word query over 2,000 notes took 9 s).
"""

from __future__ import annotations

import logging
import random
import string
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import PgServer, pg_config

from symi_memory import load_config
from symi_memory.config.fields import deep_merge
from symi_memory.manager import MemoryManager, open_memory

pytestmark = pytest.mark.postgres


def notes(root: Path, count: int) -> Path:
    rng = random.Random(5)
    vocab = ["".join(rng.choice(string.ascii_lowercase) for _ in range(6)) for _ in range(800)]
    (root / "memory").mkdir(parents=True)
    for i in range(count):
        body = "\n".join(f"- {' '.join(rng.choices(vocab, k=10))}" for _ in range(4))
        (root / "memory" / f"n{i:04d}.md").write_text(f"# Note {i}\n\n{body}\n", encoding="utf-8")
    return root


def open_pg(tmp_path: Path, server: PgServer, schema: str, ws: Path) -> MemoryManager:
    overrides = deep_merge(pg_config(server, schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "none", "sync": {"watch": False}}}}})
    return open_memory(load_config(None, state_dir=tmp_path / "state", overrides=overrides), workspace=ws,
                       agent_id="main", start=False)


def one(server: PgServer, sql: str, params: Any = ()) -> Any:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchone()[0]


def last_analyze(server: PgServer, schema: str) -> Any:
    return one(server, "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'chunks'",
               (schema,))


def test_searches_right_after_a_first_sync_probe_words_through_the_index(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = notes(tmp_path / "ws", 300)
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()
        # At once, before autovacuum's round: the server has statistics of the new rows ...
        assert one(pg_server, "SELECT count(*) FROM pg_stats WHERE schemaname = %s AND tablename = 'chunks' "
                   "AND attname = 'terms'", (pg_schema,)) == 1
        assert one(pg_server, "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)",
                   (f"{pg_schema}.chunks",)) >= 300
        # (which decide whether a query word is looked up in the GIN index or by a scan of the agent's rows: with
        # 2,000 notes and none, a 200-word query took 9 s; bench/postgres_first_sync.py)
        assert last_analyze(pg_server, pg_schema) is not None
        # A small sync after it leaves the statistics to autovacuum: one note edited is not analysed again.
        before = last_analyze(pg_server, pg_schema)
        (ws / "memory" / "n0001.md").write_text("# Note 1\n\n- the quokka moved house\n", encoding="utf-8")
        assert mem.sync().files_indexed == 1
        assert last_analyze(pg_server, pg_schema) == before
        assert [r.path for r in mem.search("quokka", min_score=0).results] == ["memory/n0001.md"]


def test_a_sync_whose_analyze_waits_on_a_lock_still_succeeds(
        tmp_path: Path, pg_server: PgServer, pg_schema: str, caplog: pytest.LogCaptureFixture) -> None:
    ws = notes(tmp_path / "ws", 0)
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        mem.sync()  # the tables, empty
        notes(tmp_path / "more", 80)
        for p in (tmp_path / "more" / "memory").iterdir():
            p.rename(ws / "memory" / p.name)
        # Another session (an operator's VACUUM, another ANALYZE) holds the lock ANALYZE needs for the whole sync.
        with psycopg.connect(pg_server.dsn) as other:
            other.execute(f"LOCK TABLE {pg_schema}.chunks IN SHARE UPDATE EXCLUSIVE MODE")
            caplog.set_level(logging.WARNING, logger="symi_memory.postgres")
            started = time.monotonic()
            report = mem.sync()
            took = time.monotonic() - started
            other.rollback()
        assert report.files_indexed == 80 and report.errors == ()
        assert took < 20
        assert any("could not analyse" in r.getMessage() for r in caplog.records)
        assert mem.status()["files"] == 80
        assert mem.search("note", min_score=0).results


def test_a_new_agents_first_sync_beside_an_analysed_agent_is_analysed(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """A fleet's new agent: the table has statistics, of the other agent's rows only, which give the new one none."""
    with open_pg(tmp_path / "a", pg_server, pg_schema, notes(tmp_path / "a" / "ws", 400)) as mem:
        mem.sync()
    before = last_analyze(pg_server, pg_schema)
    assert before is not None
    ws = notes(tmp_path / "b" / "ws", 70)  # fewer than a fifth of the table's rows
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": {
        "provider": "none", "sync": {"watch": False}}}}})
    with open_memory(load_config(None, state_dir=tmp_path / "b" / "state", overrides=overrides), workspace=ws,
                     agent_id="newcomer", start=False) as mem:
        assert mem.sync().chunks_written == 70
        assert last_analyze(pg_server, pg_schema) != before
        # The planner now counts the newcomer's rows (it took it for none, and probed each word by a scan of them).
        assert "newcomer" in one(pg_server, "SELECT most_common_vals::text FROM pg_stats WHERE schemaname = %s "
                                 "AND tablename = 'chunks' AND attname = 'owner'", (pg_schema,))
