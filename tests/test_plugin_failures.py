"""A broken third-party plugin: what the operator and the library user see.

Each plugin here is installed the way a real one is (a ``*.dist-info`` with an
``entry_points.txt`` on ``sys.path``), and the CLI runs in a subprocess, so the
test sees exactly what an operator sees: one line naming the plugin and what
went wrong, never a Python traceback; and a plugin nobody selected never takes
memory down.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.offline_install import install_plugin as _install

from symi_memory import hookimpl, open_memory
from symi_memory.errors import PluginError

pytestmark = pytest.mark.filterwarnings("ignore")



def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The NAS is at 192.168.1.20.\n", encoding="utf-8")
    return ws


def _cli(tmp_path: Path, site: Path, *args: str, slot: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "symi_memory.cli", "--state-dir", str(tmp_path / "state"),
           "--workspace", str(_workspace(tmp_path) if not (tmp_path / "ws").exists() else tmp_path / "ws")]
    if slot is not None:
        cfg = tmp_path / "symi.toml"
        cfg.write_text(f'[plugins.slots]\nmemory = "{slot}"\n[agents.defaults.memorySearch]\nprovider = "none"\n',
                       encoding="utf-8")
        cmd += ["--config", str(cfg)]
    env = {k: v for k, v in os.environ.items() if k not in ("SYMI_CONFIG", "SYMI_MEMORY_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=300)


def _search_answers(tmp_path: Path, site: Path) -> str:
    """A one-shot keyword search on builtin-sqlite finds the NAS note without a traceback; its stderr."""
    out = _cli(tmp_path, site, "search", "NAS address", "--no-server", slot="builtin-sqlite")
    assert out.returncode == 0, out.stderr
    assert "192.168.1.20" in out.stdout and "Traceback" not in out.stderr
    return out.stderr


RAISES_IN_HOOK = """
from symi_memory import hookimpl

@hookimpl
def symi_memory_register_backends(register):
    raise RuntimeError("backend table is corrupt")
"""

MISNAMED_ARGUMENT = """
from symi_memory import hookimpl

@hookimpl
def symi_memory_register_backends(registr):
    pass
"""

DEFAULTS_RAISE = """
from symi_memory import hookimpl

@hookimpl
def symi_memory_config_defaults():
    raise KeyError("windowDays")
"""


COMMANDS_RAISE = """
from symi_memory import hookimpl

@hookimpl
def symi_memory_register_commands(subparsers):
    raise RuntimeError("no such parser option")
"""


def test_a_plugin_whose_commands_hook_raises_leaves_every_other_command_working(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "broken", "broken_plugin", COMMANDS_RAISE)
    stderr = _search_answers(tmp_path, site)
    (warning,) = [ln for ln in stderr.splitlines() if "broken" in ln]
    assert "symi_memory_register_commands raised RuntimeError: no such parser option" in warning


@pytest.mark.parametrize(("source", "why"), [
    (RAISES_IN_HOOK, "symi_memory_register_backends raised RuntimeError: backend table is corrupt"),
    (MISNAMED_ARGUMENT, "registr"),
    (DEFAULTS_RAISE, "symi_memory_config_defaults raised KeyError"),
], ids=["hook-raises", "misnamed-hook-argument", "config-defaults-raises"])
def test_a_broken_plugin_nobody_selected_leaves_memory_working(tmp_path: Path, source: str, why: str) -> None:
    site = tmp_path / "site"
    _install(site, "broken", "broken_plugin", source)

    stderr = _search_answers(tmp_path, site)
    assert "broken" in stderr  # a warning names the plugin it skipped

    listed = _cli(tmp_path, site, "plugins")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("broken"))
    assert why in line


def test_selecting_a_plugin_whose_hook_raised_names_what_went_wrong(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "broken", "broken_plugin", RAISES_IN_HOOK)
    out = _cli(tmp_path, site, "status", slot="broken-backend")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("symi-memory: error:")]
    assert "plugins.slots.memory = 'broken-backend'" in line
    assert "'broken'" in line and "RuntimeError: backend table is corrupt" in line
FACTORIES = """
from symi_memory import hookimpl
from symi_memory.specs import BackendSpec


def _raises(ctx):
    raise ZeroDivisionError("division by zero")


@hookimpl
def symi_memory_register_backends(register):
    register(BackendSpec(name="raising", short_name="raising", factory=_raises))
    register(BackendSpec(name="returns-none", short_name="none", factory=lambda ctx: None))
    register(BackendSpec(name="returns-object", short_name="obj", factory=lambda ctx: object()))
"""


@pytest.mark.parametrize(("slot", "why"), [
    ("raising", "ZeroDivisionError: division by zero"),
    ("returns-none", "returned None, not a MemoryBackend"),
    ("returns-object", "returned object, not a MemoryBackend"),
])
def test_a_backend_factory_that_fails_is_one_line_naming_the_slot_and_plugin(tmp_path: Path, slot: str,
                                                                             why: str) -> None:
    site = tmp_path / "site"
    _install(site, "factories", "factories_plugin", FACTORIES)
    for command in (["status"], ["search", "NAS", "--no-server"]):
        out = _cli(tmp_path, site, *command, slot=slot)
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
        # Not "memory is disabled": the operator asked for this backend, and its plugin failed.
        assert "disabled" not in out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert f"plugins.slots.memory = {slot!r}" in line and "'factories'" in line and why in line


def test_open_memory_raises_a_plugin_error_for_a_failing_backend_factory(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _install(site, "factories", "factories_plugin", FACTORIES)
    monkeypatch.syspath_prepend(str(site))
    cfg = tmp_path / "symi.toml"
    for slot in ("raising", "returns-none", "returns-object"):
        cfg.write_text(f'[plugins.slots]\nmemory = "{slot}"\n', encoding="utf-8")
        with pytest.raises(PluginError, match=f"plugins.slots.memory = {slot!r}"):
            open_memory(cfg, workspace=_workspace(tmp_path) if not (tmp_path / "ws").exists() else tmp_path / "ws",
                        state_dir=tmp_path / "state", start=False)


WRAPPER_RAISES = """
from symi_memory import hookimpl

@hookimpl(wrapper=True)
def symi_memory_register_backends(register):
    yield
    raise RuntimeError("wrapper broke")
"""

OLD_STYLE_WRAPPER_RAISES = """
from symi_memory import hookimpl

@hookimpl(hookwrapper=True)
def symi_memory_register_config_sections(register):
    raise RuntimeError("wrapper broke")
    yield
"""


@pytest.mark.parametrize("source", [WRAPPER_RAISES, OLD_STYLE_WRAPPER_RAISES], ids=["wrapper", "hookwrapper"])
def test_a_third_party_wrapper_that_raises_is_the_plugin_skipped_not_the_builtins_it_wraps(
        tmp_path: Path, source: str) -> None:
    """A wrapper runs around every plugin's call: it raising was blamed on each builtin in turn, all of
    them were dropped as 'failed', and memory had no backend while the wrapper's plugin stayed loaded."""
    site = tmp_path / "site"
    _install(site, "wrapping", "wrapping_plugin", source)
    stderr = _search_answers(tmp_path, site)
    (warning,) = [ln for ln in stderr.splitlines() if "skipped" in ln]
    assert "'wrapping'" in warning and "RuntimeError: wrapper broke" in warning

    listed = _cli(tmp_path, site, "plugins")
    assert listed.returncode == 0, listed.stderr
    failed = [ln for ln in listed.stdout.splitlines() if "failed to load" in ln]
    assert len(failed) == 1 and failed[0].startswith("wrapping"), listed.stdout


DEFAULTS_RAISE_LATER = """
from symi_memory import hookimpl

calls = []

@hookimpl
def symi_memory_config_defaults():
    calls.append(1)
    if len(calls) > 1:
        raise KeyError("windowDays")
    return {"plugins": {"entries": {"later": {"windowDays": 3}}}}
"""


def test_a_config_defaults_hook_that_raises_only_when_called_again_is_no_traceback(tmp_path: Path) -> None:
    """Loading plugins calls the hook once; config loading called it again (twice per start), and a raise
    there was a KeyError traceback from every command. The defaults read at load are the ones used."""
    site = tmp_path / "site"
    _install(site, "later", "later_plugin", DEFAULTS_RAISE_LATER)
    _search_answers(tmp_path, site)


COMMANDS_WRAPPER_RAISES = """
from symi_memory import hookimpl

@hookimpl(wrapper=True)
def symi_memory_register_commands(subparsers):
    yield
    raise RuntimeError("wrapper broke")
"""


def test_a_commands_wrapper_that_raises_leaves_every_command_working(tmp_path: Path) -> None:
    """The wrapper runs around the core's own commands hook too: it raising was taken for a bug of the
    core's commands and every command was a RuntimeError traceback."""
    site = tmp_path / "site"
    _install(site, "wrapping", "wrapping_plugin", COMMANDS_WRAPPER_RAISES)
    stderr = _search_answers(tmp_path, site)
    (warning,) = [ln for ln in stderr.splitlines() if "wrapping" in ln]
    assert "symi_memory_register_commands raised RuntimeError: wrapper broke" in warning


RERANKS = """
from symi_memory import hookimpl
from symi_memory.specs import RerankerSpec

@hookimpl
def symi_memory_register_rerankers(register):
    register(RerankerSpec(name="echo-rerank", factory=lambda ctx: None, description="keeps the order"))
"""

# A wrapper that breaks only around some calls: the one that registers echo-rerank (it looks at what the
# wrapped plugin registered), or its second call, whichever plugin that wraps.
PICKY_WRAPPER = """
from symi_memory import hookimpl

@hookimpl(wrapper=True)
def symi_memory_register_rerankers(register):
    result = yield
    if "echo-rerank" in getattr(register, "registered", []):
        raise RuntimeError("picky wrapper broke")
    return result
"""

SECOND_CALL_WRAPPER = """
from symi_memory import hookimpl

calls = []

@hookimpl(hookwrapper=True)
def symi_memory_register_rerankers(register):
    calls.append(1)
    outcome = yield
    if len(calls) == 2:
        raise RuntimeError("picky wrapper broke")
"""


@pytest.mark.parametrize("source", [PICKY_WRAPPER, SECOND_CALL_WRAPPER], ids=["by-registration", "second-call"])
def test_a_wrapper_that_raises_around_only_some_calls_is_blamed_not_the_plugin_it_wrapped(
        tmp_path: Path, source: str) -> None:
    """The blame was found by calling the hook again: a wrapper that did not raise again (it had raised only
    because of what the wrapped plugin registered, or only on one call) was not found, so the plugin it
    wrapped was dropped as failed and the broken wrapper stayed."""
    site = tmp_path / "site"
    _install(site, "reranks", "reranks_plugin", RERANKS)
    _install(site, "picky", "picky_plugin", source)
    stderr = _search_answers(tmp_path, site)
    (warning,) = [ln for ln in stderr.splitlines() if "skipped" in ln]
    assert "'picky'" in warning and "RuntimeError: picky wrapper broke" in warning, warning
    listed = _cli(tmp_path, site, "plugins")
    assert listed.returncode == 0, listed.stderr
    failed = [ln for ln in listed.stdout.splitlines() if "failed to load" in ln]
    assert len(failed) == 1 and failed[0].startswith("picky"), listed.stdout
    assert any(ln.startswith("reranks") and "failed" not in ln for ln in listed.stdout.splitlines()), listed.stdout


class _RaisingReranker:
    @staticmethod
    @hookimpl
    def symi_memory_register_rerankers(register):  # type: ignore[no-untyped-def]
        raise RuntimeError("reranker table is corrupt")


class _PassThroughWrapper:
    @staticmethod
    @hookimpl(wrapper=True)
    def symi_memory_register_rerankers(register):  # type: ignore[no-untyped-def]
        return (yield)


class _OldStylePassThroughWrapper:
    @staticmethod
    @hookimpl(hookwrapper=True)
    def symi_memory_register_rerankers(register):  # type: ignore[no-untyped-def]
        outcome = yield
        outcome.get_result()  # re-raises the wrapped plugin's error


@pytest.mark.parametrize("wrapper", [_PassThroughWrapper, _OldStylePassThroughWrapper], ids=["wrapper", "hookwrapper"])
def test_a_plugin_that_raises_inside_a_wrapper_that_lets_errors_through_is_the_one_blamed(wrapper: type) -> None:
    from symi_memory.plugins import load_plugins

    plugins = load_plugins(extra=[("broken", _RaisingReranker()), ("wrapping", wrapper())])
    assert set(plugins.failed) == {"broken"}, plugins.failed
    assert "RuntimeError: reranker table is corrupt" in plugins.failed["broken"]
    assert plugins.pm.has_plugin("wrapping")


class _AnnotatingWrapper:
    @staticmethod
    @hookimpl(wrapper=True)
    def symi_memory_register_rerankers(register):  # type: ignore[no-untyped-def]
        try:
            return (yield)
        except Exception as exc:
            raise RuntimeError(f"while registering rerankers: {exc}") from exc


class _OldStyleAnnotatingWrapper:
    @staticmethod
    @hookimpl(hookwrapper=True)
    def symi_memory_register_rerankers(register):  # type: ignore[no-untyped-def]
        outcome = yield
        try:
            outcome.get_result()
        except Exception as exc:
            raise RuntimeError(f"while registering rerankers: {exc}")  # noqa: B904 (the error it handles is its context)


@pytest.mark.parametrize("wrapper", [_AnnotatingWrapper, _OldStyleAnnotatingWrapper], ids=["wrapper", "hookwrapper"])
def test_a_wrapper_that_restates_the_wrapped_plugins_error_is_not_blamed_for_it(wrapper: type) -> None:
    """A wrapper that raises its own error while handling the wrapped plugin's (adding what was being done) was
    blamed once the traceback alone decided: both plugins were dropped, the wrapper first. The error began in
    the plugin the wrapper wrapped, as calling that plugin again alone showed before."""
    from symi_memory.plugins import load_plugins

    plugins = load_plugins(extra=[("broken", _RaisingReranker()), ("wrapping", wrapper())])
    assert set(plugins.failed) == {"broken"}, plugins.failed
    assert "reranker table is corrupt" in plugins.failed["broken"]
    assert plugins.pm.has_plugin("wrapping")
