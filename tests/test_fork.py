"""A process forked from one holding memory open: ``os.fork`` and multiprocessing's ``fork`` start method.

The child is a copy of the parent at one instant, with the forking thread only. Forked while the parent's sync
runs, the child used to hang on its first sync (the sync's lock, held by a thread that does not exist there) and
its searches read through the parent's SQLite connections, which SQLite forbids across a fork. Each scenario runs
in a fresh interpreter (real processes, real SQLite), with a deadline in the child: a hang is a failure, not a
stuck suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

_HEAD = r"""
import faulthandler, json, os, sys, threading, time
from pathlib import Path
from symi_memory import load_config
from symi_memory.manager import open_memory

base = Path(sys.argv[1])
ws = base / "ws"
(ws / "memory").mkdir(parents=True, exist_ok=True)


def write(n, tag, start=0):
    for i in range(start, start + n):
        lines = [f"Day {i} line {j}: {tag}topic{i} zebras graze near item{i}x{j}" for j in range(8)]
        if tag == "old":
            lines.append(f"The kestrel{i} report was filed by Marta")
        (ws / "memory" / f"{tag}{i:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def paths(resp):
    return [h["path"] for h in resp["results"]]


write(30, "old")
cfg = load_config(None, state_dir=base / "state", overrides={"agents": {"defaults": {"memorySearch": {
    "provider": "hash"}}}})
mem = open_memory(cfg, workspace=ws, start=True)
mem.sync()


def answer(query):
    # The best hit (its place and text): other scores move as the parent's sync adds files (term statistics).
    best = mem.search(query).to_dict()["results"][:1]
    return [(h["path"], h["startLine"], h["endLine"], h["snippet"]) for h in best]


before = answer("kestrel7 report")
assert before[0][0] == "memory/old007.md", before


# The parent's syncs below embed slowly (a remote provider, say), so that they are still running when it forks.
from symi_memory.testing.fakes import HashEmbedder

SLOW = [0.0]
BATCHES = [0]  # the provider batches embedded so far
_embed = HashEmbedder.embed_documents


def slow_embed(self, texts):
    BATCHES[0] += 1
    time.sleep(SLOW[0] * len(texts))
    return _embed(self, texts)


HashEmbedder.embed_documents = slow_embed


def child_work(tag):
    # What a prefork server's worker does first: answer a search, then bring the index up to date.
    faulthandler.dump_traceback_later(30, exit=True)  # a hang ends the child (exit 1), with its stacks
    SLOW[0] = 0.0
    out = {"same": answer("kestrel7 report") == before}
    (ws / "memory" / f"{tag}.md").write_text(f"The {tag} note says albatross{tag}\n", encoding="utf-8")
    report = mem.sync()  # the note may be indexed already: the child's watcher starts at its first search
    out["synced"] = not report.errors and mem.status()["dirty"] is False
    out["found"] = paths(mem.search(f"albatross{tag}").to_dict())[:1] == [f"memory/{tag}.md"]
    mem.close()
    faulthandler.cancel_dump_traceback_later()
    return out
"""

FORK_WHILE_SYNCING = _HEAD + r"""
write(90, "new")
SLOW[0] = 0.003
done = []
syncing = threading.Thread(target=lambda: done.append(mem.sync()))
syncing.start()
results = []
for k in range(3):  # three children, forked at three moments of the same sync
    while BATCHES[0] < 2 + 3 * k and syncing.is_alive():
        time.sleep(0.002)
    if not syncing.is_alive():
        break
    t0 = time.monotonic()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = child_work(f"child{k}")
        except BaseException as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    forked_in = time.monotonic() - t0
    os.close(w)
    with os.fdopen(r) as fh:
        out = json.loads(fh.read() or "{}")
    out["exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out["forked_in"] = round(forked_in, 3)
    results.append(out)
syncing.join(60)
assert done and not done[0].errors, done
after = mem.sync()
print(json.dumps({"children": results, "parent_new": paths(mem.search("newtopic80 zebras").to_dict())[:1],
                  "parent_same": answer("kestrel7 report") == before,
                  "children_notes": [paths(mem.search(f"albatrosschild{k}").to_dict())[:1] for k in range(len(results))],
                  "integrity": mem.check_integrity(), "errors": list(after.errors)}))
mem.close()
"""

FORK_WHILE_IDLE = _HEAD + r"""
pid = os.fork()
if pid == 0:
    out = child_work("idlechild")
    print(json.dumps(out), flush=True)
    os._exit(0)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
mem.sync()
print(json.dumps({"exit": code, "parent_sees": paths(mem.search("albatrossidlechild").to_dict())[:1],
                  "integrity": mem.check_integrity()}))
mem.close()
"""

MULTIPROCESSING_FORK = _HEAD + r"""
import multiprocessing as mp


def job(tag):
    return child_work(tag)


write(90, "new")
SLOW[0] = 0.003
syncing = threading.Thread(target=mem.sync)
syncing.start()
while BATCHES[0] < 3:
    time.sleep(0.002)
ctx = mp.get_context("fork")
with ctx.Pool(1) as pool:
    out = pool.apply_async(job, ("poolchild",)).get(timeout=60)
syncing.join(60)
print(json.dumps(out))
mem.close()
"""


def _run(script: str, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", script, str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def test_a_child_forked_while_the_parent_syncs_searches_and_syncs_and_the_parent_goes_on(tmp_path: Path) -> None:
    # Before: the child's sync waited for ever for the parent's sync lock (held by a thread the child does not
    # have), and its search used the parent's SQLite connections.
    got = _run(FORK_WHILE_SYNCING, tmp_path)
    children = got["children"]
    assert len(children) >= 2, got
    for child in children:
        assert child == {"same": True, "synced": True, "found": True, "exit": 0,
                         "forked_in": child["forked_in"]}, got
        assert child["forked_in"] < 5, got  # the fork waited for a write transaction only
    # The parent's own sync finished undisturbed, its answers are the same, and what the children wrote is in
    # the index it reads (one index, written by whichever process synced).
    assert got["parent_new"] == ["memory/new080.md"], got
    assert got["parent_same"] is True, got
    assert got["children_notes"] == [[f"memory/child{k}.md"] for k in range(len(children))], got
    assert got["integrity"] is None and got["errors"] == [], got


def test_a_child_forked_while_idle_searches_and_syncs(tmp_path: Path) -> None:
    got = _run(FORK_WHILE_IDLE, tmp_path)
    assert got == {"exit": 0, "parent_sees": ["memory/idlechild.md"], "integrity": None}, got


def test_a_multiprocessing_fork_worker_started_while_the_parent_syncs_answers(tmp_path: Path) -> None:
    got = _run(MULTIPROCESSING_FORK, tmp_path)
    assert got == {"same": True, "synced": True, "found": True}, got


def test_a_child_forked_while_a_qmd_update_runs_syncs_on_its_own(tmp_path: Path) -> None:
    # qmd-sidecar: the parent's update (a qmd process that hangs here) marks the updater running; in a child that
    # mark stayed for ever, and the child's sync waited for an update no thread of it runs. Then, in about 1 run
    # in 3 under load, the fork came while the parent's update was taking the lock (its descriptor opened, not yet
    # recorded): the child kept a copy no fork hook knew, which held the lock past the parent's release, and the
    # child's sync waited 30 s for it (the next test makes that moment certain).
    import json
    import threading
    import time

    from qmd_standin.helpers import make_backend, standin_command, write

    from symi_memory.types import SearchQuery

    write(tmp_path / "ws" / "MEMORY.md", "# Memory\n\nProject zephyr uses PostgreSQL 16.\n")
    control = tmp_path / "control"
    control.write_text("")
    b = make_backend(tmp_path, standin_command(QMD_STANDIN_CONTROL=str(control), QMD_STANDIN_FAIL_ON="update"),
                     {"update": {"updateTimeoutMs": 4000}})
    b.sync()
    control.write_text("hang")
    parent = threading.Thread(target=lambda: b.sync())
    parent.start()
    deadline = time.monotonic() + 10
    while not b.scheduler._running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b.scheduler._running, "the parent's update did not start"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - reports through the pipe
        import faulthandler

        stacks = open(tmp_path / "child-stacks.txt", "w")  # noqa: SIM115 - written by faulthandler on a hang
        faulthandler.dump_traceback_later(30, exit=True, file=stacks)
        out: dict[str, object] = {}
        try:
            control.write_text("")
            write(tmp_path / "ws" / "memory" / "child.md", "# Child\n\nThe child saw an albatross.\n")
            report = b.sync()
            out = {"errors": list(report.errors),
                   "found": [c.path for c in b.search(SearchQuery(text="albatross", max_results=3, min_score=0.0, candidate_limit=10)).candidates][:1]}
        except BaseException as exc:
            out = {"error": repr(exc)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        child = json.loads(fh.read() or "{}")
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    parent.join(30)
    b.close()
    stacks = tmp_path / "child-stacks.txt"
    assert code == 0 and child == {"errors": [], "found": ["memory/child.md"]}, \
        (code, child, stacks.read_text() if stacks.exists() else "")


def test_a_child_forked_while_the_parent_waits_for_another_processs_qmd_update_holds_no_lock(tmp_path: Path) -> None:
    # qmd-sidecar: the parent's sync waits for another process's update, its descriptor of the update lock open.
    # Before, the fork hooks did not know that descriptor (an update records its own once it has the lock): the
    # child kept its copy, the parent's update then took the lock on the open file the two shared, and the lock
    # stayed held by the child past the parent's release: the child's sync, and the parent's next ones, waited for
    # it (up to the update timeouts: 6 min by default) and skipped.
    import json
    import logging
    import signal
    import threading
    import time

    from qmd_standin.helpers import make_backend, standin_command, write

    from symi_memory.types import SearchQuery
    from symi_memory_qmd.lock import holder

    write(tmp_path / "ws" / "MEMORY.md", "# Memory\n\nProject zephyr uses PostgreSQL 16.\n")
    b = make_backend(tmp_path, standin_command(),
                     {"update": {"updateTimeoutMs": 10000, "embedTimeoutMs": 10000, "commandTimeoutMs": 10000}})
    b.home.mkdir(parents=True, exist_ok=True)
    lock_path = str(b.home / "update.lock")
    other = subprocess.Popen(  # another process's update
        [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT); fcntl.flock(fd,fcntl.LOCK_EX);"
         "print('held',flush=True); sys.stdin.readline()", lock_path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None and other.stdout.readline() == "held\n"
    waiting = threading.Event()

    class Waits(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for it" in record.getMessage():
                waiting.set()

    handler = Waits()
    logging.getLogger("symi_memory.qmd").addHandler(handler)
    try:
        parent = threading.Thread(target=b.sync)
        parent.start()
        assert waiting.wait(10), "the parent's sync did not wait for the other process's update"

        def lock_fds() -> list[str]:
            out = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink(f"/proc/self/fd/{fd}") == lock_path:
                        out.append(fd)
                except OSError:
                    pass
            return out

        deadline = time.monotonic() + 10
        while not lock_fds() and time.monotonic() < deadline:  # the long wait's descriptor, opened after the log
            time.sleep(0.005)
        assert lock_fds(), "the parent's sync is not waiting on the lock"
        go_r, go_w = os.pipe()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - reports through the pipe
            import faulthandler

            faulthandler.dump_traceback_later(25, exit=True)
            out: dict[str, object] = {}
            try:
                os.close(go_w)
                os.read(go_r, 1)  # the parent's update is over
                write(tmp_path / "ws" / "memory" / "child.md", "# Child\n\nThe child saw an albatross.\n")
                report = b.sync()  # before: waited for the lock it held itself, then "not updated"
                out = {"errors": list(report.errors),
                       "found": [c.path for c in b.search(SearchQuery(text="albatross", max_results=3, min_score=0.0,
                                                                      candidate_limit=10)).candidates][:1]}
            except BaseException as exc:
                out = {"error": repr(exc)}
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        os.close(go_r)
        assert other.stdin is not None
        other.stdin.write("done\n")  # the other process's update ends (the child has the pipe too); the parent's runs
        other.stdin.flush()
        assert other.wait(10) == 0
        parent.join(20)
        assert not parent.is_alive()
        held_after = holder(b.home)  # the parent's update is over: nobody updates now (the child has not begun)
        if held_after is not None:  # the child would wait for the lock (~1 min here) before saying so
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the parent's update is over, yet the update lock is held: {held_after}")
        os.write(go_w, b"g")
        os.close(go_w)
        with os.fdopen(r) as fh:
            child = json.loads(fh.read() or "{}")
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        logging.getLogger("symi_memory.qmd").removeHandler(handler)
        if other.poll() is None:
            other.kill()
            other.wait()
    b.close()
    assert code == 0 and child == {"errors": [], "found": ["memory/child.md"]}, (code, child)


FORK_DURING_A_LONG_WRITE = _HEAD + r"""
# A write transaction of the parent's that runs longer than the fork waits for it (FORK_WRITE_WAIT_S, shortened
# here): the child is forked with the parent's writer inside that transaction.
from symi_memory.index import store as store_module

store_module.FORK_WRITE_WAIT_S = 0.2
st = mem.backend.store
began, release, failed = threading.Event(), threading.Event(), []


def long_write():
    try:
        with st.write():
            st.conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                                ((f"scratch{i}", "x" * 900) for i in range(3000)))
            began.set()
            release.wait(30)
            st.conn.execute("DELETE FROM meta WHERE key LIKE 'scratch%'")
            st.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('committed', 'yes')")
    except BaseException as exc:
        failed.append(f"{type(exc).__name__}: {exc}")
        began.set()


writer = threading.Thread(target=long_write)
writer.start()
began.wait()
pid = os.fork()
if pid == 0:
    # A worker that searches, then ends as a Python program does (its interpreter finalized, not os._exit).
    ok = answer("kestrel7 report") == before
    sys.exit(0 if ok else 3)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
# The child closed its copies of the parent's idle connections and exited: the parent's transaction still holds
# SQLite's write lock (POSIX locks are per process), so another process cannot write meanwhile.
import subprocess

probe = subprocess.run([sys.executable, "-c", "import apsw, sys\n"
                        "c = apsw.Connection(sys.argv[1])\n"
                        "try:\n    c.execute('BEGIN IMMEDIATE')\n    print('wrote')\n"
                        "except apsw.BusyError:\n    print('locked')", str(st.path)],
                       capture_output=True, text=True, timeout=30).stdout.strip()
release.set()
writer.join(30)
print(json.dumps({"child_exit": code, "probe": probe, "parent_write": failed or "committed", "meta": st.get_meta("committed"),
                  "same": answer("kestrel7 report") == before, "integrity": mem.check_integrity()}))
mem.close()
"""


STAGE_LOCK_HELD_AT_FORK = r"""
import faulthandler, json, os, sys, threading, time
from pathlib import Path
from symi_memory import hookimpl, load_config
from symi_memory.manager import open_memory
from symi_memory.specs import PostProcessorSpec

base = Path(sys.argv[1])
ws = base / "ws"
(ws / "memory").mkdir(parents=True, exist_ok=True)
(ws / "MEMORY.md").write_text("# Memory\n\n- The router admin page is at 10.0.0.1.\n", encoding="utf-8")


class Keep:  # a third-party post-processor: run on its stage's worker thread, under query.stageDeadlineMs
    def process(self, candidates, ctx):
        return list(candidates)


class Plugin:
    @hookimpl
    def symi_memory_register_postprocessors(self, register):
        register(PostProcessorSpec(name="keep", factory=lambda hybrid: Keep(), order=200))


cfg = load_config(None, state_dir=base / "state", overrides={"agents": {"defaults": {"memorySearch": {
    "provider": "hash", "query": {"stageDeadlineMs": 2000}}}}})
mem = open_memory(cfg, workspace=ws, plugins=[("keep-plugin", Plugin())])
mem.sync()
first = [h["path"] for h in mem.search("router admin").to_dict()["results"]]
stage = mem.pipeline.stage_states["keep"]
# The stage's lock held by another parent thread at the fork: its worker thread takes it after each call (to go
# back to the idle list), a concurrent search takes it to pick a worker.
held, go_on = threading.Event(), threading.Event()


def hold():
    with stage.lock:
        held.set()
        go_on.wait()


holder = threading.Thread(target=hold)
holder.start()
held.wait()
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(10, exit=True)  # a hang ends the child (exit 1)
    resp = mem.search("router admin")
    out = {"paths": [h["path"] for h in resp.to_dict()["results"]], "warnings": list(resp.warnings)}
    print(json.dumps(out), flush=True)
    os._exit(0)
go_on.set()
holder.join()
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps({"exit": code, "first": first}), flush=True)
mem.close()
"""


def test_a_child_forked_inside_a_long_write_that_exits_normally_leaves_the_parents_transaction_alone(
        tmp_path: Path) -> None:
    # Before: the child's interpreter, finalizing, freed the parent's writer connection it had kept, and SQLite
    # closing it rolled the parent's open transaction back over the WAL index both share: the parent's write then
    # failed with 'database disk image is malformed' (or committed into a malformed index).
    got = _run(FORK_DURING_A_LONG_WRITE, tmp_path)
    assert got == {"child_exit": 0, "probe": "locked", "parent_write": "committed", "meta": "yes", "same": True,
                   "integrity": None}, got


FORKS_FROM_TWO_THREADS = _HEAD + r"""
# Two threads of the parent fork at once, again and again (a threaded server starting workers, say).
slowest = [0.0]


def forker():
    for _ in range(15):
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        slowest[0] = max(slowest[0], time.monotonic() - t0)
        os.waitpid(pid, 0)


threads = [threading.Thread(target=forker) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
(ws / "memory" / "later.md").write_text("The later note says albatross\n", encoding="utf-8")
done = []
syncing = threading.Thread(target=lambda: done.append(mem.sync()), daemon=True)
syncing.start()
syncing.join(20)
print(json.dumps({"slowest_fork_s": round(slowest[0], 2), "synced": bool(done) and not done[0].errors,
                  "found": paths(mem.search("albatross").to_dict())[:1]}), flush=True)
os._exit(0)  # a hung sync thread must not hang the interpreter's exit
"""


def test_two_threads_forking_at_once_leave_the_index_writable(tmp_path: Path) -> None:
    # Before: the fork hooks kept one list of what each fork took; a second thread's fork cleared the first's, so
    # the index's write lock the first fork held was never released: every later fork of the other thread waited
    # 10 s for it ("a write ... has run for over 10 s") and the next sync hung for ever.
    got = _run(FORKS_FROM_TWO_THREADS, tmp_path)
    assert got["synced"] is True and got["found"] == ["memory/later.md"], got
    assert got["slowest_fork_s"] < 5, got


def test_a_child_forked_while_a_parent_thread_holds_a_search_stage_lock_calls_that_stage() -> None:
    # A reranker or post-processor with a deadline runs on the stage's worker threads, handed over under the
    # stage's lock. Before: a parent thread inside that lock at the fork (a search handing a call over, a worker
    # going back to idle) left it held in the child for ever: the child's first such search hung.
    import json
    import threading

    from symi_memory.pipeline import StageState

    stage = StageState(kind="reranker", name="r", plugin="p")
    assert stage.call(lambda: "parent", 2.0) == ("ok", "parent")
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with stage.lock:
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(5)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - reports through the pipe
        import faulthandler

        faulthandler.dump_traceback_later(5, exit=True)  # a hang ends the child (exit 1)
        out = list(stage.call(lambda: "child", 2.0))
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    leave.set()
    holder.join(5)
    os.close(w)
    with os.fdopen(r) as fh:
        child = fh.read()
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    assert (code, child) == (0, json.dumps(["ok", "child"])), (code, child)
    assert stage.call(lambda: "parent again", 2.0) == ("ok", "parent again")


def test_a_child_forked_while_a_parent_thread_holds_a_post_processors_stage_lock_searches(tmp_path: Path) -> None:
    # Before: the stage's lock (query.stageDeadlineMs's worker hand-over) stayed held in the child, by a thread the
    # child does not have, and the child's first search waited for it for ever.
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", STAGE_LOCK_HELD_AT_FORK,
                           str(tmp_path)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 2, proc.stdout + proc.stderr
    child, parent = lines
    assert parent == {"exit": 0, "first": ["MEMORY.md"]}, proc.stdout + proc.stderr
    assert child == {"paths": ["MEMORY.md"], "warnings": []}, proc.stdout + proc.stderr


FORK_AT_A_NEW_BUILD_FILE = _HEAD + r"""
# The parent's full rebuild has created and locked its build file; a thread forks at that instant (the hook holds the
# rebuild there until the fork is over), and the child lives on: a prefork server's worker.
import symi_memory.index.rebuild as rebuild

made, forked = threading.Event(), threading.Event()
_locked = rebuild._locked_build_file
BUILD = []


def locked_then_fork(index):
    got = _locked(index)
    BUILD.append(got[1])
    made.set()
    forked.wait(30)
    return got


rebuild._locked_build_file = locked_then_fork
threading.Thread(target=lambda: mem.sync(force=True), daemon=True).start()
assert made.wait(30)
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(60, exit=True)
    time.sleep(60)
    os._exit(0)
forked.set()
print(json.dumps({"child": pid, "build": str(BUILD[0])}), flush=True)
time.sleep(60)  # killed here, mid-rebuild: its build file stays behind
"""


def test_a_child_forked_as_a_rebuild_creates_its_build_file_keeps_no_lock_on_it(tmp_path: Path) -> None:
    # builtin: a full rebuild created and locked its build file, then recorded the descriptor for the fork hooks; a
    # fork in between left the child a copy of the locked descriptor that nothing closed. The parent killed
    # mid-rebuild, its leftover stayed locked by the child for the child's lifetime: status named a rebuild running
    # in a dead process, every sync waited for it (buildWaitMs), and no open could remove it.
    import json
    import signal

    from symi_memory.index.rebuild import remove_stale_builds, running_build

    proc = subprocess.Popen([sys.executable, "-c", FORK_AT_A_NEW_BUILD_FILE, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    child = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)
        got = json.loads(line)
        child = int(got["child"])
        build = Path(got["build"])
        index = build.parent / build.name.split(".build-")[0]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)  # the child has its output pipes too: no reading them to their end
        assert build.exists()  # the killed rebuild's leftover
        assert running_build(index) is None, "a rebuild is said to run, held by the forked child"
        remove_stale_builds(index)  # what an open does: the leftover goes (it may be empty yet: 0 bytes freed)
        assert not build.exists(), "the killed rebuild's leftover cannot be removed: the forked child holds it"
    finally:
        if child is not None:
            os.kill(child, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)

def test_a_forked_child_closes_the_pipes_of_the_parents_stage_workers() -> None:
    # A stage's workers (idle, or still in a call that missed the deadline) each hold two pipes. A forked child has
    # none of their threads: the pipes it inherited must not stay open for its life (a pre-forking server's
    # children, a multiprocessing pool's workers, each holding four descriptors per worker per stage).
    import gc
    import json
    import threading

    from symi_memory.pipeline import StageState

    def pipes() -> set[int]:
        out = set()
        for name in os.listdir("/proc/self/fd"):
            try:
                st = os.fstat(int(name))
            except OSError:
                continue
            if (st.st_mode & 0o170000) == 0o010000:  # a FIFO: a pipe
                out.add(st.st_ino)
        return out

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("lists descriptors through /proc")
    release = threading.Event()
    before = pipes()
    idle, hung = StageState(kind="reranker", name="r", plugin="p"), StageState(kind="postprocessor", name="q", plugin="p")
    try:
        assert idle.call(lambda: "parent", 2.0) == ("ok", "parent")
        assert hung.call(lambda: release.wait(10), 0.05) == ("timedOut", None)
        parents = pipes() - before
        assert len(parents) == 4  # two workers, two pipes each
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - reports through the pipe
            import faulthandler

            faulthandler.dump_traceback_later(5, exit=True)
            answer = idle.call(lambda: "child", 2.0)  # the child's own worker
            gc.collect()
            os.write(w, json.dumps({"answer": list(answer), "kept": len(pipes() & parents)}).encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as fh:
            child = json.loads(fh.read() or "{}")
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert child == {"answer": ["ok", "child"], "kept": 0}
        assert idle.call(lambda: "parent again", 2.0) == ("ok", "parent again")
    finally:
        release.set()
        idle.stop()
        hung.stop()


FORK_WHILE_A_STAGE_WORKER_MAKES_ITS_PIPES = r"""
import faulthandler, json, os, sys, threading, time

from symi_memory.pipeline import StageState

faulthandler.dump_traceback_later(60, exit=True)
ready_r, ready_w = os.pipe()  # the child says it is past the fork's hooks
made, forked = threading.Event(), threading.Event()
caller, made_fds = [], []
_pipe = os.pipe


def pipe():
    fds = _pipe()
    if caller and threading.current_thread() is caller[0]:
        made_fds.extend(fds)
        if not made.is_set():
            made.set()
            forked.wait(1.0)  # the main thread forks now, unless the fork waits for these pipes to be recorded
    return fds


os.pipe = pipe
stage = StageState(kind="reranker", name="r", plugin="p")
answer = []
search = threading.Thread(target=lambda: answer.append(list(stage.call(lambda: "parent", 10.0))))
caller.append(search)
search.start()  # its call makes the stage's first worker, and with it two pipes
assert made.wait(30)
pid = os.fork()
if pid == 0:
    os.write(ready_w, b"x")
    time.sleep(60)
    os._exit(0)
forked.set()
os.read(ready_r, 1)
search.join(30)
mine = {os.fstat(fd).st_ino for fd in made_fds}
theirs = set()
for name in os.listdir(f"/proc/{pid}/fd"):
    try:
        theirs.add(os.stat(f"/proc/{pid}/fd/{name}").st_ino)
    except OSError:
        pass
print(json.dumps({"child": pid, "answer": answer, "made": len(made_fds), "kept": len(mine & theirs)}), flush=True)
os.kill(pid, 9)
os.waitpid(pid, 0)
"""


def test_a_child_forked_while_a_stage_worker_makes_its_pipes_keeps_none_of_them() -> None:
    # A stage's worker (a reranker's, a third-party post-processor's) makes two pipes, then was recorded for the
    # fork hooks: a fork in between left the child those descriptors (up to four) for its life, nothing there
    # knowing of them. Now they are made and recorded in one step under the guard a fork takes first.
    import json

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("lists descriptors through /proc")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", FORK_WHILE_A_STAGE_WORKER_MAKES_ITS_PIPES], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["answer"] == [["ok", "parent"]] and got["made"] == 4, got
    assert got["kept"] == 0, got


def test_a_child_forked_by_a_stage_call_keeps_the_pipes_of_the_worker_it_runs_on() -> None:
    # A reranker that forks inside its call (a multiprocessing pool started there): the child goes on on that
    # worker's thread, which waits on the worker's pipes once the call returns. The fork hooks close the pipes of
    # every other worker, never those.
    import json
    import threading

    from symi_memory import pipeline
    from symi_memory.pipeline import StageState

    stage, other = StageState(kind="reranker", name="r", plugin="p"), StageState(kind="postprocessor", name="q",
                                                                                    plugin="p")
    assert other.call(lambda: "other", 2.0) == ("ok", "other")
    others = other.idle[0].fds
    r, w = os.pipe()

    def is_open(fds: tuple[int, ...]) -> list[bool]:
        out = []
        for fd in fds:
            try:
                os.fstat(fd)
                out.append(True)
            except OSError:
                out.append(False)
        return out

    def forks() -> int:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - reports through the pipe
            mine = [x for x in pipeline._PIPES.workers if x.ident == threading.get_ident()]
            os.write(w, json.dumps({"mine": [is_open(x.fds) for x in mine], "others": is_open(others)}).encode())
            os._exit(0)
        return pid

    try:
        outcome, pid = stage.call(forks, 5.0)
        assert outcome == "ok"
        os.close(w)
        with os.fdopen(r) as fh:
            child = json.loads(fh.read() or "{}")
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert child == {"mine": [[True] * 4], "others": [False] * 4}, child
        assert stage.call(lambda: "again", 2.0) == ("ok", "again")
    finally:
        stage.stop()
        other.stop()
