"""A hybrid search's vector scan on the scan worker, beside the keyword side (issue 13).

A long scan (``vectors.HAND_OFF_MIN_ROWS`` rows: 50,000; set to 1 here so a small index takes that path) runs on one
worker thread per process while the searching thread runs the FTS query and reads the keyword candidates. These
tests hold the worker to what a user notices: the same answers as a scan on the searching thread, the vector
side's error raised by the search, a busy worker costing no wait, a late query vector scanning nothing, and a
forked child answering. Real SQLite, real threads; the worker's CPU clock tells where a scan ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
import numpy as np
import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply

from symi_memory import load_config
from symi_memory.index import backend as backend_mod
from symi_memory.index import vectors as vectors_mod
from symi_memory.manager import open_memory
from symi_memory.testing.fakes import HashEmbedder

QUERIES = ["quarterly planning topic3", "lions at dawn", "budget review item7", "zebras graze near the river",
           "topic11 follow-up", "what did we decide about item2x5"]


def _workspace(tmp_path: Path, files: int = 24) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    animals = ["zebras", "lions", "otters", "herons"]
    for i in range(files):
        lines = [f"Day {i} line {j}: topic{i} {animals[(i + j) % 4]} and the quarterly planning of item{i}x{j}"
                 for j in range(12)]
        lines.append(f"budget review item{i % 9} at dawn near the river")
        (ws / "memory" / f"n{i:03d}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ws


def _open(tmp_path: Path, ws: Path, scan: str = "auto", **memory_search):  # type: ignore[no-untyped-def]
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "store": {"vector": {"scan": scan}}, **memory_search}}}})
    return open_memory(cfg, workspace=ws, start=False)


@pytest.fixture(autouse=True)
def _any_load(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker takes scans only while the host's load leaves a core free; a shared test host seldom does.
    monkeypatch.setattr(backend_mod, "HAND_OFF_MAX_LOAD_PER_CPU", float("inf"))
    monkeypatch.setattr(backend_mod, "_SCAN_LOAD", (-1e9, False))  # read again


def _two_cpus() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the scan never leaves the searching thread")


def _worker_cpu() -> int | None:
    """CPU time (ns) of the scan worker thread so far; None while it does not exist."""
    for t in threading.enumerate():
        if t.name.startswith("symi-vector-scan") and t.ident is not None:
            return time.clock_gettime_ns(time.pthread_getcpuclockid(t.ident))
    return None


def _answers(mem, queries=QUERIES):  # type: ignore[no-untyped-def]
    out = []
    for q in queries:
        for floor in (None, 0.0):
            out.append(mem.search(q, max_results=8, min_score=floor).to_dict())
    return out


@pytest.mark.parametrize("scan", ["float32", "int8"])
def test_a_scan_on_the_worker_answers_as_a_scan_on_the_searching_thread(tmp_path: Path, monkeypatch, scan: str) -> None:  # type: ignore[no-untyped-def]
    # The keyword candidates the scan did not return are scored from what the scan left behind (the int8 copy's
    # rescored scores, the float32 scan's scores): that state is the worker's thread's and must come along, or
    # they would be scored another way (a few ulps apart: a different order among near-ties).
    _two_cpus()
    if scan == "int8":
        pytest.importorskip("faiss")
    ws = _workspace(tmp_path)
    with _open(tmp_path, ws, scan=scan) as mem:
        mem.sync()
        monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 10**9)
        alone = _answers(mem)
        monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)
        before = _worker_cpu() or 0
        beside = _answers(mem)
        after = _worker_cpu()
        # What the worker's scan left for rescoring is this thread's now (else the keyword candidates' vectors
        # are read again from SQLite and scored by a matrix product, whose rounding may differ).
        mem.search("otters and herons item4x2")
        scanned, rescored, current, _asked, *_ = mem.backend.vectors.search_state()
        last = np.asarray(mem.backend.choice.provider.embed_query("otters and herons item4x2"), dtype=np.float32)
        assert current and np.array_equal((scanned or rescored)[0], last / np.linalg.norm(last))
    assert beside == alone
    assert all(a["mode"] == "hybrid" for a in beside)
    assert after is not None and after > before, "the scans ran on the searching thread"


def test_the_vector_sides_error_on_the_worker_is_the_searchs_error_and_frees_the_worker(tmp_path: Path,
                                                                                     monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The int8 copy rescores its candidates from the stored vectors: with their table gone (a damaged index, here
    # renamed by another connection) the scan on the worker fails. The search raises that error, as it would
    # scanning on its own thread; the worker is free again for the next search.
    _two_cpus()
    pytest.importorskip("faiss")
    monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)
    ws = _workspace(tmp_path)
    with _open(tmp_path, ws, scan="int8") as mem:
        mem.sync()
        want = mem.search("lions at dawn").to_dict()
        db = apsw.Connection(mem.status()["dbPath"])
        db.set_busy_timeout(5000)
        try:
            db.execute("ALTER TABLE embedding_cache RENAME TO embedding_cache_aside")
            cpu = _worker_cpu()
            with pytest.raises(apsw.SQLError, match="embedding_cache"):
                mem.search("lions at dawn")
            assert _worker_cpu() > cpu  # type: ignore[operator]
            db.execute("ALTER TABLE embedding_cache_aside RENAME TO embedding_cache")
        finally:
            db.close()
        cpu = _worker_cpu()
        assert mem.search("lions at dawn").to_dict() == want
        assert _worker_cpu() > cpu, "the worker stayed taken after the failed scan"  # type: ignore[operator]


def test_a_busy_worker_costs_a_search_no_wait(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # serve answers several searches at once: while the worker scans for one of them, another scans on its own
    # thread instead of queueing behind it. Here the worker is held by a job that does not end before the test
    # lets it; the search answers at once, the same answer, and the worker does none of its work.
    _two_cpus()
    monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)
    ws = _workspace(tmp_path)
    with _open(tmp_path, ws) as mem:
        mem.sync()
        want = _answers(mem)
        release, holding = threading.Event(), threading.Event()

        def hold() -> None:
            holding.set()
            release.wait(60)

        held = backend_mod._hand_off(hold)
        assert held is not None and holding.wait(10)
        try:
            cpu = _worker_cpu()
            started = time.monotonic()
            got = _answers(mem)
            took = time.monotonic() - started
            assert _worker_cpu() - cpu < 1_000_000  # type: ignore[operator]  # under a millisecond: it waited
        finally:
            release.set()
        held.result(10)
    assert got == want
    assert took < 30


def test_on_a_busy_host_the_scan_stays_on_the_searching_thread(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The overlap needs a free core: while the load average says every core is taken, a second thread would only
    # wait for one (a longer search for more CPU), so the search scans on its own thread.
    _two_cpus()
    monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)
    ws = _workspace(tmp_path)
    with _open(tmp_path, ws) as mem:
        mem.sync()
        want = _answers(mem)
        assert _worker_cpu() is not None
        monkeypatch.setattr(backend_mod, "HAND_OFF_MAX_LOAD_PER_CPU", 0.0)
        monkeypatch.setattr(backend_mod, "_SCAN_LOAD", (-1e9, True))
        cpu = _worker_cpu()
        got = _answers(mem)
        assert _worker_cpu() - cpu < 1_000_000  # type: ignore[operator]
    assert got == want


def test_a_query_vector_after_the_deadline_scans_nothing(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A slow provider: the search answers by keyword at the deadline (QUERY_EMBED_DEADLINE_S, unchanged by the
    # worker), and the vector that comes later is not scanned for nobody.
    _two_cpus()
    monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)
    ws = _workspace(tmp_path, 6)
    slow = threading.Event()

    def reply(req: Recorded) -> Reply:
        inputs = req.json()["input"]
        data = [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]} for i, t in enumerate(inputs)]
        return Reply(json={"data": data}, delay=3.5 if slow.is_set() else 0)

    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", reply)
        cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "sk-test-overlap-0123456789"}}}}})
        with open_memory(cfg, workspace=ws, start=False) as mem:
            mem.sync()
            assert mem.search("topic3 quarterly").mode == "hybrid"
            cpu = _worker_cpu()
            assert cpu is not None  # that search scanned on the worker
            slow.set()
            started = time.monotonic()
            resp = mem.search("lions near the river")
            assert time.monotonic() - started < 3.2
            assert resp.mode == "fts-only" and resp.fallback is not None
            time.sleep(2.0)  # the vector has come back by now
            assert _worker_cpu() - cpu < 1_000_000  # type: ignore[operator]


# What the subprocess scripts below start with: an index of the workspace in argv[2] (state in argv[1]) searched once
# with the scan forced onto the worker, whose answer is ``first``.
_SCRIPT_HEAD = """
import sys, threading, time
from pathlib import Path
from symi_memory import load_config
from symi_memory.index import backend as backend_mod
from symi_memory.index import vectors as vectors_mod
from symi_memory.manager import open_memory

vectors_mod.HAND_OFF_MIN_ROWS = 1
backend_mod.HAND_OFF_MAX_LOAD_PER_CPU = float("inf")
cfg = load_config(None, state_dir=Path(sys.argv[1]), overrides={"agents": {"defaults": {"memorySearch": {
    "provider": "hash"}}}})
mem = open_memory(cfg, workspace=Path(sys.argv[2]), start=False)
mem.sync()
first = mem.search("lions at dawn").to_dict()  # the scan worker exists now
"""


def _run_script(script: str, tmp_path: Path, ws: Path) -> subprocess.CompletedProcess[str]:
    """Run one of the scripts below in a fresh interpreter, on this test's state folder and workspace."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", script, str(tmp_path / "state"), str(ws)],
                          capture_output=True, text=True, timeout=120, env=env)


SEARCH_IN_A_FORKED_CHILD = _SCRIPT_HEAD + """
import os, signal
pid = os.fork()
if pid == 0:  # a prefork server's worker, say
    signal.alarm(20)
    again = mem.search("lions at dawn").to_dict()
    print("same" if again == first else "different", flush=True)
    os._exit(0)
print("child exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
mem.close()
"""


def test_a_search_in_a_forked_child_answers(tmp_path: Path) -> None:
    # The parent's scan worker does not exist in a child forked after a search: a scan handed to it would never
    # run and the child's search would wait forever. The child gets a worker of its own.
    _two_cpus()
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    ws = _workspace(tmp_path, 6)
    proc = _run_script(SEARCH_IN_A_FORKED_CHILD, tmp_path, ws)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["same", "child", "exit", "0"], proc.stdout + proc.stderr


SEARCH_WHILE_EXITING = _SCRIPT_HEAD + """


def late() -> None:  # a request thread still answering while the main thread returns
    time.sleep(0.5)
    try:
        again = mem.search("lions at dawn").to_dict()
        print("same" if again == first else "different", flush=True)
    except Exception as exc:
        print("failed:", type(exc).__name__, exc, flush=True)


threading.Thread(target=late).start()
"""


def test_a_search_answers_while_the_interpreter_exits(tmp_path: Path) -> None:
    # Once the interpreter starts exiting, the worker takes no new scan ("cannot schedule new futures after
    # shutdown"): a search still running on another thread scans on its own thread and answers as before.
    _two_cpus()
    ws = _workspace(tmp_path, 6)
    proc = _run_script(SEARCH_WHILE_EXITING, tmp_path, ws)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "same", proc.stdout + proc.stderr


def test_keyword_candidates_scored_while_the_scan_runs_score_as_after_it(tmp_path: Path) -> None:
    # While its scan runs on the worker, the searching thread reads the keyword candidates' stored vectors
    # (ExactVectors.prescore); the rescoring after the scan takes those scores: the same scores, in the same order,
    # as reading them then.
    pytest.importorskip("faiss")
    ws = _workspace(tmp_path)
    with _open(tmp_path, ws, scan="int8") as mem:
        mem.sync()
        vectors = mem.backend.vectors
        provider = mem.backend.choice.provider
        rowids = [int(r[0]) for r in mem.backend.store._read("SELECT rowid FROM chunks ORDER BY rowid DESC")]
        for text in QUERIES:
            q = provider.embed_query(text)
            hits = dict(vectors.search(q, 5))
            others = [r for r in rowids if r not in hits]
            after = vectors.rescore(q, others)
            vectors.prescore(q, others)
            assert vectors._last.pre is not None
            vectors.search(q, 5)
            ahead = vectors.rescore(q, others)
            assert vectors._last.pre is None  # taken
            assert list(ahead.items()) == list(after.items())


def test_a_scan_copy_replaced_after_a_search_on_the_worker_is_given_back(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # What the searching thread read ahead while its scan ran (ExactVectors.prescore) is kept for its rescoring;
    # when that rescoring does not take it (here every keyword candidate is a vector hit: nothing left to rescore),
    # it must not hold the scan copy it was read from: once the index changes and the copy is reloaded, the old
    # copy's memory (codes and residual codes: tens of MB at 100k chunks) is given back, not kept by an idle
    # thread's leftovers until that thread searches again.
    import gc
    import weakref

    _two_cpus()
    pytest.importorskip("faiss")
    monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)
    ws = _workspace(tmp_path, 3)
    with _open(tmp_path, ws, scan="int8") as mem:
        mem.sync()
        mem.search("lions at dawn")  # the int8 copy is loaded
        cpu = _worker_cpu() or 0
        assert mem.search("zebras at dawn").mode == "hybrid"
        assert _worker_cpu() > cpu  # type: ignore[operator]  # that scan ran on the worker
        old = weakref.ref(mem.backend.vectors._quant)
        (ws / "memory" / "n000.md").write_text("herons at dawn, a new note\n", encoding="utf-8")
        mem.sync()
        # Another thread searches the changed index: the copy is reloaded.
        other = threading.Thread(target=lambda: mem.search("herons at dawn"))
        other.start()
        other.join(30)
        assert mem.backend.vectors._quant is not None and mem.backend.vectors._quant is not old()
        gc.collect()
        assert old() is None, "the replaced scan copy is still held"


SEARCH_IN_A_CHILD_FORKED_WHILE_A_QUERY_HUNG = """
import os, signal, sys, threading, time
from pathlib import Path
from support.loopback_http import LoopbackServer, Reply
from symi_memory import load_config
from symi_memory.manager import open_memory

slow = threading.Event()


def reply(req):
    inputs = req.json()["input"]
    data = [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]} for i, t in enumerate(inputs)]
    return Reply(json={"data": data}, delay=3.5 if slow.is_set() else 0)


with LoopbackServer() as server:
    server.add("POST", "/v1/embeddings", reply)
    cfg = load_config(None, state_dir=Path(sys.argv[1]), overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "openai", "remote": {"baseUrl": server.url + "/v1", "apiKey": "sk-test-overlap-0123456789"}}}}})
    mem = open_memory(cfg, workspace=Path(sys.argv[2]), start=False)
    mem.sync()
    print(mem.search("topic3 quarterly").mode, flush=True)
    slow.set()
    print(mem.search("lions near the river").mode, flush=True)  # past the deadline: the query is still out
    slow.clear()
    pid = os.fork()
    if pid == 0:  # a prefork server's worker, forked while the parent's query embedding was hung
        signal.alarm(20)
        time.sleep(2.0)  # the parent's call has returned by now (in the parent)
        print(mem.search("lions near the river").mode, flush=True)
        os._exit(0)
    print("child exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
    mem.close()
"""


def test_a_child_forked_while_a_query_embedding_hung_embeds_its_queries(tmp_path: Path) -> None:
    # The parent's embedding call past the deadline holds back further query embeddings until it returns; a child
    # forked meanwhile has no such call (the thread making it is the parent's), so its searches embed their
    # queries on its own worker, not answer by keyword for the rest of its life.
    _two_cpus()
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    ws = _workspace(tmp_path, 6)
    proc = _run_script(SEARCH_IN_A_CHILD_FORKED_WHILE_A_QUERY_HUNG, tmp_path, ws)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["hybrid", "fts-only", "hybrid", "child", "exit", "0"], proc.stdout + proc.stderr


class _OnceMalformed(HashEmbedder):
    """The hash provider, except that the query "malformed" gets a two-row array (a provider bug)."""

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        if text == "malformed":
            time.sleep(0.3)  # returned after the search chained its scan on this call (on this worker, then)
            return np.ones((2, self.dims), dtype=np.float32)
        return super().embed_query(text)


def test_a_malformed_query_vector_fails_its_own_search_only(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The scan is chained on the embedding worker: what the chained hand-off raised on a bad vector must not end
    # that worker, or every later search waits out the embedding deadline and answers by keyword alone.
    from symi_memory import hookimpl
    from symi_memory.specs import ProviderSpec

    _two_cpus()
    monkeypatch.setattr(vectors_mod, "HAND_OFF_MIN_ROWS", 1)

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register):  # type: ignore[no-untyped-def]
            register(ProviderSpec(name="once-malformed", factory=lambda ctx: _OnceMalformed()))

    ws = _workspace(tmp_path)
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "once-malformed", "store": {"vector": {"scan": "float32"}}}}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("once-malformed", Plugin())]) as mem:
        mem.sync()
        want = mem.search("lions at dawn").to_dict()
        bad = mem.search("malformed").to_dict()  # a third-party provider's bad vector: answered by keyword
        assert bad["mode"] == "fts-only" and "query embedding failed" in bad["fallback"]["reason"]
        started = time.monotonic()
        got = mem.search("lions at dawn").to_dict()
        assert time.monotonic() - started < 2.0, "the search waited out the embedding deadline"
        assert got == want and got["mode"] == "hybrid"


SEARCH_IN_A_CHILD_FORKED_WHILE_A_WORKER_STARTED = """
import os, signal, sys, threading
from pathlib import Path
from symi_memory import load_config
from symi_memory.manager import open_memory

cfg = load_config(None, state_dir=Path(sys.argv[1]), overrides={"agents": {"defaults": {"memorySearch": {
    "provider": "hash"}}}})
mem = open_memory(cfg, workspace=Path(sys.argv[2]), start=False)
mem.sync()
if sys.argv[3] == "searched":
    print(mem.search("lions at dawn").mode, flush=True)  # the parent's query worker exists
# A request thread of the parent starting an embedding worker as the process forks holds the workers' lock (held
# here from a thread for as long as the fork takes, where a real start holds it for a thread's start).
held, forked = threading.Event(), threading.Event()


def starting() -> None:
    with mem.backend._workers_lock:
        held.set()
        forked.wait()


starter = threading.Thread(target=starting)
starter.start()
held.wait()
pid = os.fork()
if pid == 0:  # a prefork server's worker, say
    signal.alarm(20)  # a deadlocked child dies of SIGALRM (exit code -14)
    print(mem.search("lions at dawn").mode, flush=True)
    os._exit(0)
forked.set()
starter.join()
print("child exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
print(mem.search("lions at dawn").mode, flush=True)  # the parent's lock was released: it searches on
mem.close()
"""


@pytest.mark.parametrize("parent", ["fresh", "searched"])
def test_a_child_forked_while_the_embedding_workers_lock_was_held_searches(tmp_path: Path, parent: str) -> None:
    # A parent thread starting the first embedding worker holds the workers' lock; a child forked then inherits it
    # held by a thread it does not have. The child got a new lock only when the parent's query worker existed, so
    # a child of a parent that had not searched yet (or had only the synonym worker) hung on its first search.
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    ws = _workspace(tmp_path, 6)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", SEARCH_IN_A_CHILD_FORKED_WHILE_A_WORKER_STARTED,
                           str(tmp_path / "state"), str(ws), parent], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    expected = (["hybrid"] if parent == "searched" else []) + ["hybrid", "child", "exit", "0", "hybrid"]
    assert proc.stdout.split() == expected, proc.stdout + proc.stderr
