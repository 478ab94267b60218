"""`symi-memory serve`: a real server process on loopback, driven by the real CLI, HTTP and the MCP SDK client."""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.unprivileged import without_dac_override

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

TOKEN = "s3cret-token-value-xyz"


def _write_config(state: Path, main_ws: Path, other_ws: Path, *, extra: str = "") -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "symi.toml").write_text(
        f"""
[agents.defaults]
workspace = "{main_ws}"
[agents.defaults.memorySearch]
provider = "hash"
[agents.defaults.memorySearch.query]
minScore = 0.2
[[agents.list]]
id = "other"
workspace = "{other_ws}"
{extra}
""",
        encoding="utf-8",
    )


@pytest.fixture
def setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    return make_setup(tmp_path, workspace)


def make_setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    """Two agents (``main`` on ``workspace``, ``other`` on its own) and their config in ``tmp_path/state``."""
    other = tmp_path / "other-ws"
    (other / "memory").mkdir(parents=True)
    (other / "MEMORY.md").write_text("# Other agent\n\n- The launch code is PLUM-42.\n", encoding="utf-8")
    state = tmp_path / "state"
    _write_config(state, workspace, other)
    return {"state": state, "main": workspace, "other": other}


class Server:
    def __init__(self, proc: subprocess.Popen[str], record: dict[str, Any], log: Path) -> None:
        self.proc = proc
        self.record = record
        self.url = record["url"]
        self.port = int(record["port"])
        self.log = log

    def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                raw: bytes | None = None, timeout: float = 60) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        hdrs = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        try:
            return resp.status, json.loads(payload)
        except ValueError:
            return resp.status, payload.decode()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@contextmanager
def running_server(state: Path, *args: str, env: dict[str, str] | None = None,
                   prefix: tuple[str, ...] = ()) -> Iterator[Server]:
    log = state / f"serve-{time.monotonic_ns()}.log"
    full_env = {**os.environ, "SYMI_STATE_DIR": str(state), **(env or {})}
    with open(log, "w") as fh:
        proc = subprocess.Popen([*prefix, sys.executable, "-m", "symi_memory.cli", "-v", "serve", "--port", "0", *args],
                                stdout=fh, stderr=subprocess.STDOUT, text=True, env=full_env)
    record_file = state / "serve.json"
    deadline = time.monotonic() + 90
    record = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}: {log.read_text()}")
        try:
            record = json.loads(record_file.read_text())
            if record.get("pid") == proc.pid:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    else:
        proc.kill()
        raise AssertionError(f"serve did not start: {log.read_text()}")
    server = Server(proc, record, log)
    try:
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_search_is_answered_by_the_server_then_in_process_once_it_stops(setup: dict[str, Path], cli: Any) -> None:
    state = setup["state"]
    with running_server(state) as srv:
        code, out, err = cli("search", "Prefers tea", "--json", json_out=True)
        assert code == 0, err
        assert out["results"][0]["path"] == "MEMORY.md"
        code, st, err = cli("status", "--json", json_out=True)
        assert code == 0, err
        assert st["server"]["pid"] == srv.proc.pid and st["server"]["requests"]["search"] == 1
        assert st["files"] == 2
        assert st["lastSync"]["at"] > 0 and st["lastSync"]["reason"] in ("serve-open", "session-start", "watch")
        # The human output says so too, and --no-server works in-process (no server block).
        code, text, _ = cli("status")
        assert f"pid {srv.proc.pid}" in text and "search 1" in text
        code, local, _ = cli("status", "--json", "--no-server", json_out=True)
        assert code == 0 and "server" not in local
        code, text, _ = cli("search", "Utrecht")
        assert code == 0 and "server" in text.splitlines()[0] and "MEMORY.md" in text
        code, got, _ = cli("get", "memory/2026-01-01.md", "--from", "2", "--lines", "1", "--json", json_out=True)
        assert code == 0 and got["text"].strip() == "second line"
        # A note written just now is found at once, as by an in-process search (no wait for the watcher).
        (setup["main"] / "memory" / "2026-01-02.md").write_text("- The wifi password is on the fridge.\n")
        code, out, _ = cli("search", "wifi password fridge", "--json", json_out=True)
        assert code == 0 and out["results"][0]["path"] == "memory/2026-01-02.md"
        assert srv.stop() == 0
    assert not (state / "serve.json").exists()
    code, out, err = cli("search", "Prefers tea", "--json", json_out=True)
    assert code == 0 and out["results"][0]["path"] == "MEMORY.md"
    code, st, _ = cli("status", "--json", json_out=True)
    assert "server" not in st


def test_a_second_server_for_the_same_state_dir_is_refused(setup: dict[str, Path], cli: Any) -> None:
    with running_server(setup["state"]) as srv:
        code, _, err = cli("serve", "--port", "0")
        assert code == 2 and f"pid {srv.proc.pid}" in err and "Traceback" not in err
        assert json.loads((setup["state"] / "serve.json").read_text())["pid"] == srv.proc.pid


def test_a_stale_record_is_ignored(setup: dict[str, Path], cli: Any) -> None:
    """A server that died without cleaning up (its pid is gone) never answers: the CLI works in-process."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (setup["state"] / "serve.json").write_text(json.dumps({"pid": dead.pid, "url": "http://127.0.0.1:9"}))
    code, out, err = cli("search", "Prefers tea", "--json", json_out=True)
    assert code == 0 and out["results"][0]["path"] == "MEMORY.md", err


def test_a_call_for_another_workspace_is_answered_in_process(setup: dict[str, Path], cli: Any, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "MEMORY.md").write_text("- Elsewhere note about kayaks.\n")
    with running_server(setup["state"]) as srv:
        # Another agent id too: the server keeps main's index (same file name) in sync with main's own
        # workspace, and two processes indexing different workspaces into one file would race.
        code, out, err = cli("--workspace", str(elsewhere), "--agent", "scratch", "search", "kayaks", "--json",
                             json_out=True)
        assert code == 0 and out["results"], (out, err)
        assert out["results"][0]["path"] == "MEMORY.md" and "kayaks" in out["results"][0]["snippet"]
        status, st = srv.request("GET", "/api/agents/main/status")
        assert status == 200 and "search" not in st["server"]["requests"]


def test_the_one_shot_client_path_imports_nothing_heavy(setup: dict[str, Path]) -> None:
    probe = (
        "import sys, io, contextlib\n"
        "from symi_memory.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['search', 'Prefers tea', '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'onnxruntime', 'apsw', 'pluggy',"
        " 'attrs', 'starlette', 'tokenizers', 'sqlite_vec') or m.startswith('symi_memory_')"
        " or m in ('symi_memory.manager', 'symi_memory.config', 'symi_memory.plugins'))\n"
        "print(rc, heavy, 'MEMORY.md' in buf.getvalue())\n"
    )
    with running_server(setup["state"]):
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "SYMI_STATE_DIR": str(setup["state"])})
    assert proc.stdout.strip() == "0 [] True", proc.stderr


def test_mcp_streamable_http_lists_and_calls_the_tools(setup: dict[str, Path]) -> None:
    pytest.importorskip("mcp_types")
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def session_for(url: str, check: Any) -> None:
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            await check(session)

    async def main_agent(session: Any) -> None:
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["memory_search", "memory_get", "memory_append"]
        hit = await session.call_tool("memory_search", {"query": "Prefers tea"})
        assert hit.is_error is False and hit.structured_content["results"][0]["path"] == "MEMORY.md"
        got = await session.call_tool("memory_get", {"path": "memory/2026-01-01.md", "from": 3, "lines": 1})
        assert got.structured_content["text"].strip() == "third line"
        refused = await session.call_tool("memory_get", {"path": "../other-ws/MEMORY.md"})
        assert refused.is_error is True and refused.structured_content["text"] == ""

    async def other_agent(session: Any) -> None:
        hit = await session.call_tool("memory_search", {"query": "launch code PLUM-42"})
        assert hit.structured_content["results"][0]["snippet"].count("PLUM-42") == 1

    with running_server(setup["state"]) as srv:
        asyncio.run(asyncio.wait_for(session_for(srv.url + "/mcp", main_agent), 90))
        asyncio.run(asyncio.wait_for(session_for(srv.url + "/agents/other/mcp", other_agent), 90))
        status, st = srv.request("GET", "/api/agents/main/status")
        assert st["server"]["requests"]["mcp"] >= 4


def test_mcp_over_http_answers_a_lone_surrogate_or_bytes_not_utf8_and_the_session_goes_on(
        setup: dict[str, Path]) -> None:
    """The streamable HTTP transport answers such a request with a JSON-RPC parse error (HTTP 400); the same
    session's next call is answered. (The stdio server: tests/test_aio_mcp.py.)"""
    pytest.importorskip("mcp_types")
    mcp_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "MCP-Protocol-Version": "2025-06-18"}
    with running_server(setup["state"]) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        conn.request("POST", "/mcp", headers={"Host": f"127.0.0.1:{srv.port}", **mcp_headers}, body=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        resp = conn.getresponse()
        resp.read()
        session = {**mcp_headers, "Mcp-Session-Id": resp.getheader("mcp-session-id") or ""}
        conn.close()
        srv.request("POST", "/mcp", headers=session, raw=b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        call = b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "memory_search", ' \
               b'"arguments": {"query": "%s"}}}'
        for n, query in enumerate([b"tea \\ud800", b"tea \xff"], start=2):
            status, out = srv.request("POST", "/mcp", headers=session, raw=call % (n, query))
            assert status == 400 and out["error"]["code"] == -32700, out
        status, out = srv.request("POST", "/mcp", headers=session, raw=call % (4, b"Prefers tea"))
        assert status == 200 and '"id":4' in out and "MEMORY.md" in out, out
    assert "Traceback" not in srv.log.read_text()


def test_refusals_leak_nothing(setup: dict[str, Path]) -> None:
    other_file = str(setup["other"] / "MEMORY.md")
    with running_server(setup["state"]) as srv:
        # An agent that is not configured, and ids that would traverse.
        status, out = srv.request("POST", "/api/agents/stranger/search", {"query": "PLUM-42"})
        assert status == 404 and "not served" in out["error"] and "PLUM" not in json.dumps(out)
        for bad in ("..", "%2E%2E%2Fother", "a%2Fb"):
            status, out = srv.request("POST", f"/api/agents/{bad}/search", {"query": "x"})
            assert status in (400, 404), (bad, status, out)
        # memory_get stays inside the agent's own memory files.
        for path in ("../other-ws/MEMORY.md", other_file, "/etc/passwd", "memory/../../other-ws/MEMORY.md"):
            status, out = srv.request("POST", "/api/agents/main/get", {"path": path})
            assert status == 200 and out["text"] == "" and out["error"], path
        # The main agent's search never returns the other agent's notes.
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "launch code PLUM-42"})
        assert status == 200 and "PLUM-42" not in json.dumps(out)
        # A client asking for another workspace under the same agent id is told so.
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "tea", "workspace": str(setup["other"])})
        assert status == 409
        # Oversized bodies: announced and streamed.
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "x" * 2_000_000})
        assert status == 413 and "maxBodyBytes" in out["error"]
        status, out = srv.request("POST", "/mcp", {"query": "x" * 2_000_000})
        assert status == 413
        # A page on another origin reaching 127.0.0.1 through DNS rebinding names another host.
        status, out = srv.request("GET", "/api/agents/main/status", headers={"Host": "evil.example:80"})
        assert status == 421
        # Not JSON.
        status, out = srv.request("POST", "/api/agents/main/search", raw=b"query=tea",
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 415
        # Still serving.
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"]


def test_results_are_capped(setup: dict[str, Path], cli: Any) -> None:
    big = setup["main"] / "memory" / "2026-02-02.md"
    big.write_text("".join(f"- line {i} about tea and biscuits number {i}\n" for i in range(4000)))
    state = setup["state"]
    _write_config(state, setup["main"], setup["other"], extra="[serve]\nmaxResponseBytes = 20000\n")
    with running_server(state) as srv:
        status, out = srv.request("POST", "/api/agents/main/get", {"path": "memory/2026-02-02.md"})
        assert status == 200 and "truncated" in out and len(json.dumps(out)) <= 20000
        assert out["text"].startswith("- line 0 about tea")
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "tea biscuits", "maxResults": 50})
        assert status == 200 and len(json.dumps(out).encode()) <= 20000
        # `symi-memory get` printed the server's trimmed answer as the file, exit 0 and not a word: it reads the
        # file itself instead, whole, as it does with no server.
        code, out, err = cli("-v", "get", "memory/2026-02-02.md", env={"SYMI_STATE_DIR": str(state)})
        assert code == 0 and out == big.read_text(), (len(out), err)
        assert "answering in-process" in err, err


def test_mcp_answers_are_capped_so_the_sdk_client_can_read_them(setup: dict[str, Path]) -> None:
    """``memory_get`` of a 2 MB file over /mcp: the answer was sent whole (maxResponseBytes did not apply to MCP),
    as one server-sent event over the 1 MiB the MCP SDK's client takes, so the call failed ("SSE stream failed").
    It is trimmed, says so, and the session goes on."""
    pytest.importorskip("mcp_types")
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    big = setup["main"] / "memory" / "2026-02-03.md"
    big.write_text("".join(f"- line {i} about \"tea\" and biscuits number {i}\n" for i in range(50000)))
    assert big.stat().st_size > 2_000_000
    # Not indexed (over maxFileBytes), so the server starts at once; memory_get reads it all the same.
    _write_config(setup["state"], setup["main"], setup["other"],
                  extra="[agents.defaults.memorySearch.sync]\nmaxFileBytes = 100000\n")

    async def check(url: str) -> None:
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            got = await session.call_tool("memory_get", {"path": "memory/2026-02-03.md"})
            assert got.is_error is False, got.content[0].text[:300]
            out = got.structured_content
            assert "truncated" in out and out["text"].startswith('- line 0 about "tea"')
            assert len(json.dumps(out).encode()) < 1_000_000
            assert json.loads(got.content[0].text) == out
            window = await session.call_tool("memory_get", {"path": "memory/2026-02-03.md", "from": 3, "lines": 1})
            assert window.structured_content == {"text": '- line 2 about "tea" and biscuits number 2',
                                                 "path": "memory/2026-02-03.md"}

    with running_server(setup["state"]) as srv:
        asyncio.run(asyncio.wait_for(check(srv.url + "/mcp"), 90))


def test_non_loopback_bind_needs_a_token_and_never_logs_it(setup: dict[str, Path], cli: Any) -> None:
    code, _, err = cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert code == 2 and "token" in err and "Traceback" not in err
    state = setup["state"]
    with running_server(state, "--host", "0.0.0.0", env={"SYMI_SERVE_TOKEN": TOKEN}) as srv:
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "tea"})
        assert status == 401 and TOKEN not in json.dumps(out)
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "tea"},
                                  headers={"Authorization": "Bearer wrong"})
        assert status == 401
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                  headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and out["results"]
        status, out = srv.request("GET", "/", headers={"Host": "example.test"})
        assert status == 401
        # The CLI without the token warns and answers in-process; with it, the server answers.
        code, out, err = cli("search", "Prefers tea", "--json", json_out=True)
        assert code == 0 and out["results"] and "token" in err
        code, st, err = cli("status", "--json", env={"SYMI_SERVE_TOKEN": TOKEN}, json_out=True)
        assert code == 0 and st["server"]["requests"]["search"] == 1
        assert srv.stop() == 0
    assert TOKEN not in srv.log.read_text()
    assert TOKEN not in (state / "serve.json").read_text() if (state / "serve.json").exists() else True


def test_a_client_going_away_mid_request_does_not_disturb_the_others(setup: dict[str, Path]) -> None:
    with running_server(setup["state"]) as srv:
        srv.request("POST", "/api/agents/main/search", {"query": "warm up"})
        errors: list[str] = []

        def good_client() -> None:
            for _ in range(5):
                status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
                if status != 200 or not out.get("results"):
                    errors.append(f"{status} {out}")

        def rude_client() -> None:
            for i in range(5):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                body = json.dumps({"query": "tea " * 50}).encode()
                head = (f"POST /api/agents/main/search HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
                s.sendall(head + (body[: len(body) // 2] if i % 2 else body))
                s.close()  # half a body, or a whole request whose answer nobody reads

        threads = [threading.Thread(target=good_client) for _ in range(4)] + [
            threading.Thread(target=rude_client) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
        status, out = srv.request("GET", "/api/health")
        assert status == 200 and out["ok"] is True


def test_four_agents_share_one_model(setup: dict[str, Path], tmp_path: Path) -> None:
    state = setup["state"]
    extra = "".join(f'[[agents.list]]\nid = "a{i}"\nworkspace = "{setup["main"]}"\n' for i in range(3))
    _write_config(state, setup["main"], setup["other"], extra=extra)
    with running_server(state) as srv:
        for agent in ("main", "other", "a0", "a1", "a2"):
            status, out = srv.request("POST", f"/api/agents/{agent}/search", {"query": "tea"})
            assert status == 200, out
        status, st = srv.request("GET", "/api/agents/main/status")
        shared = st["server"]["sharedModels"]
        assert sorted(st["server"]["agents"]) == ["a0", "a1", "a2", "main", "other"]
        assert shared["loaded"] == 1 and shared["users"] == 5 and shared["models"] == ["hash/hash-384"]


def test_sigterm_stops_cleanly(setup: dict[str, Path]) -> None:
    state = setup["state"]
    with running_server(state) as srv:
        srv.request("POST", "/api/agents/main/search", {"query": "tea"})
        # A write and a sync in flight when SIGTERM arrives.
        status, out = srv.request("POST", "/api/agents/main/append", {"text": "Note written just before stopping."})
        assert status == 200 and not out.get("error"), out
        done: list[Any] = []
        t = threading.Thread(target=lambda: done.append(srv.request("POST", "/api/agents/main/sync", {"force": True})))
        t.start()
        time.sleep(0.2)
        started = time.monotonic()
        assert srv.stop() == 0
        took = time.monotonic() - started
        t.join(timeout=30)
    log = srv.log.read_text()
    assert "Traceback" not in log, log
    assert took < 30
    assert not (state / "serve.json").exists()
    import apsw

    db = apsw.Connection(str(state / "memory" / "main.sqlite"))
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    daily = sorted((setup["main"] / "memory").glob("20*.md"))
    assert any(p.read_text().rstrip().endswith("Note written just before stopping.") for p in daily)


def test_explain_api_breaks_down_each_score(setup: dict[str, Path]) -> None:
    with running_server(setup["state"]) as srv:
        status, out = srv.request("POST", "/api/agents/main/explain", {"query": "Prefers tea", "minScore": 0.5})
        assert status == 200, out
        assert out["stages"][0] == "fused" and out["stages"][-1] == "final"
        returned = [c for c in out["candidates"] if c["outcome"] == "returned"]
        assert [c["path"] for c in returned] == [h["path"] for h in out["response"]["results"]]
        for c in out["candidates"]:
            assert (c["outcome"] == "below minScore") == (c["stages"]["final"]["score"] < 0.5)
        status, files = srv.request("GET", "/api/agents/main/files")
        assert {f["path"]: f["state"] for f in files["files"]} == {"MEMORY.md": "indexed",
                                                                   "memory/2026-01-01.md": "indexed"}


def test_as_of_history_and_dedup_through_the_server_match_the_cli(setup: dict[str, Path], cli: Any) -> None:
    """The API and the CLI through the server give exactly what the in-process CLI gives (issue 16's features)."""
    main = setup["main"]
    (main / "MEMORY.md").write_text("# Memory\n")
    (main / "memory" / "2026-03-01.md").write_text(
        "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist for Tuesday.\n")
    (main / "memory" / "2026-06-01.md").write_text(
        "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n- Bought running shoes.\n")
    _write_config(setup["state"], main, setup["other"],
                  extra="[agents.defaults.memorySearch.query.hybrid.supersession]\nenabled = true\n")
    q = "what car do I drive?"
    local = {
        "search": cli("search", q, "--min-score", "0", "--as-of", "2026-04-01", "--json", "--no-server",
                      json_out=True)[1],
        # The fake hash provider scores this question below the configured minScore 0.2, as for search.
        "history": cli("history", q, "--min-score", "0", "--json", "--no-server", json_out=True)[1],
    }
    assert local["search"]["results"][0]["path"] == "memory/2026-03-01.md"
    assert [v["current"] for v in local["history"]["versions"]] == [False, True]
    with running_server(setup["state"]) as srv:
        status, out = srv.request("POST", "/api/agents/main/search", {"query": q, "minScore": 0, "asOf": "2026-04-01"})
        assert status == 200 and out == local["search"]
        status, out = srv.request("POST", "/api/agents/main/history", {"query": q, "minScore": 0})
        assert status == 200 and out == local["history"]
        status, out = srv.request("POST", "/api/agents/main/history", {"query": q})
        assert status == 200 and out == {"versions": []}  # below minScore 0.2: search finds nothing either
        status, out = srv.request("POST", "/api/agents/main/history", {"query": q, "minScore": "0"})
        assert status == 400 and "minScore" in out["error"]
        status, out = srv.request("POST", "/api/agents/main/history", {"query": q, "minScore": 0,
                                                                       "asOf": "2026-04-01"})
        assert [v["path"] for v in out["versions"]] == ["memory/2026-03-01.md"]
        status, out = srv.request("POST", "/api/agents/main/search", {"query": q, "asOf": 5})
        assert status == 200 and out["results"] == [] and "asOf" in out["error"]
        status, out = srv.request("POST", "/api/agents/main/history", {"query": q, "asOf": "someday"})
        assert status == 400 and "asOf" in out["error"]
        # The CLI's search --as-of and history go through the server, with the in-process answers.
        code, out, err = cli("search", q, "--min-score", "0", "--as-of", "2026-04-01", "--json", json_out=True)
        assert code == 0 and out == local["search"], err
        code, out, err = cli("history", q, "--min-score", "0", "--json", json_out=True)
        assert code == 0 and out == local["history"], err
        code, text, _ = cli("history", q, "--min-score", "0")
        assert "current" in text and "memory/2026-06-01.md:3" in text
        status, st = srv.request("GET", "/api/agents/main/status")
        assert st["server"]["requests"]["search"] == 3 and st["server"]["requests"]["history"] == 7  # 2 from the CLI
        # A bad date is still the CLI's usage error (exit 2), never a server round trip.
        code, _, err = cli("search", "car", "--as-of", "April")
        assert code == 2 and "--as-of" in err
        # Append through the API refuses a restatement, like memory_append everywhere else.
        before = (main / "memory" / "2026-03-01.md").read_bytes()
        status, out = srv.request("POST", "/api/agents/main/append", {"text": "The car is a blue hatchback."})
        assert status == 200 and out["appended"] is False
        assert out["duplicateOf"] == {"path": "memory/2026-03-01.md", "startLine": 3, "endLine": 3}
        assert (main / "memory" / "2026-03-01.md").read_bytes() == before
        # The explain trace shows the supersession demotion.
        status, out = srv.request("POST", "/api/agents/main/explain", {"query": q, "minScore": 0})
        march = next(c for c in out["candidates"] if c["path"] == "memory/2026-03-01.md")
        assert march["stages"]["supersession"]["supersededBy"]["path"] == "memory/2026-06-01.md"


_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
_MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_a_rebinding_name_that_starts_with_127_is_not_loopback(setup: dict[str, Path], cli: Any) -> None:
    """A page at http://127.0.0.1.attacker.example:PORT/ whose name the attacker re-points at 127.0.0.1."""
    with running_server(setup["state"]) as srv:
        for host in (f"127.0.0.1.rebind.example:{srv.port}", "127.attacker.example", f"localhost.example:{srv.port}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Host": host})
            assert status == 421 and "results" not in out, host
            status, _ = srv.request("POST", "/mcp", _INIT, headers={"Host": host, **_MCP_ACCEPT})
            assert status == 421, host
        for host in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", f"127.1.2.3:{srv.port}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Host": host})
            assert status == 200 and out["results"], host
    # A name is not a loopback address, whatever it starts with: binding it needs a token like any other.
    code, _, err = cli("serve", "--host", "127.0.0.1.example.com", "--port", "0")
    assert code == 2 and "needs a token" in err and "Traceback" not in err


def test_host_and_origin_name_the_server_in_any_case(setup: dict[str, Path]) -> None:
    """Host names are case-insensitive (RFC 9110): ``Host: LOCALHOST:port`` was refused 421."""
    with running_server(setup["state"]) as srv:
        for host in (f"LOCALHOST:{srv.port}", f"LocalHost:{srv.port}", "LOCALHOST"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Host": host})
            assert status == 200 and out["results"], (host, status, out)
            status, _ = srv.request("POST", "/mcp", _INIT, headers={"Host": host, **_MCP_ACCEPT})
            assert status == 200, host
        # The inspector's page, loaded as http://LOCALHOST:port/, names itself so in Origin.
        for origin, host in ((f"http://LOCALHOST:{srv.port}", f"localhost:{srv.port}"),
                             (f"HTTP://localhost:{srv.port}", f"LOCALHOST:{srv.port}")):
            status, out = srv.request("GET", "/api/agents/main/files", headers={"Host": host, "Origin": origin})
            assert status == 200 and out["files"], (origin, host, status)
        # Rebinding names stay refused, whatever their case.
        for host in (f"LOCALHOST.attacker.example:{srv.port}", "127.ATTACKER.example", f"LocalHost.Example:{srv.port}"):
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                      headers={"Host": host})
            assert status == 421 and "results" not in out, host
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                  headers={"Origin": f"http://LOCALHOST.attacker.example:{srv.port}"})
        assert status == 403 and "results" not in out


def test_pages_of_other_sites_cannot_drive_the_server(setup: dict[str, Path]) -> None:
    """A browser names the page behind each request in Origin: only the server's own (the inspector) is answered."""
    init, mcp_headers = _INIT, _MCP_ACCEPT
    with running_server(setup["state"]) as srv:
        # A page elsewhere (or a sandboxed one, Origin "null") reaching 127.0.0.1 with the right Host.
        for origin in ("http://evil.example", "null", f"http://localhost:{srv.port + 1}",
                       f"http://127.0.0.1:{srv.port}.evil.example"):
            hdr = {"Origin": origin}
            status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"}, headers=hdr)
            assert status == 403 and "results" not in out, origin
            status, _ = srv.request("POST", "/api/agents/main/sync", raw=b"", headers={**hdr, "Content-Type": "text/plain"})
            assert status == 403, origin  # a "simple" request a page may send without asking first
            status, out = srv.request("GET", "/api/agents/main/status", headers=hdr)
            assert status == 403 and "files" not in out, origin
            status, _ = srv.request("POST", "/mcp", init, headers={**hdr, **mcp_headers})
            assert status == 403, origin
        # The inspector's own requests name the server as their origin: answered.
        status, out = srv.request("POST", "/api/agents/main/explain", {"query": "Prefers tea"},
                                  headers={"Origin": f"http://127.0.0.1:{srv.port}"})
        assert status == 200 and out["response"]["results"][0]["path"] == "MEMORY.md"
        status, out = srv.request("GET", "/api/agents/main/files",
                                  headers={"Host": f"localhost:{srv.port}", "Origin": f"http://localhost:{srv.port}"})
        assert status == 200 and out["files"]
        status, st = srv.request("GET", "/api/agents/main/status")
        assert "search" not in st["server"]["requests"] and "sync" not in st["server"]["requests"]


def test_the_inspector_behind_a_reverse_proxy_is_answered(setup: dict[str, Path]) -> None:
    """nginx (``proxy_pass http://127.0.0.1:PORT``, ``proxy_set_header X-Forwarded-Host $host``) or Apache's
    ``ProxyPass`` in front of the loopback-bound server at https://memory.example.com: the server sees its own
    address as Host and the browser's name in X-Forwarded-Host, and the inspector's POSTs carry that name as
    Origin. They were refused 403 (and passing the browser's Host through, as the docs said, got 421)."""
    with running_server(setup["state"]) as srv:
        proxied = {"Origin": "https://memory.example.com", "X-Forwarded-Host": "memory.example.com",
                   "X-Forwarded-Proto": "https"}
        status, out = srv.request("POST", "/api/agents/main/explain", {"query": "Prefers tea"}, headers=proxied)
        assert status == 200 and out["response"]["results"][0]["path"] == "MEMORY.md", (status, out)
        status, page = srv.request("GET", "/", headers=proxied)
        assert status == 200 and "<html" in page.lower()
        # Another site's page is still refused, whatever the proxy forwards.
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"},
                                  headers={**proxied, "Origin": "https://evil.example"})
        assert status == 403 and "results" not in out
        # A page can only set X-Forwarded-Host after a preflight, and the preflight itself is refused.
        status, _ = srv.request("OPTIONS", "/api/agents/main/search",
                                headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
                                         "Access-Control-Request-Headers": "x-forwarded-host"})
        assert status == 403


def _raw_exchange(port: int, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as is on a fresh connection; the status and body of the answer (the server may close early)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    out = b""
    try:
        try:
            s.sendall(request)
        except OSError:  # answered and closed before the whole body was sent
            pass
        try:
            while chunk := s.recv(65536):
                out += chunk
        except OSError:
            pass
    finally:
        s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_bodies_without_a_length_and_absurd_nesting_are_refused_cleanly(setup: dict[str, Path]) -> None:
    with running_server(setup["state"]) as srv:
        body = json.dumps({"query": "x" * 2_000_000}).encode()
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 65536]), body[i:i + 65536])
                          for i in range(0, len(body), 65536)) + b"0\r\n\r\n"
        for path, accept in (("/api/agents/main/search", ""), ("/mcp", "Accept: application/json, text/event-stream\r\n")):
            head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: application/json\r\n{accept}"
                    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
            status, answer = _raw_exchange(srv.port, head + chunks)
            assert status == 413 and b"maxBodyBytes" in answer, (path, status, answer)
        for nested in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000):
            status, out = srv.request("POST", "/api/agents/main/search", raw=nested,
                                      headers={"Content-Type": "application/json"})
            assert status == 400 and out == {"error": "the request body is not valid JSON"}
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"][0]["path"] == "MEMORY.md"
    assert "Traceback" not in srv.log.read_text()


def test_sigterm_during_the_first_sync_stops_it_at_the_next_file(setup: dict[str, Path]) -> None:
    """An agent still catching up with its files when SIGTERM arrives: the server exits at once, the index is
    sound, and the next server finishes the work."""
    notes = setup["main"] / "memory" / "bulk"
    notes.mkdir()
    for i in range(1500):
        (notes / f"n{i:04d}.md").write_text("".join(f"- note {i} line {j} about item {i * 31 + j}\n" for j in range(20)))
    state = setup["state"]
    with running_server(state) as srv:
        time.sleep(0.3)
        started = time.monotonic()
        assert srv.stop() == 0
        took = time.monotonic() - started
    assert "Traceback" not in srv.log.read_text() and "could not open agent" not in srv.log.read_text()
    assert not (state / "serve.json").exists()
    import apsw

    db = apsw.Connection(str(state / "memory" / "main.sqlite"))
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    indexed = db.execute("SELECT count(*) FROM files").fetchone()[0]
    db.close()
    assert indexed < 1502, "the first sync ran to its end before the server stopped"
    assert took < 10
    with running_server(state) as srv:
        # The first request waits for the agent to open, which finishes its first sync (about a minute for these
        # 1500 files on a loaded 2-core host): a generous bound for it all, not 60 s for the first answer.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            status, st = srv.request("GET", "/api/agents/main/status", timeout=max(1.0, deadline - time.monotonic()))
            if status == 200 and st["files"] == 1502:
                break
            time.sleep(0.5)
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "note 1499 line 3"})
        assert st["files"] == 1502 and any(r["path"] == "memory/bulk/n1499.md" for r in out["results"])


def test_an_unreadable_file_is_listed_once_as_skipped_and_does_not_stop_the_watcher(setup: dict[str, Path]) -> None:
    memory = setup["main"] / "memory"
    # Root reads any file: the server runs without that privilege.
    with running_server(setup["state"], prefix=without_dac_override()) as srv:
        locked = memory / "locked.md"
        locked.write_text("- the heron is locked away\n")
        locked.chmod(0)
        (memory / "after.md").write_text("- the otter came after\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the watcher, not a search, brings the new note in
            status, files = srv.request("GET", "/api/agents/main/files")
            if {"memory/after.md", "memory/locked.md"} <= {f["path"] for f in files["files"]}:
                if any(f["path"] == "memory/after.md" and f["state"] == "indexed" for f in files["files"]):
                    break
            time.sleep(0.2)
        listed = [(f["state"], f["reason"]) for f in files["files"] if f["path"] == "memory/locked.md"]
        assert listed == [("skipped", "cannot read: Permission denied")]
        assert {f["path"]: f["state"] for f in files["files"]}["memory/after.md"] == "indexed"
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "otter came after"})
        assert out["results"][0]["path"] == "memory/after.md"
        status, st = srv.request("GET", "/api/agents/main/status")
        assert st["skipped"] == [{"path": "memory/locked.md", "reason": "cannot read: Permission denied"}]


def test_odd_arguments_get_an_answer_never_a_500(setup: dict[str, Path]) -> None:
    """Every endpoint, every parameter, values of every JSON type, a lone surrogate (valid JSON, not valid
    Unicode) and a long string: each call is answered (2xx or 4xx with an error), and the server goes on."""
    values: list[Any] = [None, True, 5, -1, 1.5, "x", "", "\ud800", [], {}, [1], {"a": 1}, "y" * 100_000]
    params = {"search": ["query", "maxResults", "minScore", "asOf", "session", "fresh", "workspace"],
              "explain": ["query", "maxResults", "minScore", "asOf", "session"],
              "history": ["query", "maxResults", "minScore", "asOf", "fresh"],
              "get": ["path", "from", "lines"], "append": ["text", "target", "allowDuplicate"], "sync": ["force"]}
    with running_server(setup["state"]) as srv:
        failures = []
        for n, (endpoint, name, value) in enumerate(
                (e, p, v) for e, names in params.items() for p in names for v in values):
            body = {"query": "tea", "path": "MEMORY.md", "text": f"odd argument note {n}", name: value}
            status, out = srv.request("POST", f"/api/agents/main/{endpoint}", body)
            if status >= 500 or not isinstance(out, dict) or (status >= 400 and not out.get("error")):
                failures.append((endpoint, name, repr(value)[:20], status, str(out)[:80]))
        assert failures == []
        status, out = srv.request("POST", "/api/agents/main/explain", {"query": "tea", "minScore": [1]})
        assert status == 400 and "minScore" in out["error"]
        status, out = srv.request("POST", "/api/agents/main/get", {"path": "memory/\ud800.md"})
        assert status == 200 and out == {"path": "memory/\ud800.md", "text": "", "disabled": True,
                                         "error": "path required"}
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"][0]["path"] == "MEMORY.md"
    assert "Traceback" not in srv.log.read_text()


def test_sigterm_right_after_the_serving_line_is_not_lost(setup: dict[str, Path]) -> None:
    """A supervisor or script that waits for "serving on" and then stops the server: the server stops."""
    env = {**os.environ, "SYMI_STATE_DIR": str(setup["state"])}
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", "serve", "--port", "0"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().startswith("serving on ")
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        rest = proc.stdout.read()
        assert code == 0 and "Traceback" not in rest, rest
        assert not (setup["state"] / "serve.json").exists()


def test_a_served_workspace_replaced_by_a_file_is_named_by_get_and_status_and_still_searched(
        setup: dict[str, Path]) -> None:
    # memory_get answered "path required" for every path once the workspace was a file (HTTP and MCP alike).
    ws = setup["main"]
    expected = (f"cannot read memory/2026-01-01.md: the workspace {ws} is a file, not a folder; set the workspace "
                 "to the folder that holds MEMORY.md and memory/")
    with running_server(setup["state"]) as srv:
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"][0]["path"] == "MEMORY.md"
        shutil.rmtree(ws)
        ws.write_text("- not a folder\n", encoding="utf-8")
        time.sleep(2.5)  # the server's watcher sees it go and syncs
        status, out = srv.request("POST", "/api/agents/main/get", {"path": "memory/2026-01-01.md"})
        assert status == 200 and out["text"] == "" and out["error"] == expected, out
        # What was indexed before stays searchable (the sync did not take the files for deleted).
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"][0]["path"] == "MEMORY.md", out
        status, st = srv.request("GET", "/api/agents/main/status")
        assert status == 200 and st["files"] == 2
        assert any(w.startswith(f"workspace {ws} is a file, not a folder") for w in st["warnings"]), st
        if importlib.util.find_spec("mcp_types") is None:
            return
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async def check() -> None:
            async with streamable_http_client(srv.url + "/mcp") as streams, \
                    ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                got = await session.call_tool("memory_get", {"path": "memory/2026-01-01.md"})
                assert got.is_error is True and got.structured_content["error"] == expected

        asyncio.run(asyncio.wait_for(check(), 90))


def test_a_skipped_stage_is_named_in_the_http_answers_warnings(tmp_path: Path, workspace: Path) -> None:
    # Seam of the agent routes made once (agent_route) and stage deadlines: a search, an explain and the MCP-less
    # JSON API answer say the reranker was skipped, as an in-process search does.
    from test_stage_deadline import SilentServer

    silent = SilentServer()
    try:
        state = tmp_path / "state"
        state.mkdir()
        (state / "symi.toml").write_text(f"""
[agents.defaults]
workspace = "{workspace}"
[agents.defaults.memorySearch]
provider = "hash"
[agents.defaults.memorySearch.query]
minScore = 0.0
stageDeadlineMs = 500
[agents.defaults.memorySearch.query.rerank]
provider = "cohere"
apiKey = "test-key-123"
baseUrl = "{silent.url}"
timeoutMs = 30000
""", encoding="utf-8")
        with running_server(state) as srv:
            code, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
            assert code == 200, out
            assert out["results"] and out["results"][0]["path"] == "MEMORY.md", out
            assert len(out["warnings"]) == 1 and "'cohere'" in out["warnings"][0], out
            code, out = srv.request("POST", "/api/agents/main/explain", {"query": "Prefers tea"})
            assert code == 200, out
            assert out["skipped"] and "'cohere'" in out["skipped"][0], out
            assert out["response"]["warnings"] == out["skipped"], out
            code, st = srv.request("GET", "/api/agents/main/status")
            assert code == 200 and st["reranker"]["name"] == "cohere" and st["reranker"]["hung"] is True, st
    finally:
        silent.close()


def test_mcp_answers_under_a_small_max_response_bytes_are_not_emptied(setup: dict[str, Path]) -> None:
    """``serve.maxResponseBytes`` may be as low as 1024: an MCP answer was then trimmed to 1024 - 1024 = 0 bytes
    (the JSON-RPC envelope's allowance taken from the setting), so ``memory_get`` of a 50-byte note gave no text
    and a "truncated" note, while the JSON API gave it whole under the same setting."""
    pytest.importorskip("mcp_types")
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    _write_config(setup["state"], setup["main"], setup["other"], extra="[serve]\nmaxResponseBytes = 1024\n")
    note = (setup["main"] / "MEMORY.md").read_text(encoding="utf-8")
    assert len(note.encode()) < 200

    async def check(url: str) -> None:
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            got = await session.call_tool("memory_get", {"path": "MEMORY.md"})
            assert got.is_error is False and got.structured_content == {"path": "MEMORY.md", "text": note}, got

    with running_server(setup["state"]) as srv:
        status, out = srv.request("POST", "/api/agents/main/get", {"path": "MEMORY.md"})
        assert status == 200 and out == {"path": "MEMORY.md", "text": note}, out
        asyncio.run(asyncio.wait_for(check(srv.url + "/mcp"), 90))
