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
    call with that error. A ``work`` whose ``needs_index`` attribute is False (listing the tools) needs no index:
    ``run`` may call it while the agent builds its first one.
    """
    Server, types = _import_mcp()
    tools = [types.Tool(name=d["name"], description=d["description"], input_schema=d["parameters"])
             for d in TOOL_DEFINITIONS]
    names = ", ".join(d["name"] for d in TOOL_DEFINITIONS)

    def enabled(manager: MemoryManager) -> bool:
        return manager.enabled

    enabled.needs_index = False  # type: ignore[attr-defined]

    async def list_tools(ctx: Any, params: Any) -> Any:
        enabled_now = await run(ctx, enabled)
        return types.ListToolsResult(tools=tools if enabled_now else [])

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


#: A line of the wire the SDK cannot take, answered here: (request id or None, JSON-RPC error code, message).
_Refusal = tuple[int | str | None, int, str]

_PARSE_ERROR, _INVALID_REQUEST, _INVALID_PARAMS = -32700, -32600, -32602


def _lone_surrogate(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (parsed JSON) a string holds a lone surrogate: ``params.arguments.query (\\ud800 at
    character 4)``; None when it holds none."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where or 'the request'} (\\u{ord(value[exc.start]):04x} at character {exc.start})"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        path = f"{where}.{key}" if where and isinstance(key, str) else f"{where}[{key}]" if where else str(key)
        found = _lone_surrogate(key, f"a key of {where or 'the request'}") if isinstance(key, str) else None
        found = found or _lone_surrogate(item, path)
        if found:
            return found
    return None


def _refusal(raw: bytes, problem: str | None) -> _Refusal | None:
    """The JSON-RPC error for a line the SDK refused (``problem``: why, when it is known), or None when no answer
    is due (a notification or a response: JSON-RPC answers neither).

    The SDK drops such a line without a word, so a client waiting for that request's answer waited for ever. The
    id is echoed when the line has a usable one, so the client can match the error to its request.
    """
    try:
        text = raw.decode("utf-8")
        bad_bytes = None
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", "replace")
        bad_bytes = f"byte 0x{raw[exc.start]:02x} at offset {exc.start}"
    try:
        message = json.loads(text)
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's own limit, with advice for the server's Python
            return None, _PARSE_ERROR, (f"Parse error: a number in the request has more than "
                                        f"{sys.get_int_max_str_digits()} digits")
        return None, _PARSE_ERROR, f"Parse error: {bad_bytes and f'not UTF-8 ({bad_bytes}); ' or ''}{exc}"
    except RecursionError:  # arrays or objects nested thousands deep: no JSON-RPC message is
        return None, _PARSE_ERROR, "Parse error: arrays or objects nested too deeply"
    if not isinstance(message, dict):
        return None, _INVALID_REQUEST, "Invalid Request: a JSON-RPC message is a JSON object"
    ident = message.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int | str) or _lone_surrogate(ident, "id"):
        ident = None
    if "method" not in message or "id" not in message:
        return None if ("method" in message or "result" in message or "error" in message) else (
            ident, _INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    if bad_bytes is not None:
        return ident, _PARSE_ERROR, f"Parse error: the request is not UTF-8 ({bad_bytes}); send UTF-8 text"
    try:
        where = _lone_surrogate(message)
    except RecursionError:
        return ident, _INVALID_REQUEST, "Invalid Request: arrays or objects nested too deeply"
    if where is not None:
        in_params = where.removeprefix("a key of ").startswith("params")
        kind = "Invalid params" if in_params else "Invalid Request"
        return ident, _INVALID_PARAMS if in_params else _INVALID_REQUEST, (
            f"{kind}: {where} holds a lone surrogate, which is not valid Unicode; send UTF-8 text")
    return ident, _INVALID_REQUEST, f"Invalid Request: {problem or 'not a JSON-RPC 2.0 request'}"


class _StdinLines:
    """The lines of the MCP wire, read on a daemon thread; ``async for`` over them ends at end of input.

    The SDK reads stdin in a worker thread that only a new line or end of input frees, and the
    interpreter waits for that thread at exit: a server stopped by SIGTERM or Ctrl-C would hang until
    its client wrote again. Here the blocking read runs on a daemon thread, and the async side waits
    on a queue that a stop can abandon (:meth:`close` frees the waiting worker).

    A line the SDK cannot take (not UTF-8, a lone surrogate such as ``"\\ud800"`` in a string, not JSON-RPC)
    is answered here with a JSON-RPC error (:func:`_refusal`) through :meth:`answer_to`'s stream; the SDK
    would drop it without an answer.
    """

    def __init__(self, wire: BinaryIO) -> None:
        import anyio

        _, self._types = _import_mcp()
        self._lines: queue.SimpleQueue[str | _Refusal | None] = queue.SimpleQueue()
        self._answers: Any = None
        self._ready = anyio.Event()
        threading.Thread(target=self._read, args=(wire,), name="symi-mcp-stdin", daemon=True).start()

    def _read(self, wire: BinaryIO) -> None:
        try:
            for raw in iter(wire.readline, b""):
                self._lines.put(self._check(raw))
        except (OSError, ValueError) as exc:  # the wire broke: end of input
            log.debug("stdin: %s", exc)
        finally:
            self._lines.put(None)

    def _check(self, raw: bytes) -> str | _Refusal:
        """The line as text when the SDK takes it; else the answer it is due (or "" for none)."""
        if not raw.strip():
            return ""
        try:
            text = raw.decode("utf-8")
            self._types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            return text
        except UnicodeDecodeError:
            problem = None
        except Exception as exc:  # pydantic's ValidationError: the SDK refuses the line the same way
            errors = getattr(exc, "errors", None)
            first = errors()[0] if callable(errors) and errors() else None
            problem = first.get("msg") if isinstance(first, dict) else None
        try:
            refusal = _refusal(raw, problem)
        except Exception as exc:  # never let one line end the wire: this thread is its only reader
            log.warning("could not read a line of the MCP wire: %s: %s", type(exc).__name__, exc)
            refusal = None, _PARSE_ERROR, "Parse error: the line could not be read as JSON-RPC"
        log.warning("refused a line of the MCP wire: %s", refusal[2] if refusal else "a notification or response "
                    "that is not valid JSON-RPC (no answer is due)")
        return refusal if refusal is not None else ""

    def answer_to(self, stream: Any) -> None:
        """Send the errors for refused lines to ``stream`` (the SDK's write stream) from now on."""
        self._answers = stream
        self._ready.set()

    def close(self) -> None:
        self._lines.put(None)

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            line = await anyio.to_thread.run_sync(self._lines.get, abandon_on_cancel=True)
            if line is None:
                self._lines.put(None)  # ended for good
                raise StopAsyncIteration
            if isinstance(line, str):
                if line:
                    return line
                continue
            await self._answer(*line)

    async def _answer(self, ident: int | str | None, code: int, message: str) -> None:
        import anyio
        from mcp.shared.message import SessionMessage

        await self._ready.wait()
        error = self._types.JSONRPCError(jsonrpc="2.0", id=ident, error=self._types.ErrorData(code=code,
                                                                                             message=message))
        try:
            await self._answers.send(SessionMessage(error))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the session has ended
            pass


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

    A signal stops the server at once: calls still running in worker threads finish (an append waiting for another
    process's append lock gives up, nothing written), nothing waits for the client.
    """
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(manager, session_key=session_key)
    with _stdin_wire() as wire:
        lines = _StdinLines(wire)
        try:
            async with anyio.create_task_group() as tg:
                if threading.current_thread() is threading.main_thread():
                    tg.start_soon(_stop_on_signal, tg.cancel_scope, manager)
                async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
                    lines.answer_to(write_stream)
                    await server.run(read_stream, write_stream, server.create_initialization_options())
                tg.cancel_scope.cancel()
        finally:
            lines.close()


async def _stop_on_signal(scope: Any, manager: MemoryManager) -> None:
    import anyio

    try:
        receiver = anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT)
        with receiver as signals:
            async for signum in signals:
                log.info("stopping on %s", signal.Signals(signum).name)
                manager._stop_waiting()  # the stop waits for running tool calls: one waiting for a lock gives up
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
