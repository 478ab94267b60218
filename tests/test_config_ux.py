"""Config UX fixes of issue 14: deduplicated key lists, list syntax hints, JSON5 config set, --workspace FILE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from symi_memory import load_config
from symi_memory.errors import ConfigError


def test_allowed_keys_are_listed_once(tmp_path: Path) -> None:
    for section in ({"bogus": 1}, {"memory": {"bogus": 1}}, {"agents": {"defaults": {"memorySearch": {"bogus": 1}}}},
                    {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"bogus": 1}}}}}}):
        cfg = tmp_path / "c.json"
        cfg.write_text(json.dumps(section), encoding="utf-8")
        # A plugin's keys below core sections used to repeat those sections' names (agents, agents, ...).
        plugin_keys = {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"myBoost": {"on": False}}}}}}}
        with pytest.raises(ConfigError) as err:
            load_config(cfg, state_dir=tmp_path / "state", extra_defaults=plugin_keys)
        line = str(err.value)
        allowed = [k.strip() for k in line.split("allowed keys here:")[1].split(",")]
        assert len(allowed) == len(set(allowed)), line


def test_config_set_list_key_with_a_bare_word_gets_a_syntax_hint(cli, tmp_path: Path) -> None:
    code, out, err = cli("config", "set", "plugins.disabled", "recency-boost")
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "plugins.disabled" in line and """'["recency-boost"]'""" in line
    code, out, err = cli("config", "set", "plugins.disabled", '["recency-boost"]')
    assert code == 0, err


def test_config_set_on_a_json5_file_keeps_every_value_and_the_original(cli, tmp_path: Path) -> None:
    cfg = tmp_path / "state" / "symi.json5"
    cfg.parent.mkdir(parents=True)
    original = """// my config
{
  memory: { citations: 'off', },  // trailing commas, single quotes
  agents: { defaults: { memorySearch: { query: { maxResults: 9, hybrid: { vectorWeight: .5 } } } } },
}
"""
    cfg.write_text(original, encoding="utf-8")
    code, out, err = cli("config", "set", "agents.defaults.memorySearch.query.minScore", "0.2")
    assert code == 0, err
    assert "JSON5" in err and "symi.json5.bak" in err
    import json5

    data = json5.loads(cfg.read_text(encoding="utf-8"))
    assert data["memory"] == {"citations": "off"}
    assert data["agents"]["defaults"]["memorySearch"]["query"] == {"maxResults": 9, "minScore": 0.2,
                                                                  "hybrid": {"vectorWeight": 0.5}}
    assert (tmp_path / "state" / "symi.json5.bak").read_text(encoding="utf-8") == original
    code, out, err = cli("config", "get", "agents.defaults.memorySearch.query.minScore")
    assert code == 0 and out.strip() == "0.2"
    # A second edit of what we wrote loses nothing, so it keeps no second backup.
    (tmp_path / "state" / "symi.json5.bak").unlink()
    code, out, err = cli("config", "unset", "agents.defaults.memorySearch.query.minScore")
    assert code == 0 and not (tmp_path / "state" / "symi.json5.bak").exists() and "JSON5" not in err


def test_workspace_that_is_a_file(cli, tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x", encoding="utf-8")
    code, out, err = cli("--workspace", str(f), "search", "x")
    assert code == 2 and "is not a directory" in err and "does not exist" not in err
    assert len(err.strip().splitlines()) == 1


def test_context_names_a_workspace_that_is_a_file_or_missing_instead_of_printing_nothing(cli, tmp_path: Path) -> None:
    """``context`` (what a runtime loads at session start) printed nothing, exit 0, for a workspace that is a file
    or does not exist, where every other command says so."""
    f = tmp_path / "notes.txt"
    f.write_text("x", encoding="utf-8")
    code, out, err = cli("--workspace", str(f), "context")
    assert code == 2 and out == "" and "is not a directory" in err, (code, out, err)
    code, out, err = cli("--workspace", str(tmp_path / "nope"), "context")
    assert code == 0 and out == "" and "does not exist" in err, (code, out, err)
    code, data, err = cli("--workspace", str(tmp_path / "nope"), "context", "--json", json_out=True)
    assert code == 0 and data["files"] == [] and "does not exist" in err, (data, err)


def test_disabling_a_builtin_plugin_keeps_its_typed_keys_in_the_file_valid(tmp_path: Path, caplog) -> None:
    """Issue 14: the keys of a disabled plugin (here faiss's typed section) warn instead of 'unknown key'."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"plugins": {"disabled": ["faiss", "rerankers"]}, "agents": {
        "defaults": {"memorySearch": {"store": {"faiss": {"index": "hnsw"}},
                                      "query": {"rerank": {"model": "rerank-v3", "topN": 5}}}},
        "list": [{"id": "a", "memorySearch": {"store": {"faiss": {"M": 16}}}}]}}), encoding="utf-8")
    loaded = load_config(cfg, state_dir=tmp_path / "state")
    assert "faiss" not in loaded.get("agents.defaults.memorySearch.store")
    assert loaded.get("agents.defaults.memorySearch.query.rerank.topN") == 5  # core keys stay
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "agents.defaults.memorySearch.store.faiss" in warning and "agents.list[0].memorySearch.store.faiss" in warning
    assert "query.rerank.model" in warning and "disabled" in warning
    # A typo in a key that no plugin owns is still an error.
    cfg.write_text(json.dumps({"plugins": {"disabled": ["faiss"]},
                               "agents": {"defaults": {"memorySearch": {"store": {"faiss": {}, "bogus": 1}}}}}),
                   encoding="utf-8")
    with pytest.raises(ConfigError, match="bogus: unknown key"):
        load_config(cfg, state_dir=tmp_path / "state")


def test_a_config_file_the_lookup_passes_over_is_named(cli, tmp_path: Path) -> None:
    """With symi.toml and symi.json both in the state dir, only symi.toml was read and nothing said so: switching
    the backend in symi.json changed nothing, without a word."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.toml").write_text('[agents.defaults.memorySearch]\nprovider = "none"\n', encoding="utf-8")
    (state / "symi.json").write_text('{"plugins": {"slots": {"memory": "faiss"}}}', encoding="utf-8")
    code, out, err = cli("--workspace", str(tmp_path), "status", "--json")
    assert code == 0, err
    assert json.loads(out)["backend"] == "builtin"  # symi.toml, as documented
    warned = [line for line in err.splitlines() if "symi.json" in line]
    assert len(warned) == 1 and "is ignored: symi.toml is read first" in warned[0], err
    (state / "symi.json").unlink()
    code, out, err = cli("--workspace", str(tmp_path), "status", "--json")
    assert code == 0 and "ignored" not in err, err


def test_a_config_path_that_is_a_folder_is_named_as_one_not_as_missing(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"is a folder, not a config file") as caught:
        load_config(folder, state_dir=tmp_path / "state")
    assert "not found" not in str(caught.value)
    monkeypatch.setenv("SYMI_CONFIG", str(folder))
    with pytest.raises(ConfigError, match=r"SYMI_CONFIG=.*is a folder, not a config file"):
        load_config(None, state_dir=tmp_path / "state")


def test_config_unset_of_a_key_the_file_does_not_set_says_so(cli, tmp_path: Path) -> None:
    """``config unset memory.citatons`` (a typo) answered "unset memory.citatons": the setting it meant stayed."""
    state = tmp_path / "state"
    env = {"SYMI_STATE_DIR": str(state)}
    code, out, err = cli("config", "set", "memory.citations", "off", env=env)
    assert code == 0, err
    code, out, err = cli("config", "unset", "memory.citatons", env=env)
    assert code == 0 and "memory.citatons is not set in" in out and "nothing changed" in out, (out, err)
    code, out, _ = cli("config", "get", "memory.citations", env=env)
    assert out.strip() == "off"
    code, out, err = cli("config", "unset", "memory.citations", env=env)
    assert code == 0 and out.startswith("unset memory.citations"), (out, err)
    code, out, _ = cli("config", "get", "memory.citations", env=env)
    assert out.strip() == "auto"
