"""``symi-memory mcp``: serve the memory tools over stdio (Model Context Protocol)."""

from __future__ import annotations

import argparse
from typing import Any

from .app import App


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve memory_search, memory_get and memory_append over stdio (MCP)")
    p.add_argument("--session", default=None, metavar="KEY", help="session key deciding citations (default: direct)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, app: App) -> int:
    import anyio

    from ..mcp_server import serve_stdio

    manager = app.manager(start=True)
    anyio.run(lambda: serve_stdio(manager, session_key=args.session))
    return 0
