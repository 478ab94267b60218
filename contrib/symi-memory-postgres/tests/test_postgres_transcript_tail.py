"""On postgres too, a transcript that only grew is read and chunked only past where the last sync stopped (its tail
state in ``transcript_tails``, written in the transaction of its rows), and one past ``sync.maxFileBytes`` keeps
its newest chunks as its window moves. Each check syncs a transcript as it grows and compares the rows with those
a fresh index of the final file holds: every file row, chunk (id, lines, text, terms, vector, line analysis), unit
vector, status and search answer. Real server, real files."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_support import REPO, PgServer, pg_config

from symi_memory import load_config
from symi_memory.config.fields import deep_merge
from symi_memory.manager import MemoryManager, open_memory

pytestmark = pytest.mark.postgres

sys.path.insert(0, str(REPO / "tests"))
from support.slow_provider import slow_plugins  # noqa: E402

WORDS = ("garden harbour router backup standup sourdough knee dentist ticket deploy pipeline beagle otter weir "
         "kumquat quokka crates feed bin heron").split()
QUERIES = ("kumquat crates", "quokka feed bin", "otter weir", "deploy pipeline router", "heron")


def msg(role: str, content: Any) -> bytes:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}}).encode() + b"\n"


def some_lines(rng: random.Random, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        k = rng.random()
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
        if k < 0.5:
            out.append(msg(rng.choice(["user", "assistant"]), words))
        elif k < 0.6:
            out.append(msg("assistant", words * rng.randint(3, 8)))  # longer than a chunk
        elif k < 0.65:
            out.append(msg("user", "abcdefg " * rng.randint(100, 250)))  # identical pieces (256 characters) on one line
        elif k < 0.7:
            out.append(msg("user", f"my key is sk-{rng.randrange(10**20):020d}abc and {words[:30]}"))
        elif k < 0.8:
            out.append(json.dumps({"type": "tool_result", "output": words * 5}).encode() + b"\n")
        elif k < 0.85:
            out.append(msg("assistant", "記憶検索の索引を作る猫が寝ている " + words))
        elif k < 0.9:
            out.append(b"not json " + words.encode() + b"\n")
        else:
            out.append(msg("system", words))
    return out


def settings(limit: int) -> dict[str, Any]:
    return {"provider": "slow", "experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
            "sync": {"maxFileBytes": limit, "watch": False}, "chunking": {"tokens": 64, "overlap": 16, "units": "pairs"}}


def open_pg(root: Path, server: PgServer, schema: str, ms: dict[str, Any], *, options: str = "") -> MemoryManager:
    """A manager of the agent at ``root`` in ``schema``; ``options``: server settings of each of its connections."""
    overrides = deep_merge(pg_config(server, schema), {"agents": {"defaults": {"memorySearch": ms}}})
    if options:
        overrides["agents"]["defaults"]["memorySearch"]["store"]["postgres"]["dsn"] += f" options='{options}'"
    cfg = load_config(None, state_dir=root / "state", overrides=overrides)
    return open_memory(cfg, workspace=root / "ws", start=False, plugins=slow_plugins(0.0))


def setup(root: Path, data: bytes = b"") -> Path:
    (root / "ws").mkdir(parents=True, exist_ok=True)
    (root / "ws" / "MEMORY.md").write_text("- the otter lives by the weir\n", encoding="utf-8")
    transcript = root / "state" / "agents" / "main" / "sessions" / "s.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_bytes(data)
    return transcript


def dump(server: PgServer, schema: str, mem: MemoryManager, root: Path, ms: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        q = lambda sql: conn.execute(sql.format(s=schema)).fetchall()  # noqa: E731
        out: dict[str, Any] = {
            "files": q("SELECT path, source, hash, CASE source WHEN 'sessions' THEN mtime END, size, chunks, bad_utf8, "
                       "lines FROM {s}.files ORDER BY path"),
            "chunks": q("SELECT cid, path, source, start_line, end_line, hash, text, terms::text, dims, embedding::text, "
                        "lines FROM {s}.chunks ORDER BY cid"),
            "units": q("SELECT cid, start_line, end_line, embedding FROM {s}.chunk_units ORDER BY 1, 2, 3"),
            "tails": q("SELECT path FROM {s}.transcript_tails ORDER BY path"),
        }
    st = mem.status()
    out["status"] = {k: st[k] for k in ("files", "chunks", "partial", "skipped", "dirty")}
    out["search"] = exact_answers(server, schema, root, ms)
    return out


def exact_answers(server: PgServer, schema: str, root: Path, ms: dict[str, Any]) -> dict[str, Any]:
    """Each query's whole answer (every hit's path, lines, score and snippet), from a manager whose connections never
    scan the HNSW index (``enable_indexscan`` off): the vector side then compares the query with every row. An HNSW
    graph is approximate, and depends on the order its rows were inserted and deleted in, not only on the rows:
    through it, the same rows written in another order can answer differently (and a test comparing them flake)."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        chunks = conn.execute(f"SELECT count(*) FROM {schema}.chunks").fetchone()[0]
    # Every row a candidate of each side and in the answer when it matches (200 at most): no tie at a cut-off is
    # broken by the rows' physical order, which differs between the two indexes.
    assert chunks <= 200, chunks
    out = {}
    with open_pg(root, server, schema, ms, options="-c enable_indexscan=off") as mem:
        for query in QUERIES:
            for _ in range(3):  # on a loaded host a query embedding can miss its deadline (keyword results only)
                res = mem.search(query, max_results=200, min_score=0)
                if res.mode == "hybrid":
                    break
            assert res.mode == "hybrid", res.warnings
            hits = [(round(h.score, 9), h.snippet, h.path, h.start_line, h.end_line) for h in res.results]
            # Best first, hits of one score in any order (ties are ordered by the rows' serial ids, which differ).
            out[query] = ([h[0] for h in hits], sorted(hits))
    return out


def index_once(tmp_path: Path, server: PgServer, schema: str, transcript: Path, ms: dict[str, Any]) -> dict[str, Any]:
    """The rows of the transcript as it is now, built from nothing in a schema of their own."""
    root = tmp_path / f"once-{len(list(tmp_path.glob('once-*')))}"
    folder = setup(root).parent
    for src in transcript.parent.glob("*.jsonl"):  # (every transcript of the folder)
        (folder / src.name).write_bytes(src.read_bytes())
        os.utime(folder / src.name, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns))
    other = f"{schema}_once"
    try:
        with open_pg(root, server, other, ms) as mem:
            mem.sync(reason="manual")
            return dump(server, other, mem, root, ms)
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {other} CASCADE")


def reads_on(caplog: pytest.LogCaptureFixture) -> int:
    return sum("read on from byte" in r.getMessage() for r in caplog.records)


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


@pytest.mark.parametrize("limit", [10_000_000, 2500], ids=["whole", "past-the-limit"])
def test_a_transcript_synced_as_it_grows_matches_one_indexed_once(tmp_path: Path, pg_server: PgServer, pg_schema: str,
                                                                  limit: int, caplog: pytest.LogCaptureFixture) -> None:
    ms = settings(limit)
    transcript = setup(tmp_path)
    rng = random.Random(limit)
    lines = some_lines(rng, 200)
    caplog.set_level(logging.DEBUG, logger="symi_memory.index")
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        for step in range(30):
            n = rng.randint(1, 8)
            take, lines = lines[:n], lines[n:]
            append(transcript, b"".join(take))
            mem.sync(reason="manual")
            if step % 10 == 9:
                assert dump(pg_server, pg_schema, mem, tmp_path, ms) == index_once(tmp_path, pg_server, pg_schema, transcript, ms)
        # Every sync after the first read on from the last, but the one (if any) whose read took the text past half
        # the limit (the chunk starts the window moves by are kept from there: that one read whole).
        crossed = sum("past half of sync.maxFileBytes" in r.getMessage() for r in caplog.records)
        assert crossed == (limit < 10_000_000) and reads_on(caplog) + crossed == 29
        assert bool(mem.status()["partial"]) == (limit < 10_000_000)


def test_a_schema_4_database_gets_the_table_and_reads_on_after_one_whole_read(
        tmp_path: Path, pg_server: PgServer, pg_schema: str, caplog: pytest.LogCaptureFixture) -> None:
    ms = settings(10_000_000)
    rng = random.Random(5)
    transcript = setup(tmp_path, b"".join(some_lines(rng, 20)))
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        mem.sync(reason="manual")
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:  # what version 4 held: no transcript_tails
        conn.execute(f"DROP TABLE {pg_schema}.transcript_tails")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '4' WHERE key = 'schemaVersion'")
    caplog.set_level(logging.DEBUG, logger="symi_memory.index")
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        assert mem.status()["dirty"] is False  # no rebuild: the table is added
        append(transcript, b"".join(some_lines(rng, 6)))
        mem.sync(reason="manual")
        assert reads_on(caplog) == 0  # no tail state yet: read whole, once
        append(transcript, b"".join(some_lines(rng, 6)))
        mem.sync(reason="manual")
        assert reads_on(caplog) == 1
        assert dump(pg_server, pg_schema, mem, tmp_path, ms) == index_once(tmp_path, pg_server, pg_schema, transcript, ms)
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        assert conn.execute(f"SELECT value FROM {pg_schema}.meta WHERE key = 'schemaVersion'").fetchall() == [("5",)]


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from support.slow_provider import slow_plugins
from symi_memory import load_config
from symi_memory.manager import open_memory
import json
cfg = load_config(None, state_dir={state!r}, overrides=json.loads({overrides!r}))
with open_memory(cfg, workspace={ws!r}, start=False, plugins=slow_plugins(0.3, {calls!r})) as mem:
    mem.sync(reason="manual")
print("finished")
"""


@pytest.mark.parametrize(("limit", "kill_after_calls"), [(10_000_000, 1), (6000, 2)], ids=["whole", "past-the-limit"])
def test_a_sync_killed_while_reading_on_loses_and_doubles_nothing(tmp_path: Path, pg_server: PgServer, pg_schema: str,
                                                                  limit: int, kill_after_calls: int) -> None:
    """SIGKILL a process's sync of appended transcripts while it embeds their new chunks (the rows of the first
    already written in the open transaction, or not yet): the tail states go with the rows, so the next sync
    reads on from the rows that are there and the index is the one a whole read makes."""
    ms = {**settings(limit), "remote": {"batch": {"enabled": False}}}
    rng = random.Random(kill_after_calls)
    transcript = setup(tmp_path, b"".join(some_lines(rng, 30)))
    other = transcript.with_name("a.jsonl")
    other.write_bytes(b"".join(some_lines(rng, 30)))
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        mem.sync(reason="manual")
    before = dump_rows(pg_server, pg_schema)
    # (read whole, the two hold at most 200 chunks in all: each row a candidate of every search, exact_answers)
    grow = 100 if limit < 10_000_000 else 50
    append(other, b"".join(some_lines(rng, grow)))
    append(transcript, b"".join(some_lines(rng, grow)))
    calls = tmp_path / "calls.txt"
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": ms}}})
    code = CHILD.format(tests=str(REPO / "tests"), state=str(tmp_path / "state"), ws=str(tmp_path / "ws"),
                        overrides=json.dumps(overrides), calls=str(calls))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        deadline = time.monotonic() + 60
        while not (calls.exists() and len(calls.read_text().split()) >= kill_after_calls):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.communicate()
    assert dump_rows(pg_server, pg_schema) == before  # the transaction went with the process: rows and tails as they were
    append(transcript, b"".join(some_lines(rng, 5)))
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        mem.sync(reason="manual")
        got = dump(pg_server, pg_schema, mem, tmp_path, ms)
    assert got == index_once(tmp_path, pg_server, pg_schema, transcript, ms)


def dump_rows(server: PgServer, schema: str) -> list[Any]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return [conn.execute(f"SELECT * FROM {schema}.{t} ORDER BY 1, 2, 3").fetchall()
                for t in ("files", "transcript_tails")] + [
            conn.execute(f"SELECT cid, start_line, text FROM {schema}.chunks ORDER BY cid").fetchall()]


def test_two_processes_opening_a_schema_4_database_at_once_both_upgrade_it_once(
        tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    """Two processes starting at once on a schema 4 database: both open it (the upgrade runs once, under the schema
    lock), and each then reads a grown transcript on from its tail state."""
    ms = settings(10_000_000)
    rng = random.Random(9)
    transcript = setup(tmp_path, b"".join(some_lines(rng, 20)))
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        mem.sync(reason="manual")
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {pg_schema}.transcript_tails")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '4' WHERE key = 'schemaVersion'")
    append(transcript, b"".join(some_lines(rng, 4)))
    overrides = deep_merge(pg_config(pg_server, pg_schema), {"agents": {"defaults": {"memorySearch": ms}}})
    code = CHILD.format(tests=str(REPO / "tests"), state=str(tmp_path / "state"), ws=str(tmp_path / "ws"),
                        overrides=json.dumps(overrides), calls=str(tmp_path / "calls.txt"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all("finished" in out for out, _ in outs)
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        assert conn.execute(f"SELECT value FROM {pg_schema}.meta WHERE key = 'schemaVersion'").fetchall() == [("5",)]
        assert conn.execute(f"SELECT path FROM {pg_schema}.transcript_tails").fetchall() == [("sessions/s.jsonl",)]
    with open_pg(tmp_path, pg_server, pg_schema, ms) as mem:
        got = dump(pg_server, pg_schema, mem, tmp_path, ms)
    want = index_once(tmp_path, pg_server, pg_schema, transcript, ms)
    # (each chunk's line analysis, written by the other processes, holds the same words, in the order of a set of
    # that process's string hashes)
    for rows in (got, want):
        rows["chunks"] = [c[:-1] for c in rows["chunks"]]
    assert got == want
