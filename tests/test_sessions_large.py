"""A long-running session's transcript stays searchable past ``sync.maxFileBytes`` (stop 32, gap 1).

Transcripts are read a line at a time: the limit bounds the message text indexed, not the JSONL file, so a
transcript full of tool output never drops out of search; one whose messages exceed the limit keeps its newest
ones searchable and status says which part is indexed. Markdown over the limit is still skipped whole.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from support.sqlite_memory import open_mem, write

SESSION_MS = {"provider": "none", "experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"]}


def msg(role: str, content: str) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}})


def tool(n: int, size: int) -> str:
    return json.dumps({"type": "tool_result", "id": n, "output": "ls -la output line\n" * (size // 20)})


def paths(mem, query: str, **kw) -> list[str]:
    return [h.path for h in mem.search(query, **kw).results]


def sessions_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "agents" / "main" / "sessions"


def test_a_transcript_growing_past_max_file_bytes_stays_searchable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    lines = [msg("user", "where did we leave the kumquat crates?"), msg("assistant", "In the cold store.")]
    p = write(sessions_dir(tmp_path), "long.jsonl", "\n".join(lines) + "\n")
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 4000}}) as mem:
        mem.sync()
        assert paths(mem, "kumquat crates") == ["sessions/long.jsonl"]
        # The session runs on: tool output makes the file ten times the limit; its messages stay small.
        lines += [tool(n, 2000) for n in range(20)]
        lines += [msg("user", "and the quokka feed?"), msg("assistant", "The quokka feed is in bin 7.")]
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert p.stat().st_size > 40_000
        mem.sync()
        assert paths(mem, "kumquat crates") == ["sessions/long.jsonl"]
        (hit,) = mem.search("quokka feed bin").results
        assert (hit.path, hit.start_line, hit.end_line) == ("sessions/long.jsonl", 1, len(lines))
        st = mem.status()
        assert st["skipped"] == [] and st["partial"] == [] and st["dirty"] is False
        assert st["sourceCounts"]["sessions"]["files"] == 1


def test_a_transcript_whose_messages_exceed_the_limit_keeps_its_newest(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    words = [f"word{n:03d}x" for n in range(100)]
    lines = [msg("user", f"note {n}: remember the token {w} for later please") for n, w in enumerate(words)]
    write(sessions_dir(tmp_path), "s.jsonl", "\n".join(lines) + "\n")
    write(ws, "memory/big.md", "- heron " * 1000 + "\n")  # Markdown over the limit: skipped whole, as before
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 3000}}) as mem:
        mem.sync()
        assert paths(mem, words[-1]) == ["sessions/s.jsonl"]
        (hit,) = mem.search(words[99]).results
        assert hit.end_line == 100  # the JSONL line of the newest message
        assert paths(mem, words[0]) == []  # the oldest messages are left out
        assert paths(mem, "heron") == []
        st = mem.status()
        assert [s["path"] for s in st["skipped"]] == ["memory/big.md"]
        (part,) = st["partial"]
        assert part["path"] == "sessions/s.jsonl"
        kept = sum(1 for w in words if paths(mem, w))
        # (the window starts where a chunk of the whole transcript starts: it holds the limit, less at most one
        # chunk's text of 1600 characters, ~25 of these messages)
        assert 3000 - 1600 < kept * 60 <= 3000
        assert f"only the newest {kept} of 100" in part["reason"] and "maxFileBytes" in part["reason"]
        assert f"JSONL lines {101 - kept}-100" in part["reason"]
        assert paths(mem, words[100 - kept]) == ["sessions/s.jsonl"] and paths(mem, words[99 - kept]) == []
    # Once the limit allows the whole transcript, all of it is searchable again and status says nothing.
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 1_000_000}}) as mem:
        mem.sync()
        assert paths(mem, words[0]) == ["sessions/s.jsonl"]
        assert mem.status()["partial"] == []


def test_a_line_longer_than_the_limit_is_skipped_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    lines = [msg("user", "the walrus tusk is polished"), msg("assistant", "pasted log " + "zebra " * 2000),
             msg("user", "the narwhal horn too")]
    write(sessions_dir(tmp_path), "s.jsonl", "\n".join(lines))  # no final newline: the last line still counts
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 3000}}) as mem:
        mem.sync()
        assert paths(mem, "walrus tusk") == ["sessions/s.jsonl"]
        (hit,) = mem.search("narwhal horn").results
        assert hit.end_line == 3
        assert paths(mem, "zebra") == []
        (part,) = mem.status()["partial"]
        assert part["reason"] == "1 line longer than sync.maxFileBytes (3000 bytes) not indexed"


def test_reading_a_large_transcript_holds_about_the_limit_in_memory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    p = write(sessions_dir(tmp_path), "big.jsonl", msg("user", "hello") + "\n")
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 30_000}}) as mem:
        mem.sync()  # the first sync's imports and caches are not the transcript's
        with open(p, "a", encoding="utf-8") as fh:
            for n in range(15_000):
                fh.write(msg("user" if n % 2 else "assistant", f"turn {n} about lanterns and rivers and ferns") + "\n")
                if n % 50 == 0:
                    fh.write(tool(n, 4000) + "\n")
            fh.write(msg("user", "finally: the ocelot sleeps in the loft") + "\n")
        size = p.stat().st_size
        assert size > 2_000_000
        tracemalloc.start()
        try:
            mem.sync()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert paths(mem, "ocelot loft") == ["sessions/big.jsonl"]
        assert mem.status()["partial"][0]["path"] == "sessions/big.jsonl"
    # Reading the file whole would take its size at least; what is held is about the limit.
    assert peak < size / 2, f"peak Python allocation {peak >> 10} KiB for a {size >> 10} KiB transcript"


def test_a_transcript_starting_with_a_byte_order_mark_keeps_its_first_message(tmp_path: Path) -> None:
    # Written by a Windows tool: a BOM, CRLF line ends. Markdown reads past both; so must a transcript.
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    stamp = '"timestamp": "2026-01-05T10:00:00Z", '
    first = msg("user", "the aardvark digs by the first gate").replace("{", "{" + stamp, 1)
    text = first + "\r\n" + msg("assistant", "the basilisk naps by the second gate") + "\r\n"
    write(sessions_dir(tmp_path), "bom.jsonl", b"\xef\xbb\xbf" + text.encode())
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        (hit,) = mem.search("aardvark digs").results
        assert (hit.path, hit.start_line) == ("sessions/bom.jsonl", 1)
        assert paths(mem, "basilisk naps") == ["sessions/bom.jsonl"]
        # Its time is read too: as of the day before it was said, the message is not known yet.
        assert paths(mem, "aardvark digs", as_of="2026-01-04") == []
        assert paths(mem, "aardvark digs", as_of="2026-01-06") == ["sessions/bom.jsonl"]


def test_a_search_as_of_a_date_does_not_read_a_huge_line_whole(tmp_path: Path) -> None:
    # A tool's output written as one line of 60 MB (the runtime still writing it: no newline yet). The sync
    # skips it holding about the limit; a search that dates its hits by the transcript's timestamps must too.
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    stamp = '"timestamp": "2026-01-05T10:00:00Z", '
    p = write(sessions_dir(tmp_path), "big.jsonl",
              msg("user", "the capybara swims in the pond").replace("{", "{" + stamp, 1) + "\n")
    with open(p, "ab") as fh:
        fh.write(b'{"type": "tool_result", "output": "')
        for _ in range(60):
            fh.write(b"x" * 1_000_000)
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 100_000}}) as mem:
        mem.sync()
        assert paths(mem, "capybara swims", as_of="2026-01-06") == ["sessions/big.jsonl"]  # imports, caches
        tracemalloc.start()
        try:
            assert paths(mem, "capybara swims", as_of="2026-01-06") == ["sessions/big.jsonl"]
            assert paths(mem, "capybara swims", as_of="2026-01-04") == []
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 10_000_000, f"peak Python allocation {peak >> 20} MiB for a search"


def test_a_newest_message_whose_text_outgrows_the_limit_does_not_take_the_older_ones_out(tmp_path: Path) -> None:
    # Its line is half the limit, but written in Latin-1: each byte reads as U+FFFD (three bytes of text).
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    latin = b'{"type": "message", "message": {"role": "user", "content": "caf' + b"\xe9" * 1500 + b'"}}\n'
    write(sessions_dir(tmp_path), "s.jsonl", (msg("user", "the wombat burrows deep") + "\n").encode() + latin)
    with open_mem(tmp_path, ws, {**SESSION_MS, "sync": {"maxFileBytes": 3000}}) as mem:
        mem.sync()
        assert paths(mem, "wombat burrows") == ["sessions/s.jsonl"]
        (part,) = mem.status()["partial"]
        assert part["reason"] == "1 line longer than sync.maxFileBytes (3000 bytes) not indexed"
