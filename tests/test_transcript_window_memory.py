"""A whole read of a transcript past ``sync.maxFileBytes`` holds memory for the chunks of its window, not for every
chunk of the file (review of stop 35: the ids of every chunk written were kept to the end of the read, ~200 bytes
per chunk: 1.3 MB per 10,000 chunks, ~110 MB for a 1 GB transcript)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from support.sqlite_memory import open_mem, write
from test_transcript_tail import msg, settings

from symi_memory.workspace import MemoryFile


def test_a_whole_read_past_the_limit_holds_no_more_for_a_longer_transcript(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    with open_mem(tmp_path, ws, settings(limit=2000, tokens=8, overlap=0)) as mem:
        indexer = mem.backend.indexer

        def peak(messages: int) -> int:
            path = tmp_path / f"s{messages}.jsonl"  # each message a chunk of its own (tokens 8: 32 characters)
            path.write_bytes(b"".join(msg("user", f"message number {i:07d}") for i in range(messages)))
            f = MemoryFile(path=f"sessions/{path.name}", abs_path=str(path), mtime=0, size=path.stat().st_size,
                           source="sessions")
            tracemalloc.start()
            try:
                loaded = indexer._load_transcript(f)
                top = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert loaded.partial and len(loaded.pieces or ()) < 80  # only the window's chunks are written
            return top

        peak(300)  # (first-use allocations)
        short, long = peak(5000), peak(14000)
    # 9,000 chunks more: ~1.8 MB more when every chunk's id is kept (past SEEN_PRUNE closed chunks, their ids are
    # forgotten: at most ~4,100 of them are held, as many for either).
    assert long - short < 400_000, (short, long)
