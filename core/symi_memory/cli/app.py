"""Shared CLI state: config loading, the manager, and output helpers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import attrs

from ..config import Config, read_raw_config
from ..errors import ConfigError
from ..host import validated_config
from ..manager import MemoryManager, open_memory
from ..plugins import Plugins, load_plugins

__all__ = ["App", "whole_arg"]


def whole_arg(minimum: int) -> Any:
    """An argparse ``type``: a whole number of at least ``minimum``, else a usage error (exit 2) saying why."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _warn_unknown_entries(config: Config, plugins: Plugins) -> None:
    """One warning per ``plugins.entries.<id>`` that no installed plugin has: its settings reach no plugin.

    The table stays free-form (settings kept for a plugin not installed yet are fine), so this is not an
    error; but a misspelt id would otherwise leave its plugin on its defaults without a word.
    """
    entries = (config.data.get("plugins") or {}).get("entries") or {}
    known = {*plugins.dists, *plugins.disabled, *plugins.failed}
    unknown = [pid for pid in entries if pid not in known]
    if unknown:
        # Installed but not loaded (SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD=1): known too. Read only when a table names
        # an id no loaded plugin has, so the entry points are not listed again on every command.
        from ..entry_points import find
        from ..plugins import ENTRY_POINT_GROUP

        try:
            installed = {ep.name for ep in find(ENTRY_POINT_GROUP)}
        except Exception:  # a warning must not fail the command
            installed = set()
        unknown = [pid for pid in unknown if pid not in installed]
    if not unknown:
        return
    import difflib
    import logging

    for pid in unknown:
        close = difflib.get_close_matches(pid, sorted(known), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]!r}?)" if close else "; `symi-memory plugins` lists the installed ones"
        logging.getLogger("symi_memory.config").warning(
            "plugins.entries.%s: no installed plugin has the id %r%s; these settings reach no plugin", pid, pid, hint)


@attrs.define
class App:
    """One CLI invocation: loads config and the manager lazily, prints for people or JSON."""

    args: argparse.Namespace
    #: The plugins the parser was built with, and the ``plugins.disabled`` they were loaded for.
    plugins: Plugins | None = None
    plugins_disabled: list[str] | None = None
    _config: Config | None = None
    _manager: MemoryManager | None = None

    @property
    def config(self) -> Config:
        """The config, validated against the parser's plugins when the file disables the same ones."""
        if self._config is None:
            raw = read_raw_config(self.args.config, state_dir=self.args.state_dir)
            plugins = self.plugins
            if plugins is None or self.plugins_disabled != raw.disabled_plugins:
                plugins = load_plugins(raw.disabled_plugins)
            self._config = validated_config(raw, plugins)
            _warn_unknown_entries(self._config, plugins)
        return self._config

    def check_workspace_arg(self) -> None:
        """A ``--workspace`` that is a file is a usage error (ConfigError), for every command."""
        ws = self.args.workspace
        if ws and os.path.exists(os.path.expanduser(ws)) and not os.path.isdir(os.path.expanduser(ws)):
            raise ConfigError(f"--workspace {ws} is not a directory; pass the folder that holds MEMORY.md "
                              f"and memory/")

    def manager(self, *, start: bool = False) -> MemoryManager:
        if self._manager is None:
            self.check_workspace_arg()
            self._manager = open_memory(self.config, agent_id=self.args.agent, workspace=self.args.workspace,
                                        start=start)
        return self._manager

    @property
    def tty(self) -> bool:
        return sys.stdout.isatty()

    def color(self, text: str, code: str) -> str:
        if not self.tty or os.environ.get("NO_COLOR"):
            return text
        return f"\033[{code}m{text}\033[0m"

    def print_json(self, data: Any) -> None:
        text = json.dumps(data, indent=2, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a path's byte that is not UTF-8) left in: escaped, valid UTF-8
            text = json.dumps(data, indent=2)
        from .render import json_stream

        print(text, file=json_stream())

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
