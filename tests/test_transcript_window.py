"""A transcript past ``sync.maxFileBytes`` keeps its newest chunks, and a sync after an append writes only the new
ones (stop 35): the window starts where a chunk of the whole transcript starts, so when it moves on the chunks still
in it are those already indexed. Each check syncs a transcript as it grows and compares the index with one built
from nothing from the final file (every row, vector, unit, term, status and search answer)."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import apsw
import pytest
from test_transcript_tail import append, dump, grown, index_once, msg, random_lines, settings, tail_reads  # noqa: F401
from test_transcript_tail_adversarial import odd_lines


def chunk_ids(mem: Any) -> dict[str, int]:
    conn = apsw.Connection(str(mem.backend.store.path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {i: s for i, s in conn.execute("SELECT id, start_line FROM chunks WHERE path = 'sessions/s.jsonl'")}
    finally:
        conn.close()


@pytest.mark.parametrize(("seed", "limit", "chunking"), [
    (1, 2500, {}),
    (2, 1500, {"tokens": 16, "overlap": 0, "units": "pairs"}),
    (3, 4000, {"tokens": 60, "overlap": 20, "units": "lines"}),
    (4, 300, {"tokens": 40, "overlap": 10}),  # a limit smaller than some chunks: the window is the last chunk
])
def test_a_transcript_past_the_limit_synced_as_it_grows_matches_one_indexed_once(
        tmp_path: Path, grown, seed: int, limit: int, chunking: dict[str, Any], caplog) -> None:  # noqa: F811
    start, transcript = grown
    ms = settings(limit=limit, **chunking)
    mem = start(ms)
    rng = random.Random(seed)
    lines = random_lines(rng, 220) + odd_lines(rng, 40)
    rng.shuffle(lines)
    syncs = 0
    caplog.set_level(logging.DEBUG, logger="symi_memory.index")
    for step in range(48):
        n = rng.randint(1, 8)
        take, lines = lines[:n], lines[n:]
        append(transcript, b"".join(take))
        mem.sync(reason="manual")
        syncs += 1
        if step % 8 == 7:
            assert dump(mem) == index_once(tmp_path, transcript, ms)
    assert dump(mem) == index_once(tmp_path, transcript, ms)
    assert mem.status()["partial"], "the transcript's messages exceed the limit"
    # Every sync after the first read on, the window moving or not, but the one (if any) whose read took the text
    # past half the limit: the chunk starts the window moves by are kept from there, and that one read whole.
    crossed = sum("past half of sync.maxFileBytes" in r.getMessage() for r in caplog.records)
    assert crossed <= 1 and len(tail_reads(caplog)) + crossed == syncs - 1


def test_an_append_past_the_limit_writes_only_its_chunks_and_keeps_the_rest(tmp_path: Path, grown) -> None:  # noqa: F811
    start, transcript = grown
    ms = settings(limit=3000)
    mem = start(ms)
    lines = [msg("user", f"note {n}: remember the token word{n:03d}x for later please") for n in range(200)]
    append(transcript, b"".join(lines[:120]))
    mem.sync(reason="manual")
    for n in range(120, 200, 2):
        before = chunk_ids(mem)
        append(transcript, b"".join(lines[n:n + 2]))
        report = mem.sync(reason="manual")
        after = chunk_ids(mem)
        # The chunks still in the window are the rows that were there: only the new messages' are written.
        first = min(after.values())
        assert {i for i, s in before.items() if s >= first} <= set(after)
        assert report.chunks_written <= 2, report
        assert len(after) < len(before) + 3
    assert dump(mem) == index_once(tmp_path, transcript, ms)
    (part,) = mem.status()["partial"]
    assert "JSONL lines" in part["reason"] and part["reason"].endswith("-200)")
