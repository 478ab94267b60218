"""Shared CLI state: config loading, the manager, and output helpers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import attrs

from ..config import Config, load_config
from ..errors import ConfigError
from ..manager import MemoryManager, open_memory

__all__ = ["App", "workspace_state"]


def workspace_state(path: Any) -> str:
    """How a workspace path is missing: ``does not exist`` or ``is not a directory``."""
    return "is not a directory" if os.path.exists(path) else "does not exist"


@attrs.define
class App:
    """One CLI invocation: loads config and the manager lazily, prints for people or JSON."""

    args: argparse.Namespace
    _config: Config | None = None
    _manager: MemoryManager | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.args.config, state_dir=self.args.state_dir)
        return self._config

    def manager(self, *, start: bool = False) -> MemoryManager:
        if self._manager is None:
            ws = self.args.workspace
            if ws and os.path.exists(os.path.expanduser(ws)) and not os.path.isdir(os.path.expanduser(ws)):
                raise ConfigError(f"--workspace {ws} is not a directory; pass the folder that holds MEMORY.md "
                                  f"and memory/")
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
        print(json.dumps(data, indent=2, ensure_ascii=False))

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
