"""One MemoryManager shared by an agent runtime's threads: closing under load, appends racing each other."""

from __future__ import annotations

import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.sqlite_memory import open_mem, write

from symi_memory import tools
from symi_memory.errors import SymiMemoryError

WORDS = "alpha beta gamma delta kestrel zebra budget coffee garden server backup report".split()


def _notes(ws: Path, count: int, *, seed: int = 1) -> None:
    rng = random.Random(seed)
    for i in range(count):
        lines = (" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(8))
        write(ws, f"memory/n{i:04d}.md", "# Note\n" + "\n".join(lines) + "\n")


def _open_on(index: Path) -> list[str]:
    """The descriptors this process holds open on the index file (and its -wal/-shm)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(index)):
            out.append(target)
    return out


def test_close_under_searches_from_a_thread_pool_leaves_no_index_open_and_no_raw_sqlite_error(tmp_path: Path) -> None:
    """An async runtime's worker threads (asyncio.to_thread) outlive the manager: after close() nothing may keep
    the index open in them, and a search caught by close() fails with our error, not SQLite's."""
    ws = tmp_path / "ws"
    _notes(ws, 400)
    pool = ThreadPoolExecutor(4)  # lives on after close, as the event loop's default executor does
    try:
        for _ in range(3):
            mem = open_mem(tmp_path, ws)
            mem.sync()
            index = Path(mem.status()["dbPath"])
            stop = threading.Event()
            answered: list[int] = []
            errors: list[BaseException] = []

            def searcher(mem=mem, stop=stop, answered=answered, errors=errors) -> None:  # type: ignore[no-untyped-def]
                while not stop.is_set():
                    try:
                        hits = mem.search("kestrel zebra alpha", min_score=0).results
                    except Exception as exc:
                        errors.append(exc)
                        return
                    assert hits, "a search before close found nothing"
                    answered.append(1)

            running = [pool.submit(searcher) for _ in range(4)]
            deadline = time.monotonic() + 30
            while len(answered) < 8 and time.monotonic() < deadline:
                time.sleep(0.01)
            mem.close()
            stop.set()
            for f in running:
                f.result(timeout=60)
            assert len(answered) >= 8
            assert all(isinstance(e, SymiMemoryError) for e in errors), [repr(e) for e in errors]
            assert _open_on(index) == [], "the closed manager still holds the index open in the pool's threads"
    finally:
        pool.shutdown()


def test_close_called_from_inside_a_search_does_not_wait_for_itself(tmp_path: Path) -> None:
    """A plugin (here a post-processor) that closes the manager during a search must not hang it."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the kestrel nests on the church tower\n")
    holder: dict[str, object] = {}

    class Closer:
        name = "closer"

        def process(self, candidates, ctx):  # type: ignore[no-untyped-def]
            holder["mem"].close()  # type: ignore[attr-defined]
            return candidates

    from symi_memory.hookspecs import hookimpl
    from symi_memory.specs import PostProcessorSpec

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register):  # type: ignore[no-untyped-def]
            register(PostProcessorSpec(name="closer", factory=lambda hybrid: Closer(), order=700))

    mem = open_mem(tmp_path, ws, plugins=[("closer", Plugin())])
    holder["mem"] = mem
    mem.sync()
    started = time.monotonic()
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["hits"] = mem.search("kestrel", min_score=0).results
        except Exception as exc:
            result["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "close() inside a search waited for that search"
    assert time.monotonic() - started < 10
    assert "hits" in result or isinstance(result.get("error"), SymiMemoryError), result


def test_the_same_note_appended_from_several_threads_at_once_is_written_once(tmp_path: Path) -> None:
    """Parallel tool calls with one note: dedup must see the first write, not let every copy through."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n- lives in Utrecht\n")
    mem = open_mem(tmp_path, ws)
    mem.sync()
    note = "The dentist appointment is on Thursday at 10:00 with Dr. Visser"
    start = threading.Barrier(4)
    answers: list[dict] = []

    def append() -> None:
        start.wait()
        answers.append(tools.memory_append(mem, {"text": note}))

    threads = [threading.Thread(target=append) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mem.close()
    assert sorted(a.get("appended") for a in answers) == [False, False, False, True], answers
    written = [ln for f in (ws / "memory").glob("*.md") for ln in f.read_text(encoding="utf-8").splitlines()]
    assert written.count(note) == 1


def test_distinct_notes_appended_from_several_threads_keep_every_line_whole(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    mem = open_mem(tmp_path, ws)
    mem.sync()
    failures: list[object] = []

    def append(n: int) -> None:
        for i in range(15):
            got = tools.memory_append(mem, {"text": f"worker {n} note {i} token w{n}n{i}", "allowDuplicate": True})
            if not got.get("appended"):
                failures.append(got)

    def search() -> None:
        for _ in range(30):
            try:
                mem.search("worker note", min_score=0)
            except Exception as exc:
                failures.append(exc)

    threads = [threading.Thread(target=append, args=(n,)) for n in range(4)] + [threading.Thread(target=search)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    lines = [ln for f in (ws / "memory").glob("*.md") for ln in f.read_text(encoding="utf-8").splitlines()]
    assert sorted(lines) == sorted(f"worker {n} note {i} token w{n}n{i}" for n in range(4) for i in range(15))
    assert mem.status()["dirty"] is False
    assert mem.search("w3n14", min_score=0).results
    mem.close()
