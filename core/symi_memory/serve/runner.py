"""Running the server: bind, record, serve until SIGTERM/SIGINT, close everything."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import __version__
from ..config import Config
from ..errors import ConfigError
from .app import ServerState, build_app, is_loopback
from .pool import AgentPool, AgentStarting
from .protocol import HeadDeadlines
from .record import TOKEN_ENV, read_record, remove_record, write_record

__all__ = ["serve"]

log = logging.getLogger("symi_memory.serve")

#: How long SIGTERM lets the requests in flight finish before the agents are closed under them.
GRACE_SECONDS = 10.0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        # A name that does not resolve, or an address this machine does not have, is the host's fault; a port in
        # use or reserved is the port's.
        which = ("serve.host (--host)" if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
                 else "serve.port (--port)")
        raise ConfigError(f"cannot bind {host}:{port} ({exc.strerror or exc}); pick another {which}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _raise_file_limit(want: int = 65536) -> None:
    """Raise this process's soft limit on open files towards its hard limit (as Go programs do on start).

    Each open agent holds about 25 descriptors (its index's connections, its watcher), each client connection
    one: the usual soft limit of 1,024 runs out at some 40 agents in use, and the hard limit is often far higher.
    """
    try:
        import resource
    except ImportError:  # Windows: no such limit
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = want if hard == resource.RLIM_INFINITY else min(hard, want)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("raised the open files limit from %d to %d", soft, target)
    except (ValueError, OSError) as exc:  # macOS refuses more than OPEN_MAX: keep what there is
        log.info("could not raise the open files limit: %s", exc)


def serve(config: Config, *, host: str | None = None, port: int | None = None, agent: str = "main",
          workspace: str | None = None, idle_minutes: float | None = None, config_explicit: bool = False,
          ready: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; returns 0 after a clean stop."""
    import uvicorn

    settings = config.data["serve"]
    host = host or settings["host"]
    port = settings["port"] if port is None else port
    # Blank is unset: a token of spaces could never be sent (HTTP strips them from a header's ends).
    token = (settings.get("token") or "").strip() or (os.environ.get(TOKEN_ENV) or "").strip() or None
    loopback = is_loopback(host)
    if not loopback and not token:
        raise ConfigError(f"serving on {host} (not loopback) needs a token: set serve.token or ${TOKEN_ENV}")
    running = read_record(config.state_dir)
    if running is not None and running["pid"] != os.getpid():
        raise ConfigError(f"a server already runs for {config.state_dir} (pid {running['pid']}, {running['url']}); "
                          f"stop it first (kill -TERM {running['pid']}) or use another --state-dir")
    idle = settings["idleMinutes"] if idle_minutes is None else idle_minutes
    pinned = tuple(dict.fromkeys([agent, *settings.get("agents", [])]))
    heads = HeadDeadlines(float(settings["clientTimeoutSeconds"]))
    http_protocol = heads.protocol()  # a ConfigError now, before anything is bound, if this uvicorn has no h11
    pool = AgentPool(config, idle_seconds=float(idle) * 60, pinned=pinned,
                     workspaces={agent: workspace} if workspace else None,
                     first_sync_wait=float(settings["firstSyncWaitSeconds"]),
                     first_sync_retry=float(settings["firstSyncRetrySeconds"]))
    _raise_file_limit()
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown}:{bound}"
    state = ServerState(pool, url=url, pid=os.getpid(), max_response=settings["maxResponseBytes"],
                        state_dir=config.state_dir, config_path=str(config.path) if config.path else None,
                        inspector=settings["inspector"])
    app = build_app(state, token=token, loopback=loopback, max_body=settings["maxBodyBytes"],
                    mcp_max_sessions=settings["mcpMaxSessions"],
                    mcp_idle_seconds=float(settings["mcpSessionIdleMinutes"]) * 60 or None,
                    body_seconds=float(settings["clientTimeoutSeconds"]), heads=heads)
    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Agents still catching up with their files stop now (the requests waiting for them get 503 at
            # once); the requests in flight on open agents have GRACE_SECONDS, then the agents close under them
            # (a sync stops at its next file, the request gets 503), before uvicorn would cancel them (a 500).
            pool.stop_opening()
            grace = threading.Timer(GRACE_SECONDS, pool.close)
            grace.daemon = True
            grace.start()
            try:
                await super().shutdown(sockets)
            finally:
                grace.cancel()

    # proxy_headers off: scope["client"] stays the socket's peer, which is how the Guard names the connection whose
    # request head came in (HeadDeadlines); nothing here trusts X-Forwarded-For. No WebSocket (nothing here serves
    # one): an upgrade would hand the connection to another protocol, out of HeadDeadlines' sight.
    server = Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", http=http_protocol,
                                   ws="none", proxy_headers=False, timeout_graceful_shutdown=int(GRACE_SECONDS) + 20,
                                   log_level="warning"))
    record = {"pid": os.getpid(), "url": url, "host": host, "port": bound, "version": __version__,
              "config": str(config.path.resolve()) if config.path else None,
              "configExplicit": config_explicit, "startedAt": time.time(),
              "token": bool(token)}
    stop = threading.Event()

    def warm() -> None:
        for agent_id in pinned:  # open (and sync) the pinned agents, so their watchers run from the start
            if stop.is_set() or pool.stopping:
                return
            try:
                pool.acquire(agent_id, wait=0)  # its first sync runs in a thread of its own
                pool.release(agent_id)
            except AgentStarting:
                pass
            except Exception as exc:  # the server keeps serving the other agents
                if not (stop.is_set() or pool.stopping):  # else a shutdown cut its first sync short
                    log.warning("could not open agent %s: %s", agent_id, exc)

    def reaper() -> None:
        while not stop.wait(min(30.0, max(1.0, pool.idle_seconds / 4 or 30.0))):
            for agent_id in pool.reap_idle():  # its idle threads go with it (else 4 stay for every agent ever used)
                state.threads.retire(agent_id)

    threads = [threading.Thread(target=warm, name="symi-serve-warm", daemon=True),
               threading.Thread(target=reaper, name="symi-serve-reaper", daemon=True)]
    # uvicorn handles SIGTERM/SIGINT (graceful shutdown), then re-raises the signal to the handler that was
    # in place before it started; this one lets the cleanup below run and the process exit 0. A signal that
    # comes before uvicorn has taken over (just after the "serving on" line) stops the server as it starts.
    def stop_early(signum: int, frame: Any) -> None:
        server.should_exit = True

    quiet: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        quiet = {sig: signal.signal(sig, stop_early) for sig in (signal.SIGTERM, signal.SIGINT)}
    write_record(config.state_dir, record)
    try:
        for t in threads:
            t.start()
        if ready is not None:
            ready(record)
        server.run(sockets=[sock])
    finally:
        stop.set()
        state.threads.shutdown()
        threads[1].join(timeout=60)  # an idle agent the reaper is closing is closed before the others
        pool.close()  # an agent still catching up with its files stops at the next file
        threads[0].join(timeout=60)  # and is closed by its opener before the process exits
        remove_record(config.state_dir, os.getpid())
        sock.close()
        for sig, handler in quiet.items():
            signal.signal(sig, handler)
        log.info("stopped")
    return 0
