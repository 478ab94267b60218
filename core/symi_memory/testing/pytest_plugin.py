"""Pytest plugin (entry point ``pytest11``): options and fixtures of the conformance suite.

Run the suite against any installed backend::

    pytest --pyargs symi_memory.testing.conformance --symi-backend NAME [--symi-config FILE]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("symi-memory")
    from symi_memory.specs import DEFAULT_BACKEND

    group.addoption("--symi-backend", default=os.environ.get("SYMI_BACKEND", DEFAULT_BACKEND),
                    help=f"memory backend the conformance suite runs against (default {DEFAULT_BACKEND})")
    group.addoption("--symi-config", default=None,
                    help="config file merged under the suite's own settings (e.g. memory.qmd.command)")


TEST_PLUGINS = "symi_memory.testing.plugin"


@pytest.fixture
def symi_test_plugins(monkeypatch: pytest.MonkeyPatch) -> str:
    """Opt in to the test fakes (``hash`` provider, ``in-memory`` backend) for one test.

    Sets ``SYMI_MEMORY_PLUGINS`` for this test and the subprocesses it starts;
    nothing is registered for tests that do not ask. A suite that wants them
    everywhere sets the variable in its own ``conftest.py``.
    """
    from symi_memory.plugins import EXTRA_PLUGINS_ENV

    present = [p for p in os.environ.get(EXTRA_PLUGINS_ENV, "").split(",") if p.strip()]
    if TEST_PLUGINS not in present:
        monkeypatch.setenv(EXTRA_PLUGINS_ENV, ",".join([*present, TEST_PLUGINS]))
    return TEST_PLUGINS


@pytest.fixture
def symi_backend(request: pytest.FixtureRequest) -> str:
    """The backend name under test; tests may parametrize it indirectly."""
    return getattr(request, "param", None) or request.config.getoption("--symi-backend")


@pytest.fixture
def symi_extra_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Extra config (camelCase dict) for the backend under test; override it in a conftest or test module.

    Defaults to the file given with ``--symi-config``.
    """
    from symi_memory.config import parse_config_text

    extra_file = request.config.getoption("--symi-config")
    if not extra_file:
        return {}
    p = Path(extra_file)
    return parse_config_text(p.read_text(encoding="utf-8"), p.suffix.lower(), str(p))


CONFORMANCE_FILES = {
    "MEMORY.md": "# Long-term memory\n\n- Prefers oat milk in coffee.\n- Deploy key rotates every 90 days.\n",
    "memory/2026-01-01.md": "# 2026-01-01\n\nline two: quokka sighting at the harbour\nline three\n",
    "memory/2026-01-02.md": "# 2026-01-02\n\n- Release tag zx81build shipped to staging.\n- Lunch with Marguerite.\n",
    "memory/projects/atlas.md": "# Atlas\n\nThe atlas project migrates billing to the ledger service.\n",
}


@pytest.fixture
def conformance_workspace(tmp_path: Path) -> Path:
    """A small workspace with known, distinctive lines."""
    ws = tmp_path / "workspace"
    for rel, text in CONFORMANCE_FILES.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return ws


@pytest.fixture
def open_conformance_memory(
    tmp_path: Path, symi_backend: str, symi_extra_config: dict[str, Any], symi_test_plugins: str
) -> Iterator[Callable[..., Any]]:
    """Factory: ``open_conformance_memory(workspace, plugins=None, **overrides) -> MemoryManager`` for the backend
    under test; ``plugins``: extra ``(name, plugin object)`` pairs to register, as :func:`open_memory` takes them."""
    from symi_memory import load_config
    from symi_memory.config.fields import deep_merge
    from symi_memory.manager import open_memory

    opened: list[Any] = []

    def factory(workspace: Path, *, plugins: Any = None, **overrides: Any) -> Any:
        base = symi_extra_config
        settings = {
            "plugins": {"slots": {"memory": symi_backend}},
            "agents": {"defaults": {"memorySearch": {"provider": "hash", "sync": {"watch": False}}}},
        }
        cfg = load_config(None, state_dir=tmp_path / "state", overrides=deep_merge(deep_merge(base, settings), overrides))
        manager = open_memory(cfg, workspace=workspace, start=False, plugins=plugins)
        opened.append(manager)
        return manager

    yield factory
    for m in opened:
        m.close()
