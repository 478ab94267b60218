"""Plugins own their config: typed sections declared with the core's field DSL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from symi_memory import hookimpl
from symi_memory.config import load_config
from symi_memory.config.fields import fields_by_key, opt, section
from symi_memory.config.schema import MemorySearch, MemorySection, Rerank, Store
from symi_memory.errors import ConfigError, PluginError
from symi_memory.plugins import load_plugins
from symi_memory.specs import ConfigSection


@attrs.define(kw_only=True)
class _Window:
    size: int = opt("size", 7, lo=1, hi=30, doc="Days in the window.")


@attrs.define(kw_only=True)
class _Tidy:
    mode: str = opt("mode", "gentle", choices=("gentle", "strict"), doc="How hard to tidy.")
    every: str = opt("every", "1h", kind="duration", doc="How often.")
    window: _Window = section(_Window, "window")


class _TidyPlugin:
    @hookimpl
    def symi_memory_register_config_sections(self, register: Any) -> None:
        register(ConfigSection(key="plugins.entries.tidy", model=_Tidy, doc="The tidy plugin."))


def _config(tmp_path: Path, overrides: dict[str, Any] | None = None, **kw: Any) -> Any:
    plugins = load_plugins(extra=[("tidy", _TidyPlugin())], **kw)
    return load_config(None, state_dir=tmp_path, overrides=overrides or {}, plugins=plugins)


def test_a_plugin_section_has_defaults_and_the_cores_validation(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert cfg.get("plugins.entries.tidy") == {"mode": "gentle", "every": "1h", "window": {"size": 7}}
    bad = {"plugins": {"entries": {"tidy": {"mode": "wild", "every": "soon", "window": {"size": 99, "sise": 1}}}}}
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, bad)
    lines = str(err.value).splitlines()
    assert any("plugins.entries.tidy.mode: 'wild' is not allowed; use one of gentle, strict" in x for x in lines)
    assert any("plugins.entries.tidy.every:" in x and "not a duration" in x for x in lines)
    assert any("plugins.entries.tidy.window.size: 99 is out of range; allowed 1..30" in x for x in lines)
    assert any('plugins.entries.tidy.window.sise: unknown key (did you mean "size"?)' in x for x in lines)


def test_builtin_plugin_sections_live_in_their_plugins(tmp_path: Path) -> None:
    assert not {"local", "remote"} & set(fields_by_key(MemorySearch))
    assert "faiss" not in fields_by_key(Store) and "qmd" not in fields_by_key(MemorySection)
    assert set(fields_by_key(Rerank)) == {"provider", "topN"}  # the slot stays core; API keys are the plugin's
    full = load_config(None, state_dir=tmp_path)
    assert full.get("agents.defaults.memorySearch.store.faiss.index") == "flat"
    assert full.get("memory.qmd.command") == "qmd"
    without = load_config(None, state_dir=tmp_path, overrides={"plugins": {"disabled": ["faiss", "qmd-sidecar"]}})
    assert "faiss" not in without.get("agents.defaults.memorySearch.store")
    assert "qmd" not in without.get("memory")
    assert without.get("agents.defaults.memorySearch.local.threads") is None  # other plugins keep theirs


def test_disabling_a_plugin_removes_its_keys_from_config_show_and_the_reference(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "symi.toml"
    cfg.write_text('[plugins]\ndisabled = ["faiss"]\n', encoding="utf-8")
    code, shown, err = cli("--config", str(cfg), "config", "show", "--json", json_out=True)
    assert code == 0, err
    assert "faiss" not in shown["agents"]["defaults"]["memorySearch"]["store"]
    code, shown, _ = cli("config", "show", "--json", json_out=True)
    assert shown["agents"]["defaults"]["memorySearch"]["store"]["faiss"]["index"] == "flat"
    reference = (Path(__file__).resolve().parents[1] / "docs" / "config-reference.md").read_text(encoding="utf-8")
    assert "`agents.defaults.memorySearch.store.faiss.efSearch`" in reference and "(plugin faiss)" in reference


def test_a_section_may_not_redefine_a_core_key(tmp_path: Path) -> None:
    @attrs.define(kw_only=True)
    class Sneaky:
        top_n: int = opt("topN", 5, doc="clash")

    class Clash:
        @hookimpl
        def symi_memory_register_config_sections(self, register: Any) -> None:
            register(ConfigSection(key="agents.defaults.memorySearch.query.rerank", model=Sneaky))

    with pytest.raises(PluginError, match="plugin 'clash' declares config key .*rerank.topN, which is already defined"):
        load_config(None, state_dir=tmp_path, plugins=load_plugins(extra=[("clash", Clash())]))

    class NotAModel:
        @hookimpl
        def symi_memory_register_config_sections(self, register: Any) -> None:
            register(ConfigSection(key="plugins.entries.x", model=dict))

    with pytest.raises(PluginError, match="plugin 'bad' registered .* as a config section"):
        load_plugins(extra=[("bad", NotAModel())])
