"""Appends from several processes on one workspace: ``symi-memory serve`` beside a CLI call, two agent runtimes.

Real processes, each with its own MemoryManager on the same workspace and state dir, appending at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import open_mem, write

from symi_memory import tools, writing
from symi_memory.manager import _append_lock_path

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the holder process uses flock")

TESTS = Path(__file__).resolve().parent

#: Notes every worker appends, in the same order, at the same time: each must be written once.
SHARED = [
    "The dentist appointment is on Thursday at 10:00 with Dr. Visser",
    "Car insurance renews on 14 March with Centraal Beheer",
    "Marieke's birthday party is at the boathouse in Leiden",
    "The router admin password was rotated after the outage",
    "Quarterly taxes for the bakery are filed by Jansen accountants",
    "Swimming lessons for Noor moved to Wednesday afternoons",
]

WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from support.sqlite_memory import open_mem
    from symi_memory import tools

    tmp, ws, n, shared = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
    mem = open_mem(tmp, ws)
    (tmp / f"ready-{n}").write_text("")
    while not (tmp / "go").exists():
        time.sleep(0.005)
    answers = []
    for i, note in enumerate(shared):
        answers.append(tools.memory_append(mem, {"text": note}))
        own = f"worker {n} note {i} token w{n}n{i} " + "abcdefgh" * (1 + (n * 7 + i * 131) % 1200)
        answers.append(tools.memory_append(mem, {"text": own, "allowDuplicate": True}))
    mem.close()
    print(json.dumps(answers))
""")


def _own(n: int, i: int) -> str:
    return f"worker {n} note {i} token w{n}n{i} " + "abcdefgh" * (1 + (n * 7 + i * 131) % 1200)


def test_notes_appended_from_several_processes_at_once_are_each_written_once_and_whole(tmp_path: Path) -> None:
    """Four processes append the same six notes at once, and each its own (up to 9.6 KB): every note is in the
    daily log exactly once, as one whole line. Before the lock between processes, a note every process appended
    at once was written by several of them (each one's dedup lookup ran before the others' writes)."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n- lives in Utrecht\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    workers = 4
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(ws), str(n), json.dumps(SHARED)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for n in range(workers)]
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{n}").exists() for n in range(workers)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a worker did not start"
            time.sleep(0.01)
        (tmp_path / "go").write_text("")
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0] * workers, [err for _, err in outs]
    answers = [a for out, _ in outs for a in json.loads(out.strip().splitlines()[-1])]
    assert [a for a in answers if a.get("error")] == []
    lines = Counter(ln for f in (ws / "memory").glob("*.md") for ln in f.read_text(encoding="utf-8").splitlines())
    expected = {*SHARED, *(_own(n, i) for n in range(workers) for i in range(len(SHARED)))}
    assert {ln: c for ln, c in lines.items() if ln not in expected} == {}  # no cut-off or run-together lines
    assert {note: lines[note] for note in SHARED} == dict.fromkeys(SHARED, 1)
    assert all(lines[_own(n, i)] == 1 for n in range(workers) for i in range(len(SHARED)))
    assert sum(1 for a in answers if a["appended"]) == len(expected)  # the others were told duplicateOf


HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(60)
""")


def _hold(path: Path) -> subprocess.Popen[str]:
    """Another process holding ``path``'s lock (as an appender stopped mid-append would: a SIGSTOPped CLI)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _in_thread(fn: object) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())  # type: ignore[operator]
        except Exception as exc:
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_an_append_waits_a_bounded_time_for_another_process_holding_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that holds the memory file's lock and never lets go: the append gives up with an error saying
    so and writes nothing, instead of hanging the agent's tool call for as long as that process lives."""
    ws = tmp_path / "ws"
    memory = write(ws, "MEMORY.md", "- prefers tea\n")
    monkeypatch.setattr(writing, "LOCK_WAIT_SECONDS", 1.0, raising=False)  # (new in this release)
    holder = _hold(memory)
    try:
        t, out = _in_thread(lambda: writing.append_memory(ws, "- switched to coffee", target="long-term"))
        t.join(timeout=15)
        assert not t.is_alive(), "the append is still waiting for the other process"
    finally:
        holder.kill()
        holder.wait()
    t.join(timeout=60)
    assert len(out) == 1 and isinstance(out[0], writing.MemoryWriteError), out
    assert "another process has held a lock on it for 1 s" in str(out[0]) and "nothing was written" in str(out[0])
    assert memory.read_text(encoding="utf-8") == "- prefers tea\n"
    assert writing.append_memory(ws, "- switched to coffee", target="long-term").bytes_written > 0  # holder gone
    assert memory.read_text(encoding="utf-8") == "- prefers tea\n- switched to coffee\n"


def test_a_manager_append_waits_a_bounded_time_for_another_process_appending_to_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's append to the same workspace (its dedup lookup, write and indexing) holds the state
    dir's append lock: this one waits for it, at most LOCK_WAIT_SECONDS, then answers with the error shape."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    monkeypatch.setattr(writing, "LOCK_WAIT_SECONDS", 1.0, raising=False)  # (new in this release)
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        lock = _append_lock_path(mem.agent.state_dir, ws)
        lock.parent.mkdir(parents=True, exist_ok=True)
        holder = _hold(lock)
        try:
            started = time.monotonic()
            refused = tools.memory_append(mem, {"text": "Bought a bicycle from the neighbours", "target": "long-term"})
            took = time.monotonic() - started
        finally:
            holder.kill()
            holder.wait()
        assert refused["bytesWritten"] == 0 and "another append to it has shown no sign of life for 1 s" in refused["error"]
        assert 0.9 < took < 10
        assert (ws / "MEMORY.md").read_text(encoding="utf-8") == "- prefers tea\n"
        done = tools.memory_append(mem, {"text": "Bought a bicycle from the neighbours", "target": "long-term"})
        assert done["appended"] is True, done


SLOW_APPENDER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, str(Path(sys.argv[4]) / "support"))
    from slow_provider import slow_plugins
    from symi_memory import load_config, tools, writing
    from symi_memory.manager import open_memory

    writing.LOCK_WAIT_SECONDS = float(sys.argv[3])  # as the test process's
    cfg = load_config(None, state_dir=sys.argv[1], overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "slow", "cache": {"enabled": False}}}}})
    mem = open_memory(cfg, workspace=sys.argv[2], start=False, plugins=slow_plugins(float(sys.argv[5])))
    print(json.dumps(tools.memory_append(mem, {"text": sys.argv[6], "target": "long-term"})), flush=True)
    mem.close()
""")

NOTE = "Bought a bicycle from the neighbours for forty euros"


def _slow_appender(tmp_path: Path, ws: Path, wait: float, delay: float) -> subprocess.Popen[str]:
    """Another process appending NOTE through a provider that takes ``delay`` s to index it; returns once the
    note is on disk (that process is indexing it, holding the append lock)."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW_APPENDER, str(tmp_path / "state"), str(ws), str(wait),
                             str(TESTS), str(delay), NOTE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while NOTE not in (ws / "MEMORY.md").read_text(encoding="utf-8"):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    return proc


def _open_slow(tmp_path: Path, ws: Path, delay: float, **memory_search: object) -> Any:
    """A manager whose provider takes ``delay`` s a batch (no embedding cache), ``memory_search`` set beside it."""
    sys.path.insert(0, str(TESTS / "support"))
    from slow_provider import slow_plugins

    from symi_memory import load_config
    from symi_memory.manager import open_memory

    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "slow", "cache": {"enabled": False}, **memory_search}}}})
    return open_memory(cfg, workspace=ws, start=False, plugins=slow_plugins(delay))


@contextmanager
def _beside_a_slow_appender(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delay: float,
                            **memory_search: object) -> Iterator[tuple[Any, subprocess.Popen[str]]]:
    """tmp_path/ws indexed by a manager (``memory_search`` set) on a provider without delay, LOCK_WAIT_SECONDS 1 s,
    and another process appending NOTE through a provider taking ``delay`` s to index it: yields (manager, process)
    once the note is on disk, that process holding the append lock. Then kills the process if it still runs, and
    closes the manager."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    monkeypatch.setattr(writing, "LOCK_WAIT_SECONDS", 1.0)
    mem = _open_slow(tmp_path, ws, 0.0, **memory_search)
    try:
        mem.sync()
        other = _slow_appender(tmp_path, ws, 1.0, delay)
        try:
            yield mem, other
        finally:
            if other.poll() is None:
                other.kill()
                other.wait()
    finally:
        mem.close()


def _appending_slowly(tmp_path: Path, ws: Path,
                      monkeypatch: pytest.MonkeyPatch) -> tuple[object, threading.Thread, list[object]]:
    """A workspace indexed, then reopened on a provider taking 2.5 s a batch (LOCK_WAIT_SECONDS 1 s), appending
    NOTE to MEMORY.md in a thread: returned (manager, thread, its answer) once the note is on disk, while the
    thread holds the append lock to index it. The caller closes the manager."""
    write(ws, "MEMORY.md", "- prefers tea\n")
    monkeypatch.setattr(writing, "LOCK_WAIT_SECONDS", 1.0)
    mem = _open_slow(tmp_path, ws, 0.0)
    mem.sync()  # type: ignore[attr-defined]
    mem.close()  # type: ignore[attr-defined]
    mem = _open_slow(tmp_path, ws, 2.5)
    try:
        t, out = _in_thread(lambda: tools.memory_append(mem, {"text": NOTE, "target": "long-term"}))
        deadline = time.monotonic() + 30
        while NOTE not in (ws / "MEMORY.md").read_text(encoding="utf-8"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    except BaseException:
        mem.close()  # type: ignore[attr-defined]
        raise
    return mem, t, out


def test_an_append_waits_for_another_process_whose_provider_is_slow_to_index_its_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's append is indexing its note through an embedding provider slower than LOCK_WAIT_SECONDS
    (a remote endpoint answering in 40 s, a local model loading): it is alive and working, so this append waits
    for it and then sees its note (duplicateOf), instead of failing with 'nothing was written'. Before, it gave
    up after LOCK_WAIT_SECONDS whatever the holder was doing."""
    ws = tmp_path / "ws"
    with _beside_a_slow_appender(tmp_path, monkeypatch, 3.0) as (mem, other):
        started = time.monotonic()
        answer = tools.memory_append(mem, {"text": NOTE, "target": "long-term"})
        took = time.monotonic() - started
        out, err = other.communicate(timeout=60)
    assert json.loads(out.strip().splitlines()[-1])["appended"] is True, err
    assert answer.get("error") is None, answer
    assert answer["appended"] is False and answer["duplicateOf"]["path"] == "MEMORY.md", answer
    assert took > 1.5  # it did wait past LOCK_WAIT_SECONDS
    assert (ws / "MEMORY.md").read_text(encoding="utf-8").count(NOTE) == 1


def test_two_appends_in_one_process_wait_for_a_slow_provider(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve answering two memory_append calls at once, its provider slower than LOCK_WAIT_SECONDS to index the
    first note: the second waits its turn and is written (it used to fail with 'nothing was written')."""
    ws = tmp_path / "ws"
    mem, first, out1 = _appending_slowly(tmp_path, ws, monkeypatch)
    try:
        second = tools.memory_append(mem, {"text": "The plumber comes on Friday morning",  # type: ignore[arg-type]
                                           "target": "long-term"})
        first.join(timeout=60)
    finally:
        mem.close()  # type: ignore[attr-defined]
    assert out1[0]["appended"] is True and second.get("error") is None, (out1, second)  # type: ignore[index]
    assert second["appended"] is True
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == (
        f"- prefers tea\n{NOTE}\nThe plumber comes on Friday morning\n")


def test_an_append_gives_up_on_a_stopped_appender(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An appending process stopped mid-append (SIGSTOP, a suspended terminal job) shows no more signs of life:
    the append waits LOCK_WAIT_SECONDS, not for as long as that process stays stopped."""
    import signal

    ws = tmp_path / "ws"
    with _beside_a_slow_appender(tmp_path, monkeypatch, 3.0) as (mem, other):
        other.send_signal(signal.SIGSTOP)  # killed (stopped or not) on the way out
        started = time.monotonic()
        answer = tools.memory_append(mem, {"text": "The plumber comes on Friday morning", "target": "long-term"})
        took = time.monotonic() - started
    assert "nothing was written" in answer["error"] and took < 10, (answer, took)
    assert "Friday" not in (ws / "MEMORY.md").read_text(encoding="utf-8")


def test_a_waiting_append_gives_up_when_the_manager_closes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve stopping (SIGTERM closes its agents) while an append waits for another process's lock: the append
    answers at once that nothing was written, so the server does not stay up for the rest of the wait."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    monkeypatch.setattr(writing, "LOCK_WAIT_SECONDS", 20.0)
    mem = open_mem(tmp_path, ws)
    mem.sync()
    lock = _append_lock_path(mem.agent.state_dir, ws)
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = _hold(lock)
    try:
        t, out = _in_thread(lambda: tools.memory_append(mem, {"text": NOTE, "target": "long-term"}))
        time.sleep(0.5)
        closed = time.monotonic()
        mem.close()
        t.join(timeout=10)
        took = time.monotonic() - closed
    finally:
        holder.kill()
        holder.wait()
    t.join(timeout=60)
    assert took < 5, f"the append went on waiting {took:.1f} s after close()"
    assert "nothing was written" in out[0]["error"], out  # type: ignore[index]
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == "- prefers tea\n"


def test_a_child_forked_while_a_thread_appends_can_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process forks (multiprocessing's default on Linux) while one of its threads is appending: the child
    inherits that thread's append lock held, with no thread to let it go. Its own appends must still go through
    once the parent's append is done (they waited LOCK_WAIT_SECONDS and failed, every one, for the child's life)."""
    ws = tmp_path / "ws"
    mem, t, out = _appending_slowly(tmp_path, ws, monkeypatch)  # the thread holds the append lock
    try:
        answer_file = tmp_path / "child.json"
        pid = os.fork()
        if pid == 0:  # the child: a manager of its own, appending another note
            code = 1
            try:
                child = _open_slow(tmp_path, ws, 0.0)
                answer = tools.memory_append(child, {"text": "The plumber comes on Friday",  # type: ignore[arg-type]
                                                     "target": "long-term"})
                answer_file.write_text(json.dumps(answer))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        t.join(timeout=60)
    finally:
        mem.close()  # type: ignore[attr-defined]
    assert os.waitstatus_to_exitcode(status) == 0
    answer = json.loads(answer_file.read_text())
    assert answer.get("error") is None and answer["appended"] is True, answer
    assert out[0]["appended"] is True  # type: ignore[index]
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == f"- prefers tea\n{NOTE}\nThe plumber comes on Friday\n"


def test_a_child_forked_during_a_write_does_not_keep_the_memory_file_locked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork while a thread writes a note (between its write and the end of its fsync) gives the child a copy
    of the writer's locked descriptor. The writer lets the lock go itself, so the child's copy does not keep
    every later append to that file (from any process) waiting and failing for as long as the child lives."""
    ws = tmp_path / "ws"
    memory = write(ws, "MEMORY.md", "- prefers tea\n")
    monkeypatch.setattr(writing, "LOCK_WAIT_SECONDS", 1.0)
    note = "- a long note " + "about the garden shed " * 200_000
    refused = 0
    for _ in range(3):
        size = memory.stat().st_size
        t, out = _in_thread(lambda: writing.append_memory(ws, note, target="long-term"))
        deadline = time.monotonic() + 30
        while memory.stat().st_size == size:  # written; the writer is in its fsync, holding the lock
            assert time.monotonic() < deadline, out
        pid = os.fork()
        if pid == 0:  # a long-lived child (a multiprocessing worker) that never touches memory
            time.sleep(5)
            os._exit(0)
        try:
            t.join(timeout=60)
            try:
                writing.append_memory(ws, "- after the fork", target="long-term")
            except writing.MemoryWriteError:
                refused += 1
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert refused == 0


def test_an_append_gives_up_on_a_live_but_hung_appender_after_append_wait_seconds_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's append is alive (it beats) but its provider call does not come back: this append waits
    sync.appendWaitSeconds in all, then answers with an error naming that process (pid, how long it has held the
    lock) and writes nothing; the other append is not disturbed and lands. Before, it waited as long as the holder
    kept beating: without limit for a provider call that never returns."""
    ws = tmp_path / "ws"
    # The other process beats every 1/6 s while its provider sleeps.
    with _beside_a_slow_appender(tmp_path, monkeypatch, 4.5, sync={"appendWaitSeconds": 1.5}) as (mem, other):
        started = time.monotonic()
        answer = tools.memory_append(mem, {"text": "The plumber comes on Friday morning", "target": "long-term"})
        took = time.monotonic() - started
        out, err = other.communicate(timeout=60)
    assert answer["bytesWritten"] == 0 and answer.get("appended") is None, answer
    assert f"pid {other.pid}, holding lock file" in answer["error"], answer
    assert "sync.appendWaitSeconds = 1.5" in answer["error"] and "nothing was written" in answer["error"], answer
    assert 1.4 < took < 4.0, took  # gave up at the limit, not when the holder finished
    assert json.loads(out.strip().splitlines()[-1])["appended"] is True, err  # the holder went on undisturbed
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == f"- prefers tea\n{NOTE}\n"


#: An append of a release from before the lock file named its holder: it locks the file and beats (touches it),
#: writing nothing into it.
OLDER_RELEASE_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    while True:
        os.utime(sys.argv[1])
        time.sleep(0.1)
""")


def test_a_hung_appender_that_does_not_name_itself_is_not_given_the_pid_of_the_append_before_it(
        tmp_path: Path) -> None:
    """The lock file names its holder (pid, since when) for a waiter's error. An append finished, and the next
    holder is one that writes no name (an older release sharing the state dir): the error said the finished
    append's pid (here this very process's, 'another thread's append') held the lock, and to stop that process if
    stuck; a pid since reused by another program would be named as well. A holder now takes its name out when it
    lets go, so such a holder is an unnamed 'process holding lock file'."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    with open_mem(tmp_path, ws, {"sync": {"appendWaitSeconds": 1}}) as mem:
        assert tools.memory_append(mem, {"text": "The plumber comes on Friday morning"})["appended"] is True
        path = _append_lock_path(tmp_path / "state", ws)
        proc = subprocess.Popen([sys.executable, "-c", OLDER_RELEASE_HOLDER, str(path)], stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
            answer = tools.memory_append(mem, {"text": "The boiler is serviced in October"})
        finally:
            proc.kill()
            proc.wait()
    assert answer["bytesWritten"] == 0, answer
    assert f"(a process holding lock file {path}) is still running" in answer["error"], answer
    assert f"pid {os.getpid()}" not in answer["error"], answer
