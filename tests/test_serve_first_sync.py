"""`symi-memory serve` while an agent catches up with its files: requests answered from the index it has at once.

A real server process on loopback; the `stall` provider (tests/support/stalling_provider.py) holds the embedding of
a file naming ``hold-NAME`` until the test creates ``NAME`` in its hold folder, so the first sync runs for exactly as
long as the test needs.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_serve import _write_config, make_setup, running_server
from test_serve_lifecycle import STALL_ENV, _mcp

pytest.importorskip("uvicorn")
pytest.importorskip("mcp_types")


@pytest.fixture
def setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    s = make_setup(tmp_path, workspace)
    _write_config(s["state"], s["main"], s["other"], extra="[serve]\nfirstSyncWaitSeconds = 1\n")
    cfg = s["state"] / "symi.toml"
    cfg.write_text(cfg.read_text().replace('provider = "hash"', 'provider = "stall"'))
    return s


@pytest.fixture
def hold(tmp_path: Path) -> Path:
    """The folder the stall provider's ``hold-NAME`` markers wait on."""
    folder = tmp_path / "hold"
    folder.mkdir()
    return folder


@contextmanager
def _released(hold: Path) -> Iterator[None]:
    """Lets the held embedding go at the end (a failed assertion included: else the server's stop waits for it)."""
    try:
        yield
    finally:
        (hold / "slow").touch()


def _env(hold: Path) -> dict[str, str]:
    return {**STALL_ENV, "SYMI_TEST_HOLD_DIR": str(hold)}


def _post(port: int, path: str, body: Any, timeout: float = 60) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"})
    resp = conn.getresponse()
    out = json.loads(resp.read())
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, out


def _indexed_then_a_held_note(setup: dict[str, Path], hold: Path) -> None:
    """The agent indexed by the CLI, then a note written while no server watched: a server's first sync must embed
    it, which lasts until the test lets it go (``hold``)."""
    import os

    env = {**os.environ, "SYMI_STATE_DIR": str(setup["state"]), **_env(hold)}
    subprocess.run([sys.executable, "-m", "symi_memory.cli", "index"], env=env, check=True, capture_output=True,
                   timeout=120)
    (setup["main"] / "memory" / "slow.md").write_text("- A slow note hold-slow about the harbour.\n", encoding="utf-8")


def test_an_agent_with_an_index_answers_at_once_while_its_first_sync_runs(setup: dict[str, Path], hold: Path,
                                                                          ) -> None:
    """Before: every request for the agent waited for its first sync (minutes on a large workspace)."""
    _indexed_then_a_held_note(setup, hold)
    with running_server(setup["state"], env=_env(hold)) as srv, _released(hold):
        started = time.monotonic()
        status, _, out = _post(srv.port, "/api/agents/main/search", {"query": "Prefers tea", "fresh": True})
        took = time.monotonic() - started
        assert status == 200, out
        assert out["results"] and out["results"][0]["path"] == "MEMORY.md"
        assert any("catching up" in w for w in out.get("warnings", [])), out
        assert took < 6, took
        status, st = srv.request("GET", "/api/agents/main/status")
        assert status == 200 and st["firstSync"] is not None and st["firstSync"]["indexedBefore"] is True, st
        # explain wraps the search's answer (``response``): the warning is in that answer's warnings, where the
        # stages a search skipped are too (MemoryManager.explain); it was at the top level, beside ``skipped``.
        status, _, out = _post(srv.port, "/api/agents/main/explain", {"query": "Prefers tea"})
        assert status == 200 and out["response"]["results"][0]["path"] == "MEMORY.md", out
        assert any("catching up" in w for w in out["response"].get("warnings", [])), out
        assert "warnings" not in out, out

        async def search(session: Any) -> Any:
            return (await session.call_tool("memory_search", {"query": "Prefers tea"})).structured_content

        hit = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/mcp", search), 30))
        assert hit["results"][0]["path"] == "MEMORY.md" and any("catching up" in w for w in hit["warnings"]), hit
        status, st = srv.request("GET", "/api/agents/main/status")
        assert status == 200 and st["firstSync"] is not None, st  # it was still running all along
        (hold / "slow").touch()
        # Once the sync is done the new note is found and the warning is gone.
        deadline = time.monotonic() + 90
        while True:
            status, _, out = _post(srv.port, "/api/agents/main/search", {"query": "slow note about the harbour"})
            if any(r["path"] == "memory/slow.md" for r in out["results"]):
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.3)
        assert not any("catching up" in w for w in out.get("warnings", [])), out
        assert srv.request("GET", "/api/agents/main/status")[1]["firstSync"] is None
    assert "Traceback" not in srv.log.read_text()


def test_an_agent_with_no_index_waits_a_bounded_while_then_gets_503_with_retry_after(setup: dict[str, Path],
                                                                                     hold: Path) -> None:
    """Before: the request waited for the whole first build, however long it took."""
    (setup["other"] / "memory" / "slow.md").write_text("- Another slow note hold-slow.\n", encoding="utf-8")
    with running_server(setup["state"], env=_env(hold)) as srv, _released(hold):
        started = time.monotonic()
        status, headers, out = _post(srv.port, "/api/agents/other/search", {"query": "launch code"})
        took = time.monotonic() - started
        assert status == 503, out
        assert "no index yet" in out["error"] and "firstSyncWaitSeconds" in out["error"], out
        assert int(headers["retry-after"]) >= 1
        assert took < 5, took
        (hold / "slow").touch()
        deadline = time.monotonic() + 90
        while True:
            status, _, out = _post(srv.port, "/api/agents/other/search", {"query": "launch code"})
            if status == 200:
                break
            assert status == 503 and time.monotonic() < deadline, out
            time.sleep(0.5)
        assert out["results"] and out["results"][0]["path"] == "MEMORY.md"
    assert "Traceback" not in srv.log.read_text()


def test_waiters_for_an_agent_with_no_index_leave_its_status_and_other_agents_answering(
        setup: dict[str, Path], hold: Path) -> None:
    """Before: each request waiting for an agent's first build held one of that agent's 4 worker threads, so with 4
    waiters its status (the answer that says how far the build is) queued behind them and then waited for the build
    itself: it could never show ``firstSync`` for an agent with no index. Now waiters wait without a thread, the
    status answers at once with the build's progress, and other agents are never held up."""
    from concurrent.futures import ThreadPoolExecutor

    cfg = setup["state"] / "symi.toml"
    cfg.write_text(cfg.read_text().replace("firstSyncWaitSeconds = 1", "firstSyncWaitSeconds = 3"))
    (setup["other"] / "memory" / "slow.md").write_text("- Another slow note hold-slow.\n", encoding="utf-8")
    with running_server(setup["state"], env=_env(hold)) as srv, _released(hold), \
            ThreadPoolExecutor(8) as threads:
        assert srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})[0] == 200
        waiters = [threads.submit(_post, srv.port, "/api/agents/other/search", {"query": "launch code"})
                   for _ in range(6)]
        time.sleep(1)  # the waiters are in
        started = time.monotonic()
        status, st = srv.request("GET", "/api/agents/other/status")
        took = time.monotonic() - started
        assert status == 200, st
        assert st["firstSync"] is not None and st["firstSync"]["indexedBefore"] is False, st
        assert took < 2, took
        started = time.monotonic()
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"] and time.monotonic() - started < 2
        answers = [w.result() for w in waiters]
        assert all(a[0] == 503 and "retry-after" in a[1] for a in answers), answers
        (hold / "slow").touch()
    assert "Traceback" not in srv.log.read_text()


def test_an_append_while_the_first_sync_runs_answers_at_once(setup: dict[str, Path], hold: Path) -> None:
    """An agent answering from its index while its first sync runs: an append wrote its note at once but then waited
    for that whole sync (minutes on a large workspace) to index it, so the client's request hung meanwhile. Now it
    answers at once, and is indexed once that sync is done (with no watcher too)."""
    cfg = setup["state"] / "symi.toml"
    cfg.write_text(cfg.read_text() + "[agents.defaults.memorySearch.sync]\nwatch = false\n")

    _indexed_then_a_held_note(setup, hold)
    with running_server(setup["state"], env=_env(hold)) as srv, _released(hold):
        started = time.monotonic()
        status, _, out = _post(srv.port, "/api/agents/main/append", {"text": "The ferry leaves at nine."}, timeout=30)
        took = time.monotonic() - started
        assert status == 200 and out["appended"] is True, out
        assert took < 5, took
        assert srv.request("GET", "/api/agents/main/status")[1]["firstSync"] is not None  # still running
        (hold / "slow").touch()
        deadline = time.monotonic() + 60
        while True:  # indexed once the first sync is done
            status, _, out = _post(srv.port, "/api/agents/main/search", {"query": "ferry leaves at nine"})
            if any("ferry" in r["snippet"] for r in out["results"]):
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.3)
    assert "Traceback" not in srv.log.read_text()


def test_an_mcp_client_of_an_agent_with_no_index_lists_its_tools_at_once(setup: dict[str, Path], hold: Path) -> None:
    """``tools/list`` needs no index, yet it waited for the agent's first build (serve.firstSyncWaitSeconds, then an
    error): an MCP client connecting meanwhile saw no tools. Now it lists them at once; a tool call still waits for
    the build and then gets its error."""
    cfg = setup["state"] / "symi.toml"
    cfg.write_text(cfg.read_text().replace("firstSyncWaitSeconds = 1", "firstSyncWaitSeconds = 3"))
    (setup["other"] / "memory" / "slow.md").write_text("- Another slow note hold-slow.\n", encoding="utf-8")
    with running_server(setup["state"], env=_env(hold)) as srv, _released(hold):
        assert srv.request("GET", "/api/agents/other/status")[0] == 200  # opened: its first build runs

        async def tools(session: Any) -> Any:
            started = time.monotonic()
            listed = await session.list_tools()
            took = time.monotonic() - started
            called = await session.call_tool("memory_search", {"query": "launch code"})
            return listed, took, called

        listed, took, called = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/agents/other/mcp", tools), 30))
        assert {t.name for t in listed.tools} == {"memory_search", "memory_get", "memory_append"}, listed
        assert took < 1.5, took
        assert called.is_error and "no index yet" in called.structured_content["error"], called
    assert "Traceback" not in srv.log.read_text()


def test_a_failed_first_sync_is_said_and_tried_again_until_it_lands(tmp_path: Path, workspace: Path,
                                                                    cli: Any) -> None:
    """An agent whose first sync failed (here its index is read-only for the server: restored from a backup with
    the wrong mode, say): it was only logged. With no index the agent then answered every search with nothing and
    no warning, status said nothing, and nothing tried again until its files changed. Now status shows the failure,
    every search answer (HTTP, MCP) warns naming it, and the sync is tried again: once the index is writable, the
    agent heals without a restart."""
    import os

    from support.unprivileged import without_dac_override

    s = make_setup(tmp_path, workspace)
    _write_config(s["state"], s["main"], s["other"], extra="[serve]\nfirstSyncRetrySeconds = 0.5\n")
    # The agent's index exists and is empty (made while its workspace was empty), then made read-only.
    note = (s["other"] / "MEMORY.md").read_text(encoding="utf-8")
    (s["other"] / "MEMORY.md").unlink()
    env = {**os.environ, "SYMI_STATE_DIR": str(s["state"])}
    subprocess.run([sys.executable, "-m", "symi_memory.cli", "--agent", "other", "index"], env=env, check=True,
                   capture_output=True, timeout=120)
    (s["other"] / "MEMORY.md").write_text(note, encoding="utf-8")
    index = [p for p in s["state"].rglob("other.sqlite*")]
    assert index, list(s["state"].rglob("*"))
    for p in index:
        p.chmod(0o444)
    # Root writes any file: the server runs without that privilege.
    with running_server(s["state"], prefix=without_dac_override()) as srv:
        try:
            status, _, out = _post(srv.port, "/api/agents/other/search", {"query": "launch code"})
            assert status == 200 and out["results"] == [], out
            warned = [w for w in out.get("warnings", []) if "first sync failed" in w]
            assert warned and "read-only" in warned[0] and "tried again" in warned[0], out
            status, st = srv.request("GET", "/api/agents/other/status")
            first = st["firstSync"]
            assert status == 200 and first is not None and first["state"] in ("failed", "retrying"), st
            assert "read-only" in first["error"] and first["failures"] >= 1 and first["indexedBefore"] is False, st
            assert first["retryInSeconds"] >= 0, st
            code, text, err = cli("--agent", "other", "status")  # answered by the server
            assert code == 0 and "firstSync" in text and "failed (" in text and "read-only" in text, text + err
            status, _, out = _post(srv.port, "/api/agents/other/explain", {"query": "launch code"})
            assert any("first sync failed" in w for w in out["response"].get("warnings", [])), out

            async def search(session: Any) -> Any:
                return (await session.call_tool("memory_search", {"query": "launch code"})).structured_content

            hit = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/agents/other/mcp", search), 30))
            assert hit["results"] == [] and any("first sync failed" in w for w in hit["warnings"]), hit
        finally:  # its -shm too, which SQLite made with the index's mode
            for p in s["state"].rglob("other.sqlite*"):
                p.chmod(0o644)
        # Writable again: a later try lands, without a restart (status asks for no sync: the retry does it).
        deadline = time.monotonic() + 30
        while (first := srv.request("GET", "/api/agents/other/status")[1]["firstSync"]) is not None:
            assert time.monotonic() < deadline, first
            time.sleep(0.2)
        status, _, out = _post(srv.port, "/api/agents/other/search", {"query": "launch code"})
        assert out["results"][0]["path"] == "MEMORY.md" and not out.get("warnings"), out
    assert "Traceback" not in srv.log.read_text()


def test_an_agent_whose_first_sync_keeps_failing_still_closes_when_idle() -> None:
    """An agent opened for a request whose first sync failed (its index read-only for the server) was never closed
    for idleness (``serve.idleMinutes``): its manager, watcher and retry thread stayed for the server's life, a
    try every 5 minutes, for an agent nobody asked for again. Now idleness closes it and ends its retries; its
    next request opens it afresh and tries again."""
    import shutil
    import tempfile
    import threading

    from support.unprivileged import Unprivileged

    from symi_memory import load_config
    from symi_memory.serve.pool import AgentPool

    root = Path(tempfile.mkdtemp(prefix="symi-idle-failed-"))  # pytest's temp root is private to root
    try:
        ws = root / "ws"
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text("- the otter lives by the weir\n", encoding="utf-8")
        cfg = load_config(None, state_dir=root / "state",
                          overrides={"agents": {"defaults": {"memorySearch": {"provider": "hash"}}}})
        now = [1000.0]

        def pool_of() -> AgentPool:
            return AgentPool(cfg, workspaces={"main": str(ws)}, idle_seconds=60, clock=lambda: now[0],
                             first_sync_retry=30)

        pool = pool_of()  # as root: the index is made and holds the note
        pool.acquire("main")
        pool.release("main")
        deadline = time.monotonic() + 30
        while pool.catching_up("main") is not None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        pool.close()
        (ws / "memory" / "b.md").write_text("- the heron nests by the reservoir\n", encoding="utf-8")
        for p in [root, *root.rglob("*")]:  # readable by all, writable by root only: read-only for nobody
            p.chmod(p.stat().st_mode | 0o555)

        def retrying() -> list[threading.Thread]:
            return [t for t in threading.enumerate() if t.name == "symi-first-sync-main"]

        with Unprivileged():
            pool = pool_of()
            try:
                pool.acquire("main")
                pool.release("main")
                deadline = time.monotonic() + 30
                while (catch := pool.catching_up("main")) is None or catch.retry_at is None:
                    assert catch is not None and time.monotonic() < deadline, catch
                    time.sleep(0.05)
                assert "read-only" in (catch.error or ""), catch.view()
                now[0] += 120  # no request for two minutes, past idle_seconds
                assert pool.reap_idle() == ["main"]
                assert pool.open_agents() == [] and pool.catching_up("main") is None
                deadline = time.monotonic() + 10
                while retrying():
                    assert time.monotonic() < deadline, "the failed first sync's thread outlived its agent"
                    time.sleep(0.05)
                pool.acquire("main")  # its next request opens it afresh: the first sync is tried again
                pool.release("main")
                deadline = time.monotonic() + 30
                while (catch := pool.catching_up("main")) is None or catch.retry_at is None:
                    assert catch is not None and time.monotonic() < deadline, catch
                    time.sleep(0.05)
                assert catch.failures == 1 and retrying()
            finally:
                pool.close()
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(p.stat().st_mode | 0o700)
        shutil.rmtree(root, ignore_errors=True)
