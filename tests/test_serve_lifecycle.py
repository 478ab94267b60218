"""`symi-memory serve`: agents opened and closed under the requests of MCP sessions and HTTP clients.

A real server process on loopback, driven by the MCP SDK's streamable HTTP client and plain HTTP.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_serve import _INIT, _MCP_ACCEPT, _write_config, make_setup, running_server

pytest.importorskip("uvicorn")
pytest.importorskip("mcp_types")

TESTS = Path(__file__).resolve().parent
# The `stall` provider (tests/support/stalling_provider.py): a query naming `stall2.5s` takes 2.5 s to embed.
STALL_ENV = {"SYMI_MEMORY_PLUGINS": "symi_memory.testing.plugin,support.stalling_provider",
             "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def setup(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    return make_setup(tmp_path, workspace)


def _stall_config(setup: dict[str, Path], serve: str) -> Path:
    state = setup["state"]
    _write_config(state, setup["main"], setup["other"], extra=f"[serve]\n{serve}\n")
    cfg = state / "symi.toml"
    cfg.write_text(cfg.read_text().replace('provider = "hash"', 'provider = "stall"'))
    return state


async def _mcp(url: str, check: Any) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await check(session)


def test_an_mcp_call_longer_than_idle_minutes_keeps_its_agent_and_a_later_call_reopens_it(
        setup: dict[str, Path]) -> None:
    """serve.idleMinutes shorter than one memory_search: the agent was closed under the running call
    (the tool answered an error), because the MCP endpoint let go of the agent as soon as it had looked it up."""
    state = _stall_config(setup, "idleMinutes = 0.005")  # 0.3 s; the reaper looks every second

    with running_server(state, env=STALL_ENV) as srv:
        def open_agents() -> list[str]:
            status, out = srv.request("GET", "/api/health")
            assert status == 200, out
            return list(out["agents"])

        async def session(s: Any) -> tuple[list[Any], list[list[str]]]:
            answers = []
            # Longer than idleMinutes (shorter than the 2.5 s a query embedding is waited for): the reaper runs
            # once or twice meanwhile. What the server says is open is sampled all along.
            call = asyncio.ensure_future(s.call_tool("memory_search", {"query": "launch code PLUM-42 stall2.2s"}))
            seen: list[list[str]] = []
            while not call.done():
                seen.append(await asyncio.to_thread(open_agents))
                await asyncio.sleep(0.1)
            answers.append(await call)
            # Idle between two calls of one session: the agent is closed meanwhile ...
            deadline = time.monotonic() + 20
            while "other" in await asyncio.to_thread(open_agents):
                assert time.monotonic() < deadline, "agent other was never closed for idleness"
                await asyncio.sleep(0.3)
            # ... and the session's next call opens it again.
            answers.append(await s.call_tool("memory_get", {"path": "MEMORY.md"}))
            answers.append(await s.call_tool("memory_search", {"query": "launch code PLUM-42"}))
            return answers, seen

        (slow, got, again), seen = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/agents/other/mcp", session), 120))
        assert slow.is_error is False, slow.structured_content
        assert "PLUM-42" in slow.structured_content["results"][0]["snippet"]
        # Open from the moment the call opened it to its answer: never closed under it.
        held = ["other" in agents for agents in seen]
        assert True in held and all(held[held.index(True):]), seen
        assert got.is_error is False and "PLUM-42" in got.structured_content["text"], got.structured_content
        assert again.is_error is False and again.structured_content["results"], again.structured_content
        assert "other" in open_agents()
    assert "closing idle agent other" in srv.log.read_text()


def _post_mcp(port: int, body: dict[str, Any], session: str | None = None) -> tuple[int, str | None, bytes]:
    """One MCP POST on a fresh connection: (status, the Mcp-Session-Id answered, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", **_MCP_ACCEPT}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=headers)
    resp = conn.getresponse()
    out = (resp.status, resp.getheader("mcp-session-id"), resp.read())
    conn.close()
    return out


_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _hold_stream(port: int, session: str) -> socket.socket:
    """A client's standing GET stream on ``session`` (the session is busy while it is open)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
              f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n".encode())
    assert s.recv(12) == b"HTTP/1.1 200"
    return s


def test_abandoned_mcp_sessions_are_bounded_the_idlest_closed_first(setup: dict[str, Path]) -> None:
    """Clients that initialize and never end their session (no DELETE) kept ~40 KB each for 30 minutes,
    without limit. At serve.mcpMaxSessions a new session closes the one idle longest; when all are busy the
    new one is refused 503, saying why."""
    state = setup["state"]
    _write_config(state, setup["main"], setup["other"], extra="[serve]\nmcpMaxSessions = 3\n")
    with running_server(state) as srv:
        def sessions() -> dict[str, Any]:
            status, out = srv.request("GET", "/api/health")
            assert status == 200, out
            return dict(out["mcpSessions"])

        opened = []
        for _ in range(3):
            status, sid, _ = _post_mcp(srv.port, _INIT)
            assert status == 200 and sid, status
            opened.append(sid)
        assert sessions() == {"open": 3, "max": 3, "closedIdle": 0}

        # A real client still gets in: the oldest abandoned session makes room.
        async def use(s: Any) -> tuple[Any, dict[str, Any]]:
            hit = await s.call_tool("memory_search", {"query": "Prefers tea"})
            return hit, await asyncio.to_thread(sessions)

        hit, during = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/mcp", use), 90))
        assert hit.is_error is False and hit.structured_content["results"][0]["path"] == "MEMORY.md"
        assert during == {"open": 3, "max": 3, "closedIdle": 1}
        assert _post_mcp(srv.port, _INITIALIZED, opened[0])[0] == 404  # closed: its client would start anew
        assert _post_mcp(srv.port, _INITIALIZED, opened[2])[0] == 202  # a younger one lives on
        assert sessions()["open"] == 2  # the SDK client ended its own session (DELETE)

        # Every session busy (each client holding its stream open): a new one is refused, saying why.
        status, sid, _ = _post_mcp(srv.port, _INIT)
        assert status == 200 and sid
        streams = [_hold_stream(srv.port, s) for s in (opened[1], opened[2], sid)]
        status, none, body = _post_mcp(srv.port, _INIT)
        assert status == 503 and none is None and b"serve.mcpMaxSessions = 3" in body, (status, body)
        for s in streams:
            s.close()
        deadline = time.monotonic() + 20
        while (status := _post_mcp(srv.port, _INIT)[0]) == 503 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert status == 200

        # A flood of abandoned sessions stays at the limit.
        for _ in range(150):
            assert _post_mcp(srv.port, _INIT)[0] == 200
        after = sessions()
        assert after["open"] == 3 and after["closedIdle"] >= 150, after
    assert "serve.mcpMaxSessions (3) reached" in srv.log.read_text()


def test_an_mcp_session_idle_for_mcp_session_idle_minutes_is_closed(setup: dict[str, Path]) -> None:
    state = setup["state"]
    _write_config(state, setup["main"], setup["other"], extra="[serve]\nmcpSessionIdleMinutes = 0.02\n")  # 1.2 s
    with running_server(state) as srv:
        status, sid, _ = _post_mcp(srv.port, _INIT)
        assert status == 200 and sid
        assert _post_mcp(srv.port, _INITIALIZED, sid)[0] == 202
        time.sleep(2.5)
        assert _post_mcp(srv.port, _INITIALIZED, sid)[0] == 404
        status, out = srv.request("GET", "/api/health")
        assert out["mcpSessions"]["open"] == 0


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    return t, out


def _sound(db_path: Path) -> bool:
    import apsw

    db = apsw.Connection(str(db_path))
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def test_sigterm_answers_a_request_waiting_for_an_agent_still_opening_at_once(setup: dict[str, Path]) -> None:
    """A search for an agent whose first sync is still running when SIGTERM arrives: the server waited for
    that sync, up to its whole 10 s grace, then answered 500 (a traceback in its log). Now the first sync
    stops at its next file and the request is answered 503 at once (the CLI then answers in-process)."""
    bulk = setup["other"] / "memory" / "bulk"
    bulk.mkdir()
    for i in range(3000):
        (bulk / f"n{i:04d}.md").write_text("".join(f"- note {i} line {j} about item {i * 31 + j}\n" for j in range(20)))
    with running_server(setup["state"]) as srv:
        t, out = _in_thread(lambda: srv.request("POST", "/api/agents/other/search", {"query": "note 5"}))
        # The request is in the server once it is opening the agent (its index file appears); a fixed 0.5 s was
        # sometimes before the server had read it on a loaded host, and the unread connection was reset.
        deadline = time.monotonic() + 60
        while not (setup["state"] / "memory" / "other.sqlite").exists():
            assert time.monotonic() < deadline and t.is_alive(), out
            time.sleep(0.02)
        started = time.monotonic()
        assert srv.stop() == 0
        took = time.monotonic() - started
        t.join(timeout=60)
    log = srv.log.read_text()
    assert out and out[0][0] == 503 and "shutting down" in out[0][1]["error"], out
    assert took < 5, took
    assert "Traceback" not in log and "could not open agent" not in log, log
    assert _sound(setup["state"] / "memory" / "other.sqlite")


def test_sigterm_closes_what_outlasts_the_grace_and_answers_it_503(setup: dict[str, Path]) -> None:
    """A sync still running 10 s after SIGTERM: uvicorn cancelled its request (500, a traceback in the log)
    and the sync went on under a server that was exiting. Now the agent is closed at the end of the grace,
    the sync stops at its next file, and its request is answered 503."""
    state = _stall_config(setup, "")
    with running_server(state, env=STALL_ENV) as srv:
        assert srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})[0] == 200
        # 2,600 notes the embedder takes 0.3 s per batch of 64 for: about 12 s of sync, interrupted only
        # between groups of files.
        bulk = setup["main"] / "memory" / "bulk"
        bulk.mkdir()
        for i in range(2600):
            (bulk / f"n{i:04d}.md").write_text(f"- stall0.3s note {i}\n")
        t, out = _in_thread(lambda: srv.request("POST", "/api/agents/main/sync", {}))
        time.sleep(1.0)
        started = time.monotonic()
        assert srv.stop() == 0
        took = time.monotonic() - started
        t.join(timeout=60)
    log = srv.log.read_text()
    assert out and out[0][0] == 503, out
    assert 9 < took < 20, took
    assert "Traceback" not in log, log
    assert _sound(state / "memory" / "main.sqlite")


def _with_agents(setup: dict[str, Path], tmp_path: Path, count: int, *, extra: str = "") -> None:
    """The server's config with ``count`` more agents, a0, a1, ..., each with a workspace of its own (one note), and
    ``extra`` (TOML) before them."""
    for i in range(count):
        ws = tmp_path / f"ws{i}"
        (ws / "memory").mkdir(parents=True)
        (ws / "MEMORY.md").write_text(f"# Agent {i}\n\n- Prefers tea number {i}.\n", encoding="utf-8")
        extra += f'[[agents.list]]\nid = "a{i}"\nworkspace = "{ws}"\n'
    _write_config(setup["state"], setup["main"], setup["other"], extra=extra)


def test_many_agents_and_clients_fit_in_a_small_file_descriptor_limit(setup: dict[str, Path], tmp_path: Path) -> None:
    """Every worker thread kept a read connection to every agent's index it had searched: 8 agents and 40
    concurrent clients took ~800 file descriptors, and under `ulimit -n 512` the server stopped accepting
    connections ("Too many open files"). Each agent now has its own few threads."""
    state = setup["state"]
    _with_agents(setup, tmp_path, 8)
    small = ("sh", "-c", 'ulimit -n 512 && exec "$0" "$@"')
    with running_server(state, prefix=small) as srv:
        failures: list[str] = []

        deadline = time.monotonic() + 6

        def client(k: int) -> None:
            n = k
            while time.monotonic() < deadline:
                n += 1
                agent = f"a{n % 8}"
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=15)
                    conn.request("POST", f"/api/agents/{agent}/search", body=b'{"query": "Prefers tea"}',
                                 headers={"Host": f"127.0.0.1:{srv.port}", "Content-Type": "application/json"})
                    resp = conn.getresponse()
                    out = json.loads(resp.read())
                    conn.close()
                    if resp.status != 200 or not out.get("results"):
                        failures.append(f"{agent}: {resp.status} {out}")
                except (OSError, ValueError) as exc:
                    failures.append(f"{agent}: {type(exc).__name__}: {exc}")
                if failures:
                    return

        clients = [threading.Thread(target=client, args=(k,)) for k in range(40)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(timeout=120)
        assert failures == [], failures[:3]
        status, out = srv.request("GET", "/api/health")
        assert status == 200 and len(out["agents"]) == 9
    assert "Too many open files" not in srv.log.read_text()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.settimeout(20)
    return s


def _answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except OSError:
        pass
    s.close()
    return out


class _Closing:
    """Reads ``s`` on a thread until the server closes it, noting when: the time a connection was cut off is the
    server's, not whenever the test got round to reading it (a search answered meanwhile on a loaded host)."""

    def __init__(self, s: socket.socket) -> None:
        self.data = b""
        self.closed_at: float | None = None  # None: the read timed out, the server never closed it
        self._thread = threading.Thread(target=self._read, args=(s,), daemon=True)
        self._thread.start()

    def _read(self, s: socket.socket) -> None:
        try:
            while chunk := s.recv(65536):
                self.data += chunk
            self.closed_at = time.monotonic()
        except TimeoutError:
            pass
        except OSError:  # reset by the server: closed too
            self.closed_at = time.monotonic()
        finally:
            s.close()

    def result(self) -> tuple[bytes, float | None]:
        self._thread.join(60)
        assert not self._thread.is_alive()
        return self.data, self.closed_at


def _response(s: socket.socket) -> bytes:
    """One whole HTTP response (with a Content-Length) read from ``s``."""
    data = b""
    while b"\r\n\r\n" not in data and (chunk := s.recv(65536)):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length and (chunk := s.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


def _trickle(s: socket.socket, data: bytes, every: float) -> float | None:
    """Send ``data`` a byte every ``every`` s; how long until the server closed the connection (None: never)."""
    started = time.monotonic()
    for byte in data:
        try:
            s.send(bytes([byte]))
        except OSError:  # the server closed it
            return time.monotonic() - started
        time.sleep(every)
    return None


def test_clients_that_trickle_a_request_in_are_cut_off(setup: dict[str, Path]) -> None:
    """A connection that sent nothing, or a request's head or body a byte now and then, was held open for as
    long as the client liked (a file descriptor each: a few hundred such clients and no one else got in). Now
    the head must arrive within serve.clientTimeoutSeconds, and the body may not stall that long nor average
    under 1 KiB/s after it."""
    state = setup["state"]
    _write_config(state, setup["main"], setup["other"], extra="[serve]\nclientTimeoutSeconds = 2\n")
    with running_server(state) as srv:
        head = f"POST /api/agents/main/search HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n".encode()
        json_head = head + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        silent, trickling, slow_body, slow_mcp = (_connect(srv.port) for _ in range(4))
        # 1000 bytes in, then nothing: the stall (2 s after them) comes well before the 1 KiB/s average would run
        # out (2 s + 1000/1024 s), whatever the host's load. With one byte in, the two came within a millisecond.
        slow_body.sendall(head + b"Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{" + b" " * 999)
        slow_mcp.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: application/json\r\n"
                         f"Accept: application/json, text/event-stream\r\nContent-Length: 500\r\n\r\n{{".encode())
        started = time.monotonic()
        closing = {name: _Closing(s) for name, s in (("silent", silent), ("body", slow_body), ("mcp", slow_mcp))}
        cut = _trickle(trickling, head[:16], 0.5)  # a byte every 0.5 s: never idle, never done
        assert cut is not None and cut < 6, cut
        # Meanwhile everyone else is answered as usual.
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"]
        ended = {name: c.result() for name, c in closing.items()}
        # Each was cut off by the server near its 2 s deadline (generous for a loaded host; a connection never cut
        # off shows as None, after the client's 20 s read timeout).
        took = {name: None if at is None else round(at - started, 1) for name, (_, at) in ended.items()}
        assert all(t is not None and t < 8 for t in took.values()), took
        assert ended["silent"][0] == b""
        body = ended["body"][0]
        assert body.startswith(b"HTTP/1.1 408") and b"stalled: nothing came for 2 s" in body, body
        assert ended["mcp"][0].split(b" ", 2)[1] in (b"408", b"400"), "the MCP endpoint took the slow body"
        # A body never silent for 2 s, but a byte every 0.5 s: cut off once under 1 KiB/s after its first 2 s.
        dripping = _connect(srv.port)
        dripping.sendall(json_head)
        cut = _trickle(dripping, b'{"query": "Prefers tea"' + b" " * 80, 0.5)
        body = _answer(dripping)
        assert body.startswith(b"HTTP/1.1 408") and b"too slowly" in body, (cut, body)
        # After an answer, the next request's head on the same connection has the same deadline.
        kept = _connect(srv.port)
        kept.sendall(head + b"Content-Type: application/json\r\nContent-Length: 24\r\n\r\n"
                     b'{"query": "Prefers tea"}')
        first = _response(kept)
        assert first.startswith(b"HTTP/1.1 200"), first
        cut = _trickle(kept, head, 0.5)
        assert cut is not None and cut < 6, cut
    assert "Traceback" not in srv.log.read_text()


def test_a_slow_but_steady_upload_and_a_long_answer_are_not_cut(setup: dict[str, Path]) -> None:
    """The whole body had to arrive within serve.clientTimeoutSeconds: a large request over a slow link (here 9 KB
    at about 2 KB/s, over twice the 2 s limit) was answered 408 although it never stalled. A search that takes
    longer than the limit to answer is not a late head either: its connection stays open for the next request."""
    state = _stall_config(setup, "clientTimeoutSeconds = 2")
    with running_server(state, env=STALL_ENV) as srv:
        body = b'{"query": "Prefers tea"' + b" " * 9000 + b"}"  # JSON whitespace: the same search, 9 KB
        s = _connect(srv.port)
        s.sendall(f"POST /api/agents/main/search HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        started = time.monotonic()
        for i in range(0, len(body), 200):
            s.sendall(body[i:i + 200])
            time.sleep(0.1)
        took = time.monotonic() - started
        answer = _response(s)
        assert took > 4, took
        assert answer.startswith(b"HTTP/1.1 200") and b"MEMORY.md" in answer, answer[:300]
        # The same connection: a search whose embedding takes 3 s (over the 2 s limit) is answered on it.
        slow = json.dumps({"query": "Prefers tea stall3s"}).encode()
        s.sendall(f"POST /api/agents/main/search HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(slow)}\r\n\r\n".encode() + slow)
        again = _response(s)
        assert again.startswith(b"HTTP/1.1 200"), again[:300]
        s.close()
    assert "Traceback" not in srv.log.read_text()


def test_two_connections_from_one_client_port_to_two_server_addresses_keep_their_own_deadlines(
        setup: dict[str, Path]) -> None:
    """A server listening on every address names a connection by its client's address and port alone: two connections
    from one client port to two of its addresses (Linux gives one ephemeral port to connections to different
    destinations) were one to the head deadline. The second's entry replaced the first's, whose timer from the
    moment it opened then ran on through its request: a search taking 3 s on a 2 s limit was cut off unanswered."""
    state = _stall_config(setup, 'clientTimeoutSeconds = 2\ntoken = "s3cret-token-0123456789"')
    a, b = socket.socket(), socket.socket()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.settimeout(20)
    a.bind(("127.0.0.1", 0))
    b.bind(a.getsockname())  # the same client address and port
    with running_server(state, "--host", "0.0.0.0", env=STALL_ENV) as srv:
        a.connect(("127.0.0.1", srv.port))
        try:
            b.connect(("127.0.0.2", srv.port))
        except OSError as exc:  # no 127.0.0.2 (macOS has only 127.0.0.1 on lo0)
            pytest.skip(f"127.0.0.2 unreachable: {exc}")
        time.sleep(0.3)  # both are open on the server
        body = json.dumps({"query": "Prefers tea stall3s"}).encode()
        a.sendall(f"POST /api/agents/main/search HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
                  f"Authorization: Bearer s3cret-token-0123456789\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        answer = _response(a)
        assert answer.startswith(b"HTTP/1.1 200") and b"MEMORY.md" in answer, answer[:300]
        assert _answer(b) == b""  # the other, which sent nothing, is closed at its own deadline
        a.close()
    assert "Traceback" not in srv.log.read_text()


def test_serve_says_what_to_install_when_uvicorn_has_no_h11_protocol(setup: dict[str, Path], tmp_path: Path) -> None:
    """The head deadline is uvicorn's own h11 protocol with the asyncio connection callbacks extended: a uvicorn
    without it (a release that moved it) makes serve refuse to start, naming the tested releases, rather than
    serve without the deadline."""
    stub = tmp_path / "stub" / "uvicorn"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("__version__ = '9.0'\nclass Server: ...\nclass Config: ...\n")
    env = {**os.environ, "SYMI_STATE_DIR": str(setup["state"]),
           "PYTHONPATH": os.pathsep.join([str(stub.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "symi_memory.cli", "serve", "--port", "0"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode != 0
    assert "cannot limit slow clients" in proc.stderr and "pip install 'uvicorn>=" in proc.stderr, proc.stderr
    assert not (setup["state"] / "serve.json").exists()


def test_an_agent_that_cannot_be_opened_is_answered_with_why_and_the_others_go_on(setup: dict[str, Path]) -> None:
    """An agent whose index file cannot be opened (here a directory stands in its place): the JSON API answered
    a bare 500 (a traceback in the log) and an MCP tool call a protocol error instead of a tool result."""
    state = setup["state"]
    (state / "memory").mkdir(parents=True, exist_ok=True)
    (state / "memory" / "other.sqlite").mkdir()
    with running_server(state) as srv:
        status, out = srv.request("POST", "/api/agents/other/search", {"query": "launch code"})
        assert status == 503 and "agent 'other' could not be opened" in out["error"], (status, out)

        async def call(s: Any) -> Any:
            return await s.call_tool("memory_search", {"query": "launch code"})

        hit = asyncio.run(asyncio.wait_for(_mcp(srv.url + "/agents/other/mcp", call), 60))
        assert hit.is_error is True and "agent 'other' could not be opened" in hit.structured_content["error"]
        status, out = srv.request("POST", "/api/agents/main/search", {"query": "Prefers tea"})
        assert status == 200 and out["results"]
    log = srv.log.read_text()
    assert "Traceback" not in log and "could not open agent other" in log, log


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/<pid>/limits")
def test_the_server_raises_its_soft_open_files_limit(setup: dict[str, Path]) -> None:
    """About 25 descriptors per open agent: a soft limit of 1,024 ran out at some 40 agents in use although the
    hard limit allowed far more."""
    low = ("sh", "-c", 'ulimit -S -n 256 && exec "$0" "$@"')
    with running_server(setup["state"], prefix=low) as srv:
        line = next(ln for ln in Path(f"/proc/{srv.proc.pid}/limits").read_text().splitlines()
                    if ln.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        assert int(soft) > 256 and (hard == "unlimited" or int(soft) == min(int(hard), 65536)), line


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_an_agent_closed_for_idleness_lets_its_threads_go(setup: dict[str, Path], tmp_path: Path) -> None:
    """Each agent's worker threads (up to 4) outlived the agent: closed for idleness, its threads stayed, so a
    server whose clients come and go over many agents held 4 idle threads for every agent it had ever served."""
    state = setup["state"]
    _with_agents(setup, tmp_path, 6, extra="[serve]\nidleMinutes = 0.005\n")
    with running_server(state) as srv:
        def open_agents() -> list[str]:
            status, out = srv.request("GET", "/api/health")
            assert status == 200, out
            return list(out["agents"])

        deadline = time.monotonic() + 30
        while open_agents() != ["main"]:  # the pinned agent warmed up
            assert time.monotonic() < deadline
            time.sleep(0.1)
        before = _threads(srv.proc.pid)

        def search(agent: str) -> None:
            status, out = srv.request("POST", f"/api/agents/{agent}/search", {"query": "Prefers tea"})
            assert status == 200 and out["results"], out

        for _ in range(2):  # all of each agent's threads busy at once
            clients = [threading.Thread(target=search, args=(f"a{i % 6}",)) for i in range(24)]
            for t in clients:
                t.start()
            for t in clients:
                t.join(timeout=60)
        busy = _threads(srv.proc.pid)
        deadline = time.monotonic() + 30
        while open_agents() != ["main"]:
            assert time.monotonic() < deadline, "the agents were never closed for idleness"
            time.sleep(0.3)
        deadline = time.monotonic() + 10
        while _threads(srv.proc.pid) > before + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        after = _threads(srv.proc.pid)
    assert busy >= before + 6, (before, busy)
    assert after <= before + 2, f"{after - before} threads more than before 6 agents were used and closed"


def test_bad_serve_options_are_refused_saying_which_to_change(setup: dict[str, Path], cli: Any) -> None:
    """``--idle-minutes -5`` started a server that closed agents as soon as it could; an address this machine does
    not have was blamed on the port ("pick another serve.port")."""
    env = {"SYMI_STATE_DIR": str(setup["state"]), "SYMI_SERVE_TOKEN": "a-token-long-enough-1234"}
    for bad in ("-5", "nan"):
        code, out, err = cli("serve", "--idle-minutes", bad, env=env)
        assert code == 2 and "--idle-minutes" in err and "0 or more" in err and "Traceback" not in err, (bad, err)
        assert "serving on" not in out
    code, _, err = cli("serve", "--host", "203.0.113.5", "--port", "0", env=env)  # TEST-NET-3: no machine's own
    assert code == 2 and "cannot bind 203.0.113.5:0" in err and "serve.host" in err and "serve.port" not in err, err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli("serve", "--port", str(port), env=env)
        assert code == 2 and f"cannot bind 127.0.0.1:{port}" in err and "serve.port" in err, err
