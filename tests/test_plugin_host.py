"""The plugin host calls hooks through pluggy, and test support is opt-in."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from symi_memory.errors import PluginError
from symi_memory.hookspecs import PROJECT, hookimpl
from symi_memory.plugins import EXTRA_PLUGINS_ENV, collect_config_defaults, load_plugins
from symi_memory.specs import BackendSpec

wrapper_marker = pluggy.HookimplMarker(PROJECT)


class _Spy:
    """A new-style wrapper: records each wrapped call and the names registered inside it."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @wrapper_marker(wrapper=True)
    def symi_memory_register_backends(self, register: Any) -> Iterator[None]:
        seen: list[str] = []
        self.calls.append(seen)
        result = yield
        seen.append(f"register:{id(register)}")
        return result


class _Recorder:
    """A hookwrapper that records the register callable and what each plugin registered through it."""

    def __init__(self) -> None:
        self.calls = 0

    @wrapper_marker(hookwrapper=True)
    def symi_memory_register_embedding_providers(self, register: Any) -> Iterator[None]:
        self.calls += 1
        yield


def test_a_wrapper_plugin_wraps_the_call_of_every_registering_plugin() -> None:
    spy, rec = _Spy(), _Recorder()
    plugins = load_plugins(extra=[("spy", spy), ("rec", rec)])
    backend_owners = {plugins.owners["backends"][n] for n in plugins.backends}
    provider_owners = {plugins.owners["embeddingProviders"][n] for n in plugins.providers}
    # One wrapped call per plugin that registers backends / providers: the wrapper saw them all.
    assert len(spy.calls) == len(backend_owners) >= 3
    assert rec.calls == len(provider_owners) >= 2


def test_hook_calls_are_visible_to_pluggy_call_monitoring() -> None:
    traced: list[str] = []

    class Late:
        @hookimpl
        def symi_memory_register_backends(self, register: Any) -> None:
            register(BackendSpec(name="late-one", factory=lambda ctx: None, description="x"))

    plugins = load_plugins(extra=[("late", Late())])
    undo = plugins.pm.add_hookcall_monitoring(lambda name, impls, kw: traced.append(name), lambda *a: None)
    try:
        plugins._build()  # rebuilding the registries is observable through pluggy's call monitoring
    finally:
        undo()
    assert "late-one" in plugins.backends and plugins.owners["backends"]["late-one"] == "late"
    assert traced.count("symi_memory_register_backends") >= 4


def test_config_defaults_hook_still_names_the_offending_plugin() -> None:
    class Bad:
        @hookimpl
        def symi_memory_config_defaults(self) -> Any:
            return 5

    plugins = load_plugins(extra=[("bad-defaults", Bad())])
    with pytest.raises(PluginError, match="bad-defaults.*must return a dict"):
        collect_config_defaults({}, plugins)


def test_fakes_load_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXTRA_PLUGINS_ENV, raising=False)
    monkeypatch.delenv("SYMI_MEMORY_TESTING", raising=False)
    plain = load_plugins()
    assert "hash" not in plain.providers and "in-memory" not in plain.backends
    assert "testing" not in plain.dists
    monkeypatch.setenv(EXTRA_PLUGINS_ENV, "symi_memory.testing.plugin")
    asked = load_plugins()
    assert "hash" in asked.providers and "in-memory" in asked.backends
    monkeypatch.setenv(EXTRA_PLUGINS_ENV, "no_such_module_xyz")
    with pytest.raises(PluginError, match="SYMI_MEMORY_PLUGINS.*no_such_module_xyz"):
        load_plugins()


def test_another_projects_pytest_sees_no_fakes_and_no_testing_switch(tmp_path: Path) -> None:
    project = tmp_path / "other-project"
    project.mkdir()
    (project / "test_theirs.py").write_text(textwrap.dedent("""
        import os
        from symi_memory.plugins import load_plugins

        def test_environment_is_clean():
            assert "SYMI_MEMORY_TESTING" not in os.environ
            assert "SYMI_MEMORY_PLUGINS" not in os.environ
            plugins = load_plugins()
            assert "hash" not in plugins.providers
            assert "in-memory" not in plugins.backends
    """), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (EXTRA_PLUGINS_ENV, "SYMI_MEMORY_TESTING", "PYTEST_ADDOPTS")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_builtins_declare_their_optional_capabilities_through_the_specs_protocols(tmp_path: Path) -> None:
    from symi_memory.config import load_config
    from symi_memory.manager import open_memory
    from symi_memory.specs import (
        BackendServices,
        Closeable,
        MemoryBackend,
        NotifiesSyncs,
        StalenessAware,
        StartableBackend,
        VectorSide,
    )

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("- capability check\n", encoding="utf-8")
    cfg = load_config(None, state_dir=tmp_path / "state",
                      overrides={"agents": {"defaults": {"memorySearch": {"provider": "hash"}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        backend = mem.backend
        for proto in (MemoryBackend, StartableBackend, StalenessAware, NotifiesSyncs):
            assert isinstance(backend, proto), proto.__name__
        assert isinstance(backend.vectors, VectorSide)
        # The in-memory reference backend opts in to none of the optional capabilities.
    cfg = load_config(None, state_dir=tmp_path / "state2",
                      overrides={"plugins": {"slots": {"memory": "in-memory"}},
                                 "agents": {"defaults": {"memorySearch": {"provider": "hash"}}}})
    with open_memory(cfg, workspace=ws, start=True) as mem:
        assert isinstance(mem.backend, MemoryBackend) and not isinstance(mem.backend, StartableBackend)
        mem.sync()
        assert mem.search("capability", min_score=0).results  # never started, still works
    from symi_memory.manager import Services

    assert isinstance(Services(plugins=None, config=None, agent=None), BackendServices)  # type: ignore[arg-type]
    assert not isinstance(object(), Closeable)
