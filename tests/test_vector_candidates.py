"""How many candidates a search asks of the vector side: ``maxResults * candidateMultiplier`` (spec §4, from each
side), and twice that only when the index holds chunks of a source the search leaves out (the vector side cannot
filter by source, so those chunks may take some of its places)."""

from __future__ import annotations

import json
from pathlib import Path

from support.sqlite_memory import add_filler, open_mem, write

from symi_memory.types import SearchQuery

SESSIONS = {"experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"]}


def _vector_only(mem, sources: tuple[str, ...], limit: int = 8) -> list[str]:  # type: ignore[no-untyped-def]
    # Words no chunk holds: every candidate comes from the vector side.
    got = mem.backend.search(SearchQuery(text="zyzzyva quokkaberry", max_results=2, min_score=0.0,
                                         candidate_limit=limit, sources=sources))
    assert got.mode == "hybrid"
    return [c.source for c in got.candidates]


def test_a_memory_only_index_is_asked_for_the_candidates_the_spec_counts(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_filler(ws, 40)
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert mem.status()["chunks"] > 16
        assert _vector_only(mem, ("memory",)) == ["memory"] * 8


def test_an_index_holding_other_sources_over_fetches_for_the_searched_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_filler(ws, 40)
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    lines = [json.dumps({"type": "message", "message": {"role": "user", "content": f"note {n} about the weather"}})
             for n in range(60)]
    write(sessions, "x.jsonl", "\n".join(lines) + "\n")
    with open_mem(tmp_path, ws, SESSIONS) as mem:
        mem.sync()
        assert mem.status()["sourceCounts"]["sessions"]["files"] == 1
        both = _vector_only(mem, ("memory", "sessions"))
        assert len(both) == 8 and "sessions" in both
        # Searching memory alone, the session chunks among the vector side's places are made up for.
        memory = _vector_only(mem, ("memory",))
        assert set(memory) == {"memory"} and len(memory) > 8 - both.count("sessions")
