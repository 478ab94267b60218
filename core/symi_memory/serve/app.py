"""The ASGI application of ``symi-memory serve``: JSON API, MCP over streamable HTTP, inspector.

Built on Starlette and served by uvicorn, both already installed with the
``mcp`` extra (the SDK's streamable HTTP transport is a Starlette app): no
new dependency, and the MCP endpoint and the JSON API share one event loop,
one port and one guard.

Every request passes :class:`Guard` first: the Host header must name a
loopback address when the server binds one (DNS rebinding), a browser's
``Origin`` must be the server itself (no other page may drive it), the bearer token
must match when one is set, and bodies over ``serve.maxBodyBytes`` get 413
before anything reads them. Blocking work (SQLite, embedding) runs in worker
threads, at most 4 per agent (:class:`AgentThreads`), so a slow search or a
client that goes away mid-request never holds up the others.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from .. import arguments, tools
from ..errors import BuildWaitExpired, SymiMemoryError
from .pool import AgentPool, AgentStarting, AgentUnavailable, UnknownAgent, check_agent_id, ensure_fresh
from .protocol import HeadDeadlines
from .record import eval_record_path
from .sessions import McpSessions

__all__ = ["AgentThreads", "Guard", "ServerState", "build_app", "is_loopback", "same_origin"]

log = logging.getLogger("symi_memory.serve")

_T = TypeVar("_T")

SERVER_HEADER = (b"x-symi-memory", b"1")
_MCP_PATH = re.compile(r"^/(?:agents/([^/]+)/)?mcp/?$")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
#: A request body must average at least this many bytes a second once serve.clientTimeoutSeconds have passed.
BODY_MIN_RATE = 1024


def is_loopback(host: str) -> bool:
    """True for ``localhost`` (in any case: host names are case-insensitive) and loopback IP addresses; never
    for a DNS name such as ``127.0.0.1.example.com`` or ``localhost.example.com``."""
    host = host.lower()
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def same_origin(origin: str, host: str) -> bool:
    """True when the browser's ``Origin`` names the host and port the request was sent to (``Host``)."""
    scheme, sep, netloc = origin.strip().partition("://")
    return bool(sep) and scheme.lower() in ("http", "https") and bool(host) and netloc.lower() == host.lower()


def _forwarded_clients(headers: dict[bytes, bytes]) -> list[str]:
    """The client addresses a reverse proxy names (``X-Forwarded-For``, ``Forwarded: for=``, ``X-Real-IP``),
    without ports or brackets. Untrusted: a client may send them itself; only ever used to warn."""
    names: list[str] = []
    for raw in (headers.get(b"x-forwarded-for", b""), headers.get(b"x-real-ip", b"")):
        names += raw.decode("latin-1").split(",")
    for element in headers.get(b"forwarded", b"").decode("latin-1").replace(",", ";").split(";"):
        key, _, value = element.strip().partition("=")
        if key.strip().lower() == "for":
            names.append(value)
    out = []
    for name in names:
        name = name.strip().strip('"').strip()
        if name.startswith("["):
            name = name[1:].partition("]")[0]
        elif name.count(":") == 1:
            name = name.partition(":")[0]
        if name:
            out.append(name[:64])
    return out


class Guard:
    """ASGI middleware: Host and Origin checks, bearer token, body cap, the server header, request counts."""

    def __init__(self, app: Any, *, token: str | None, loopback: bool, max_body: int, mcp: Any = None,
                 state: ServerState | None = None, body_seconds: float = 30.0, heads: HeadDeadlines | None = None) -> None:
        self.app = app
        self.body_seconds = body_seconds
        self.heads = heads
        self.token = token.encode() if token else None
        self.loopback = loopback
        self.max_body = max_body
        self.mcp = mcp
        self.state = state
        self._proxy_warned = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # The request's head is in: its connection's head deadline is off until it is answered.
        head = self.heads.head_in(scope.get("client"), scope.get("server")) if self.heads is not None and scope["type"] == "http" else None
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self._http(scope, receive, send, head)
        finally:
            if head is not None:
                head[0].answered(head[1])

    async def _http(self, scope: Any, receive: Any, send: Any, head: Any) -> None:
        headers = dict(scope.get("headers") or [])
        started = False

        async def send_marked(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], SERVER_HEADER]
            await send(message)
            if head is not None and message["type"] == "http.response.body" and not message.get("more_body", False):
                head[0].answered(head[1])  # the next request's head is awaited from now

        async def refuse(status: int, error: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
            body = json.dumps({"error": error}).encode()
            await send_marked({"type": "http.response.start", "status": status,
                               "headers": [(b"content-type", b"application/json"),
                                           (b"content-length", str(len(body)).encode()), *(extra or [])]})
            await send_marked({"type": "http.response.body", "body": body})

        path = scope.get("path", "")
        # For the log: the client chose the path (URL-decoded, control characters and all), so it is escaped.
        shown = repr(path)[1:-1]
        host = headers.get(b"host", b"").decode("latin-1")
        if self.loopback:
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if not is_loopback(name):
                log.info("refused %s %s: Host %r is not a loopback name", scope["method"], shown, host)
                await refuse(421, "this server only answers requests addressed to 127.0.0.1 or localhost")
                return
        if self.token is None and not self._proxy_warned:
            remote = [c for c in _forwarded_clients(headers) if not is_loopback(c)]
            if remote:
                # A proxy others can reach makes a loopback-bound server theirs too: say so, once. Not refused:
                # the proxy may authenticate its clients itself (basic auth, single sign-on).
                self._proxy_warned = True
                log.warning("a request came through a proxy for %r, not a loopback client, and this server has no "
                            "token: whoever can reach the proxy can read and write memory unless the proxy "
                            "authenticates them; set serve.token (or $SYMI_SERVE_TOKEN) and have the proxy send "
                            "'Authorization: Bearer <token>'", remote[0].encode("ascii", "backslashreplace").decode())
        origin = headers.get(b"origin")
        # Behind a reverse proxy the browser's name for the server is X-Forwarded-Host (nginx, Apache, Caddy), Host
        # being the proxy's upstream address. A page elsewhere cannot forge it: a custom header needs a preflight,
        # and the preflight carries its own Origin, refused here.
        forwarded = headers.get(b"x-forwarded-host", b"").decode("latin-1").split(",")[0].strip()
        if origin is not None and not (same_origin(origin.decode("latin-1"), host)
                                       or (forwarded and same_origin(origin.decode("latin-1"), forwarded))):
            # A browser names the page that sent the request: only the server's own pages (the inspector) may
            # drive it, as the MCP spec asks of streamable HTTP servers; clients outside a browser send no Origin.
            log.info("refused %s %s: Origin %r is not this server", scope["method"], shown, origin.decode("latin-1"))
            await refuse(403, "cross-origin request refused: only pages served by this server may call it")
            return
        if self.token is not None:
            # The scheme is case-insensitive and may be followed by more than one space (RFC 9110 11.1, 11.4);
            # the credentials are compared in constant time.
            scheme, _, given = headers.get(b"authorization", b"").strip().partition(b" ")
            if not (hmac.compare_digest(given.strip(), self.token) and scheme.lower() == b"bearer"):
                log.info("refused %s %s: missing or wrong token", scope["method"], shown)
                await refuse(401, "missing or wrong token: send 'Authorization: Bearer <serve.token>'",
                             [(b"www-authenticate", b"Bearer")])
                return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                too_big = int(length) > self.max_body
            except ValueError:
                await refuse(400, "bad Content-Length")
                return
            if too_big:
                await refuse(413, _too_large(self.max_body))
                return
        seen = 0
        max_body = self.max_body
        # A client trickling a body in would hold its connection (and a file descriptor) for as long as it
        # liked. So no part of the body may keep the server waiting more than body_seconds, and the body as a
        # whole must keep up an average of BODY_MIN_RATE bytes a second after its first body_seconds: a large
        # upload over a slow link goes through, a stalled or trickling one is cut off (408). Once the body is
        # in, receive() waits for the disconnect of a streamed answer, without limit.
        began: float | None = time.monotonic()
        limit = self.body_seconds

        async def capped_receive() -> Any:
            nonlocal seen, began
            if began is None:
                return await receive()
            now = time.monotonic()
            overall = began + limit + seen / BODY_MIN_RATE - now
            try:
                message = await asyncio.wait_for(receive(), max(0.0, min(limit, overall)))
            except TimeoutError:
                if overall <= limit:
                    raise _BodyRefused(408, f"the request body arrived too slowly: under {BODY_MIN_RATE} bytes/s "
                                            f"after its first {limit:g} s ({seen} bytes in)") from None
                raise _BodyRefused(408, f"the request body stalled: nothing came for {limit:g} s "
                                        f"(serve.clientTimeoutSeconds; {seen} bytes in)") from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_body:
                    raise _BodyRefused(413, _too_large(max_body))
                if not message.get("more_body", False):
                    began = None
            else:
                began = None
            return message

        try:
            m = _MCP_PATH.match(path)
            if m and self.mcp is not None:
                agent = m.group(1) or "main"
                try:
                    assert self.state is not None
                    self.state.pool.check(agent)
                except UnknownAgent as exc:
                    await refuse(404, str(exc))
                    return
                except SymiMemoryError as exc:
                    await refuse(400, str(exc))
                    return
                scope = {**scope, "symi.agent": agent}
                self.state.count("mcp")
                await self.mcp.handle_request(scope, capped_receive, send_marked)
                return
            await self.app(scope, capped_receive, send_marked)
        except _BodyRefused as exc:
            if not started:  # else the app answered already (an error of its own): the connection just ends
                await refuse(exc.status, str(exc))


def _too_large(max_body: int) -> str:
    """What a request whose body is over the limit is answered (413)."""
    return f"request body over serve.maxBodyBytes ({max_body} bytes)"


class _BodyRefused(Exception):
    """The body went over serve.maxBodyBytes (413) or did not arrive in time (408)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AgentThreads:
    """The worker threads of each agent: at most ``per_agent`` run its requests at once, the others wait their turn.

    A thread keeps its own read connection to each index it searches (file descriptors and a page cache), so
    on one shared pool of threads every thread would come to hold one to every agent's index: 40 threads and
    12 agents took about 1,100 descriptors, over the usual limit of 1,024. Here an agent's index is read
    through at most ``per_agent`` connections, and one agent's slow requests never hold up another's.
    """

    def __init__(self, per_agent: int = 4) -> None:
        self.per_agent = per_agent
        self._lock = threading.Lock()
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._closed = False

    async def run(self, agent: str, fn: Callable[[], _T]) -> _T:
        """``fn()`` in one of ``agent``'s threads. Cancelled while it waits for a thread, it never runs; cancelled
        while it runs, it runs to its end (it releases what it acquired) and its result is dropped."""
        with self._lock:
            if self._closed:
                raise SymiMemoryError("the server is shutting down")
            pool = self._pools.get(agent)
            if pool is None:
                pool = self._pools[agent] = ThreadPoolExecutor(self.per_agent, thread_name_prefix=f"symi-{agent}")
            future = pool.submit(fn)  # under the lock: retire() never shuts a pool down between lookup and submit
        return await asyncio.wrap_future(future)

    def retire(self, agent: str) -> None:
        """The agent was closed for idleness: its threads end once what was handed to them is done (a request
        that came meanwhile runs, and opens the agent again); its next request starts new ones."""
        with self._lock:
            pool = self._pools.pop(agent, None)
        if pool is not None:
            pool.shutdown(wait=False)

    def shutdown(self) -> None:
        """No more work; what waits for a thread is dropped, what runs finishes on its own."""
        with self._lock:
            self._closed = True
            pools = list(self._pools.values())
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


class ServerState:
    """What the routes share: the pool, settings, counters."""

    def __init__(self, pool: AgentPool, *, url: str, pid: int, max_response: int, state_dir: Path,
                 config_path: str | None, inspector: bool) -> None:
        self.pool = pool
        self.url = url
        self.pid = pid
        self.max_response = max_response
        self.state_dir = state_dir
        self.config_path = config_path
        self.inspector = inspector
        self.started = time.time()
        self.requests: dict[str, int] = {}
        self.threads = AgentThreads()
        self.mcp_sessions: McpSessions | None = None

    def count(self, kind: str) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + 1

    def info(self) -> dict[str, Any]:
        return {"url": self.url, "pid": self.pid, "startedAt": self.started, "requests": dict(self.requests),
                "agents": self.pool.open_agents(), "sharedModels": self.pool.providers.stats(),
                "mcpSessions": self.mcp_sessions.stats() if self.mcp_sessions is not None else None}


class _JSON(JSONResponse):
    """JSON as UTF-8; an answer that echoes a lone surrogate of the request (a path, a query) is sent
    with ``\\u`` escapes instead of failing to encode."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return _JSON({"error": message}, status_code=status, headers=headers)


#: The answers that list what a search found: they say so while the agent's first sync runs.
_SEARCHES = ("search", "explain", "history")
#: The answers that need no index: they answer at once while the agent's first index is built (status says how far).
_NO_INDEX = ("status", "files")


def _catching_up(pool: AgentPool, agent: str, out: Any, kind: str = "search") -> Any:
    """``out`` (a search's answer) with a warning when the agent's first sync is still running.

    ``explain`` wraps a search's answer (``response``): the warning goes in that answer's ``warnings``, beside the
    stages the search skipped, as :meth:`MemoryManager.explain` puts every warning of the search there."""
    catch = pool.catching_up(agent)
    if catch is None or not isinstance(out, dict):
        return out
    if kind == "explain" and isinstance(out.get("response"), dict):
        return {**out, "response": _catching_up(pool, agent, out["response"])}
    return {**out, "warnings": [*(out.get("warnings") or []), catch.warning(agent)]}


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


#: The most bytes of tool answer an MCP tool result carries. The MCP SDK's client refuses a server-sent event over
#: 1 MiB (``DEFAULT_MAX_SSE_EVENT_SIZE``), failing the call, and a tool result is sent as one such event.
MCP_ANSWER_BYTES = 1_000_000


def _mcp_size(value: Any) -> int:
    """The bytes an MCP tool result spends on ``value``: it carries it twice, as ``structuredContent`` and as the
    JSON text of its text content (escaped once more inside that JSON string)."""
    return _size(value) + _size(json.dumps(value, ensure_ascii=False))


def _fit(out: dict[str, Any], limit: int, size: Callable[[Any], int] = _size,
         why: str = "serve.maxResponseBytes") -> dict[str, Any]:
    """Trim a tool answer to ``limit`` bytes of JSON (as ``size`` counts them): drop trailing results, cut long
    text. ``truncated`` says so, naming ``why``."""
    if size(out) <= limit:
        return out
    out = dict(out)
    out["truncated"] = f"answer trimmed to {why} ({limit} bytes); ask for fewer results or lines"
    if isinstance(out.get("results"), list):
        results = list(out["results"])
        while results and size({**out, "results": results}) > limit:
            results.pop()
        out["results"] = results
    if isinstance(out.get("text"), str):
        # A start of the text that fits. A character takes at least one byte; escaping (quotes, control
        # characters, the second copy of an MCP answer) takes more: measured, each guess scaled by what the last
        # one took (two or three measurements of a few MB, not one per character).
        text = out["text"]
        base = size({**out, "text": ""})
        room = limit - base
        n = min(len(text), max(0, room))
        while n > 0:
            used = size({**out, "text": text[:n]}) - base
            if used <= room:
                break
            n = min(n - 1, int(n * room / used * 0.99))
        out["text"] = text[:max(0, n)]
    if isinstance(out.get("candidates"), list):
        cands = list(out["candidates"])
        while cands and size({**out, "candidates": cands}) > limit:
            cands.pop()
        out["candidates"] = cands
    return out


async def _body(request: Request) -> dict[str, Any]:
    if request.method == "GET":
        return {}
    ctype = request.headers.get("content-type", "").split(";")[0].strip()
    try:
        raw = await request.body()
    except _BodyRefused as exc:  # a chunked body with no Content-Length or a slow one, cut off by the Guard
        raise _Bad(exc.status, str(exc)) from None
    if not raw:
        return {}
    if ctype != "application/json":
        raise _Bad(415, "send the request body as application/json")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: arrays or objects nested thousands deep
        raise _Bad(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise _Bad(400, "the request body must be a JSON object")
    return data


class _Bad(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def build_app(state: ServerState, *, token: str | None, loopback: bool, max_body: int, mcp_max_sessions: int = 100,
              mcp_idle_seconds: float | None = 1800.0, body_seconds: float = 30.0,
              heads: HeadDeadlines | None = None) -> Any:
    """The whole server as one ASGI app (Guard around Starlette, MCP routed by the Guard).

    No part of a request's body may keep it waiting over ``body_seconds``, and the body must average
    :data:`BODY_MIN_RATE` bytes a second after its first ``body_seconds`` (else 408). ``heads`` (the server's
    :class:`~.protocol.HeadDeadlines`) learns when each request's head came in and when it was answered.

    At most ``mcp_max_sessions`` MCP sessions live at once (:class:`~.sessions.McpSessions`), each closed after
    ``mcp_idle_seconds`` without requests (None: never).
    """
    from ..mcp_server import build_routed_server

    pool = state.pool

    async def first_sync(agent: str, run: Callable[[], _T]) -> _T:
        """``run()`` (which acquires ``agent`` with ``wait=0``) in one of the agent's worker threads. While the agent
        builds its first index, ``run`` raises :class:`AgentStarting` and the wait for that build is here, holding
        none of the agent's threads (waiters holding them all kept its status, which says how far the build is,
        queued behind them), at most ``serve.firstSyncWaitSeconds``; then AgentStarting is raised."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + pool.first_sync_wait
        while True:
            try:
                return await state.threads.run(agent, run)
            except AgentStarting:
                catch = pool.catching_up(agent)
                if loop.time() >= deadline:
                    raise
                while catch is not None and not catch.done.is_set() and not pool.stopping and loop.time() < deadline:
                    await asyncio.sleep(0.05)

    async def agent_call(request: Request, kind: str, work: Any) -> Response:
        """Check the agent, hold its manager for the call, run ``work(manager, body)`` in a thread."""
        agent = request.path_params["agent"]
        try:
            body = await _body(request)
            pool.check(agent)
        except _Bad as exc:
            return _error(exc.status, exc.message)
        except UnknownAgent as exc:
            return _error(404, str(exc))
        except SymiMemoryError as exc:
            return _error(400, str(exc))
        want = body.get("workspace")
        index = kind not in _NO_INDEX

        def run() -> dict[str, Any]:  # one worker thread per request: acquire, check, work, release
            manager = pool.acquire(agent, wait=0, index=index)  # first_sync() waits for a first index
            try:
                if want is not None and (not isinstance(want, str) or Path(want) != manager.agent.workspace):
                    raise _Bad(409, f"this server serves agent {agent!r} from another workspace")
                state.count(kind)
                return work(manager, body)
            finally:
                pool.release(agent)

        try:
            out = await first_sync(agent, run)
        except _Bad as exc:
            return _error(exc.status, exc.message)
        except AgentStarting as exc:  # no index yet, its first build still running past serve.firstSyncWaitSeconds
            return _error(503, str(exc), {"Retry-After": str(exc.retry_after)})
        except SymiMemoryError as exc:
            # 503 for what a later try may get past: the server closing (a sync it cut short included), another
            # process's build still running, an agent that could not be opened.
            busy = isinstance(exc, (BuildWaitExpired, AgentUnavailable)) or pool.stopping
            return _error(503 if busy else 400, str(exc))
        except Exception as exc:
            if pool.stopping:
                return _error(503, "the server is shutting down")  # it closed the agent under this request
            # A bug (a plugin's, or ours): the client gets one line saying whose, in the API's JSON error shape,
            # not the bare "Internal Server Error" of the framework; the traceback goes to the server's log.
            from ..plugins import plugin_failure

            log.error("%s %s failed", kind, agent, exc_info=exc)
            return _error(500, plugin_failure(kind, exc))
        if kind in _SEARCHES:
            out = _catching_up(pool, agent, out, kind)
        return _JSON(_fit(out, state.max_response))

    def fresh(manager: Any, body: dict[str, Any]) -> None:
        """The CLI's searches bring changed files in first, as in-process; not while the agent's first sync runs
        (that sync is doing it: waiting for it could take minutes, the answer says it runs)."""
        if body.get("fresh") is True and pool.catching_up(manager.agent.id) is None:
            ensure_fresh(manager, reason="cli-search")

    def search_params(body: dict[str, Any]) -> dict[str, Any]:
        return {k: body[k] for k in ("query", "maxResults", "minScore", "asOf") if k in body}

    def session_of(body: dict[str, Any]) -> str | None:
        session = body.get("session")
        if session is not None and not isinstance(session, str):
            raise _Bad(400, "session must be a string")
        return session

    def query_of(body: dict[str, Any]) -> tuple[str, str | None]:
        """The body's ``query`` (a non-empty string) and ``asOf`` (a string or None), checked."""
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise _Bad(400, "query required: pass a non-empty string")
        as_of = body.get("asOf")
        if as_of is not None and not isinstance(as_of, str):
            raise _Bad(400, f"asOf must be a date like 2026-04-01, got {as_of!r}")
        return query, as_of

    def do_search(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        fresh(manager, body)
        return tools.memory_search(manager, search_params(body), session_key=session_of(body))

    def do_explain(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        query, as_of = query_of(body)
        try:
            return manager.explain(query, max_results=body.get("maxResults"), min_score=body.get("minScore"),
                                   session_key=session_of(body), as_of=as_of)
        except ValueError as exc:
            raise _Bad(400, str(exc)) from None

    def do_history(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        query, as_of = query_of(body)
        try:
            n = arguments.max_results(body.get("maxResults"))  # checked before the sync below
            min_score = arguments.min_score(body.get("minScore"))
            fresh(manager, body)
            found = manager.history(query, max_results=n or 30, min_score=min_score, as_of=as_of)
            return found.to_dict()  # type: ignore[no-any-return]
        except ValueError as exc:
            raise _Bad(400, str(exc)) from None

    def do_get(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        return tools.memory_get(manager, {k: body[k] for k in ("path", "from", "lines") if k in body})

    def do_append(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        return tools.memory_append(manager, {k: v for k, v in body.items() if k != "workspace"})

    def do_status(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        catch = pool.catching_up(manager.agent.id)
        return {**manager.status(), "lastSync": pool.last_sync(manager.agent.id),
                "firstSync": catch.view() if catch is not None else None, "server": state.info()}

    def do_sync(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise _Bad(400, "force must be true or false")
        return manager.sync(reason="serve-api", force=force).to_dict()

    def do_files(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
        return files_view(manager, pool.last_sync(manager.agent.id))

    def agent_route(kind: str, work: Any, methods: list[str]) -> Route:
        """``/api/agents/{agent}/<kind>``, named ``kind``: ``work(manager, body)`` through :func:`agent_call`."""

        async def endpoint(request: Request) -> Response:
            return await agent_call(request, kind, work)

        return Route(f"/api/agents/{{agent}}/{kind}", endpoint, methods=methods, name=kind)

    async def health(request: Request) -> Response:
        return _JSON({"ok": True, **state.info()})

    async def last_eval(request: Request) -> Response:
        path = Path(eval_record_path(state.state_dir))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return _JSON({"result": None, "hint": "run `symi-memory eval DATASET` to see results here"})
        except (OSError, ValueError) as exc:
            return _error(500, f"{path}: unreadable ({exc})")
        return _JSON(data)

    async def index_page(request: Request) -> Response:
        if not state.inspector:
            return _error(404, "the inspector is off (serve.inspector = false)")
        from .inspector import render_page

        agent = request.query_params.get("agent", "main")
        try:
            check_agent_id(agent)
        except SymiMemoryError as exc:
            return _error(400, str(exc))
        return HTMLResponse(render_page(agent=agent, agents=sorted(pool.allowed)),
                            headers={"Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                     "script-src 'self' 'unsafe-inline'; img-src 'self' data:",
                                     "X-Frame-Options": "DENY", "Cache-Control": "no-store"})

    routes = [
        Route("/", index_page, methods=["GET"]),
        Route("/api/health", health, methods=["GET"]),
        Route("/api/eval", last_eval, methods=["GET"]),
        agent_route("search", do_search, ["POST"]),
        agent_route("explain", do_explain, ["POST"]),
        agent_route("history", do_history, ["POST"]),
        agent_route("get", do_get, ["POST"]),
        agent_route("append", do_append, ["POST"]),
        agent_route("status", do_status, ["GET", "POST"]),
        agent_route("sync", do_sync, ["POST"]),
        agent_route("files", do_files, ["GET"]),
    ]

    async def run_mcp(ctx: Any, work: Any) -> Any:
        """One MCP request's work on the agent its URL names, held (never closed for idleness) until it is done:
        acquire, work and release in one worker thread, as the JSON API's requests do, so a call the client gave
        up on still lets go of the agent only once its work has finished."""
        request = getattr(ctx, "request", None)
        agent = request.scope.get("symi.agent", "main") if request is not None else "main"

        index = getattr(work, "needs_index", True)  # listing the tools needs none

        def held() -> Any:
            manager = pool.acquire(agent, wait=0, index=index)  # first_sync() waits for a first index
            try:
                out = work(manager)
            finally:
                pool.release(agent)
            if not isinstance(out, dict):
                return out
            out = _catching_up(pool, agent, out) if "results" in out else out
            # Trimmed as the JSON API's answers are, and to what an MCP client takes in one event.
            # The JSON-RPC envelope's allowance comes off the client's hard 1 MB only: taken off serve.maxResponseBytes
            # too, its lowest value (1024) left MCP answers no byte at all.
            cap = MCP_ANSWER_BYTES - 1024
            limit = min(state.max_response, cap)
            why = "serve.maxResponseBytes" if state.max_response <= cap else "the 1 MB an MCP client takes in one answer"
            return _fit(out, limit, _mcp_size, why)

        return await first_sync(agent, held)

    mcp_server = build_routed_server(run_mcp)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    # The Guard checks Host and the token for every path, /mcp included. McpSessions keeps the count of
    # sessions; the SDK's own limit is a backstop.
    session_manager = StreamableHTTPSessionManager(
        app=mcp_server, max_request_body_size=max_body,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=mcp_idle_seconds or None, max_sessions=2 * mcp_max_sessions)
    sessions = McpSessions(session_manager, max_sessions=mcp_max_sessions, idle_seconds=mcp_idle_seconds or None)
    state.mcp_sessions = sessions

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with session_manager.run():
            yield

    inner = Starlette(routes=routes, lifespan=lifespan)
    return Guard(inner, token=token, loopback=loopback, max_body=max_body, mcp=sessions, state=state,
                 body_seconds=body_seconds, heads=heads)


def files_view(manager: Any, last_sync: dict[str, Any] | None) -> dict[str, Any]:
    """Each file's indexed state (indexed / vectors pending / changed / new / removed / skipped and why)."""
    st = manager.status()
    backend = manager.backend
    store = getattr(backend, "store", None)
    indexer = getattr(backend, "indexer", None)
    rows = store.file_rows() if store is not None and hasattr(store, "file_rows") else []
    changed: dict[str, Any] = {}
    removed: list[str] = []
    skipped = {s["path"] for s in st.get("skipped") or []}
    if indexer is not None:
        ch, removed = indexer.changed_files(retry_pending=False)
        # A file the sync skips (unreadable, too large) is listed once, as skipped and why: no sync will take it.
        changed = {f.path: f for f in ch if f.path not in skipped}
    files = []
    for row in rows:
        if row["path"] in removed:
            state, why = "removed", "deleted on disk; the next sync drops it"
        elif row["path"] in changed:
            state, why = "changed", "changed on disk since the last sync; the watcher will reindex it"
        elif row["pending"]:
            state, why = "pending", "searchable by keyword; waiting for its vectors (provider unavailable)"
        else:
            state, why = "indexed", None
        files.append({**row, "state": state, "reason": why})
    known = {r["path"] for r in rows}
    for path, f in sorted(changed.items()):
        if path not in known:
            files.append({"path": path, "source": f.source, "chunks": 0, "mtime": f.mtime, "size": f.size,
                          "pending": True, "state": "new", "reason": "not indexed yet; the watcher will index it"})
    for s in st.get("skipped") or []:
        files.append({"path": s["path"], "source": None, "chunks": 0, "mtime": None, "size": None, "pending": False,
                      "state": "skipped", "reason": s.get("reason")})
    keep = ("backend", "plugin", "files", "chunks", "dirty", "pendingFiles", "workspaceDir", "provider", "model",
            "requestedProvider", "providerReason", "fallback", "build", "lastError")
    return {"agent": manager.agent.id, "status": {k: st.get(k) for k in keep}, "lastSync": last_sync,
            "files": files}
