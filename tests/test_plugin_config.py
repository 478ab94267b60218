"""Plugins own their config: typed sections declared with the core's field DSL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from symi_memory import hookimpl, load_config
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


def test_a_plugin_id_with_a_hyphen_owns_its_entries_section(tmp_path: Path) -> None:
    """Plugin ids are entry-point names such as ``recency-boost``: their section mounts and validates."""

    class Hyphenated:
        @hookimpl
        def symi_memory_register_config_sections(self, register: Any) -> None:
            register(ConfigSection(key="plugins.entries.tidy-up", model=_Window, doc="A hyphenated id."))

    plugins = load_plugins(extra=[("tidy-up", Hyphenated())])
    cfg = load_config(None, state_dir=tmp_path, plugins=plugins)
    assert cfg.get("plugins.entries.tidy-up") == {"size": 7}
    with pytest.raises(ConfigError, match=r"plugins\.entries\.tidy-up\.size: 0 is out of range"):
        load_config(None, state_dir=tmp_path, plugins=plugins,
                    overrides={"plugins": {"entries": {"tidy-up": {"size": 0}}}})


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


class _EveryKind:
    """One plugin registering one of each kind; each records the plugins.entries table it was given."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    @hookimpl
    def symi_memory_register_config_sections(self, register: Any) -> None:
        register(ConfigSection(key="plugins.entries.every-kind", model=_Window, doc="One of each kind."))

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Any) -> None:
        from symi_memory.specs import ProviderSpec
        from symi_memory.testing.fakes import HashEmbedder

        def factory(ctx: Any) -> Any:
            self.seen["provider"] = dict(ctx.plugin_settings)
            return HashEmbedder.from_context(ctx)

        register(ProviderSpec(name="every-provider", factory=factory, default_model="hash-384"))

    @hookimpl
    def symi_memory_register_rerankers(self, register: Any) -> None:
        from symi_memory.specs import RerankerSpec

        class Keep:
            def rerank(self, query: str, documents: Any, top_n: int) -> list[tuple[int, float]]:
                return [(i, 0.5) for i in range(min(top_n, len(documents)))]

            def close(self) -> None:
                pass

        def factory(ctx: Any) -> Any:
            self.seen["reranker"] = dict(ctx.plugin_settings)
            return Keep()

        register(RerankerSpec(name="every-reranker", factory=factory))

    @hookimpl
    def symi_memory_register_postprocessors(self, register: Any) -> None:
        from symi_memory.specs import PostProcessorSpec

        def factory(hybrid: Any, plugin_settings: Any) -> None:
            self.seen["postprocessor"] = dict(plugin_settings)
            return None

        register(PostProcessorSpec(name="every-postprocessor", factory=factory))

    @hookimpl
    def symi_memory_register_backends(self, register: Any) -> None:
        from symi_memory.specs import BackendSpec
        from symi_memory.testing.fakes import InMemoryBackend

        def factory(ctx: Any) -> Any:
            self.seen["backend"] = dict(ctx.plugin_settings)
            ctx.services.choose_provider()
            return InMemoryBackend(ctx)

        register(BackendSpec(name="every-backend", factory=factory))


def test_plugins_entries_reach_every_kind_of_plugin(tmp_path: Path) -> None:
    from symi_memory import open_memory

    plugin = _EveryKind()
    plugins = load_plugins(extra=[("every-kind", plugin)])
    cfg = load_config(None, state_dir=tmp_path, plugins=plugins, overrides={
        "plugins": {"slots": {"memory": "every-backend"}, "entries": {"every-kind": {"size": 3}}},
        "agents": {"defaults": {"memorySearch": {"provider": "every-provider",
                                                 "query": {"rerank": {"provider": "every-reranker"}}}}}})
    with open_memory(cfg, workspace=tmp_path / "ws", start=False) as mem:
        assert mem.pipeline is not None  # the reranker and post-processors are built on first use
    assert plugin.seen == {kind: {"size": 3} for kind in ("provider", "reranker", "postprocessor", "backend")}


def test_a_plugin_without_an_entries_table_gets_an_empty_one(tmp_path: Path) -> None:
    from symi_memory.specs import PostProcessorSpec

    got: list[Any] = []

    class Bare:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="bare", factory=lambda hybrid, plugin_settings: got.append(plugin_settings)))

    from symi_memory import open_memory

    plugins = load_plugins(extra=[("bare", Bare())])
    with open_memory(load_config(None, state_dir=tmp_path, plugins=plugins), workspace=tmp_path, start=False) as mem:
        assert mem.pipeline is not None  # post-processors are built on first use
    assert got == [{}]


def test_config_never_loads_the_plugin_host(tmp_path: Path) -> None:
    """The host passes the loaded plugins in: no config module imports the plugin machinery."""
    import ast

    from symi_memory.config import load_config as config_layer_load

    config_dir = Path(__file__).resolve().parents[1] / "core" / "symi_memory" / "config"
    host_modules = {"plugins", "host", "manager", "hookspecs", "pluggy"}
    imported = []
    for path in sorted(config_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                parts = (node.module or "").split(".")
                names = {a.name for a in node.names}
                if (node.level == 2 and (host_modules & set(parts[:1]) or (not node.module and host_modules & names))) \
                        or (node.level == 0 and parts[0] == "pluggy") \
                        or (node.level == 0 and parts[:1] == ["symi_memory"] and host_modules & set(parts[1:2])):
                    imported.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.Import):
                imported += [f"{path.name}:{node.lineno}" for a in node.names
                             if a.name == "pluggy" or a.name.split(".")[1:2] and a.name.split(".")[1] in host_modules]
    assert imported == []
    with pytest.raises(TypeError, match="symi_memory.load_config loads them"):
        config_layer_load(None, state_dir=tmp_path)
    cfg = config_layer_load(None, state_dir=tmp_path, plugins=load_plugins(["faiss"]))
    assert "faiss" not in cfg.get("agents.defaults.memorySearch.store")
