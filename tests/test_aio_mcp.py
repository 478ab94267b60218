from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from symi_memory import load_config, open_memory
from symi_memory.aio import AsyncMemoryManager

KEYWORD_ONLY = {"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
OTHER_NOTES = [
    "Standup notes: CI pipeline flaky on arm64.",
    "Met Bob about the billing migration.",
    "Release 2.4 shipped; rollback plan ready.",
    "Kubernetes upgrade scheduled for March.",
]


@pytest.fixture
def notes(workspace: Path) -> Path:
    """The shared workspace plus unrelated notes, so keyword scores mean something."""
    for i, text in enumerate(OTHER_NOTES):
        (workspace / "memory" / f"2026-01-0{i + 2}.md").write_text(text + "\n", encoding="utf-8")
    return workspace


def _config(state: Path):
    state.mkdir(parents=True, exist_ok=True)
    (state / "symi.json").write_text(json.dumps(KEYWORD_ONLY))
    return load_config(None, state_dir=state)


def test_async_facade_round_trip(tmp_path: Path, notes: Path) -> None:
    workspace = notes

    async def scenario() -> None:
        mem = open_memory(_config(tmp_path / "state"), workspace=workspace, start=False)
        async with AsyncMemoryManager(mem) as amm:
            report = await amm.sync(force=True)
            assert report.files_indexed == 6  # MEMORY.md and five daily logs
            first, second = await asyncio.gather(amm.search("tea"), amm.search("Utrecht"))
            assert first.results and first.results[0].path == "MEMORY.md"
            assert "Utrecht" in second.results[0].snippet
            read = await amm.read_file("memory/2026-01-01.md", from_line=2, lines=1)
            assert read.text.strip() == "second line"
            assert (await amm.status())["workspaceDir"] == str(workspace)
            appended = await amm.memory_append(
                {"text": "Deploy window is Thursday 14:00.", "target": "long-term"}
            )
            assert appended["path"] == "MEMORY.md"
            await amm.sync()
            found = await amm.memory_search({"query": "deploy window"}, session_key="discord:group:1")
            assert found["results"] and "Thursday" in found["results"][0]["snippet"]
            assert "Source:" not in found["results"][0]["snippet"]  # auto: no citations in groups
            bad = await amm.memory_get({"path": "../etc/passwd"})
            assert bad["disabled"] is True and bad["text"] == ""
        with pytest.raises(Exception, match="closed"):
            mem.search("tea")

    asyncio.run(scenario())


def test_a_cancelled_async_sync_stops_its_work_and_the_next_sync_finishes_it(tmp_path: Path) -> None:
    """``asyncio.timeout``/``wait_for`` around ``await amm.sync()``: the sync in the worker thread must stop too
    (not run on for seconds, still calling the progress callback its caller gave up on), leaving the index
    consistent for the next call."""
    from support.sqlite_memory import open_mem, write

    ws = tmp_path / "ws"
    for i in range(3000):
        write(ws, f"memory/n{i:04d}.md", f"# Note {i}\nalpha beta gamma kestrel n{i}x\n" * 3)

    async def scenario() -> None:
        mem = open_mem(tmp_path, ws)
        amm = AsyncMemoryManager(mem)
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        cancelled_at: list[int] = []
        task: asyncio.Task | None = None

        def progress(p) -> None:  # type: ignore[no-untyped-def]
            seen.append(p.phase)
            if p.phase == "index" and not cancelled_at:
                cancelled_at.append(len(seen))
                loop.call_soon_threadsafe(task.cancel)  # type: ignore[union-attr]

        task = asyncio.create_task(amm.sync(progress=progress))
        with pytest.raises(asyncio.CancelledError):
            await task
        time.sleep(0.5)  # the worker thread's sync reaches its next step meanwhile (the loop waits with it)
        assert cancelled_at and len(seen) <= cancelled_at[0] + 1, seen  # at most the report already under way
        report = await amm.sync()  # the cancelled full build never landed: this one does the whole of it
        assert report.files_indexed == 3000 and report.full
        hits = await amm.search("n2999x", min_score=0)
        assert hits.results and hits.results[0].path == "memory/n2999.md"
        assert not [p for p in (tmp_path / "state" / "memory").iterdir() if ".build" in p.name]
        await amm.close()

    asyncio.run(scenario())


def test_mcp_stdio_server_end_to_end(tmp_path: Path, notes: Path) -> None:
    workspace = notes
    pytest.importorskip("mcp_types")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    state = tmp_path / "state"
    with open_memory(_config(state), workspace=workspace, start=False) as mem:
        mem.sync(force=True)  # the server's searches never wait for indexing
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "symi_memory.mcp_server", "--state-dir", str(state), "--workspace", str(workspace)],
        env={**os.environ, "SYMI_STATE_DIR": str(state)},
    )

    async def scenario() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == ["memory_search", "memory_get", "memory_append"]
            assert listed.tools[0].input_schema["required"] == ["query"]

            hit = await session.call_tool("memory_search", {"query": "tea"})
            assert hit.is_error is False
            body = json.loads(hit.content[0].text)
            assert body == hit.structured_content
            assert body["mode"] == "fts-only" and body["results"][0]["path"] == "MEMORY.md"
            assert body["results"][0]["snippet"].endswith("Source: " + body["results"][0]["citation"])

            got = await session.call_tool(
                "memory_get", {"path": "memory/2026-01-01.md", "from": 3, "lines": 1}
            )
            assert got.is_error is False
            assert got.structured_content["path"] == "memory/2026-01-01.md"
            assert got.structured_content["text"].strip() == "third line"

            # Bad arguments are tool errors; the server keeps serving.
            bad = await session.call_tool("memory_get", {"path": "memory/2026-01-01.md", "from": "two"})
            assert bad.is_error is True and "from" in bad.structured_content["error"]
            refused = await session.call_tool("memory_get", {"path": "../../etc/passwd"})
            assert refused.is_error is True and refused.structured_content["error"] == "path required"
            empty = await session.call_tool("memory_search", {})
            assert empty.is_error is True and "query" in empty.structured_content["error"]
            unknown = await session.call_tool("memory_delete", {"path": "MEMORY.md"})
            assert unknown.is_error is True and "memory_search" in unknown.structured_content["error"]

            wrote = await session.call_tool("memory_append", {"text": "Note from MCP."})
            assert wrote.is_error is False and wrote.structured_content["path"].startswith("memory/")
            again = await session.call_tool("memory_search", {"query": "tea"})
            assert again.is_error is False and again.structured_content["results"]

    asyncio.run(asyncio.wait_for(scenario(), 60))
    daily = sorted((workspace / "memory").glob("20*.md"))
    assert any(p.read_text().strip().endswith("Note from MCP.") for p in daily)


def test_disabled_memory_exposes_no_tools_and_writes_nothing(tmp_path: Path, notes: Path) -> None:
    workspace = notes
    pytest.importorskip("mcp_types")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from symi_memory import tools

    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.json").write_text(json.dumps({"agents": {"defaults": {"memorySearch": {"enabled": False}}}}))
    before = sorted(p.name for p in (workspace / "memory").iterdir())
    memory_md = (workspace / "MEMORY.md").read_text()
    with open_memory(load_config(None, state_dir=state), workspace=workspace, start=False) as mem:
        direct = tools.memory_append(mem, {"text": "Should not land.", "target": "long-term"})
        assert direct["bytesWritten"] == 0 and direct["path"] == "" and "memory is disabled" in direct["error"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "symi_memory.mcp_server", "--state-dir", str(state), "--workspace", str(workspace)],
        env={**os.environ, "SYMI_STATE_DIR": str(state)},
    )

    async def scenario() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert (await session.list_tools()).tools == []
            for name, args in [("memory_append", {"text": "Note from MCP."}), ("memory_search", {"query": "tea"})]:
                res = await session.call_tool(name, args)
                assert res.is_error is True and "memory is disabled" in res.structured_content["error"]

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert sorted(p.name for p in (workspace / "memory").iterdir()) == before
    assert (workspace / "MEMORY.md").read_text() == memory_md


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_mcp_stdio_server_stops_on_a_signal_with_its_client_still_connected(
        tmp_path: Path, notes: Path, signum: signal.Signals) -> None:
    """A client that stops the server with SIGTERM (the MCP spec's next step after closing stdin) or Ctrl-C in a
    terminal: the server exits at once with 0, without waiting for the client to write or close stdin."""
    pytest.importorskip("mcp_types")
    state = tmp_path / "state"
    with open_memory(_config(state), workspace=notes, start=False) as mem:
        mem.sync(force=True)  # the server's searches never wait for indexing
    proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "--workspace", str(notes), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "SYMI_STATE_DIR": str(state)})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        def call(message: dict[str, object]) -> dict[str, object]:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
            return json.loads(proc.stdout.readline())

        init = call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert init["result"]["serverInfo"]["name"] == "symi-memory"
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        hit = call({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "memory_search", "arguments": {"query": "tea"}}})
        assert hit["result"]["structuredContent"]["results"][0]["path"] == "MEMORY.md"
        started = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=20)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode()
    assert code == 0 and "Traceback" not in err, err
    assert took < 10


def _stdio_mcp(tmp_path: Path, notes: Path) -> tuple[subprocess.Popen[bytes], Callable[[bytes], dict[str, Any] | None]]:
    """An indexed ``notes`` served by a real ``symi-memory mcp`` over stdio, and ``send``: one raw line written,
    its answer read (None: no answer within 60 s, a loaded host starting slowly)."""
    import select

    state = tmp_path / "state"
    with open_memory(_config(state), workspace=notes, start=False) as mem:
        mem.sync(force=True)
    proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "--workspace", str(notes), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "SYMI_STATE_DIR": str(state)})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(raw: bytes) -> dict[str, Any] | None:
        stdin.write(raw + b"\n")
        stdin.flush()
        if not select.select([stdout], [], [], 60)[0]:
            return None
        return json.loads(stdout.readline())

    return proc, send


def test_mcp_stdio_server_answers_lines_that_are_not_valid_unicode_and_keeps_serving(
        tmp_path: Path, notes: Path) -> None:
    """A request with a lone surrogate (JSON "\\ud800": valid JSON, not valid Unicode) or bytes that are not UTF-8
    gets a JSON-RPC error with its own id, and the next request is answered. The SDK dropped such a line without
    a word, so a client waiting for that answer waited for ever (its request never timed out server-side)."""
    pytest.importorskip("mcp_types")

    before = {p: p.read_bytes() for p in notes.rglob("*.md")}
    proc, send = _stdio_mcp(tmp_path, notes)

    def call(name: str, arguments: bytes, ident: int) -> bytes:
        return (b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}'
                % (ident, name.encode(), arguments))

    try:
        init = send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode())
        assert init is not None and init["result"]["serverInfo"]["name"] == "symi-memory"
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        answers = {
            "search": send(call("memory_search", b'{"query": "tea \\ud800"}', 2)),
            "get": send(call("memory_get", b'{"path": "memory/\\udc80.md"}', 3)),
            "append": send(call("memory_append", b'{"text": "Note \\ud800 here"}', 4)),
            "not utf-8": send(latin := call("memory_search", b'{"query": "tea \xff\xfe"}', 5)),
            "not json": send(b"\xff not json at all"),
        }
        after = send(call("memory_search", b'{"query": "tea"}', 6))
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    assert {k: v is not None for k, v in answers.items()} == dict.fromkeys(answers, True), err
    for (kind, answer), ident in zip(answers.items(), [2, 3, 4, 5, None], strict=True):
        assert answer is not None and answer["id"] == ident and "result" not in answer, (kind, answer)
    assert answers["search"]["error"] == {"code": -32602, "message": (
        "Invalid params: params.arguments.query (\\ud800 at character 4) holds a lone surrogate, which is not "
        "valid Unicode; send UTF-8 text")}
    assert "params.arguments.path (\\udc80" in answers["get"]["error"]["message"]
    assert "params.arguments.text (\\ud800" in answers["append"]["error"]["message"]
    assert answers["not utf-8"]["error"] == {"code": -32700, "message": (
        f"Parse error: the request is not UTF-8 (byte 0xff at offset {latin.index(0xff)}); send UTF-8 text")}
    assert answers["not json"]["error"]["code"] == -32700
    assert after is not None and after["id"] == 6 and after["result"]["structuredContent"]["results"][0]["path"] \
        == "MEMORY.md"
    assert {p: p.read_bytes() for p in notes.rglob("*.md")} == before  # nothing written
    assert code == 0 and "Traceback" not in err, err


def test_async_explain_history_and_check_integrity_answer_as_the_manager_does(tmp_path: Path) -> None:
    from support.sqlite_memory import open_mem, write

    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- The car is a blue hatchback.\n")
    write(ws, "memory/2026-06-01.md", "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n")
    write(ws, "MEMORY.md", "# Memory\n\n- Likes hiking in the Alps.\n")
    query = "what car do I drive?"

    async def scenario() -> None:
        mem = open_mem(tmp_path, ws)
        mem.sync()
        async with AsyncMemoryManager(mem) as amm:
            history = await amm.history(query, min_score=0)
            assert [(v["path"], v["current"]) for v in history] == [
                ("memory/2026-03-01.md", False), ("memory/2026-06-01.md", True)], history
            assert history == mem.history(query, min_score=0)
            assert await amm.history(query, min_score=0, as_of="2026-04-01") == mem.history(
                query, min_score=0, as_of="2026-04-01")
            explained = await amm.explain(query, min_score=0, max_results=3)
            assert explained["response"] == mem.explain(query, min_score=0, max_results=3)["response"]
            assert explained["candidates"] and explained["maxResults"] == 3
            assert await amm.check_integrity() is None
            # The manager's argument checks, raised to the awaiting task.
            for call in (amm.history, amm.explain):
                with pytest.raises(ValueError, match="maxResults must be a whole number, got '5'"):
                    await call(query, max_results="5")  # type: ignore[operator]
                with pytest.raises(ValueError, match="query must be a non-empty string"):
                    await call("  ")  # type: ignore[operator]
            with pytest.raises(ValueError, match="minScore must be a number"):
                await amm.history(query, min_score="high")  # type: ignore[arg-type]
        with pytest.raises(Exception, match="closed"):
            await AsyncMemoryManager(mem).check_integrity()

    asyncio.run(scenario())


def test_a_cancelled_async_integrity_check_still_records_the_damage_it_finds(tmp_path: Path) -> None:
    """Cancelling the task does not stop the check in its worker thread (it cannot be interrupted); close() waits for
    it, and what it found is recorded, so the next sync rebuilds the index."""
    from support.sqlite_memory import open_mem, write
    from test_sqlite_failures import _damage

    ws = tmp_path / "ws"
    for i in range(300):
        write(ws, f"memory/n{i:03d}.md", f"# Note {i}\nalpha beta gamma kestrel n{i}x\n" * 4)
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    _damage(db, "chunks_path")

    async def scenario() -> None:
        amm = AsyncMemoryManager(open_mem(tmp_path, ws))
        task = asyncio.create_task(amm.check_integrity())
        await asyncio.sleep(0)  # the check is handed to its worker thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await amm.close()

    asyncio.run(scenario())
    with open_mem(tmp_path, ws) as other:
        st = other.status()
        assert st["dirty"] is True and "the index file is damaged" in st["lastError"], st["lastError"]
        assert other.sync().full and other.check_integrity() is None


def test_mcp_stdio_server_stops_on_a_signal_while_an_append_waits_for_another_process(
        tmp_path: Path, notes: Path) -> None:
    """SIGTERM while a memory_append waits for another process's append lock (a stopped CLI append holds it):
    the server exits at once, the append gives up with nothing written. It used to stay up for the rest of the
    30 s wait (28.7 s after SIGTERM), as the signal waited for the append's worker thread."""
    pytest.importorskip("mcp_types")
    from symi_memory.manager import _append_lock_path

    state = tmp_path / "state"
    with open_memory(_config(state), workspace=notes, start=False) as mem:
        mem.sync(force=True)
    before = {p: p.read_bytes() for p in notes.rglob("*.md")}
    lock = _append_lock_path(state, notes)
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('locked', flush=True)\ntime.sleep(120)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "--workspace", str(notes), "mcp"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "SYMI_STATE_DIR": str(state)})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        ).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_append", "arguments": {"text": "Bought a bicycle from the neighbours"}}}).encode() + b"\n")
        proc.stdin.flush()
        time.sleep(1.5)  # the append is waiting for the holder
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        for p in (proc, holder):
            if p.poll() is None:
                p.kill()
                p.wait()
    err = proc.stderr.read().decode()
    assert code == 0 and "Traceback" not in err, err
    assert took < 10, f"the server stopped {took:.1f} s after SIGTERM"
    assert {p: p.read_bytes() for p in notes.rglob("*.md")} == before


def test_mcp_memory_append_answers_an_error_naming_a_hung_appender_and_keeps_serving(
        tmp_path: Path, notes: Path) -> None:
    """Another process's append to the workspace is alive but hung (its provider call does not come back): the MCP
    memory_append answers after sync.appendWaitSeconds with a tool error naming that process's pid, writes
    nothing, and the server goes on answering. It used to wait as long as the holder lived."""
    pytest.importorskip("mcp_types")
    tests = Path(__file__).resolve().parent
    from test_append_processes import SLOW_APPENDER

    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.json").write_text(json.dumps({"agents": {"defaults": {"memorySearch": {
        "provider": "none", "sync": {"appendWaitSeconds": 1}}}}}))
    marker = "Bought a bicycle from the neighbours for forty euros"
    holder = subprocess.Popen([sys.executable, "-c", SLOW_APPENDER, str(state), str(notes), "30", str(tests), "120",
                               marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "--workspace", str(notes), "--agent", "other",
                             "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "SYMI_STATE_DIR": str(state)})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        deadline = time.monotonic() + 60
        while marker not in (notes / "MEMORY.md").read_text(encoding="utf-8"):  # it indexes its note, for ever
            assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()
            time.sleep(0.01)
        before = {p: p.read_bytes() for p in notes.rglob("*.md")}

        def call(ident: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {
                "name": name, "arguments": arguments}}).encode() + b"\n")
            proc.stdin.flush()
            return json.loads(proc.stdout.readline())["result"]

        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        ).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        started = time.monotonic()
        refused = call(2, "memory_append", {"text": "The plumber comes on Friday morning"})
        took = time.monotonic() - started
        found = call(3, "memory_search", {"query": "tea"})
        assert holder.poll() is None  # still hung, undisturbed
    finally:
        for p in (proc, holder):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert refused["isError"] is True and took < 20, (refused, took)
    error = refused["structuredContent"]["error"]
    assert f"pid {holder.pid}, holding lock file" in error and "nothing was written" in error, error
    assert refused["structuredContent"]["bytesWritten"] == 0
    assert found["isError"] is False and found["structuredContent"]["results"], found
    assert {p: p.read_bytes() for p in notes.rglob("*.md")} == before


def test_mcp_stdio_server_answers_absurdly_nested_json_and_keeps_serving(tmp_path: Path, notes: Path) -> None:
    """A line of arrays nested 100,000 deep (a few hundred KB): the reader of the wire died on a RecursionError
    (a traceback on stderr) and the server never answered another request. Now it is a parse error with no id and
    the next request is answered; other refused shapes (a batch, a non-object, a float id) get their error too."""
    pytest.importorskip("mcp_types")

    proc, send = _stdio_mcp(tmp_path, notes)

    search = b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "memory_search", ' \
             b'"arguments": {"query": "tea"}}}'
    try:
        init = send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode())
        assert init is not None and init["result"]["serverInfo"]["name"] == "symi-memory"
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        deep = send(b"[" * 100_000 + b"]" * 100_000)
        deep_object = send(b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": ' + b'{"a": ' * 50_000
                           + b"1" + b"}" * 50_001)
        batch = send(b"[" + search % 2 + b"]")
        after = send(search % 3)
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    assert deep == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": "Parse error: arrays or objects nested too deeply"}}, err
    assert deep_object is not None and deep_object["error"]["code"] == -32700, err
    assert batch is not None and batch["error"]["code"] == -32600 and batch["id"] is None
    assert after is not None and after["id"] == 3 and after["result"]["structuredContent"]["results"][0]["path"] \
        == "MEMORY.md", err
    assert code == 0 and "Traceback" not in err, err
