"""Config loading/validation/editing and plugin slots, mostly through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from symi_memory import load_config
from symi_memory.config.fields import parse_duration_ms
from symi_memory.errors import ConfigError, PluginError
from symi_memory.hookspecs import hookimpl
from symi_memory.plugins import load_plugins, resolve_backend_name
from symi_memory.specs import BackendSpec

BUILTIN_IDS = {"builtin-sqlite", "qmd-sidecar", "remote-embeddings", "local-embeddings", "rerankers",
               "postprocessors", "testing"}


def test_plugins_json_lists_builtins(cli) -> None:
    code, data, _ = cli("plugins", "--json", json_out=True)
    assert code == 0
    by_id = {p["id"]: p for p in data}
    assert BUILTIN_IDS <= set(by_id)
    assert by_id["builtin-sqlite"]["registers"]["backends"] == ["builtin-sqlite"]
    assert by_id["builtin-sqlite"]["distribution"] == "symi-memory"
    assert set(by_id["remote-embeddings"]["registers"]["embeddingProviders"]) == {"openai", "gemini", "voyage"}
    assert set(by_id["postprocessors"]["registers"]["postprocessors"]) == {"mmr", "temporal-decay", "supersession",
                                                                          "month-cue"}


def test_disabled_plugins_are_not_loaded(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[plugins]\ndisabled = ["rerankers"]\n', encoding="utf-8")
    code, data, _ = cli("--config", str(cfg), "plugins", "--json", json_out=True)
    assert code == 0
    by_id = {p["id"]: p for p in data}
    # Listed as disabled (issue 14), registering nothing.
    assert by_id["rerankers"]["disabled"] is True and not any(by_id["rerankers"]["registers"].values())
    assert by_id["builtin-sqlite"]["disabled"] is False


def test_unknown_backend_slot_exits_2_with_one_actionable_line(cli, tmp_path: Path, workspace: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[plugins.slots]\nmemory = "nope"\n', encoding="utf-8")
    code, out, err = cli("--config", str(cfg), "--workspace", str(workspace), "search", "tea")
    assert code == 2 and out == ""
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert len(lines) == 1
    assert "plugins.slots.memory" in lines[0] and "'nope'" in lines[0] and "builtin-sqlite" in lines[0]
    assert "installed" in lines[0] and "Traceback" not in err


def test_config_set_get_typed_and_validated(cli, tmp_path: Path) -> None:
    code, _, _ = cli("config", "set", "agents.defaults.memorySearch.query.maxResults", "10")
    assert code == 0
    code, out, _ = cli("config", "get", "agents.defaults.memorySearch.query.maxResults")
    assert (code, out.strip()) == (0, "10")
    state = tmp_path / "state" / "symi.toml"
    assert "maxResults = 10" in state.read_text(encoding="utf-8")
    before = state.read_text(encoding="utf-8")
    code, _, err = cli("config", "set", "agents.defaults.memorySearch.query.maxResult", "10")
    assert code == 2 and 'did you mean "maxResults"' in err
    code, _, err = cli("config", "set", "memory.citations", "sometimes")
    assert code == 2 and "auto, on, off" in err
    assert state.read_text(encoding="utf-8") == before  # refused before anything was written
    code, _, _ = cli("config", "set", "memory.citations", "off")
    assert code == 0
    code, _, _ = cli("config", "unset", "memory.citations")
    code, out, _ = cli("config", "get", "memory.citations")
    assert out.strip() == "auto"


def test_unknown_key_in_file_fails_with_did_you_mean(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[agents.defaults.memorySearch]\nprovder = \"openai\"\n", encoding="utf-8")
    code, _, err = cli("--config", str(cfg), "status")
    assert code == 2
    assert 'agents.defaults.memorySearch.provder: unknown key (did you mean "provider"?)' in err


def test_json5_and_json_configs_and_per_agent_overrides(tmp_path: Path) -> None:
    j5 = tmp_path / "c.json5"
    j5.write_text(
        "{agents: {defaults: {memorySearch: {extraPaths: ['a', ' b ']}},"
        " list: [{id: 'ops', memorySearch: {extraPaths: ['b', 'c'], query: {maxResults: 3}}}]},}",
        encoding="utf-8",
    )
    cfg = load_config(j5, state_dir=tmp_path)
    ops = cfg.agent("ops")
    assert ops.memory_search["extraPaths"] == ["a", "b", "c"]
    assert ops.settings.query.max_results == 3
    assert cfg.agent("main").settings.query.max_results == 6


def test_weights_normalised_and_values_clamped(tmp_path: Path) -> None:
    cfg = load_config(None, state_dir=tmp_path, overrides={"agents": {"defaults": {"memorySearch": {
        "query": {"minScore": 7, "hybrid": {"vectorWeight": 3, "textWeight": 1, "candidateMultiplier": 99}},
        "chunking": {"tokens": 100, "overlap": 500}}}}})
    ms = cfg.agent().memory_search
    assert ms["query"]["minScore"] == 1.0
    assert ms["query"]["hybrid"]["vectorWeight"] == pytest.approx(0.5)  # 1/(1+1) after clamping 3 -> 1
    assert ms["query"]["hybrid"]["candidateMultiplier"] == 20
    assert ms["chunking"]["overlap"] == 99


def test_durations() -> None:
    assert parse_duration_ms("5m") == 300_000
    assert parse_duration_ms("1500ms") == 1500
    assert parse_duration_ms("2") == 120_000
    assert parse_duration_ms("1.5h") == 5_400_000
    with pytest.raises(ValueError):
        parse_duration_ms("5 minutes")
    with pytest.raises(ConfigError, match="interval"):
        load_config(None, state_dir="/tmp", overrides={"memory": {"qmd": {"update": {"interval": "soon"}}}})


def test_slot_resolution_and_legacy_keys() -> None:
    assert resolve_backend_name({}) == "builtin-sqlite"
    assert resolve_backend_name({"memory": {"backend": "qmd"}}) == "qmd-sidecar"
    assert resolve_backend_name({"memory": {"backend": "builtin"}}) == "builtin-sqlite"
    assert resolve_backend_name({"plugins": {"slots": {"memory": "memory-core"}}}) == "builtin-sqlite"
    assert resolve_backend_name({"plugins": {"slots": {"memory": "NONE"}}}) is None
    both = {"plugins": {"slots": {"memory": "builtin-sqlite"}}, "memory": {"backend": "qmd"}}
    assert resolve_backend_name(both) == "builtin-sqlite"


class _Dup:
    @hookimpl
    def symi_memory_register_backends(self, register):
        register(BackendSpec(name="builtin-sqlite", factory=lambda ctx: None))


def test_duplicate_names_are_an_error_naming_both() -> None:
    with pytest.raises(PluginError, match="registered twice.*builtin-sqlite.*dup"):
        load_plugins(extra=[("dup", _Dup())])


class _Typo:
    @hookimpl
    def symi_memory_register_backend(self, register):  # misspelled on purpose
        pass


def test_misspelled_hook_fails_loudly() -> None:
    with pytest.raises(PluginError, match="unknown hook"):
        load_plugins(extra=[("typo", _Typo())])


def test_autoload_switch_keeps_only_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins = load_plugins()
    assert {dist for dist, _ in plugins.dists.values()} == {"symi-memory"}


def test_memory_none_disables_tools(tmp_path: Path, workspace: Path) -> None:
    from symi_memory import open_memory, tools

    cfg = load_config(None, state_dir=tmp_path, overrides={"plugins": {"slots": {"memory": "none"}}})
    with open_memory(cfg, workspace=workspace) as mem:
        assert not mem.enabled
        out = tools.memory_search(mem, {"query": "tea"})
        assert out["results"] == [] and out["disabled"] is True and "disabled" in out["error"]
        assert mem.status()["backend"] == "none"


def test_tool_definitions_render_for_openai_and_anthropic() -> None:
    from symi_memory import tools

    names = [d["name"] for d in tools.TOOL_DEFINITIONS]
    assert names[:2] == ["memory_search", "memory_get"]
    oa = tools.openai_tools()
    assert oa[0]["type"] == "function" and oa[0]["function"]["parameters"]["required"] == ["query"]
    an = tools.anthropic_tools()
    assert an[1]["input_schema"]["required"] == ["path"]
    json.dumps(oa), json.dumps(an)


class _Clash:
    @hookimpl
    def symi_memory_config_defaults(self):
        return {"memory": {"citations": "on"}}


def test_plugin_defaults_may_not_redefine_core_keys() -> None:
    from symi_memory.plugins import collect_config_defaults

    with pytest.raises(PluginError, match="memory.citations"):
        collect_config_defaults({}, load_plugins(extra=[("clash", _Clash())]))


class _Reverse:
    """A post-processor that reverses the order: proves registration, ordering and config-driven enabling."""

    @hookimpl
    def symi_memory_register_postprocessors(self, register):
        from symi_memory.specs import PostProcessorSpec

        class Reverse:
            def process(self, candidates, ctx):
                return [attrs.evolve(c) for c in reversed(candidates)]

        def factory(hybrid):
            return Reverse() if hybrid.get("mmr", {}).get("enabled") else None

        register(PostProcessorSpec(name="reverse", factory=factory, order=700))

    @hookimpl
    def symi_memory_config_defaults(self):
        return {"plugins": {"entries": {"reverse": {"strength": 1}}}}


def test_third_party_postprocessor_runs_in_order(tmp_path: Path, workspace: Path) -> None:
    from symi_memory import open_memory

    (workspace / "memory" / "a.md").write_text("kiwi kiwi kiwi banana\n", encoding="utf-8")
    (workspace / "memory" / "b.md").write_text("kiwi apple pear plum\n", encoding="utf-8")
    over = {"agents": {"defaults": {"memorySearch": {"provider": "none", "query": {"hybrid": {"mmr": {"enabled": True, "lambda": 1.0}}}}}}}
    cfg = load_config(None, state_dir=tmp_path, overrides=over, extra_defaults=collect_defaults_with_reverse())
    with open_memory(cfg, workspace=workspace, plugins=[("reverse", _Reverse())], start=False) as mem:
        mem.sync()
        plain = [h.path for h in mem.search("kiwi", min_score=0).results]
        assert "reverse" in mem.plugins.postprocessors
    assert cfg.get("plugins.entries.reverse.strength") == 1
    with open_memory(load_config(None, state_dir=tmp_path / "b", overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}),
                     workspace=workspace, plugins=[("reverse", _Reverse())], start=False) as mem:
        mem.sync()
        normal = [h.path for h in mem.search("kiwi", min_score=0).results]
    assert plain == list(reversed(normal))


def collect_defaults_with_reverse():
    from symi_memory.plugins import collect_config_defaults

    return collect_config_defaults({}, load_plugins(extra=[("reverse", _Reverse())]))


def test_config_masks_secrets_unless_asked(cli, tmp_path: Path) -> None:
    key, token = "sk-test-SENTINEL-cfg-1", "rerank-SENTINEL-2"
    code, out, _ = cli("config", "set", "agents.defaults.memorySearch.remote.apiKey", key)
    assert code == 0 and key not in out and "apiKey = ***" in out
    code, out, _ = cli("config", "set", "models.providers.openai", json.dumps({"apiKey": key, "baseUrl": "http://x"}))
    assert code == 0 and key not in out and '"apiKey": "***"' in out and "http://x" in out
    code, out, _ = cli("config", "set", "agents.defaults.memorySearch.query.rerank.apiKey", token)
    assert code == 0 and token not in out
    for fmt in ((), ("--json",)):
        code, out, _ = cli("config", "show", *fmt)
        assert code == 0 and key not in out and token not in out and out.count("***") >= 3
        assert "http://x" in out  # other values print as they are
    code, out, _ = cli("config", "get", "agents.defaults.memorySearch.remote.apiKey")
    assert (code, out.strip()) == (0, "***")
    code, out, _ = cli("config", "get", "models.providers", "--json")
    assert json.loads(out) == {"openai": {"apiKey": "***", "baseUrl": "http://x"}}
    code, out, _ = cli("config", "get", "agents.defaults.memorySearch.chunking.tokens")
    assert code == 0 and out.strip().isdigit()  # a number under a token-ish name is not a secret
    code, out, _ = cli("config", "get", "agents.defaults.memorySearch.remote.apiKey", "--show-secrets")
    assert out.strip() == key
    code, out, _ = cli("config", "show", "--show-secrets")
    assert key in out and token in out


class _Counted:
    """A post-processor whose factory counts its calls: when does the manager build the search tail?"""

    def __init__(self) -> None:
        self.built = 0

    @hookimpl
    def symi_memory_register_postprocessors(self, register):
        from symi_memory.specs import PostProcessorSpec

        class Keep:
            def process(self, candidates, ctx):
                return list(candidates)

        def factory(hybrid):
            self.built += 1
            return Keep()

        register(PostProcessorSpec(name="counted", factory=factory, order=700))


def test_post_processors_are_built_on_the_first_search_not_on_open(tmp_path: Path, workspace: Path) -> None:
    # `status` and `get` open the memory too; they never run the search tail, so they should not build it.
    from symi_memory import open_memory

    counted = _Counted()
    cfg = load_config(None, state_dir=tmp_path, overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    with open_memory(cfg, workspace=workspace, plugins=[("counted", counted)], start=False) as mem:
        mem.sync()
        assert mem.status()["files"] >= 1
        assert mem.read_file("MEMORY.md").text
        assert counted.built == 0
        mem.search("tea", min_score=0)
        mem.search("tea", min_score=0)
        assert counted.built == 1
        assert [name for _, name, _ in mem.pipeline.processors][-1] == "counted"
    assert counted.built == 1


def test_the_tool_schema_names_the_defaults_search_uses(tmp_path: Path) -> None:
    """A model reads the tool description: the minScore and maxResults defaults it names are the real ones.

    It said "usually 0.35" while the default is 0.015; a model passing 0.35 as "the default" got
    almost nothing back (docs/search-scores.md: 0.35 empties most answers on the calibrated scale).
    """
    import re

    from symi_memory import tools

    query = load_config(None, state_dir=tmp_path).agent("main").memory_search["query"]
    props = tools.TOOL_DEFINITIONS[0]["parameters"]["properties"]
    for key in ("minScore", "maxResults"):
        named = re.search(r"usually ([0-9.]+)", props[key]["description"])
        assert named is not None, props[key]["description"]
        assert float(named.group(1)) == query[key], (key, props[key]["description"])
