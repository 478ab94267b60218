"""A stdio MCP server exposing ``memory_search``, ``memory_get`` and ``memory_append``.

Built on the official ``mcp`` SDK (the ``mcp`` extra, version 2 API). Every
call runs in a worker thread, so a slow search never blocks the protocol
loop. A bad argument or an unknown tool comes back as a tool result with
``isError`` set, never as a crash. With memory disabled
(``memorySearch.enabled = false`` or ``plugins.slots.memory = "none"``) no
tools are listed and every call is answered with a tool error saying so.

Run it with ``symi-memory mcp`` or ``python -m symi_memory.mcp_server``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from . import tools as tool_calls
from .errors import SymiMemoryError
from .tools import MEMORY_DISABLED, TOOL_DEFINITIONS

if TYPE_CHECKING:
    from .manager import MemoryManager

__all__ = ["build_routed_server", "build_server", "main", "serve_stdio"]

log = logging.getLogger("symi_memory.mcp")


def _import_mcp() -> tuple[Any, Any]:
    try:
        import mcp_types
        from mcp.server.lowlevel import Server
    except ImportError as exc:
        raise SymiMemoryError(
            f"the MCP server needs the 'mcp' package version 2 ({exc}); install it with: pip install 'symi-memory[mcp]'"
        ) from None
    return Server, mcp_types


def build_server(manager: MemoryManager, *, session_key: str | None = None) -> Any:
    """Build the MCP ``Server`` for ``manager``; ``session_key`` decides citations (``auto``)."""
    import asyncio

    async def run(ctx: Any, work: Callable[[MemoryManager], Any]) -> Any:
        return await asyncio.to_thread(work, manager)

    return build_routed_server(run, session_key=session_key)


def build_routed_server(run: Callable[[Any, Callable[[MemoryManager], Any]], Awaitable[Any]], *,
                        session_key: str | None = None) -> Any:
    """An MCP ``Server`` whose every request runs its work with ``await run(ctx, work)``.

    ``run`` calls ``work(manager)`` in a worker thread with the manager the request names and holds
    that manager for the whole call (``symi-memory serve`` picks the agent its URL names and keeps it
    from being closed for idleness meanwhile); ``run`` raising :class:`SymiMemoryError` answers a tool
    call with that error.
    """
    Server, types = _import_mcp()
    tools = [types.Tool(name=d["name"], description=d["description"], input_schema=d["parameters"])
             for d in TOOL_DEFINITIONS]
    names = ", ".join(d["name"] for d in TOOL_DEFINITIONS)

    async def list_tools(ctx: Any, params: Any) -> Any:
        enabled = await run(ctx, lambda manager: manager.enabled)
        return types.ListToolsResult(tools=tools if enabled else [])

    async def call_tool(ctx: Any, params: Any) -> Any:
        args = params.arguments or {}
        name = params.name

        def work(manager: MemoryManager) -> dict[str, Any]:
            if not manager.enabled:
                return {"error": MEMORY_DISABLED, "disabled": True}
            if name == "memory_search":
                return tool_calls.memory_search(manager, args, session_key=session_key)
            if name == "memory_get":
                return tool_calls.memory_get(manager, args)
            if name == "memory_append":
                return tool_calls.memory_append(manager, args)
            return {"error": f"unknown tool {name!r}; available: {names}"}

        try:
            result: dict[str, Any] = await run(ctx, work)
        except SymiMemoryError as exc:
            result = {"error": str(exc)}
        is_error = bool(result.get("error"))
        if is_error:
            log.info("%s: %s", name, result["error"])
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error=is_error,
        )

    from . import __version__

    return Server(
        "symi-memory",
        version=__version__,
        instructions="Durable agent memory: search with memory_search, read with memory_get, write with memory_append.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class _StdinLines:
    """The lines of the MCP wire, read on a daemon thread; ``async for`` over them ends at end of input.

    The SDK reads stdin in a worker thread that only a new line or end of input frees, and the
    interpreter waits for that thread at exit: a server stopped by SIGTERM or Ctrl-C would hang until
    its client wrote again. Here the blocking read runs on a daemon thread, and the async side waits
    on a queue that a stop can abandon (:meth:`close` frees the waiting worker).
    """

    def __init__(self, wire: BinaryIO) -> None:
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._read, args=(wire,), name="symi-mcp-stdin", daemon=True).start()

    def _read(self, wire: BinaryIO) -> None:
        try:
            for raw in iter(wire.readline, b""):
                self._lines.put(raw.decode("utf-8", "replace"))
        except (OSError, ValueError) as exc:  # the wire broke: end of input
            log.debug("stdin: %s", exc)
        finally:
            self._lines.put(None)

    def close(self) -> None:
        self._lines.put(None)

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        line = await anyio.to_thread.run_sync(self._lines.get, abandon_on_cancel=True)
        if line is None:
            self._lines.put(None)  # ended for good
            raise StopAsyncIteration
        return line


@contextmanager
def _stdin_wire() -> Iterator[BinaryIO]:
    """stdin's pipe for the server alone: fd 0 reads the null device meanwhile (a child process or plugin reading
    stdin must not take bytes of the protocol), and points at the pipe again afterwards, as the SDK does."""
    try:
        wire = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        yield sys.stdin.buffer
        return
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire, "rb", closefd=False)  # never closed: the reader thread may still be blocked on it
    finally:
        os.dup2(wire, 0)


async def serve_stdio(manager: MemoryManager, *, session_key: str | None = None) -> None:
    """Serve ``manager`` over stdin/stdout until the client closes stdin, or (in the main thread) SIGTERM/SIGINT.

    A signal stops the server at once: calls still running in worker threads finish, nothing waits for the client.
    """
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(manager, session_key=session_key)
    with _stdin_wire() as wire:
        lines = _StdinLines(wire)
        try:
            async with anyio.create_task_group() as tg:
                if threading.current_thread() is threading.main_thread():
                    tg.start_soon(_stop_on_signal, tg.cancel_scope)
                async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
                    await server.run(read_stream, write_stream, server.create_initialization_options())
                tg.cancel_scope.cancel()
        finally:
            lines.close()


async def _stop_on_signal(scope: Any) -> None:
    import anyio

    try:
        receiver = anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT)
        with receiver as signals:
            async for signum in signals:
                log.info("stopping on %s", signal.Signals(signum).name)
                scope.cancel()
                return
    except NotImplementedError:  # no signal handlers in this event loop (Windows): stdin's end stops the server
        await anyio.sleep_forever()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m symi_memory.mcp_server [--config F] [--state-dir D] [--workspace W] [--agent ID] [--session KEY]``."""
    import anyio

    from .manager import open_memory

    parser = argparse.ArgumentParser(prog="symi-memory-mcp", description=__doc__.splitlines()[0])
    parser.add_argument("--config", metavar="FILE")
    parser.add_argument("--state-dir", metavar="DIR")
    parser.add_argument("--workspace", metavar="DIR")
    parser.add_argument("--agent", metavar="ID", default="main")
    parser.add_argument("--session", metavar="KEY", help="session key deciding citations (default: direct)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="symi-memory mcp: %(message)s")
    try:
        manager = open_memory(
            args.config, agent_id=args.agent, workspace=args.workspace, state_dir=args.state_dir
        )
    except SymiMemoryError as exc:
        print(f"symi-memory mcp: error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        anyio.run(lambda: serve_stdio(manager, session_key=args.session))
    finally:
        manager.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
