"""One MemoryManager shared by an agent runtime's threads: closing under load, appends racing each other."""

from __future__ import annotations

import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.sqlite_memory import open_mem, open_on, write

from symi_memory import tools
from symi_memory.errors import SymiMemoryError

WORDS = "alpha beta gamma delta kestrel zebra budget coffee garden server backup report".split()


def _notes(ws: Path, count: int, *, seed: int = 1) -> None:
    rng = random.Random(seed)
    for i in range(count):
        lines = (" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(8))
        write(ws, f"memory/n{i:04d}.md", "# Note\n" + "\n".join(lines) + "\n")


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
            assert open_on(index) == [], "the closed manager still holds the index open in the pool's threads"
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


TESTS = Path(__file__).resolve().parent


def _run_script(tmp_path: Path, body: str, timeout: float = 120) -> dict:
    """Run ``body`` in a fresh interpreter (signal handlers need its main thread; a hang must not hang pytest)."""
    import json
    import subprocess
    import sys
    import textwrap

    prelude = textwrap.dedent("""
        import json, os, signal, sys, threading, time
        from pathlib import Path
        from support.sqlite_memory import open_mem, open_on, write
        from symi_memory.errors import SymiMemoryError
        tmp = Path(sys.argv[1]); ws = tmp / "ws"
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(body), str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hung: no answer within {timeout:g} s") from None
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_close_from_a_sync_progress_callback_stops_the_sync_instead_of_hanging(tmp_path: Path) -> None:
    """A runtime shutting down from inside the progress callback it gave sync(): close() waited for the sync
    that was waiting for the callback, forever."""
    _notes(tmp_path / "ws", 600)
    got = _run_script(tmp_path, """
        mem = open_mem(tmp, ws)
        index = Path(mem.status()["dbPath"])
        steps = []

        def progress(p):
            steps.append(p.phase)
            if p.phase == "index" and steps.count("index") == 1:
                mem.close()

        try:
            mem.sync(progress=progress)
            out = {"raised": None}
        except Exception as exc:
            out = {"raised": type(exc).__name__, "ours": isinstance(exc, SymiMemoryError)}
        out["index_steps_after_close"] = steps.count("index") - 1
        out["open"] = open_on(index)
        out["builds"] = [p.name for p in index.parent.iterdir() if ".build" in p.name]
        try:
            mem.search("kestrel")
        except SymiMemoryError:
            out["search_after"] = "refused"
        print(json.dumps(out))
    """, timeout=60)
    assert got["raised"] == "SyncCancelled" and got["ours"], got
    assert got["index_steps_after_close"] <= 1, got
    assert got["open"] == [] and got["builds"] == [], got
    assert got["search_after"] == "refused"


def test_close_from_a_signal_handler_during_a_sync_stops_it_and_closes_the_index(tmp_path: Path) -> None:
    """SIGTERM-style shutdown (the handler calls close()) while the main thread is in sync(): it hung."""
    _notes(tmp_path / "ws", 1500)
    got = _run_script(tmp_path, """
        mem = open_mem(tmp, ws)
        index = Path(mem.status()["dbPath"])
        signal.signal(signal.SIGALRM, lambda *a: mem.close())
        started = []
        def progress(p):
            if p.phase == "index" and not started:
                started.append(1)
                signal.setitimer(signal.ITIMER_REAL, 0.05)  # the signal lands in the middle of the build
        t0 = time.monotonic()
        try:
            mem.sync(progress=progress)
            out = {"raised": None}
        except Exception as exc:
            out = {"raised": type(exc).__name__}
        out["seconds"] = time.monotonic() - t0
        out["open"] = open_on(index)
        out["builds"] = [p.name for p in index.parent.iterdir() if ".build" in p.name]
        print(json.dumps(out))
    """, timeout=90)
    assert got["raised"] == "SyncCancelled", got
    assert got["open"] == [] and got["builds"] == [], got


def test_close_from_a_signal_handler_inside_a_search_waits_for_that_search(tmp_path: Path) -> None:
    """The handler runs in the thread it interrupted, which may be holding the manager's lock (here: building
    the search pipeline on the first search, where a plugin's factory runs): close() waited for that lock, which
    its own thread held, forever. Now the search finishes and the index closes as it returns."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the kestrel nests on the church tower\n")
    got = _run_script(tmp_path, """
        from symi_memory.hookspecs import hookimpl
        from symi_memory.specs import PostProcessorSpec

        class Keep:
            name = "keep"
            def process(self, candidates, ctx):
                return candidates

        def factory(hybrid):
            signal.raise_signal(signal.SIGUSR1)  # a signal that arrives while the pipeline is being built
            return Keep()

        class Plugin:
            @hookimpl
            def symi_memory_register_postprocessors(self, register):
                register(PostProcessorSpec(name="keep", factory=factory, order=700))

        mem = open_mem(tmp, ws, plugins=[("keep", Plugin())])
        mem.sync()
        index = Path(mem.status()["dbPath"])
        signal.signal(signal.SIGUSR1, lambda *a: mem.close())
        out = {}
        try:
            out["hits"] = [h.path for h in mem.search("kestrel", min_score=0).results]
        except Exception as exc:
            out["raised"] = f"{type(exc).__name__}: {exc}"
            out["ours"] = isinstance(exc, SymiMemoryError)
        out["open"] = open_on(index)
        try:
            mem.search("kestrel")
        except SymiMemoryError:
            out["search_after"] = "refused"
        print(json.dumps(out))
    """, timeout=60)
    assert got.get("hits") == ["MEMORY.md"], got
    assert got["open"] == [] and got["search_after"] == "refused", got
