"""Plugins add CLI commands through symi_memory_register_commands; the core's own commands use it too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from symi_memory import hookimpl
from symi_memory.cli import build_parser, main
from symi_memory.errors import PluginError
from symi_memory.plugins import load_plugins

SUPPORT = str(Path(__file__).parent / "support")


def _env() -> dict[str, str]:
    plugins = f"{os.environ.get('SYMI_MEMORY_PLUGINS', '')},command_plugin".strip(",")
    return {"SYMI_MEMORY_PLUGINS": plugins, "PYTHONPATH": os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")])}


def test_a_plugin_command_runs_with_the_cli_state(cli, workspace: Path) -> None:
    code, out, err = cli("--workspace", str(workspace), "tally", "--unit", "fail", env=_env())
    assert code == 3, err
    assert "tally: 0 files, agent main, unit fail" in out
    code, out, _ = cli("--help", env=_env())
    assert "tally" in out and "count indexed files" in out


def test_a_disabled_plugin_adds_no_command(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "symi.toml"
    cfg.write_text('[plugins]\ndisabled = ["tally"]\n', encoding="utf-8")
    code, _, err = cli("--config", str(cfg), "tally", env=_env())
    assert code == 2 and "invalid choice: 'tally'" in err


def test_a_command_name_taken_twice_names_the_plugin() -> None:
    class Clash:
        @hookimpl
        def symi_memory_register_commands(self, subparsers: Any) -> None:
            subparsers.add_parser("search")

    with pytest.raises(PluginError, match="plugin 'clash' adds a command that already exists"):
        build_parser([], plugins=load_plugins(extra=[("clash", Clash())]))


def test_core_commands_come_through_the_hook(capsys: pytest.CaptureFixture[str]) -> None:
    plugins = load_plugins()
    parser = build_parser([], plugins=plugins)
    assert plugins.pm.get_plugin("cli") is not None  # the core's commands are a plugin of the host
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"status", "index", "search", "get", "config", "flush", "eval", "plugins"} <= set(commands)
    assert main(["plugins", "--json"]) == 0
    assert '"id": "builtin-sqlite"' in capsys.readouterr().out
