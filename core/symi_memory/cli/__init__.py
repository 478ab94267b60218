"""The ``symi-memory`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import apsw

from ..errors import SymiMemoryError
from . import cmd_config, cmd_eval, cmd_flush, cmd_mcp, cmd_memory, cmd_plugins
from .app import App

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symi-memory",
        description="Durable, searchable memory for AI agents: index Markdown memory files and search them.",
    )
    parser.add_argument("--config", metavar="FILE", help="config file (TOML, JSON or JSON5)")
    parser.add_argument("--state-dir", metavar="DIR", help="state dir (default $SYMI_STATE_DIR or ~/.symi)")
    parser.add_argument("--workspace", metavar="DIR", help="agent workspace holding MEMORY.md and memory/")
    parser.add_argument("--agent", metavar="ID", default="main", help="agent id (default main)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (cmd_memory, cmd_plugins, cmd_config, cmd_eval, cmd_flush, cmd_mcp):
        module.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="symi-memory: %(levelname)s: %(message)s", stream=sys.stderr)
    app = App(args)
    try:
        return int(args.func(args, app) or 0)
    except SymiMemoryError as exc:
        lines = str(exc).splitlines() or [type(exc).__name__]
        for line in lines:
            print(f"symi-memory: error: {line}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`search ... | head`): not an error; keep Python quiet on exit.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except OSError as exc:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"symi-memory: error: {exc.strerror or exc}{where}; check the path and its permissions "
              f"(--state-dir, --workspace, memorySearch.store.path)", file=sys.stderr)
        return 1
    except apsw.BusyError:
        print("symi-memory: error: the index is busy (another process holds a long write); try again shortly",
              file=sys.stderr)
        return 1
    except apsw.Error as exc:
        print(f"symi-memory: error: the index database failed ({exc}); `symi-memory index --force` rebuilds it",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        app.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
