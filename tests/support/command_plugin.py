"""A third-party-style plugin that adds a ``symi-memory`` command (loaded through SYMI_MEMORY_PLUGINS)."""

from __future__ import annotations

from typing import Any

from symi_memory import hookimpl

PLUGIN_ID = "tally"


def _run(args: Any, app: Any) -> int:
    files = app.manager().status()["files"]
    print(f"tally: {files} files, agent {args.agent}, unit {args.unit}")
    return 3 if args.unit == "fail" else 0


@hookimpl
def symi_memory_register_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("tally", help="count indexed files (a plugin's command)")
    p.add_argument("--unit", default="files")
    p.set_defaults(func=_run)
