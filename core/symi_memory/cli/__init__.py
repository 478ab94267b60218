"""The ``symi-memory`` command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .remote import try_server

# `typing` and `logging` load after the server fast path (a one-shot call answered by `serve` skips them).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["build_parser", "console", "main"]

#: One-shot commands that embed one query and scan the vectors once: OpenBLAS runs them on one thread
#: (other commands, long-running ones such as ``serve`` or ``eval`` included, keep its own thread count).
ONE_QUERY_COMMANDS = frozenset({"search", "explain", "history", "append"})
#: The commands whose ``--json`` answer goes through ``App.print_json``/``render.print_json`` while anything else
#: printed to stdout (a plugin's ``print``) goes to stderr.
JSON_DIVERTED = frozenset({"search", "explain", "history", "append", "get", "status", "index", "context"})
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def _global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="config file (TOML, JSON or JSON5)")
    parser.add_argument("--state-dir", metavar="DIR", help="state dir (default $SYMI_STATE_DIR or ~/.symi)")
    parser.add_argument("--workspace", metavar="DIR", help="agent workspace holding MEMORY.md and memory/")
    parser.add_argument("--agent", metavar="ID", default="main", help="agent id (default main)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")


def _disabled_plugins(argv: Sequence[str] | None) -> list[str]:
    """``plugins.disabled`` from the config file, best effort: a broken config must still let
    ``config set`` and ``--help`` run, so any problem here leaves every plugin's commands in."""
    from ..config import default_state_dir, find_config_file, parse_config_text

    pre = argparse.ArgumentParser(add_help=False)
    _global_options(pre)
    try:
        known, _ = pre.parse_known_args(argv)
        file = find_config_file(known.config, default_state_dir(known.state_dir))
        if file is None:
            return []
        raw = parse_config_text(file.read_text(encoding="utf-8"), file.suffix.lower(), str(file))
        disabled = (raw.get("plugins") or {}).get("disabled") or []
        return [d for d in disabled if isinstance(d, str)] if isinstance(disabled, list) else []
    except Exception:
        return []


def _command(argv: Sequence[str] | None) -> str | None:
    """The command ``argv`` names (its first word after the global options), best effort."""
    pre = argparse.ArgumentParser(add_help=False)
    _global_options(pre)
    try:
        _, rest = pre.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    except (SystemExit, Exception):
        return None
    return next((a for a in rest if not a.startswith("-")), None)


def _add_commands(sub: Any, plugins: Any) -> None:
    import logging

    from ..errors import PluginError, SymiMemoryError
    from ..plugins import _culprit, _per_plugin_callers
    from . import builtin_commands

    callers = _per_plugin_callers(plugins.pm, "symi_memory_register_commands")
    # The core's commands go first, so a plugin can never shadow one; the clash names the plugin.
    callers.sort(key=lambda item: item[0] != builtin_commands.PLUGIN_ID)
    for plugin_id, caller in callers:
        try:
            caller(subparsers=sub)
        except argparse.ArgumentError as exc:
            raise PluginError(f"plugin {plugin_id!r} adds a command that already exists ({exc}); "
                              f"uninstall or disable one of them (plugins.disabled)") from exc
        except SymiMemoryError:
            raise
        except Exception as exc:
            # A wrapper runs around every plugin's call (the core's too): find whose code raised.
            culprit = _culprit(plugins.pm, "symi_memory_register_commands", plugin_id,
                               {"subparsers": argparse.ArgumentParser().add_subparsers()}, exc)
            if culprit != plugin_id:
                raise _WrapperRaised(culprit, exc) from exc
            if plugin_id == builtin_commands.PLUGIN_ID:
                raise
            # Like a plugin that fails to import: its commands are missing, every other command works.
            logging.getLogger("symi_memory.plugins").warning(
                "plugin %r: symi_memory_register_commands raised %s: %s; its commands are left out",
                plugin_id, type(exc).__name__, exc)


class _WrapperRaised(Exception):
    """A plugin's wrapper of symi_memory_register_commands raised around another plugin's commands."""

    def __init__(self, plugin_id: str, error: Exception) -> None:
        super().__init__(plugin_id, error)
        self.plugin_id = plugin_id
        self.error = error


def build_parser(argv: Sequence[str] | None = None, *, plugins: Any = None) -> argparse.ArgumentParser:
    """The ``symi-memory`` parser, with the commands every enabled plugin adds (the core's included).

    ``plugins`` is a loaded :class:`~symi_memory.plugins.Plugins`; by default the installed plugins
    minus the config's ``plugins.disabled`` are loaded.
    """
    from ..plugins import load_plugins
    from . import builtin_commands

    if plugins is None:
        plugins = load_plugins(_disabled_plugins(argv), extra=[(builtin_commands.PLUGIN_ID, builtin_commands)])
    elif not plugins.pm.is_registered(builtin_commands):
        plugins.pm.register(builtin_commands, name=builtin_commands.PLUGIN_ID)
    while True:
        parser = argparse.ArgumentParser(
            prog="symi-memory",
            description="Durable, searchable memory for AI agents: index Markdown memory files and search them.",
        )
        _global_options(parser)
        sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
        try:
            _add_commands(sub, plugins)
        except _WrapperRaised as exc:
            # The wrapping plugin leaves (its other hooks too); the parser is built again without it.
            import logging

            why = f"symi_memory_register_commands raised {type(exc.error).__name__}: {exc.error}"
            plugins.pm.unregister(name=exc.plugin_id)
            dist = plugins.dists.pop(exc.plugin_id, ("?", "?"))[0]
            plugins.failed[exc.plugin_id] = f"{dist}: {why}"
            logging.getLogger("symi_memory.plugins").warning(
                "plugin %r: %s; its commands are left out", exc.plugin_id, why)
            continue
        return parser


def main(argv: Sequence[str] | None = None) -> int:
    # A running `symi-memory serve` answers search/get/status before anything heavy is imported.
    try:
        served = try_server(argv)
    except BrokenPipeError:
        # The reader went away (`search ... | head`) while the server's answer was printed: not an error, as
        # in-process (below); keep Python quiet on exit.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    if served is not None:
        return served
    # attrs compiles the methods of every class the command defines (~105 for a search): their code is kept
    # between runs (attrs_code.py). Installed for this call only; in-process callers get attrs unchanged after.
    from .attrs_code import install

    uninstall = install()
    try:
        return _main(argv)
    finally:
        uninstall()


def _main(argv: Sequence[str] | None) -> int:
    import logging

    import apsw

    from ..errors import PluginError, SymiMemoryError
    from ..plugins import load_plugins
    from .app import App

    # Set up before the plugins load, so a plugin that fails to import is reported in our format.
    logging.basicConfig(level=logging.WARNING, format="symi-memory: %(levelname)s: %(message)s", stream=sys.stderr)
    disabled = _disabled_plugins(argv)
    from .render import json_to_stdout_only

    # A plugin that prints as it is imported would write ahead of a `--json` answer: diverted too (nothing of
    # ours prints to stdout while plugins load, so a `--json` that turns out to be the query loses nothing).
    given = sys.argv[1:] if argv is None else list(argv)
    loading = json_to_stdout_only() if "--json" in given and _command(argv) in JSON_DIVERTED \
        else contextlib.nullcontext()
    try:
        # Loaded once: the parser's commands and the config (App) use the same plugins.
        try:
            with loading:
                plugins = load_plugins(disabled)
        except PluginError as exc:
            if _command(argv) != "config":
                raise
            # Two plugins that clash (one name registered twice, one plugin id declared twice) stop every command;
            # the fix the error names, `config set plugins.disabled [...]`, must still run: `config` runs on the
            # builtins alone (an edit is then validated against the plugins the new config leaves enabled).
            logging.getLogger("symi_memory.plugins").warning("%s; `config` runs with the builtin plugins only", exc)
            plugins = load_plugins(disabled, builtins_only=True)
        with loading:
            parser = build_parser(argv, plugins=plugins)
    except SymiMemoryError as exc:
        print(f"symi-memory: error: {exc}", file=sys.stderr)
        return exc.exit_code
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING - 10 * min(args.verbose, 2))
    # A one-shot query scans the vectors once: the worker threads OpenBLAS starts (and keeps spinning) when
    # numpy loads cost it more CPU than they can save. Unless the caller chose a count.
    one_thread_blas = (args.command in ONE_QUERY_COMMANDS and BLAS_THREADS_ENV not in os.environ
                       and "numpy" not in sys.modules)
    if one_thread_blas:
        os.environ[BLAS_THREADS_ENV] = "1"
    app = App(args, plugins=plugins, plugins_disabled=disabled)
    # A `--json` answer of a memory command is parsed by scripts and agent hosts: what a plugin prints to stdout
    # while the command runs goes to stderr instead of into the JSON.
    divert = json_to_stdout_only() if getattr(args, "json", False) is True and args.command in JSON_DIVERTED \
        else contextlib.nullcontext()
    try:
        with divert:
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
    except Exception as exc:
        # A bug (ours or a plugin's command): the traceback is what a report needs, and the exit code must
        # say it failed, so a script or agent host never takes a crash for an answer.
        import traceback

        traceback.print_exc(file=sys.stderr)
        culprit = _plugin_that_raised(exc)
        if culprit is not None:
            plugin_id, dist, where = culprit
            print(f"symi-memory: error: plugin {plugin_id!r} ({dist}) raised {type(exc).__name__} at {where}: {exc} "
                  f"(a bug of that plugin; the traceback above is for its authors; plugins.disabled = "
                  f"[\"{plugin_id}\"] turns it off)", file=sys.stderr)
            return 1
        print(f"symi-memory: error: unexpected {type(exc).__name__} (a bug; the traceback above is for a report)",
              file=sys.stderr)
        return 1
    finally:
        app.close()
        if one_thread_blas:
            os.environ.pop(BLAS_THREADS_ENV, None)


def _plugin_that_raised(exc: BaseException) -> tuple[str, str, str] | None:
    """See :func:`symi_memory.plugins.plugin_that_raised`."""
    from ..plugins import plugin_that_raised

    return plugin_that_raised(exc)


def console() -> None:
    """The ``symi-memory`` command: :func:`main`, then exit without tearing the interpreter down.

    When :func:`main` returns, the command is done and everything it opened is closed (``App.close``
    joins the threads it started and closes the index). Python's own shutdown would then free every
    module and object one by one, numpy's and ONNX Runtime's included: ~0.1 s of a one-shot `search`'s
    wall time on the 2-core VM. Output and logging are flushed first. An exception (including argparse's
    ``SystemExit``) leaves the normal way, and so does a run that leaves a non-daemon thread behind (a
    third party's plugin still writing): the interpreter's shutdown waits for it. Exit handlers that a
    plugin registered with :mod:`atexit` still run.
    """
    code = main()
    import atexit
    import logging
    import threading

    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away, or the stream is closed: nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console()
