"""``search``, ``get``, ``status`` and ``history`` answered by a running ``symi-memory serve``.

Standard library only: this runs before the CLI loads plugins, the config
model or the index, so a one-shot call that a server answers costs a Python
start-up and one loopback request. Anything this path cannot answer exactly
as the in-process command would (``--no-server``, no live server, another
config file or workspace than the server's, the server refusing) returns
None and the normal command runs.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # kept out of the one-shot path: `typing` alone costs more than the request
    from collections.abc import Sequence
    from typing import Any

__all__ = ["try_server"]

_COMMANDS = ("search", "get", "status", "history")


class _NotForUs(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # the full parser reports usage errors
        raise _NotForUs(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # --help goes to the full parser
        raise _NotForUs(message or "")


def _parser() -> _Parser:
    p = _Parser(add_help=False, prog="symi-memory")
    p.add_argument("--config")
    p.add_argument("--state-dir")
    p.add_argument("--workspace")
    p.add_argument("--agent", default="main")
    p.add_argument("-v", "--verbose", action="count", default=0)
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    s = sub.add_parser("search", add_help=False)
    s.add_argument("query")
    s.add_argument("-n", "--max-results", type=int, default=None)
    s.add_argument("--min-score", type=float, default=None)
    s.add_argument("--session", default=None)
    s.add_argument("--as-of", default=None)
    s.add_argument("--json", action="store_true")
    s.add_argument("--no-server", action="store_true")
    h = sub.add_parser("history", add_help=False)
    h.add_argument("query")
    h.add_argument("--as-of", default=None)
    h.add_argument("--min-score", type=float, default=None)
    h.add_argument("--json", action="store_true")
    h.add_argument("--no-server", action="store_true")
    g = sub.add_parser("get", add_help=False)
    g.add_argument("path")
    g.add_argument("--from", dest="from_line", type=int, default=None)
    g.add_argument("--lines", type=int, default=None)
    g.add_argument("--json", action="store_true")
    g.add_argument("--no-server", action="store_true")
    st = sub.add_parser("status", add_help=False)
    st.add_argument("--json", action="store_true")
    st.add_argument("--no-server", action="store_true")
    return p


def _is_date(text: str) -> bool:
    """What ``--as-of`` accepts; anything else goes to the full CLI's error."""
    from ..as_of import parse_as_of

    try:
        parse_as_of(text)
    except ValueError:
        return False
    return True


def _state_dir(arg: str | None) -> str:
    return os.path.realpath(os.path.expanduser(arg or os.environ.get("SYMI_STATE_DIR") or "~/.symi"))


def _same_config(args: argparse.Namespace, record: dict[str, Any]) -> bool:
    """True when this call would load the config file the server loaded."""
    explicit = args.config or os.environ.get("SYMI_CONFIG")
    if not explicit:
        return not record.get("configExplicit")
    return os.path.realpath(os.path.expanduser(explicit)) == record.get("config")


def _surely_no_server(argv: list[str]) -> bool:
    """True when no state dir this call could name holds a server record (checked before any parsing)."""
    from ..serve.record import record_path

    dirs: list[str | None] = []
    for i, arg in enumerate(argv):
        if arg.startswith("--st"):
            if arg == "--state-dir" and i + 1 < len(argv):
                dirs.append(argv[i + 1])
            elif arg.startswith("--state-dir="):
                dirs.append(arg.split("=", 1)[1])
            else:
                return False  # an abbreviated option, or a query that looks like one: the parser decides
    return not any(os.path.exists(record_path(_state_dir(d))) for d in dirs or [None])


def try_server(argv: Sequence[str] | None) -> int | None:
    """Answer through a running server and return the exit code, or None to run in-process."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(cmd in argv for cmd in _COMMANDS) or "-h" in argv or "--help" in argv:
        return None
    if _surely_no_server(argv):
        return None  # the common case: no server, so the parser below is not worth building
    try:
        args = _parser().parse_args(argv)
    except _NotForUs:
        return None
    if args.command not in _COMMANDS or args.no_server:
        return None
    if args.command == "search" and ((args.max_results is not None and args.max_results < 1) or not args.query.strip()):
        return None  # the full parser and tool report these
    if getattr(args, "as_of", None) is not None and not _is_date(args.as_of):
        return None
    if getattr(args, "min_score", None) is not None and args.min_score != args.min_score:
        return None  # NaN: the full parser reports it
    if args.command == "history" and not args.query.strip():
        return None
    from ..serve.record import read_record

    record = read_record(_state_dir(args.state_dir))
    if record is None or not _same_config(args, record):
        return None
    from ..serve.client import (  # socket: only with a server to ask
        ServerClient,
        ServerError,
        ServerUnavailable,
    )

    body: dict[str, Any] = {}
    if args.workspace:
        body["workspace"] = os.path.realpath(os.path.expanduser(args.workspace))
    client = ServerClient(record["url"])
    try:
        if args.command == "search":
            body["query"] = args.query
            body["fresh"] = True  # like the in-process command: changed files are indexed first
            if args.max_results is not None:
                body["maxResults"] = args.max_results
            if args.min_score is not None:
                body["minScore"] = args.min_score
            if args.session is not None:
                body["session"] = args.session
            if args.as_of is not None:
                body["asOf"] = args.as_of
            out = client.call("POST", client.agent_path(args.agent, "search"), body)
        elif args.command == "history":
            body.update(query=args.query, fresh=True)
            if args.as_of is not None:
                body["asOf"] = args.as_of
            if args.min_score is not None:
                body["minScore"] = args.min_score
            out = client.call("POST", client.agent_path(args.agent, "history"), body)
        elif args.command == "get":
            body["path"] = args.path
            if args.from_line is not None:
                body["from"] = args.from_line
            if args.lines is not None:
                body["lines"] = args.lines
            out = client.call("POST", client.agent_path(args.agent, "get"), body)
        else:
            out = client.call("POST", client.agent_path(args.agent, "status"), body)
    except ServerUnavailable:
        return None
    except ServerError as exc:
        if exc.status == 401:
            print(f"symi-memory: warning: the server at {record['url']} refused the token "
                  f"(set $SYMI_SERVE_TOKEN); answering in-process", file=sys.stderr)
        elif args.verbose:
            print(f"symi-memory: info: the server did not answer ({exc.message}); answering in-process",
                  file=sys.stderr)
        return None
    if isinstance(out, dict) and out.get("truncated"):
        # Trimmed to serve.maxResponseBytes: this command prints the whole answer, which it can read itself.
        if args.verbose:
            print(f"symi-memory: info: the server trimmed its answer ({out['truncated']}); answering in-process",
                  file=sys.stderr)
        return None
    if args.verbose:
        print(f"symi-memory: info: answered by the server at {record['url']}", file=sys.stderr)
    from . import render

    if args.command == "search":
        return render.print_search(out, as_json=args.json, via="server")
    if args.command == "history":
        return render.print_history(out["versions"], as_json=args.json, warnings=out.get("warnings") or ())
    if args.command == "get":
        return render.print_get(out, args.path, as_json=args.json)
    return render.print_status(out, as_json=args.json)
