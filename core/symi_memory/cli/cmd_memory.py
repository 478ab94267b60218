"""``status``, ``index``, ``search``, ``history``, ``append``, ``get``, ``watch``, ``context``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from typing import Any

from ..errors import BackendError, ConfigError
from ..specs import NotifiesSyncs, StalenessAware
from ..types import SyncProgress, SyncReport
from . import render
from .app import App, whole_arg

log = logging.getLogger("symi_memory.cli")


def _query_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments ``search`` and ``explain`` share: the query and what shapes its answer."""
    p.add_argument("query")
    p.add_argument("-n", "--max-results", type=whole_arg(1), default=None, metavar="N")
    p.add_argument("--min-score", type=_score, default=None, metavar="X")
    p.add_argument("--session", default=None, metavar="KEY", help="session key (scope rules, citations)")
    p.add_argument("--as-of", default=None, metavar="DATE",
                   help="answer as memory stood on DATE (YYYY-MM-DD): later notes are left out")


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value:  # NaN (written as such, or not a number at all)
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; use one from 0 to 1")
    return value


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("status", help="show the index and provider status")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-server", action="store_true", help="work in-process even when `serve` is running")
    p.set_defaults(func=run_status)

    p = sub.add_parser("index", help="bring the index up to date (a progress bar on a terminal)")
    p.add_argument("--force", action="store_true", help="rebuild the whole index")
    p.add_argument("--check", action="store_true",
                   help="first read the whole index for damage (a disk fault); a damaged one is rebuilt")
    p.add_argument("--build-wait", type=whole_arg(0), default=None, metavar="SECONDS",
                   help="wait at most this long for another process's full build of the index, then exit 1 "
                        "(default: sync.buildWaitSeconds, 1800; 0: do not wait)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_index)

    p = sub.add_parser("search", help="search memory (indexes first when needed)")
    _query_arguments(p)
    p.add_argument("--json", action="store_true", help="print exactly the memory_search tool output")
    p.add_argument("--no-server", action="store_true", help="work in-process even when `serve` is running")
    p.set_defaults(func=run_search)

    p = sub.add_parser("explain", help="search, and show every candidate's score at each stage and why it was cut")
    _query_arguments(p)
    p.add_argument("--json", action="store_true", help="print what MemoryManager.explain returns")
    p.set_defaults(func=run_explain)

    p = sub.add_parser("history", help="every version of a fact, oldest first, with paths and lines")
    p.add_argument("query")
    p.add_argument("--as-of", default=None, metavar="DATE", help="only versions written by DATE (YYYY-MM-DD)")
    p.add_argument("--min-score", type=_score, default=None, metavar="X",
                   help="no fact unless the best match scores X or more (default: minScore, as search)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-server", action="store_true", help="work in-process even when `serve` is running")
    p.set_defaults(func=run_history)

    p = sub.add_parser("append", help="append a note to memory, unless memory already says it (like memory_append)")
    p.add_argument("text", help="the note (Markdown); '-' reads it from stdin")
    p.add_argument("--long-term", action="store_true", help="append to MEMORY.md instead of today's daily log")
    p.add_argument("--allow-duplicate", action="store_true", help="write even when memory already states this")
    p.add_argument("--json", action="store_true", help="print exactly the memory_append tool output")
    p.set_defaults(func=run_append)

    p = sub.add_parser("get", help="read a memory file or a window of its lines")
    p.add_argument("path")
    p.add_argument("--from", dest="from_line", type=int, default=None, metavar="N")
    p.add_argument("--lines", type=int, default=None, metavar="N")
    p.add_argument("--json", action="store_true", help="print exactly the memory_get tool output")
    p.add_argument("--no-server", action="store_true", help="work in-process even when `serve` is running")
    p.set_defaults(func=run_get)

    p = sub.add_parser("watch", help="keep the index fresh while files change (Ctrl-C to stop)")
    p.set_defaults(func=run_watch)

    p = sub.add_parser("context", help="what to load at session start (today's and yesterday's logs, MEMORY.md)")
    p.add_argument("--session", default=None, metavar="KEY", help="session key; MEMORY.md only for direct chats")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_context)


def run_status(args: argparse.Namespace, app: App) -> int:
    return render.print_status(app.manager().status(), as_json=args.json)


class _Bar:
    """A one-line progress bar for terminals (and, while a sync waits for another process's build, a line saying so)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.open_line = False
        self.waiting = False

    def __call__(self, p: SyncProgress) -> None:
        if p.phase == "wait":
            import shutil

            width = shutil.get_terminal_size((100, 20)).columns
            text = f"  wait {p.done}/{p.total} s for another build of the index: {p.detail or p.path}"
            self.stream.write("\r" + text[: max(20, width - 1)] + "\033[K")
            self.stream.flush()
            self.open_line = self.waiting = True
            return
        if p.total <= 0:
            return
        if self.waiting:  # the wait is over: the bar goes on the next line
            self.end_line()
            self.waiting = False
        width = 30
        filled = int(width * p.done / p.total)
        # ``embed``: after each provider batch, the vectors computed and those reused from the cache so far.
        said = f" files, {p.detail}" if p.detail else ""
        line = f"{p.phase:>6} [{'#' * filled}{'.' * (width - filled)}] {p.done}/{p.total}{said}"
        if said:  # one line, however narrow the terminal; what a longer line before left is cleared
            import shutil

            line = line[: max(20, shutil.get_terminal_size((100, 20)).columns - 1)]
        self.stream.write(f"\r{line}\033[K")
        self.stream.flush()
        if p.phase == "done" or (p.phase == "query" and p.done == p.total):
            self.stream.write("\n")
            self.open_line = False
        else:
            self.open_line = True

    def end_line(self) -> None:
        """End the line the bar is drawing, if any (before another message or another phase)."""
        if self.open_line:
            self.stream.write("\n")
            self.stream.flush()
            self.open_line = False


def _summary(r: SyncReport) -> str:
    kind = "full reindex" if r.full else "sync"
    return (f"{kind}: {r.files_scanned} files scanned, {r.files_indexed} indexed, {r.files_removed} removed, "
            f"{r.chunks_written} chunks, {r.embeddings_computed} embedded ({r.embeddings_cached} cached) "
            f"in {r.seconds:.2f}s")


def _check(manager: Any, *, quiet: bool) -> dict[str, Any]:
    """``index --check``: read the whole index for damage before the sync (which rebuilds a damaged one)."""
    started = time.monotonic()
    try:
        problem = manager.check_integrity()
    except BackendError as exc:
        if not quiet:
            print(f"symi-memory: note: {exc}; syncing without a check", file=sys.stderr)
        return {"checked": False, "damage": None, "reason": str(exc)}
    seconds = round(time.monotonic() - started, 2)
    if not quiet:
        said = "intact" if problem is None else f"damaged ({problem}); it is set aside and rebuilt from the files"
        print(f"symi-memory: index check ({seconds:.2f}s): {said}", file=sys.stderr)
    return {"checked": True, "damage": problem, "seconds": seconds}


def run_index(args: argparse.Namespace, app: App) -> int:
    manager = app.manager()  # a workspace that does not exist: the sync logs a warning saying so
    reason = manager.status().get("providerReason")
    if reason and not args.json:
        print(f"symi-memory: note: {reason}", file=sys.stderr)
    check = _check(manager, quiet=args.json) if args.check else None
    if args.build_wait is not None:
        manager.agent.memory_search["sync"]["buildWaitSeconds"] = args.build_wait
    progress = _Bar(sys.stderr) if sys.stderr.isatty() and not args.json else None
    try:
        report = manager.sync(reason="cli", force=args.force, progress=progress)
    finally:
        if progress is not None:
            progress.end_line()
    if args.json:
        app.print_json(report.to_dict() if check is None else {**report.to_dict(), "check": check})
    else:
        print(_summary(report))
    st = manager.status()
    if st.get("fallback") and not args.json:
        fb = st["fallback"]
        where = st.get("fallbackIndex") or {}
        served = f"; searches use the {where.get('backend')} fallback ({where.get('files')} files)" if where else ""
        print(f"symi-memory: note: not using {fb.get('from')}: {fb.get('reason')}{served}", file=sys.stderr)
    if report.errors and st.get("fallbackIndex") and not st["fallbackIndex"].get("dirty"):
        return 0  # the backend failed, but the fallback that answers searches is up to date (noted above)
    if report.errors:
        # The files are searchable by keyword, but the index is not what was asked for: say so, and
        # exit 1 so scripts notice. The next sync retries the embeddings.
        pending = st.get("pendingFiles") or 0
        if not pending:
            print(f"symi-memory: error: the sync did not complete: {'; '.join(report.errors)}", file=sys.stderr)
            return 1
        what = "every embedding failed" if report.embeddings_computed == 0 else "some embeddings failed"
        print(f"symi-memory: error: {what} ({'; '.join(report.errors)}); {pending} file(s) indexed for keyword "
              f"search only, their vectors are retried on the next sync", file=sys.stderr)
        return 1
    return 0


def _ensure_fresh(app: App) -> None:
    manager = app.manager()
    if not manager.enabled:
        return  # the tool itself answers with the disabled error shape
    st = manager.status()
    backend = manager.backend
    if isinstance(backend, StalenessAware) and (st.get("files") is None or st["files"]):
        # Files that only wait for vectors (a provider outage) are searchable by keyword already;
        # a one-shot search should not stall on retrying the provider for them.
        try:
            stale = backend.is_stale(retry_pending=False)
        except BackendError as exc:
            # Its store cannot be reached: nothing to sync into. The search itself answers from what it
            # can reach and says why in its fallback; one line of that is enough.
            log.info("not syncing before the search: %s", exc)
            return
    else:
        stale = bool(st.get("dirty")) or not st.get("files")
    if stale:
        try:
            manager.sync(reason="cli-search")  # logs what it warns about (a workspace that is not there)
        except BackendError as exc:
            # A backend that cannot sync now (its server is down) still answers from its last synced state.
            print(f"symi-memory: warning: {exc}", file=sys.stderr)
    else:
        for warning in st.get("warnings") or []:  # a workspace away: the answers are what was indexed from it
            log.warning("%s", warning)


def run_search(args: argparse.Namespace, app: App) -> int:
    # The query's embedding model (a local one) loads in the background while the index is checked.
    app.manager().prepare_search()
    _ensure_fresh(app)
    params: dict[str, Any] = {"query": args.query}
    if args.max_results is not None:
        params["maxResults"] = args.max_results
    if args.min_score is not None:
        params["minScore"] = args.min_score
    if args.as_of is not None:
        _check_date(args.as_of)
        params["asOf"] = args.as_of
    from .. import tools

    out = tools.memory_search(app.manager(), params, session_key=args.session)
    return render.print_search(out, as_json=args.json)


def run_explain(args: argparse.Namespace, app: App) -> int:
    """The search, with every candidate's score at each stage (what serve's explain API and the inspector show)."""
    if args.as_of is not None:
        _check_date(args.as_of)
    manager = app.manager()
    manager.prepare_search()
    _ensure_fresh(app)
    if not manager.enabled:
        from ..tools import MEMORY_DISABLED

        print(f"symi-memory: error: {MEMORY_DISABLED}", file=sys.stderr)
        return 1
    try:
        out = manager.explain(args.query, max_results=args.max_results, min_score=args.min_score,
                              session_key=args.session, as_of=args.as_of)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if args.json:
        app.print_json(out)
        return 0
    render.print_explain(out)
    return 0


def _check_date(value: str) -> None:
    from ..manager import parse_as_of

    try:
        parse_as_of(value)
    except ValueError as exc:
        raise ConfigError(f"--as-of: {exc}") from None


def run_history(args: argparse.Namespace, app: App) -> int:
    if args.as_of is not None:
        _check_date(args.as_of)
    _ensure_fresh(app)
    manager = app.manager()
    if not manager.enabled:
        from ..tools import MEMORY_DISABLED

        print(f"symi-memory: error: {MEMORY_DISABLED}", file=sys.stderr)
        return 1
    found = manager.history(args.query, as_of=args.as_of, min_score=args.min_score)
    return render.print_history(found, as_json=args.json, warnings=found.warnings)


def run_append(args: argparse.Namespace, app: App) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    if not text.strip():
        raise ConfigError("append: the note is empty")
    params: dict[str, Any] = {"text": text, "target": "long-term" if args.long_term else "daily",
                              "allowDuplicate": bool(args.allow_duplicate)}
    manager = app.manager()
    if manager.enabled:
        _ensure_fresh(app)
    from .. import tools

    out = tools.memory_append(manager, params)
    if args.json:
        app.print_json(out)
        return 1 if out.get("error") else 0
    if out.get("error"):
        print(f"symi-memory: error: {out['error']}", file=sys.stderr)
        return 1
    if not out.get("appended"):
        dup = out["duplicateOf"]
        print(f"not appended: memory already says this at {dup['path']}:{dup['startLine']} "
              "(--allow-duplicate writes it anyway)")
        return 0
    line = f"appended {out['bytesWritten']} bytes to {out['path']}"
    if out.get("supersedes"):
        sup = out["supersedes"]
        line += f"; supersedes {sup['path']}:{sup['startLine']}"
    print(line)
    return 0


def run_get(args: argparse.Namespace, app: App) -> int:
    params: dict[str, Any] = {"path": args.path}
    if args.from_line is not None:
        params["from"] = args.from_line
    if args.lines is not None:
        params["lines"] = args.lines
    from .. import tools

    out = tools.memory_get(app.manager(), params)
    return render.print_get(out, args.path, as_json=args.json)


def run_watch(args: argparse.Namespace, app: App) -> int:
    manager = app.manager(start=True)
    print(_summary(manager.sync(reason="watch-start")), flush=True)
    backend = manager.backend
    if isinstance(backend, NotifiesSyncs):
        backend.on_synced = lambda r: print(_summary(r), flush=True)
    print(f"watching {manager.agent.workspace} (Ctrl-C to stop)", flush=True)
    stop = threading.Event()
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        print("stopped")
    return 0


def run_context(args: argparse.Namespace, app: App) -> int:
    from ..writing import session_start_context

    app.check_workspace_arg()
    agent = app.config.agent(args.agent, workspace=args.workspace)
    if not os.path.isdir(agent.workspace):  # loading nothing is right, saying nothing is not
        what = "is not a directory" if os.path.exists(agent.workspace) else "does not exist"
        print(f"symi-memory: warning: workspace {agent.workspace} {what}: no memory to load; set the workspace to "
              "the folder that holds MEMORY.md and memory/ (agents.defaults.workspace, --workspace)", file=sys.stderr)
    ctx = session_start_context(agent.workspace, session_key=args.session, tz=agent.user_timezone)
    data = ctx.to_dict()
    if args.json:
        app.print_json(data)
        return 0
    # Exact text for a pipe (an agent runtime's prompt); on a terminal, control characters are shown escaped.
    shown = render.visible if app.tty else str
    for item in data.get("files", []):
        print(app.color(f"== {shown(item['path'])} ==", "1"))
        print(shown(item.get("text", "")))
    return 0
