"""A reranker or third-party post-processor that hangs: the search answers without it, in bounded time, saying so.

``query.stageDeadlineMs`` bounds each reranker call and each third-party post-processor call. The reranker here is
the builtin ``cohere`` one against a real loopback server that accepts the connection and never answers; the
post-processor is a third-party plugin registered through the plugin manager whose ``process`` sleeps. A call
that missed the deadline is not started again while it still runs (no thread piles up): the next search skips
the stage at once. ``status`` names the reranker and the post-processors running and how their last call went;
``symi-memory plugins`` marks the plugin serving each slot, as ``status`` names it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from support.sqlite_memory import open_mem, write

from symi_memory import hookimpl, tools
from symi_memory.specs import PostProcessContext, PostProcessorSpec
from symi_memory.types import Candidate

NOTES = {
    "MEMORY.md": "# Memory\n\n- The router admin page is at 10.0.0.1.\n",
    "memory/net.md": "# Network\n\n- The router admin password rotates monthly.\n",
}
ROOT = Path(__file__).resolve().parents[1]
DEADLINE_MS = 800
#: What a search that skips a hung stage at once may take on a loaded host: well under the deadline.
AT_ONCE_S = 0.5


class SilentServer:
    """A loopback TCP server that accepts connections, reads what is sent and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self._stop = True
        for conn in self.conns:
            conn.close()  # the hung client call ends (connection closed), its thread with it
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    srv = SilentServer()
    try:
        yield srv
    finally:
        srv.close()


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for rel, text in NOTES.items():
        write(ws, rel, text)
    return ws


def _hits(resp: Any) -> list[tuple[str, float]]:
    return [(h.path, h.score) for h in resp.results]


def _plain_hits(tmp_path: Path, ws: Path) -> list[tuple[str, float]]:
    """What the test query finds in ``ws`` with no reranker or post-processor: a skipped stage answers this."""
    with open_mem(tmp_path, ws) as plain:
        plain.sync()
        return _hits(plain.search("router admin"))


def test_a_remote_reranker_that_never_answers_costs_one_deadline_then_is_skipped_at_once(
        tmp_path: Path, silent: SilentServer) -> None:
    ws = _ws(tmp_path)
    expected = _plain_hits(tmp_path, ws)
    rerank = {"provider": "cohere", "apiKey": "test-key-123", "baseUrl": silent.url, "timeoutMs": 30_000}
    with open_mem(tmp_path, ws, {"query": {"rerank": rerank, "stageDeadlineMs": DEADLINE_MS}}) as mem:
        t0 = time.monotonic()
        first = mem.search("router admin")
        took = time.monotonic() - t0
        # The fused order, within the deadline (plus the search itself), not the client's 30 s timeout.
        assert _hits(first) == expected and len(expected) == 2
        assert took < DEADLINE_MS / 1000 + 3.0, took  # + building the reranker (its HTTP client) on a busy host
        (warning,) = first.warnings
        assert "'cohere'" in warning and "'rerankers'" in warning and f"{DEADLINE_MS / 1000:g} s" in warning
        assert first.to_dict()["warnings"] == [warning]
        # The call is still out: the next search does not start another one, nor wait.
        t0 = time.monotonic()
        second = mem.search("router password")
        assert time.monotonic() - t0 < AT_ONCE_S, "waited for a reranker already known to hang"
        assert "has not returned" in second.warnings[0] and "'cohere'" in second.warnings[0]
        time.sleep(0.1)
        assert len(silent.conns) == 1, "a second request was started while the first still hangs"
        st = mem.status()
        assert st["reranker"]["name"] == "cohere" and st["reranker"]["plugin"] == "rerankers"
        assert st["reranker"]["lastCall"] == "skipped" and st["reranker"]["hung"] is True
        assert st["slots"]["reranker"] == {"name": "cohere", "plugin": "rerankers"}
        explained = mem.explain("router admin")
        assert explained["skipped"] and "'cohere'" in explained["skipped"][0]
        assert explained["response"]["warnings"] == explained["skipped"]


class Sleepy:
    """A post-processor that sleeps until ``release`` is set (a plugin stuck in a loop), counting its calls."""

    def __init__(self, release: threading.Event, calls: list[float]) -> None:
        self.release, self.calls = release, calls

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        self.calls.append(time.monotonic())
        self.release.wait(20)
        return list(candidates)


def _sleepy_plugin(release: threading.Event, calls: list[float]) -> Any:
    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="sleepy", factory=lambda hybrid: Sleepy(release, calls), order=200))

    return Plugin()


def test_a_third_party_post_processor_that_sleeps_is_skipped_past_the_deadline_and_not_piled_up(
        tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    expected = _plain_hits(tmp_path, ws)
    release = threading.Event()
    calls: list[float] = []
    try:
        with open_mem(tmp_path, ws, {"query": {"stageDeadlineMs": DEADLINE_MS}},
                      plugins=[("sleepy-plugin", _sleepy_plugin(release, calls))]) as mem:
            t0 = time.monotonic()
            first = mem.search("router admin")
            assert time.monotonic() - t0 < DEADLINE_MS / 1000 + 3.0
            assert _hits(first) == expected
            (warning,) = first.warnings
            assert "'sleepy'" in warning and "'sleepy-plugin'" in warning and "skipped" in warning
            t0 = time.monotonic()
            second = mem.search("router admin")
            assert time.monotonic() - t0 < AT_ONCE_S
            assert _hits(second) == expected and "has not returned" in second.warnings[0]
            # The memory_search tool output (MCP, serve) says the same.
            out = tools.memory_search(mem, {"query": "router admin"})
            assert [r["path"] for r in out["results"]] == [p for p, _ in expected]
            assert len(out["warnings"]) == 1 and "'sleepy-plugin'" in out["warnings"][0]
            assert len(calls) == 1, "a second call was started while the first still sleeps"
            sleepy = next(p for p in mem.status()["postprocessors"] if p["name"] == "sleepy")
            assert sleepy == {"name": "sleepy", "plugin": "sleepy-plugin", "order": 200, "running": True,
                              "lastCall": "skipped", "lastReason": sleepy["lastReason"], "hung": True}
            # Once it returns, the next search calls it again, on the same thread.
            release.set()
            deadline = time.monotonic() + 5
            while mem.status()["postprocessors"][0]["hung"] and time.monotonic() < deadline:
                time.sleep(0.01)
            third = mem.search("router admin")
            assert third.warnings == () and "warnings" not in third.to_dict() and len(calls) == 2
            sleepy = next(p for p in mem.status()["postprocessors"] if p["name"] == "sleepy")
            assert sleepy["lastCall"] == "ok" and sleepy["hung"] is False
            threads = [t for t in threading.enumerate() if t.name == "symi-stage-sleepy"]
            assert len(threads) == 1
        threads[0].join(5)  # closing memory ends the stage's idle thread
        assert not threads[0].is_alive()
    finally:
        release.set()


def test_status_names_the_reranker_and_the_post_processors_running(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    release = threading.Event()
    release.set()
    rerank = {"provider": "cohere", "apiKey": "test-key-123", "baseUrl": "http://127.0.0.1:9", "timeoutMs": 2000}
    with open_mem(tmp_path, ws, {"query": {"rerank": rerank, "hybrid": {"mmr": {"enabled": True}}}},
                  plugins=[("sleepy-plugin", _sleepy_plugin(release, []))]) as mem:
        mem.sync()
        # Before any search: named from config, nothing built for it (no call yet; the third-party processor
        # declares no ``running`` check, so whether its factory returns one is not known yet).
        before = mem.status()
        assert mem._pipeline is None
        mem.search("router admin")  # port 9 refuses: the reranker's call fails, the search answers
        after = mem.status()
    assert before["reranker"] == {"name": "cohere", "plugin": "rerankers", "lastCall": None, "lastReason": None,
                                  "hung": False, "active": None, "reason": None}
    assert [(p["name"], p["plugin"], p["running"]) for p in before["postprocessors"]] == [
        ("sleepy", "sleepy-plugin", None), ("supersession", "postprocessors", True),
        ("month-cue", "postprocessors", True), ("mmr", "postprocessors", True)]
    assert after["reranker"]["active"] is True and after["reranker"]["lastCall"] == "failed"
    assert after["reranker"]["lastReason"].startswith("failed (")
    assert [(p["name"], p["plugin"], p["running"], p["lastCall"]) for p in after["postprocessors"]] == [
        ("sleepy", "sleepy-plugin", True, "ok"), ("supersession", "postprocessors", True, None),
        ("month-cue", "postprocessors", True, None), ("mmr", "postprocessors", True, None)]
    assert after["slots"] == before["slots"] == {
        "memory": {"name": "builtin-sqlite", "plugin": "builtin-sqlite"},
        "embeddingProvider": {"name": "hash", "plugin": "testing"},
        "reranker": {"name": "cohere", "plugin": "rerankers"}}


def test_status_says_why_a_configured_reranker_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    with open_mem(tmp_path, _ws(tmp_path), {"query": {"rerank": {"provider": "cohere"}}}) as mem:
        mem.sync()
        mem.search("router admin")
        rr = mem.status()["reranker"]
    assert rr["name"] == "cohere" and rr["active"] is False and "COHERE_API_KEY" in rr["reason"]


def test_the_plugins_listing_marks_each_slots_plugin_as_status_names_it(cli, tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
        "provider": "hash", "query": {"rerank": {"provider": "jina", "apiKey": "test-key-123",
                                                 "baseUrl": "http://127.0.0.1:9"}}}}}}), encoding="utf-8")
    code, listed, err = cli("--config", str(cfg), "plugins", "--json", json_out=True)
    assert code == 0, err
    code, st, err = cli("--config", str(cfg), "status", "--json", json_out=True)
    assert code == 0, err
    active = {p["id"]: p["active"] for p in listed if p["active"]}
    slots = {slot: held for slot, held in st["slots"].items() if held}
    assert slots == {"memory": {"name": "builtin-sqlite", "plugin": "builtin-sqlite"},
                     "embeddingProvider": {"name": "hash", "plugin": "testing"},
                     "reranker": {"name": "jina", "plugin": "rerankers"}}
    for slot, held in slots.items():
        assert active[held["plugin"]][slot] == held["name"]
    assert active["postprocessors"]["postprocessors"] == [p["name"] for p in st["postprocessors"]]
    assert "remote-embeddings" not in active and "qmd-sidecar" not in active
    code, text, err = cli("--config", str(cfg), "plugins")
    assert code == 0, err
    line = next(ln for ln in text.splitlines() if ln.startswith("rerankers "))
    assert "[active: reranker jina]" in line
    line = next(ln for ln in text.splitlines() if ln.startswith("builtin-sqlite "))
    assert "[active: memory backend builtin-sqlite]" in line
    assert not any("active" in ln for ln in text.splitlines() if ln.startswith("qmd-sidecar "))
    code, text, err = cli("--config", str(cfg), "status")
    assert code == 0, err
    assert any(ln.split() [:2] == ["reranker", "jina"] for ln in text.splitlines()), text


class Gated:
    """A post-processor whose n-th call waits for ``gates[n]`` (returns at once past the gates), counting calls
    started and returned."""

    def __init__(self, gates: list[threading.Event]) -> None:
        self.gates, self.started, self.returned = gates, 0, 0

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        n = self.started
        self.started += 1
        if n < len(self.gates):
            self.gates[n].wait(20)
        self.returned += 1
        return list(candidates)


def test_two_concurrent_searches_that_both_time_out_keep_the_stage_skipped_until_both_calls_returned(
        tmp_path: Path) -> None:
    # serve searches on several threads: two searches may each start a call that misses the deadline. The one
    # that returns first must not make the stage callable again while the other still runs (threads pile up).
    ws = _ws(tmp_path)
    gates = [threading.Event(), threading.Event()]
    proc = Gated(gates)

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="gated", factory=lambda hybrid: proc, order=200))

    try:
        with open_mem(tmp_path, ws, {"query": {"stageDeadlineMs": 1500}}, plugins=[("gated-plugin", Plugin())]) as mem:
            mem.sync()
            answers: list[Any] = []
            first = threading.Thread(target=lambda: answers.append(mem.search("router admin")))
            first.start()
            deadline = time.monotonic() + 5
            while proc.started < 1 and time.monotonic() < deadline:
                time.sleep(0.005)
            second = threading.Thread(target=lambda: answers.append(mem.search("router password")))
            second.start()
            first.join(10)
            second.join(10)
            assert proc.started == 2 and len(answers) == 2
            assert all("did not answer" in a.warnings[0] for a in answers)
            gates[1].set()  # the second call returns; the first still hangs
            while proc.returned < 1 and time.monotonic() < deadline + 5:
                time.sleep(0.005)
            time.sleep(0.05)
            third = mem.search("router admin")
            assert "has not returned" in third.warnings[0], third.warnings
            assert proc.started == 2, "a call was started while an earlier one that missed the deadline still runs"
            assert next(p for p in mem.status()["postprocessors"] if p["name"] == "gated")["hung"] is True
            gates[0].set()
            while proc.returned < 2 and time.monotonic() < deadline + 10:
                time.sleep(0.005)
            time.sleep(0.05)
            assert mem.search("router admin").warnings == () and proc.started == 3
    finally:
        for gate in gates:
            gate.set()


def test_a_third_party_post_processor_gets_the_same_context_answers_on_its_worker_thread(tmp_path: Path) -> None:
    # ctx.plain answers from what the backend read for this search, kept per searching thread: a processor run on
    # the stage's worker thread (the default deadline) must get the answers it gets on the searching thread.
    ws = _ws(tmp_path)
    seen: list[tuple[str, dict[str, bool]]] = []

    class Peek:
        def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
            assert ctx.plain is not None
            seen.append((threading.current_thread().name, dict(ctx.plain([c.id for c in candidates]))))
            return list(candidates)

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="peek", factory=lambda hybrid: Peek(), order=200))

    for deadline in (0, 5000):
        with open_mem(tmp_path, ws, {"query": {"stageDeadlineMs": deadline}},
                      plugins=[("peek-plugin", Plugin())]) as mem:
            mem.sync()
            mem.search("router admin")
    (inline, inline_plain), (worker, worker_plain) = seen
    assert worker == "symi-stage-peek" and inline != worker
    assert len(inline_plain) == 2 and worker_plain == inline_plain


def test_the_plugins_listing_creates_no_index_and_starts_no_backend(cli, tmp_path: Path) -> None:
    # A listing of what is installed and configured: on a fresh set-up it leaves nothing behind (no index file, no
    # state folder), as before it marked the active plugins, and still marks them.
    ws = _ws(tmp_path)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
        "provider": "hash", "query": {"rerank": {"provider": "jina", "apiKey": "test-key-123"}}}}}}),
        encoding="utf-8")
    code, text, err = cli("--config", str(cfg), "plugins")
    assert code == 0, err
    assert "[active: reranker jina]" in next(ln for ln in text.splitlines() if ln.startswith("rerankers "))
    assert "[active: memory backend builtin-sqlite]" in next(
        ln for ln in text.splitlines() if ln.startswith("builtin-sqlite "))
    assert "note:" not in text
    assert not (tmp_path / "state").exists(), sorted(str(p) for p in (tmp_path / "state").rglob("*"))


def test_a_post_processor_that_answers_with_a_generator_is_bounded_by_the_deadline_too(tmp_path: Path) -> None:
    # ``process`` written as a generator returns at once; its work runs as its answer is read. That reading is part
    # of the call: a generator stuck in a loop must cost one deadline, not hold the search.
    ws = _ws(tmp_path)
    expected = _plain_hits(tmp_path, ws)
    release = threading.Event()

    class Lazy:
        def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> Any:
            release.wait(20)
            yield from candidates

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="lazy", factory=lambda hybrid: Lazy(), order=200))

    try:
        with open_mem(tmp_path, ws, {"query": {"stageDeadlineMs": DEADLINE_MS}},
                      plugins=[("lazy-plugin", Plugin())]) as mem:
            t0 = time.monotonic()
            first = mem.search("router admin")
            assert time.monotonic() - t0 < DEADLINE_MS / 1000 + 3.0
            assert _hits(first) == expected
            assert "'lazy'" in first.warnings[0] and "did not answer" in first.warnings[0]
            release.set()
            deadline = time.monotonic() + 5
            while mem.status()["postprocessors"][0]["hung"] and time.monotonic() < deadline:
                time.sleep(0.01)
            second = mem.search("router admin")  # a generator that answers is used as before
            assert second.warnings == () and _hits(second) == expected
    finally:
        release.set()


def test_a_reranker_that_answers_with_a_generator_is_bounded_by_the_deadline_too(tmp_path: Path) -> None:
    # ``rerank`` written as a generator returns at once; its work runs as its answer is read. That reading is part
    # of the call: one that hangs after its first pair must cost one deadline, not hold the search.
    from symi_memory.specs import RerankerSpec

    ws = _ws(tmp_path)
    expected = _plain_hits(tmp_path, ws)
    release = threading.Event()

    class Lazy:
        def rerank(self, query: str, documents: Sequence[str], top_n: int) -> Any:
            yield 1, 0.9
            release.wait(20)
            yield 0, 0.8

    class Plugin:
        @hookimpl
        def symi_memory_register_rerankers(self, register: Any) -> None:
            register(RerankerSpec(name="lazy-rerank", factory=lambda ctx: Lazy()))

    try:
        with open_mem(tmp_path, ws, {"query": {"rerank": {"provider": "lazy-rerank"}, "stageDeadlineMs": DEADLINE_MS}},
                      plugins=[("lazy-plugin", Plugin())]) as mem:
            t0 = time.monotonic()
            first = mem.search("router admin")
            assert time.monotonic() - t0 < DEADLINE_MS / 1000 + 3.0, "the generator was read outside the deadline"
            assert _hits(first) == expected
            assert "'lazy-rerank'" in first.warnings[0] and "did not answer" in first.warnings[0]
            release.set()
            deadline = time.monotonic() + 5
            while mem.status()["reranker"]["hung"] and time.monotonic() < deadline:
                time.sleep(0.01)
            second = mem.search("router admin")  # a generator that answers is used as before
            assert second.warnings == ()
            assert [h.path for h in second.results] == [expected[1][0], expected[0][0]]
            assert [h.score for h in second.results] == [0.9, 0.8]
    finally:
        release.set()


def test_history_names_the_stages_it_skipped_as_search_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # history runs the same stages as search: a post-processor past the deadline is skipped there too, and the
    # answer must say so (its versions are then those of the fused order), not leave the caller to guess.
    ws = _ws(tmp_path)
    release = threading.Event()
    calls: list[float] = []
    try:
        with open_mem(tmp_path, ws, {"query": {"stageDeadlineMs": DEADLINE_MS}},
                      plugins=[("sleepy-plugin", _sleepy_plugin(release, calls))]) as mem:
            mem.sync()
            found = mem.history("router admin")
            assert found and found[0]["path"] in NOTES
            (warning,) = found.warnings
            assert "'sleepy'" in warning and "'sleepy-plugin'" in warning and "did not answer" in warning
            assert found.to_dict() == {"versions": list(found), "warnings": [warning]}
            from symi_memory.cli import render

            render.print_history(found, as_json=True, warnings=found.warnings)  # `history --json`, the server's
            assert json.loads(capsys.readouterr().out) == found.to_dict()
            render.print_history(found, as_json=False, warnings=found.warnings)
            assert f"warning: {warning}" in capsys.readouterr().err
            again = mem.history("router admin")  # the call is still out: skipped at once, said again
            assert "has not returned" in again.warnings[0]
            release.set()
            deadline = time.monotonic() + 5
            while mem.status()["postprocessors"][0]["hung"] and time.monotonic() < deadline:
                time.sleep(0.01)
            clean = mem.history("router admin")
            assert clean.warnings == () and clean.to_dict() == {"versions": list(clean)} and clean == again
    finally:
        release.set()


def test_a_stage_worker_keeps_nothing_of_the_last_search_while_it_waits(tmp_path: Path) -> None:
    # The stage's worker thread lives on between searches: what the last call was handed (candidates, the context
    # with the backend's readers) and what it answered must not stay reachable from it until the next search.
    import gc
    import weakref

    ws = _ws(tmp_path)
    seen: list[Any] = []

    class Peek:
        def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
            seen.append(weakref.ref(ctx))
            return [attrs.evolve(c) for c in candidates]

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="peek", factory=lambda hybrid: Peek(), order=200))

    with open_mem(tmp_path, ws, plugins=[("peek-plugin", Plugin())]) as mem:
        mem.sync()
        assert mem.search("router admin").results
        gc.collect()
        assert len(seen) == 1 and seen[0]() is None, "the idle worker still holds the last search's context"
        assert mem.pipeline is not None and mem.pipeline.stage_states["peek"].idle  # it did run on the worker


@pytest.mark.parametrize("hand_over", ["pipes", "raw locks"])
def test_a_stage_call_after_one_that_timed_out_and_returned_waits_for_its_own_answer(
        hand_over: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker wakes its caller through a pipe (raw locks where select.poll is missing, as on Windows): the wake
    # of a call that timed out and returned later is still there when the next call is handed over, and must not
    # pass for that call's answer.
    from symi_memory import pipeline

    if hand_over == "raw locks":
        monkeypatch.setattr(pipeline, "_POLL", None)
    stage = pipeline.StageState(kind="postprocessor", name="s", plugin="p")
    release = threading.Event()
    try:
        assert stage.call(lambda: "first", 2.0) == ("ok", "first")
        assert stage.call(lambda: release.wait(10) and "late", 0.2) == ("timedOut", None)
        assert stage.call(lambda: "never", 2.0) == ("skipped", None)
        release.set()
        deadline = time.monotonic() + 5
        while stage.to_dict()["hung"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not stage.to_dict()["hung"]
        for k in range(3):
            assert stage.call(lambda k=k: time.sleep(0.05) or f"answer {k}", 2.0) == ("ok", f"answer {k}")
        outcome, exc = stage.call(lambda: 1 / 0, 2.0)
        assert outcome == "failed" and isinstance(exc, ZeroDivisionError)
        assert len(stage.idle) == 1, "the worker was not reused"
    finally:
        release.set()
        stage.stop()


@pytest.mark.parametrize("hand_over", ["pipes", "raw locks"])
def test_concurrent_calls_of_one_stage_each_get_their_own_answer(hand_over: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Searches in several threads (the server's, an agent's) call the same stage at once. A worker back in the idle
    # list while the search it answered still waited on its pipe was handed to the next search: the two polled
    # one pipe (poll() raised "concurrent poll() invocation": the stage was skipped as "failed", blamed on the
    # plugin) or one drained the byte that was to wake the other.
    from symi_memory import pipeline

    if hand_over == "raw locks":
        monkeypatch.setattr(pipeline, "_POLL", None)
    stage = pipeline.StageState(kind="reranker", name="s", plugin="p")
    wrong: list[Any] = []

    def search(t: int) -> None:
        for k in range(400):
            try:
                got: Any = stage.call(lambda k=k: (t, k), 5.0)
            except Exception as exc:  # noqa: BLE001 - what the search in that thread would have met
                got = exc
            if got != ("ok", (t, k)):
                wrong.append((t, k, got))

    threads = [threading.Thread(target=search, args=(t,)) for t in range(4)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert not wrong, f"{len(wrong)} calls answered wrongly, e.g. {wrong[:2]}"
        assert 1 <= len(stage.idle) <= pipeline._StageThread.IDLE_KEPT
    finally:
        stage.stop()



@pytest.mark.skipif(not hasattr(os, "pipe") or sys.platform == "win32", reason="pipes and RLIMIT_NOFILE")
def test_a_worker_that_cannot_get_its_pipes_leaves_no_descriptor_open() -> None:
    # Descriptors run out (a busy server): a worker's second pipe cannot be made. The search goes on without the
    # stage, and the first pipe must not stay open for ever: each search would leak two more until none is left.
    script = textwrap.dedent("""
        import os, resource
        from symi_memory import pipeline

        def count():
            return len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))

        stage = pipeline.StageState(kind="reranker", name="s", plugin="p")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (count() + 64, hard))
        fill = []
        try:
            while True:
                fill.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        for fd in fill[-3:]:  # room for one pipe and a half
            os.close(fd)
        del fill[-3:]
        before = count()
        for _ in range(5):
            try:
                stage.call(lambda: "x", 2.0)
            except OSError:
                pass
            else:
                raise SystemExit("a worker got its pipes")
        leaked = count() - before
        for fd in fill:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert stage.call(lambda: "x", 2.0) == ("ok", "x")
        print("leaked", leaked)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "core"), str(ROOT / "plugins")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["leaked", "0"]


def test_historys_answer_pickles_at_every_protocol_as_the_list_it_was(tmp_path: Path) -> None:
    # history answered a plain list, which pickles at any protocol (a cache, shelve, a process pool); the History
    # that replaced it must too, warnings and all (protocols 0 and 1 refused a list subclass with __slots__).
    import pickle

    ws = _ws(tmp_path)
    release = threading.Event()
    try:
        with open_mem(tmp_path, ws, {"query": {"stageDeadlineMs": DEADLINE_MS}},
                      plugins=[("sleepy-plugin", _sleepy_plugin(release, []))]) as mem:
            mem.sync()
            found = mem.history("router admin")
            assert found and found.warnings
            for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
                back = pickle.loads(pickle.dumps(found, protocol))
                assert back == found and back.warnings == found.warnings, protocol
                assert back.to_dict() == found.to_dict()
    finally:
        release.set()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="a timer signal interrupts the wait")
@pytest.mark.parametrize("hand_over", ["pipes", "raw locks"])
def test_a_search_interrupted_while_it_waits_for_a_stage_leaves_the_worker_to_the_next(
        hand_over: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C (or any signal handler that raises) while a search waits for its reranker: the call goes on on the
    # worker, and the worker must come back to idle once it returns, not wait for ever for a search that left.
    from symi_memory import pipeline

    if hand_over == "raw locks":
        monkeypatch.setattr(pipeline, "_POLL", None)

    class Interrupted(Exception):
        pass

    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted

    stage = pipeline.StageState(kind="reranker", name="s", plugin="p")
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        assert stage.call(lambda: "first", 2.0) == ("ok", "first")
        (worker,) = stage.idle
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Interrupted):
            stage.call(lambda: time.sleep(0.3) or "interrupted", 5.0)
        deadline = time.monotonic() + 5
        while not stage.idle and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stage.idle == [worker], "the worker of the interrupted call never came back"
        assert stage.call(lambda: "next", 2.0) == ("ok", "next")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        stage.stop()


def test_a_call_that_returns_as_its_search_gives_up_leaves_its_worker_idle() -> None:
    # The search's deadline passes just as the call returns: the search decides "timed out" under the stage's lock
    # while the worker, back from the call, waits for that lock. The worker must then see that nobody waits for it
    # and go back to idle itself; it read that before taking the lock, thought its search would put it back, and
    # waited for ever (a thread and four descriptors lost per such call, the next call starting another).
    from symi_memory import pipeline

    stage = pipeline.StageState(kind="reranker", name="s", plugin="p")
    started, proceed = threading.Event(), threading.Event()
    got: list[Any] = []
    try:
        assert stage.call(lambda: "first", 2.0) == ("ok", "first")
        (worker,) = stage.idle

        def late() -> str:
            started.set()
            proceed.wait(5)
            return "late"

        search = threading.Thread(target=lambda: got.append(stage.call(late, 0.2)))
        search.start()
        assert started.wait(5)
        with stage.lock:
            time.sleep(0.5)  # the search's deadline passes: it waits for the lock to say so
            proceed.set()
            time.sleep(0.2)  # the call returns: the worker waits for the lock too, after the search
        search.join(5)
        assert got and got[0] in (("timedOut", None), ("ok", "late"))
        deadline = time.monotonic() + 5
        while not stage.idle and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stage.idle == [worker], "the worker never came back to idle"
        assert stage.call(lambda: "next", 2.0) == ("ok", "next")
    finally:
        proceed.set()
        stage.stop()
