"""A growing transcript is read and chunked only past where the last sync stopped (stop 34).

Each check builds the index of a transcript by syncing it as it grows, then indexes the final file once in a
fresh index, and compares the two: every file row, chunk (id, lines, text, vector, line analysis), unit vector,
keyword-index term count, status and search answer must be the same. Real files, real SQLite, the ``hash`` provider.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.sqlite_memory import open_mem, write

QUERIES = ("kumquat crates", "quokka feed bin", "otter weir", "deploy pipeline router", "REDACTED", "heron")
WORDS = ("garden harbour router backup standup sourdough knee dentist ticket deploy pipeline beagle otter weir "
         "kumquat quokka crates feed bin heron").split()


def settings(limit: int = 10_000_000, **chunking: Any) -> dict[str, Any]:
    return {"experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
            "sync": {"maxFileBytes": limit, "watch": False},
            "chunking": {"tokens": 24, "overlap": 6, **chunking}}


def msg(role: str, content: Any, **extra: Any) -> bytes:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}, **extra}).encode() + b"\n"


def random_lines(rng: random.Random, n: int) -> list[bytes]:
    """Message lines of every kind a transcript holds, and lines that are not messages."""
    out = []
    for i in range(n):
        kind = rng.random()
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
        if kind < 0.45:
            out.append(msg(rng.choice(["user", "assistant"]), words, timestamp=1_700_000_000 + i))
        elif kind < 0.55:  # longer than a chunk: split into pieces sharing a line number
            out.append(msg("assistant", words * rng.randint(3, 8)))
        elif kind < 0.6:  # a long repetitive line: identical pieces on the same line
            out.append(msg("user", "ab " * rng.randint(60, 200)))
        elif kind < 0.65:
            out.append(msg("user", f"my key is sk-{rng.randrange(10**20):020d}abc and token={words[:20]}xyzxyzxy"))
        elif kind < 0.75:
            out.append(json.dumps({"type": "tool_result", "output": words * 5}).encode() + b"\n")
        elif kind < 0.8:
            out.append(msg("assistant", [{"type": "text", "text": words}, {"type": "image"}]))
        elif kind < 0.85:
            out.append(b'{"type": "message", "message": {"role": "user", "content": "caf\xe9 ' + words.encode() + b'"}}\n')
        elif kind < 0.9:
            out.append(b"not json at all " + words.encode() + b"\n")
        elif kind < 0.93:
            out.append(b"\n")
        else:
            out.append(msg("system", words))
    return out


def dump(mem: Any) -> dict[str, Any]:
    """Everything the index holds about its files that a search or status can tell, rowids left out."""
    conn = apsw.Connection(str(mem.backend.store.path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        q = lambda sql: [tuple(r) for r in conn.execute(sql)]  # noqa: E731
        out = {
            # (MEMORY.md is written anew for each index: its mtime differs)
            "files": q("SELECT path, source, hash, CASE source WHEN 'sessions' THEN mtime END, size, chunks, "
                       "bad_utf8, lines FROM files ORDER BY path"),
            "chunks": q("SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, e.embedding, c.lines, "
                        "c.plain FROM chunks c LEFT JOIN embedding_cache e ON e.id = c.vector ORDER BY c.id"),
            "units": q("SELECT c.id, u.start_line, u.end_line, e.embedding FROM chunk_units u JOIN chunks c "
                       "ON c.rowid = u.chunk JOIN embedding_cache e ON e.id = u.vector ORDER BY 1, 2, 3"),
            "terms": q("SELECT term, doc, cnt FROM chunks_vocab ORDER BY term"),
            "partial": q("SELECT value FROM meta WHERE key = 'transcripts'"),
            "skipped": q("SELECT path, reason FROM skipped ORDER BY path"),
        }
    finally:
        conn.close()
    st = mem.status()
    out["status"] = {k: st[k] for k in ("files", "chunks", "partial", "skipped", "dirty", "sourceCounts")}
    out["search"] = {query: [(h.path, h.start_line, h.end_line, round(h.score, 9), h.snippet)
                             for h in mem.search(query, max_results=20, min_score=0).results] for query in QUERIES}
    return out


def index_once(tmp_path: Path, transcript: Path, ms: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The index of the transcript as it is now, built from nothing in a fresh index."""
    root = tmp_path / f"once-{len(list(tmp_path.glob('once-*')))}"
    ws = root / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    target = write(root / "state" / "agents" / "main" / "sessions", transcript.name, transcript.read_bytes())
    os.utime(target, ns=(transcript.stat().st_atime_ns, transcript.stat().st_mtime_ns))
    with open_mem(root, ws, ms, **kw) as mem:
        mem.sync(reason="manual")
        return dump(mem)


@pytest.fixture()
def grown(tmp_path: Path):
    """``(mem, transcript)``: an index of a transcript yet to be written."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    transcript = tmp_path / "state" / "agents" / "main" / "sessions" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(b"")
    mems = []

    def start(ms: dict[str, Any]) -> Any:
        mems.append(open_mem(tmp_path, ws, ms))
        return mems[-1]

    yield start, transcript
    for mem in mems:
        mem.close()


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


def test_a_transcript_synced_as_it_grows_matches_one_indexed_once(tmp_path: Path, grown, caplog) -> None:
    start, transcript = grown
    ms = settings()
    mem = start(ms)
    rng = random.Random(7)
    lines = random_lines(rng, 180)
    step = 0
    with caplog.at_level(logging.DEBUG, logger="symi_memory.index"):
        while lines:
            n = rng.randint(1, 12)
            take, lines = lines[:n], lines[n:]
            append(transcript, b"".join(take))
            mem.sync(reason="manual")
            step += 1
            if step % 12 == 0:
                assert dump(mem) == index_once(tmp_path, transcript, ms)
    assert dump(mem) == index_once(tmp_path, transcript, ms)
    # Every sync but the first (the index's first build) went on from where the last stopped.
    assert len(tail_reads(caplog)) == step - 1


def tail_reads(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "read on from byte" in r.getMessage()]


def grow_and_compare(tmp_path: Path, mem: Any, transcript: Path, ms: dict[str, Any], *changes: Any) -> None:
    """Apply each change (bytes to append, or a function of the path), sync, and compare with indexing once."""
    for change in changes:
        if isinstance(change, bytes):
            append(transcript, change)
        else:
            change(transcript)
        mem.sync(reason="manual")
        assert dump(mem) == index_once(tmp_path, transcript, ms)


def some_lines(seed: int, n: int) -> bytes:
    return b"".join(random_lines(random.Random(seed), n))


def test_a_truncated_or_rewritten_transcript_is_read_whole(tmp_path: Path, grown, caplog) -> None:
    start, transcript = grown
    ms = settings()
    mem = start(ms)
    first = some_lines(1, 40)

    def truncate(p: Path) -> None:  # shorter: the session was cut back
        p.write_bytes(first[: first.index(b"\n", len(first) // 2) + 1])

    def same_head_new_end(p: Path) -> None:  # grown, the first KiB unchanged, the last lines read rewritten
        data = p.read_bytes()
        p.write_bytes(data[:-40] + b"X" * 39 + b"\n" + some_lines(3, 10))

    def new_head(p: Path) -> None:  # rewritten in place, longer, another first line
        p.write_bytes(msg("user", "a different first question about the heron") + p.read_bytes()[20:] + some_lines(4, 5))

    with caplog.at_level(logging.DEBUG, logger="symi_memory.index"):
        grow_and_compare(tmp_path, mem, transcript, ms, first, truncate)
        assert tail_reads(caplog) == []  # the index's first build; then the cut
        caplog.clear()
        grow_and_compare(tmp_path, mem, transcript, ms, some_lines(2, 30), same_head_new_end, new_head)
        assert len(tail_reads(caplog)) == 1  # the plain append; neither rewrite


def test_a_transcript_scrubbed_in_the_middle_while_it_grew_is_read_whole(tmp_path: Path, grown, caplog) -> None:
    """A word scrubbed far from both ends of the bytes read (past the first KiB, before the last blocks), the
    file grown too: every byte read is hashed again, so the sync reads the file whole and the old word goes."""
    start, transcript = grown
    ms = settings()
    mem = start(ms)
    secret = msg("user", "the vault combination is marmoset")
    before, after = some_lines(11, 400), some_lines(12, 1200)
    assert len(before) > 4096 and len(after) > 3 * 65536

    def scrub_and_grow(p: Path) -> None:
        data = p.read_bytes()
        at = data.index(b"marmoset")
        p.write_bytes(data[:at] + b"XXXXXXXX" + data[at + 8:] + some_lines(13, 5))

    with caplog.at_level(logging.DEBUG, logger="symi_memory.index"):
        grow_and_compare(tmp_path, mem, transcript, ms, before + secret + after)
        assert {h.path for h in mem.search("marmoset").results} == {"sessions/s.jsonl"}
        caplog.clear()
        grow_and_compare(tmp_path, mem, transcript, ms, scrub_and_grow)
        assert tail_reads(caplog) == []
    assert not any("marmoset" in h.snippet for h in mem.search("marmoset", min_score=0).results)


def test_a_rotated_transcript_is_read_whole_even_when_it_starts_with_the_same_bytes(tmp_path: Path, grown,
                                                                                    caplog) -> None:
    start, transcript = grown
    ms = settings()
    mem = start(ms)

    def rotate(p: Path) -> None:  # moved aside and a new file started in its place, the old bytes copied in first
        data = p.read_bytes()
        p.rename(p.with_suffix(".old"))
        p.write_bytes(data + some_lines(6, 8))

    with caplog.at_level(logging.DEBUG, logger="symi_memory.index"):
        grow_and_compare(tmp_path, mem, transcript, ms, some_lines(5, 30))
        caplog.clear()
        grow_and_compare(tmp_path, mem, transcript, ms, rotate)
        assert tail_reads(caplog) == []


def test_a_line_half_written_at_a_sync_is_indexed_whole_once_finished(tmp_path: Path, grown, caplog) -> None:
    start, transcript = grown
    ms = settings()
    mem = start(ms)
    line = msg("user", "where did we leave the tamarind barrels? " * 3)
    done = msg("assistant", "In the cold store by the lighthouse.")
    with caplog.at_level(logging.DEBUG, logger="symi_memory.index"):
        grow_and_compare(tmp_path, mem, transcript, ms, some_lines(8, 20), line[:30])
        assert [h.path for h in mem.search("tamarind barrels").results] == []
        # The rest of the line; then a whole message written without its newline yet (valid JSON: indexed as it
        # is, as a whole read indexes it), then its newline and more.
        grow_and_compare(tmp_path, mem, transcript, ms, line[30:], done[:-1], done[-1:] + some_lines(9, 6))
        assert {h.path for h in mem.search("tamarind barrels").results} == {"sessions/s.jsonl"}
    # Syncs 2 and 4 read on from where the last whole line ended; 3 and 5, after a read that stopped inside a
    # line, read the file whole (1 is the index's first build).
    assert [m.split(" byte ")[1].split()[0] for m in tail_reads(caplog)] == [
        str(len(some_lines(8, 20))), str(len(some_lines(8, 20)) + len(line))]


def test_past_max_file_bytes_the_newest_messages_stay_and_status_says_which(tmp_path: Path, grown, caplog) -> None:
    start, transcript = grown
    ms = settings(limit=6000)
    mem = start(ms)
    words = [f"word{n:03d}x" for n in range(120)]
    lines = [msg("user", f"note {n}: remember the token {w} for later please") for n, w in enumerate(words)]
    with caplog.at_level(logging.DEBUG, logger="symi_memory.index"):
        grow_and_compare(tmp_path, mem, transcript, ms, *(b"".join(lines[i:i + 10]) for i in range(0, 120, 10)))
    (part,) = mem.status()["partial"]
    assert "only the newest 99 of 120 are searchable (JSONL lines 22-120)" in part["reason"]
    assert [(h.path, h.end_line) for h in mem.search(words[-1]).results][:1] == [("sessions/s.jsonl", 120)]
    # Every sync after the first read on, those after which the oldest messages left the window too, but the one
    # whose read took the text past half the limit (the chunk starts are kept from there).
    assert sum("past half of sync.maxFileBytes" in r.getMessage() for r in caplog.records) == 1
    assert len(tail_reads(caplog)) == 10


def test_a_message_over_the_limit_and_long_lines_are_counted_as_a_whole_read_counts_them(tmp_path: Path, grown) -> None:
    start, transcript = grown
    ms = settings(limit=3000)
    mem = start(ms)
    grow_and_compare(tmp_path, mem, transcript, ms, some_lines(10, 5),
                     msg("user", "kumquat " * 500),  # its text alone exceeds the limit: left out, the rest kept
                     json.dumps({"type": "tool_result", "output": "x" * 5000}).encode() + b"\n",  # a line past it
                     some_lines(11, 3))
    (part,) = mem.status()["partial"]
    assert "longer than sync.maxFileBytes" in part["reason"]


def test_an_append_read_against_rows_another_sync_replaced_meanwhile_is_not_written(tmp_path: Path) -> None:
    """Two processes' syncs (here two managers) read the same tail state; the slower one's append, read against
    rows the other replaced meanwhile, must not be written onto them (chunks doubled or lost): it is left for the
    next sync, which reads on from the rows that are there."""
    from support.slow_provider import slow_plugins
    from support.sqlite_memory import wait_for

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    transcript = write(tmp_path / "state" / "agents" / "main" / "sessions", "s.jsonl", some_lines(20, 30))
    ms = {**settings(), "provider": "slow"}
    calls = tmp_path / "calls.txt"
    with open_mem(tmp_path, ws, ms, plugins=slow_plugins(0.0)) as fast, \
            open_mem(tmp_path, ws, ms, plugins=slow_plugins(1.5, str(calls))) as slow:
        fast.sync(reason="manual")
        append(transcript, some_lines(21, 12))
        worker = threading.Thread(target=slow.sync, kwargs={"reason": "manual"})
        worker.start()
        wait_for(calls.exists, timeout=30)  # the slow sync has read the transcript and is embedding its new chunks
        append(transcript, some_lines(22, 12))
        fast.sync(reason="manual")
        worker.join(timeout=60)
        fast.sync(reason="manual")
        assert dump(fast) == index_once(tmp_path, transcript, ms, plugins=slow_plugins(0.0))


@pytest.mark.parametrize(("kill_after_calls", "limit"), [(1, 10_000_000), (3, 10_000_000), (1, 4000)])
def test_a_sync_killed_while_reading_on_loses_and_doubles_nothing(tmp_path: Path, kill_after_calls: int,
                                                                  limit: int) -> None:
    """SIGKILL a process's sync of an appended transcript (while it embeds the new chunks, in its last batch or
    before): the tail state goes with the chunks, so the next sync reads on from the rows that are there."""
    import signal
    import subprocess
    import sys

    from support.slow_provider import slow_plugins
    from support.sqlite_memory import wait_for

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    transcript = write(tmp_path / "state" / "agents" / "main" / "sessions", "s.jsonl", some_lines(30, 30))
    ms = {**settings(limit), "provider": "slow"}  # (4000: past the limit, the window moves as it is read on)
    with open_mem(tmp_path, ws, ms, plugins=slow_plugins(0.0)) as mem:
        mem.sync(reason="manual")
    append(transcript, some_lines(31, 60))
    calls = tmp_path / "calls.txt"
    script = Path(__file__).parent / "support" / "slow_provider.py"
    proc = subprocess.Popen([sys.executable, str(script), "sync", str(tmp_path / "state"), str(ws), "0.3", str(calls),
                             json.dumps({**ms, "remote": {"batch": {"enabled": False}}})],
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: calls.exists() and len(calls.read_text().split()) >= kill_after_calls, timeout=60)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.communicate()
    append(transcript, some_lines(32, 5))
    with open_mem(tmp_path, ws, ms, plugins=slow_plugins(0.0)) as mem:
        mem.sync(reason="manual")
        assert dump(mem) == index_once(tmp_path, transcript, ms, plugins=slow_plugins(0.0))
