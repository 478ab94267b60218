"""One bad file or line skips only itself: listed in status.skipped with a reason, the rest indexed (issue 14)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import open_mem, write
from support.unprivileged import Unprivileged

SESSION_MS = {"experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"]}


def msg(role: object, content: object) -> str:
    return json.dumps({"type": "message", "message": {"role": role, "content": content}})


def skipped(mem) -> dict[str, str]:
    return {s["path"]: s["reason"] for s in mem.status()["skipped"]}


def test_a_file_name_that_is_not_utf8_skips_only_that_file(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/good.md", "- the otter lives by the weir\n")
    bad = os.path.join(os.fsencode(ws / "memory"), b"caf\xe9.md")
    with open(bad, "wb") as fh:
        fh.write(b"- the heron is hidden here\n")
    with open_mem(tmp_path, ws) as mem:
        report = mem.sync()
        assert report.files_indexed == 1
        assert [h.path for h in mem.search("otter weir").results] == ["memory/good.md"]
        st = mem.status()
        assert st["files"] == 1 and st["dirty"] is False
        assert skipped(mem) == {"memory/caf\\xe9.md": "file name is not valid UTF-8"}
        mem.sync(force=True)  # the full rebuild takes the same path
        assert mem.status()["files"] == 1 and skipped(mem) == {"memory/caf\\xe9.md": "file name is not valid UTF-8"}


def test_a_malformed_transcript_line_skips_only_that_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    lines = [
        msg("user", "where is the kayak?"),
        '{"type":"message","message":{"role":["user"],"content":"x"}}',
        json.dumps({"type": "message", "message": {"role": {"a": 1}, "content": "y"}}),
        '{"type":"message","message":{"role":"user","content":"lone \\ud800 surrogate quince"}}',
        msg("assistant", "The kayak hangs in the boathouse."),
    ]
    write(sessions, "s.jsonl", "\n".join(lines) + "\n")
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        st = mem.status()
        assert st["sourceCounts"]["memory"]["files"] == 1 and st["sourceCounts"]["sessions"]["files"] == 1
        hits = mem.search("kayak boathouse").results
        assert hits and hits[0].path == "sessions/s.jsonl" and hits[0].end_line == 5
        assert "where is the kayak" in hits[0].snippet and "boathouse" in hits[0].snippet
        assert any(h.path == "sessions/s.jsonl" for h in mem.search("quince").results)
        assert [h.path for h in mem.search("otter weir").results] == ["MEMORY.md"]


def _deep_dir(root: Path) -> str:
    """A folder nested below ``root`` deeper than PATH_MAX (built with dir_fd, as no path can name it)."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(24):
            os.mkdir("d" * 200, dir_fd=fd)
            nfd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        wfd = os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(wfd, b"- unreachable heron\n")
        os.close(wfd)
    finally:
        os.close(fd)
    return "d" * 200


def test_a_file_nested_deeper_than_path_max_is_listed_as_skipped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "memory/good.md", "- the otter lives by the weir\n")
    _deep_dir(ws / "memory")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert mem.status()["files"] == 1
        assert [h.path for h in mem.search("otter").results] == ["memory/good.md"]
        entries = skipped(mem)
        assert len(entries) == 1
        (path, reason), = entries.items()
        assert path.startswith("memory/" + "d" * 200) and "cannot list folder" in reason
        assert "too long" in reason.lower()
        assert mem.status()["dirty"] is False


def test_an_unreadable_file_is_skipped_with_a_reason_and_does_not_keep_status_dirty(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # pytest's own temp root is private to root: use a folder nobody can reach
        tmp_path = Path(tempfile.mkdtemp(prefix="symi-unreadable-"))
        warm = tmp_path / "warm"  # import everything a sync needs while still root
        write(warm / "ws", "memory/w.md", "- warm\n")
        with open_mem(warm, warm / "ws") as mem:
            mem.sync()
            mem.search("warm")
            mem.status()
    ws = tmp_path / "ws"
    write(ws, "memory/good.md", "- the otter lives by the weir\n")
    write(ws, "memory/locked.md", "- locked heron\n").chmod(0)
    (tmp_path / "state").mkdir()
    if os.geteuid() == 0:
        for p in [tmp_path, ws, *ws.rglob("*"), tmp_path / "state"]:
            os.chown(p, 65534, 65534)
        tmp_path.chmod(0o755)
    try:
        with Unprivileged():
            with open_mem(tmp_path, ws) as mem:
                mem.sync()
                st = mem.status()
                assert st["files"] == 1 and [h.path for h in mem.search("otter").results] == ["memory/good.md"]
                assert st["skipped"] == [{"path": "memory/locked.md", "reason": "cannot read: Permission denied"}]
                assert st["dirty"] is False
                mem.sync()  # retried (cheap), still skipped, still clean
                assert mem.status()["skipped"] == st["skipped"] and mem.status()["dirty"] is False
            with open_mem(tmp_path, ws) as mem:  # what a new process sees
                assert mem.status()["dirty"] is False
            (ws / "memory" / "locked.md").chmod(0o644)
            with open_mem(tmp_path, ws) as mem:
                mem.sync()
                assert mem.status()["files"] == 2 and mem.status()["skipped"] == []
    finally:
        if tmp_path.name.startswith("symi-unreadable-"):
            shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_transcript_line_with_an_absurd_timestamp_does_not_break_search(tmp_path: Path) -> None:
    """A timestamp no clock gives (an integer of 400 digits, ``1e400``, NaN, year 10^13) is left out: the message
    is still found, by every search that reads message times (plain, ``as_of``, ``history``)."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    stamps = ["1" + "0" * 400, "1e400", "-1e400", "NaN", "1e300", "-99999999999999999999999"]
    lines = [f'{{"type":"message","timestamp":{s},"message":{{"role":"user","content":"the kayak hangs in the '
             f'boathouse number {i}"}}}}' for i, s in enumerate(stamps)]
    lines.append('{"type":"message","timestamp":"2026-01-02T00:00:00Z","message":{"role":"assistant",'
                 '"content":"noted, the kayak hangs in the boathouse"}}')
    write(sessions, "s.jsonl", "\n".join(lines) + "\n")
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        assert [h.path for h in mem.search("where does the kayak hang").results] == ["sessions/s.jsonl"]
        assert [h.path for h in mem.search("where does the kayak hang", as_of="2026-06-01").results] == [
            "sessions/s.jsonl"]
        assert {v["path"] for v in mem.history("where does the kayak hang")} == {"sessions/s.jsonl"}
    from symi_memory.sessions import message_times

    day = datetime(2026, 1, 2, tzinfo=UTC).timestamp()
    assert message_times(sessions, "sessions/s.jsonl", 1, len(lines)) == (day, day)


def _sync_swapping(mem: Any, fifo: Path, link: Path, secret: Path, when: Callable[[Any], bool]) -> None:
    """``mem.sync()`` on a thread; at the first progress report ``when`` accepts, ``fifo`` is swapped for a FIFO and
    ``link`` for a symlink to ``secret`` (outside the workspace). Fails when the sync hangs (after giving the FIFO
    a writer, so that the thread can end) or raises."""
    import threading

    def swap(progress: Any) -> None:
        if when(progress) and fifo.is_file():
            fifo.unlink()
            os.mkfifo(fifo)
            link.unlink()
            link.symlink_to(secret)

    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(mem.sync(progress=swap)), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # hung opening the FIFO: give it a writer so the thread can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        raise AssertionError("the sync hung on a file swapped for a FIFO")
    assert done, "the sync failed"


def test_a_file_swapped_for_a_fifo_or_a_symlink_while_the_sync_runs_is_skipped(tmp_path: Path) -> None:
    """The walker lists only regular files; one replaced after the listing (a FIFO, a symlink to a file outside
    memory) must neither hang the sync nor get the symlink's target indexed (memory_get never reads either)."""
    ws = tmp_path / "ws"
    for i in range(300):  # more chunks than one embedding group: the sync reports progress in between
        write(ws, f"memory/a{i:03d}.md", f"- note {i} about the garden\n")
    fifo, link = write(ws, "memory/zz-fifo.md", "- fifo\n"), write(ws, "memory/zz-link.md", "- link\n")
    secret = write(tmp_path, "secret.txt", "- the vault code is quokka-7731\n")

    with open_mem(tmp_path, ws) as mem:
        _sync_swapping(mem, fifo, link, secret, lambda progress: progress.phase == "index")
        assert not [h for h in mem.search("vault code quokka").results if "quokka" in h.snippet]
        reasons = skipped(mem)
        assert set(reasons) == {"memory/zz-fifo.md", "memory/zz-link.md"}, reasons
        assert all(r.startswith("cannot read: ") for r in reasons.values()), reasons
        assert mem.status()["files"] == 300


def test_the_in_memory_backend_neither_hangs_on_nor_follows_a_file_swapped_after_the_listing(tmp_path: Path) -> None:
    """The test backend (symi_memory.testing) read listed files with open(): a FIFO swapped in hung its sync and
    a symlink's target outside the workspace was indexed and searchable."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- The router is called gatekeeper.\n")
    fifo, link = write(ws, "memory/fifo.md", "- fifo\n"), write(ws, "memory/link.md", "- link\n")
    write(ws, "memory/plain.md", "- The garden hose is in the shed.\n")
    secret = write(tmp_path, "secret.txt", "- the vault code is quokka-7731\n")

    from support.sqlite_memory import settings

    from symi_memory import load_config, open_memory

    cfg = load_config(None, state_dir=tmp_path / "state", overrides=settings(plugins={"slots": {"memory": "in-memory"}}))
    with open_memory(cfg, workspace=ws, start=False) as mem:
        assert mem.status()["backend"] == "in-memory"
        # MEMORY.md is listed first and read first: the other files are listed by now
        _sync_swapping(mem, fifo, link, secret, lambda progress: progress.path == "MEMORY.md")
        assert not [h for h in mem.search("vault code quokka", min_score=0).results if "quokka" in h.snippet]
        assert [h.path for h in mem.search("garden hose shed", min_score=0).results] == ["memory/plain.md"]
        assert mem.status()["files"] == 4  # listed; the two swapped ones were left out of the chunks


def test_a_utf16_memory_file_with_a_byte_order_mark_is_read_as_text(tmp_path: Path) -> None:
    """Windows PowerShell's ``echo ... > MEMORY.md`` and Notepad's "Unicode" write UTF-16 with a byte order mark:
    its text is indexed, cited, read and appended to as text, not as bytes with a NUL between letters."""
    from symi_memory import tools

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "\ufeff# Memory\r\n\r\n- The kestrel nests on the water tower.\r\n".encode("utf-16-le"))
    write(ws, "memory/notes.md", "\ufeff- Zoë keeps the spare key under the heron statue.\n".encode("utf-16-be"))
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        st = mem.status()
        assert st["files"] == 2 and st["invalidUtf8Files"] == 0
        hit = mem.search("where does the kestrel nest").results[0]
        assert hit.path == "MEMORY.md" and (hit.start_line, hit.end_line) == (1, 4)
        assert "- The kestrel nests on the water tower." in hit.snippet and "\x00" not in hit.snippet
        hit = mem.search("spare key heron statue").results[0]
        assert hit.path == "memory/notes.md" and "Zoë keeps the spare key" in hit.snippet
        got = tools.memory_get(mem, {"path": "MEMORY.md", "from": 3, "lines": 1})
        assert got["text"] == "- The kestrel nests on the water tower."
        mem.append("The kestrel fledged two chicks in June.", target="long-term", allow_duplicate=True)
        data = (ws / "MEMORY.md").read_bytes()
        assert data.decode("utf-16-le").endswith("tower.\r\nThe kestrel fledged two chicks in June.\n")
        mem.sync()
        assert "fledged two chicks" in mem.search("how many chicks fledged").results[0].snippet


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-32-be"])
def test_an_append_to_a_utf16_file_cut_inside_a_character_is_refused_not_garbled(tmp_path: Path, codec: str) -> None:
    """A UTF-16/32 file cut off inside a character (a truncated copy): text appended after the stray bytes would
    be out of step with the code units and read back as other characters. The append says why instead."""
    from symi_memory.writing import MemoryWriteError

    ws = tmp_path / "ws"
    whole = "\ufeff# Memory\n\n- The kestrel nests on the water tower.\n".encode(codec)
    write(ws, "MEMORY.md", whole[:-1])
    with open_mem(tmp_path, ws) as mem:
        with pytest.raises(MemoryWriteError, match="refusing to append to MEMORY.md: it is UTF-.* ends inside a "
                                                   "character"):
            mem.append("The kestrel fledged two chicks in June.", target="long-term", allow_duplicate=True)
        assert (ws / "MEMORY.md").read_bytes() == whole[:-1], "the file is left as it was"
        write(ws, "MEMORY.md", whole)  # whole again: appended in its encoding
        mem.append("The kestrel fledged two chicks in June.", target="long-term", allow_duplicate=True)
        assert (ws / "MEMORY.md").read_bytes().decode(codec).endswith("tower.\nThe kestrel fledged two chicks in "
                                                                      "June.\n")


def test_a_transcript_line_nested_too_deep_for_json_does_not_break_search(tmp_path: Path) -> None:
    """A line of 200,000 ``[`` (a crashed writer, a fuzzer) makes Python's JSON decoder raise RecursionError, not
    ValueError. Indexing skipped the line, but every search reading the transcript's message times (plain searches
    whose hits state a change, ``as_of``, ``history``) failed with "memory search failed"."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    lines = [
        json.dumps({"type": "message", "timestamp": "2026-01-01T10:00:00Z",
                    "message": {"role": "user", "content": "The kestrel database used to be MySQL 5.7"}}),
        "[" * 200_000,
        json.dumps({"type": "message", "timestamp": "2026-01-02T10:00:00Z",
                    "message": {"role": "assistant", "content": "The kestrel database moved to PostgreSQL 16, "
                                                                "no longer MySQL"}}),
    ]
    write(sessions, "s.jsonl", "\n".join(lines) + "\n")
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        assert [h.path for h in mem.search("kestrel database").results] == ["sessions/s.jsonl"]
        assert [h.path for h in mem.search("kestrel database", as_of="2026-06-01").results] == ["sessions/s.jsonl"]
        assert {v["path"] for v in mem.history("kestrel database")} == {"sessions/s.jsonl"}
    from symi_memory.sessions import message_times

    first = datetime(2026, 1, 1, 10, tzinfo=UTC).timestamp()
    assert message_times(sessions, "sessions/s.jsonl", 1, 3) == (first, first + 86400)


def test_a_search_does_not_hang_on_a_transcript_swapped_for_a_fifo_after_indexing(tmp_path: Path) -> None:
    """Searches read message times from the transcript itself; one replaced by a FIFO (no writer) since the sync
    must not hang the search (nor be read through a symlink put in its place)."""
    import threading

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    s = write(sessions, "s.jsonl", "\n".join([
        json.dumps({"type": "message", "timestamp": "2026-01-01T10:00:00Z",
                    "message": {"role": "user", "content": "the kayak hangs in the boathouse"}}),
        json.dumps({"type": "message", "timestamp": "2026-01-02T10:00:00Z",
                    "message": {"role": "assistant", "content": "noted, the kayak hangs in the boathouse"}}),
    ]) + "\n")
    with open_mem(tmp_path, ws, SESSION_MS) as mem:
        mem.sync()
        s.unlink()
        os.mkfifo(s)
        done: list[object] = []
        worker = threading.Thread(
            target=lambda: done.append(mem.search("where does the kayak hang", as_of="2026-06-01")), daemon=True)
        worker.start()
        worker.join(30)
        if worker.is_alive():
            os.close(os.open(s, os.O_WRONLY | os.O_NONBLOCK))  # a writer lets the thread end
            worker.join(10)
            raise AssertionError("the search hung reading message times from a FIFO")
        assert done and [h.path for h in done[0].results] == ["sessions/s.jsonl"]


def test_a_file_deleted_after_the_listing_is_not_named_as_skipped(tmp_path: Path) -> None:
    """A note deleted between the sync's listing and its read (an editor's save-by-rename, a `git checkout`) was
    named in `status.skipped` ("cannot read: No such file or directory") for a file that no longer exists, with
    `dirty: false`, until some later change made a sync run. One emptied meanwhile is indexed empty."""
    ws = tmp_path / "ws"
    for i in range(300):  # more chunks than one embedding group: the sync reports progress in between
        write(ws, f"memory/a{i:03d}.md", f"- note {i} about the garden\n")
    gone, emptied = write(ws, "memory/zz-gone.md", "- quince gone\n"), write(ws, "memory/zz-empty.md", "- quince\n")

    def delete(progress: Any) -> None:
        if progress.phase == "index" and gone.exists():
            gone.unlink()
            emptied.write_bytes(b"")

    with open_mem(tmp_path, ws) as mem:
        report = mem.sync(progress=delete)
        assert not gone.exists() and report.errors == ()
        st = mem.status()
        assert (st["files"], st["dirty"], st["skipped"]) == (301, False, [])
        assert [h.path for h in mem.search("quince", min_score=0).results if "quince" in h.snippet] == []
