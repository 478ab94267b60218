"""Clearly invalid configs are refused with one line naming key, value and what is allowed (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from symi_memory import load_config
from symi_memory.config.fields import parse_duration_ms
from symi_memory.errors import ConfigError

MS = "agents.defaults.memorySearch"


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return p


def _refused(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(path, state_dir=path.parent / "state")
    assert len(err.value.problems) == 1, err.value.problems
    return err.value.problems[0]


@pytest.mark.parametrize(("text", "key"), [
    ('{"agents": []}', "agents"),
    ('{"agents": "x"}', "agents"),
    ('{"agents": {"list": 5}}', "agents.list"),
    ('{"agents": {"list": "x"}}', "agents.list"),
])
def test_agents_of_the_wrong_shape(tmp_path: Path, text: str, key: str) -> None:
    line = _refused(_write(tmp_path, "c.json", text))
    assert f": {key}: " in line and ("table/object" in line or "list" in line)


@pytest.mark.parametrize(("key", "value"), [
    (f"{MS}.query.minScore", "NaN"),
    (f"{MS}.query.hybrid.vectorWeight", "NaN"),
    (f"{MS}.query.hybrid.textWeight", "-Infinity"),
    (f"{MS}.query.hybrid.mmr.lambda", "NaN"),
    (f"{MS}.query.hybrid.temporalDecay.halfLifeDays", "NaN"),
    (f"{MS}.sync.intervalMinutes", "NaN"),
    (f"{MS}.sync.intervalMinutes", "Infinity"),
    (f"{MS}.sync.intervalMinutes", "1e300"),
    (f"{MS}.chunking.tokens", "1e400"),
    ("contextWindow", "9" * 400),
])
def test_non_finite_and_huge_numbers(tmp_path: Path, key: str, value: str) -> None:
    text = json.dumps(_nest(key, "@")).replace('"@"', value)
    line = _refused(_write(tmp_path, "c.json5", text))
    assert key.rsplit(".", 1)[-1] in line and ("finite" in line or "too large" in line or "out of range" in line)
    assert "allowed" in line or "use" in line


@pytest.mark.parametrize("value", ["inf", "nan", "1e305", "-5", "9" * 400, '"' + "9" * 400 + '"', '"-5m"'])
def test_bad_durations(tmp_path: Path, value: str) -> None:
    cfg = _write(tmp_path, "c.toml", f"[memory.qmd.update]\ninterval = {value}\n")
    line = _refused(cfg)
    assert "memory.qmd.update.interval" in line and "366d" in line


def test_duration_parser_bounds() -> None:
    assert parse_duration_ms("366d") == 366 * 86_400_000
    assert parse_duration_ms(0) == 0
    for bad in (float("inf"), float("nan"), 1e305, -1, "367d", "9" * 400):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)


def test_file_not_utf8(tmp_path: Path) -> None:
    line = _refused(_write(tmp_path, "c.toml", b"[memory]\ncitations = \"\xff\xfe\"\n"))
    assert "not UTF-8" in line and "0xff" in line


@pytest.mark.parametrize("suffix", [".json", ".json5"])
def test_deep_nesting(tmp_path: Path, suffix: str) -> None:
    line = _refused(_write(tmp_path, "c" + suffix, '{"a":' * 900 + "1" + "}" * 900))
    assert "nested" in line


def test_qmd_paths_entries_are_checked_for_every_backend(tmp_path: Path) -> None:
    line = _refused(_write(tmp_path, "c.json", '{"memory": {"qmd": {"paths": [{}]}}}'))
    assert "memory.qmd.paths[0]" in line and "path" in line


def test_cli_exits_2_with_one_line(cli, tmp_path: Path) -> None:
    for name, text in (("a.json", '{"agents": []}'), ("b.json5", '{"agents": {"defaults": {"contextWindow": NaN}}}'),
                       ("c.toml", b"\xff\xfe"), ("d.json", '{"a":' * 900 + "1" + "}" * 900)):
        code, out, err = cli("--config", str(_write(tmp_path, name, text)), "status")
        assert code == 2, (name, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def _nest(path: str, value: object) -> dict:
    out: object = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out  # type: ignore[return-value]


@pytest.mark.parametrize(("text", "key"), [
    ('{"agents": {"defaults": {"memorySearch": {"sources": ["memry"]}}}}', f"{MS}.sources"),
    ('{"agents": {"defaults": {"memorySearch": {"sources": ["memory", "session"]}}}}', f"{MS}.sources"),
    ('{"agents": {"list": [{"id": "work", "memorySearch": {"sources": ["transcripts"]}}]}}',
     "agents.list[0].memorySearch.sources"),
])
def test_a_misspelt_source_is_refused_naming_the_choices(tmp_path: Path, text: str, key: str) -> None:
    # Before, the typo loaded and every search answered nothing: the index holds no source of that name.
    line = _refused(_write(tmp_path, "c.json", text))
    assert f"{key}" in line and "memory, sessions" in line


def test_the_sources_one_may_write_load(tmp_path: Path) -> None:
    for sources in ([], ["memory"], ["memory", "sessions"], ["Sessions", "MEMORY"]):
        cfg = load_config(_write(tmp_path, "c.json", json.dumps(_nest(f"{MS}.sources", sources))),
                          state_dir=tmp_path / "state")
        assert cfg.agent("main").memory_search["sources"] == [s.lower() for s in sources]


@pytest.mark.parametrize(("text", "key"), [
    ('{"agents": {"defaults": {"userTimezone": "Europe/Amsterdm"}}}', "agents.defaults.userTimezone"),
    ('{"agents": {"defaults": {"userTimezone": "Mars/Olympus"}}}', "agents.defaults.userTimezone"),
    ('{"agents": {"list": [{"id": "work", "userTimezone": "CEST+2"}]}}', "agents.list[0].userTimezone"),
])
def test_an_unknown_time_zone_is_refused_when_config_loads(tmp_path: Path, text: str, key: str) -> None:
    # It loaded, search worked, and then every memory_append (the flush turn's notes included), `flush prompts`
    # and `context` failed with "time zone ... is unknown", naming no key.
    line = _refused(_write(tmp_path, "c.json", text))
    assert key in line and "IANA" in line


def test_known_time_zones_load(tmp_path: Path) -> None:
    for zone in ("Europe/Amsterdam", "UTC", "America/Argentina/Buenos_Aires", ""):
        cfg = load_config(_write(tmp_path, "c.json", json.dumps({"agents": {"defaults": {"userTimezone": zone}}})),
                          state_dir=tmp_path / "state")
        assert cfg.agent("main").user_timezone == zone


def test_an_agent_id_listed_twice_is_refused(tmp_path: Path) -> None:
    # The last entry silently won: `status` showed the second entry's workspace for "main", the first's was never
    # indexed or searched.
    text = json.dumps({"agents": {"list": [{"id": "main", "workspace": str(tmp_path / "a")},
                                           {"id": "work"}, {"id": "main", "workspace": str(tmp_path / "b")}]}})
    line = _refused(_write(tmp_path, "c.json", text))
    assert "agents.list[2].id" in line and "'main'" in line and "agents.list[0]" in line


@pytest.mark.parametrize("agent_id", ["../evil", "..", ".", "a/b", "team\\x", "a\x00b", ""])
def test_an_agent_id_that_would_leave_the_state_dir_is_refused(tmp_path: Path, agent_id: str) -> None:
    # The id names the index file ({stateDir}/memory/{agentId}.sqlite) and the agent's state folder: "../evil"
    # put the index at <stateDir>/evil.sqlite, "../../x" anywhere the process may write.
    from symi_memory import open_memory

    state = tmp_path / "state"
    with pytest.raises(ConfigError, match="agent id"):
        open_memory(None, agent_id=agent_id, workspace=tmp_path, state_dir=state, start=False)
    assert {p.name for p in tmp_path.iterdir()} <= {"state"} and not list(tmp_path.rglob("*.sqlite"))
    line = _refused(_write(tmp_path, "c.json", json.dumps({"agents": {"list": [{"id": agent_id}]}})))
    assert "agents.list[0].id" in line


def test_agent_ids_people_use_still_open(tmp_path: Path) -> None:
    from symi_memory import open_memory

    for agent_id in ("main", "work", "agent-2.v1", "Main Bot", "ops_bot", "..hidden-not-parent"):
        with open_memory(None, agent_id=agent_id, workspace=tmp_path, state_dir=tmp_path / "state", start=False) as m:
            assert m.agent.id == agent_id


def test_cli_refuses_a_traversing_agent_id_in_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("--state-dir", str(tmp_path / "state"), "--workspace", str(tmp_path), "--agent", "../evil",
                         "status")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "evil.sqlite").exists()


def test_an_agent_s_own_sources_in_any_case_search_that_source(tmp_path: Path) -> None:
    # "Memory" in an agents.list entry loaded (the case-insensitive check let it through) but was kept as written,
    # so the index, which names the source "memory", answered every search of that agent with nothing.
    from symi_memory import open_memory

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The NAS is at 192.168.1.20.\n", encoding="utf-8")
    cfg = _write(tmp_path, "c.json", json.dumps({"agents": {
        "defaults": {"memorySearch": {"provider": "none"}},
        "list": [{"id": "work", "memorySearch": {"sources": ["Memory", "SESSIONS"]}}]}}))
    manager = open_memory(cfg, agent_id="work", workspace=ws, state_dir=tmp_path / "state")
    try:
        assert manager.agent.memory_search["sources"] == ["memory", "sessions"]
        manager.sync()
        assert [r["path"] for r in manager.search("NAS address").to_dict()["results"]] == ["MEMORY.md"]
    finally:
        manager.close()


def test_a_backend_not_installed_is_named_before_its_settings(cli, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Selecting the postgres backend without its plugin said only that `store.postgres` is an unknown key, which
    sent the operator looking for a typo; the missing backend is named first (CLI and load_config)."""
    monkeypatch.setenv("SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD", "1")  # the builtins only, wherever it is installed
    cfg = _write(tmp_path, "c.toml", '[plugins.slots]\nmemory = "postgres"\n\n'
                                     f'[{MS}.store.postgres]\ndsn = "host=db"\n')
    code, out, err = cli("--config", str(cfg), "status")
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err
    assert lines[0].startswith("symi-memory: error: plugins.slots.memory = 'postgres': no backend of that name"), err
    assert "Is the plugin installed" in lines[0] and "store.postgres: unknown key" in lines[1], err
    with pytest.raises(ConfigError) as refused:
        load_config(cfg, state_dir=tmp_path / "state")
    assert refused.value.problems[0].startswith("plugins.slots.memory = 'postgres'"), refused.value.problems
    # A backend that is installed: only the misspelt key is reported, as before.
    cfg.write_text(f'[plugins.slots]\nmemory = "faiss"\n\n[{MS}.store.faiss]\nnlistt = 4\n', encoding="utf-8")
    assert "nlistt: unknown key" in _refused(cfg)
