"""``symi-memory serve``: one warm memory service (JSON API, MCP over HTTP, watchers, inspector)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .app import App


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the warm memory service: MCP over HTTP, a JSON API, watchers, inspector")
    p.add_argument("--host", default=None, help="address to bind (default serve.host, 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="TCP port (default serve.port; 0 picks a free one)")
    p.add_argument("--idle-minutes", type=float, default=None, metavar="M",
                   help="close an agent unused this long (default serve.idleMinutes)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, app: App) -> int:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        from ..errors import ConfigError

        raise ConfigError("serve needs the 'mcp' extra (starlette, uvicorn): pip install 'symi-memory[mcp]'") from None
    from ..serve.runner import serve

    if args.port is not None and not 0 <= args.port <= 65535:
        from ..errors import ConfigError

        raise ConfigError(f"--port {args.port}: use 0 to 65535")
    if args.idle_minutes is not None and not args.idle_minutes >= 0:  # NaN too
        from ..errors import ConfigError

        raise ConfigError(f"--idle-minutes {args.idle_minutes:g}: use 0 or more (0 keeps agents open)")

    def ready(record: dict[str, Any]) -> None:
        print(f"serving on {record['url']} (pid {record['pid']}); inspector at {record['url']}/ ; "
              f"MCP at {record['url']}/mcp", flush=True)

    return serve(app.config, host=args.host, port=args.port, agent=args.agent, workspace=args.workspace,
                 idle_minutes=args.idle_minutes, config_explicit=bool(args.config or os.environ.get("SYMI_CONFIG")),
                 ready=ready)
