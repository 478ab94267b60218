"""The core's own commands, added through the same hook as a plugin's (like tox's internal plugins)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl
from . import cmd_config, cmd_eval, cmd_flush, cmd_mcp, cmd_memory, cmd_plugins, cmd_serve

PLUGIN_ID = "cli"
MODULES = (cmd_memory, cmd_plugins, cmd_config, cmd_eval, cmd_flush, cmd_mcp, cmd_serve)


@hookimpl
def symi_memory_register_commands(subparsers: Any) -> None:
    for module in MODULES:
        module.add_parsers(subparsers)
