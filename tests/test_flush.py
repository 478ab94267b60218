from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from symi_memory.errors import ConfigError
from symi_memory.flush import (
    DEFAULT_FLUSH_PROMPT,
    DEFAULT_FLUSH_SYSTEM_PROMPT,
    FlushSettings,
    build_flush_prompts,
    should_flush,
    workspace_writable,
)
from symi_memory.session_store import SessionStore

SMALL = FlushSettings(reserve_tokens_floor=10, soft_threshold_tokens=5, context_window=100)


def test_defaults_and_from_config() -> None:
    assert FlushSettings.from_config({}) == FlushSettings()
    s = FlushSettings.from_config(
        {
            "reserveTokensFloor": 30000,
            "memoryFlush": {
                "enabled": False,
                "softThresholdTokens": 1000,
                "prompt": "Write notes.",
                "systemPrompt": "Sys.",
            },
        }
    )
    assert (s.enabled, s.reserve_tokens_floor, s.soft_threshold_tokens) == (False, 30000, 1000)
    assert (s.prompt, s.system_prompt, s.context_window) == ("Write notes.", "Sys.", 200000)
    assert FlushSettings.from_config(None, context_window=128000).context_window == 128000


def test_from_config_rejects_bad_values_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"memoryFlush\.softThresholdTokens: -1"):
        FlushSettings.from_config({"memoryFlush": {"softThresholdTokens": -1}})
    with pytest.raises(ConfigError, match=r"reserveTokensFloor: 'lots'"):
        FlushSettings.from_config({"reserveTokensFloor": "lots"})


def test_zero_tokens_never_flushes() -> None:
    d = should_flush({"totalTokens": 0}, SMALL)
    assert d.should_flush is False and d.reason == "token count unknown"
    assert should_flush(None, SMALL).should_flush is False


def test_threshold_reached() -> None:
    d = should_flush({"totalTokens": 85, "totalTokensFresh": True, "compactionCount": 0}, SMALL)
    assert d.to_dict() == {
        "shouldFlush": True,
        "thresholdTokens": 85,
        "totalTokens": 85,
        "reason": "threshold reached",
    }
    assert should_flush({"totalTokens": 84}, SMALL).should_flush is False


def test_default_threshold_uses_200k_window() -> None:
    d = should_flush({"totalTokens": 176000}, FlushSettings())
    assert d.threshold_tokens == 176000 and d.should_flush
    # A known, smaller model window wins over the default.
    assert should_flush({"totalTokens": 10000}, FlushSettings(), context_window=32000).should_flush
    assert should_flush({"totalTokens": 7000}, FlushSettings(), context_window=32000).should_flush is False


def test_non_positive_threshold_never_flushes() -> None:
    d = should_flush({"totalTokens": 50}, FlushSettings(), context_window=20000)
    assert d.should_flush is False and d.threshold_tokens < 0


def test_stale_count_and_disabled_and_read_only() -> None:
    assert should_flush({"totalTokens": 90, "totalTokensFresh": False}, SMALL).reason == "token count stale"
    off = FlushSettings(enabled=False, reserve_tokens_floor=10, soft_threshold_tokens=5, context_window=100)
    assert should_flush({"totalTokens": 90}, off).should_flush is False
    d = should_flush({"totalTokens": 90}, SMALL, workspace_writable=False)
    assert d.should_flush is False and d.reason == "workspace not writable"


def test_once_per_cycle_and_every_cycle(tmp_path: Path) -> None:
    """Drive the policy through the real sessions.json record, cycle after cycle."""
    store = SessionStore.for_agent(tmp_path, "main")
    key = "agent:main:discord:dm:1"
    store.update(key, {"totalTokens": 90, "totalTokensFresh": True, "compactionCount": 0})
    for cycle in range(4):
        assert should_flush(store.get(key), SMALL).should_flush, f"cycle {cycle} should flush"
        store.record_flush(key, now_ms=1_000 + cycle)
        again = should_flush(store.get(key), SMALL)
        assert again.should_flush is False and again.reason == "already flushed this compaction cycle"
        store.update(key, lambda e: {**e, "compactionCount": e["compactionCount"] + 1})
    assert store.get(key)["memoryFlushCompactionCount"] == 3


def test_default_prompts_in_user_time_zone() -> None:
    now = datetime(2026, 2, 16, 15, 0, tzinfo=UTC)
    p = build_flush_prompts(FlushSettings(), now=now, tz="America/New_York")
    assert "memory/2026-02-16.md" in p.user and "YYYY-MM-DD" not in p.user
    assert p.user.startswith(DEFAULT_FLUSH_PROMPT.replace("YYYY-MM-DD", "2026-02-16"))
    assert p.user.count("Current time:") == 1
    assert "10:00" in p.user and "(America/New_York)" in p.user
    assert p.system == DEFAULT_FLUSH_SYSTEM_PROMPT
    assert p.user.count("NO_REPLY") == 1  # the default already has it: no hint added


def test_date_rolls_over_in_user_zone() -> None:
    now = datetime(2026, 2, 17, 3, 30, tzinfo=UTC)  # still the 16th in New York, already the 17th in Tokyo
    assert "memory/2026-02-16.md" in build_flush_prompts(FlushSettings(), now=now, tz="America/New_York").user
    assert "memory/2026-02-17.md" in build_flush_prompts(FlushSettings(), now=now, tz="Asia/Tokyo").user


def test_custom_prompts_get_hint_and_single_time_line() -> None:
    s = FlushSettings(
        prompt="Write notes to memory/YYYY-MM-DD.md.\nCurrent time: whatever the runtime said (UTC)",
        system_prompt="Session nearing compaction. Store durable memories now.",
    )
    p = build_flush_prompts(s, now=datetime(2026, 2, 16, 15, 0, tzinfo=UTC), tz="UTC")
    assert p.user.count("Current time:") == 1
    assert "memory/2026-02-16.md" in p.user
    assert "NO_REPLY" in p.user and "NO_REPLY" in p.system
    assert "Current time:" not in p.system


def test_unknown_time_zone_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        build_flush_prompts(FlushSettings(), now=datetime(2026, 1, 1, tzinfo=UTC), tz="Mars/Olympus")


def test_workspace_writable_real_dirs(tmp_path: Path) -> None:
    assert workspace_writable(tmp_path) is True
    assert list(tmp_path.iterdir()) == []  # the probe cleans up
    assert workspace_writable(tmp_path / "missing") is False
    assert workspace_writable(tmp_path, "rw") is True
    assert workspace_writable(tmp_path, "ro") is False
    assert workspace_writable(tmp_path, "none") is False


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A directory this process really cannot write into.

    As root, mode bits do not stop writes, so the directory is made
    immutable (chattr +i), which binds root too; without it the test skips.
    """
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode
    ):
        pytest.skip("running as root and cannot make an immutable directory (chattr +i)")
    try:
        yield d
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=True)


def test_read_only_workspace_is_not_writable(read_only_dir: Path) -> None:
    assert workspace_writable(read_only_dir) is False
    d = should_flush({"totalTokens": 90}, SMALL, workspace_writable=workspace_writable(read_only_dir))
    assert d.should_flush is False


def test_from_real_config_file(tmp_path: Path) -> None:
    from symi_memory import load_config

    (tmp_path / "symi.json").write_text(
        '{"agents": {"defaults": {"contextWindow": 100, "compaction": '
        '{"reserveTokensFloor": 10, "memoryFlush": {"softThresholdTokens": 5}}}}}'
    )
    agent = load_config(state_dir=tmp_path, extra_defaults={}).agent("main")
    settings = FlushSettings.from_config(agent.compaction, context_window=agent.context_window)
    assert settings == SMALL
    assert should_flush({"totalTokens": 85}, settings).should_flush


def test_unset_user_zone_dates_prompt_and_append_alike_in_the_machine_zone(tmp_path: Path) -> None:
    # 15:30 UTC on the 16th is already 00:30 on the 17th in Tokyo: both must pick the 17th.
    script = (
        "import sys\n"
        "from datetime import UTC, datetime\n"
        "from symi_memory.flush import FlushSettings, build_flush_prompts\n"
        "from symi_memory.writing import append_memory\n"
        "now = datetime(2026, 2, 16, 15, 30, tzinfo=UTC)\n"
        "print(build_flush_prompts(FlushSettings(), now=now, tz=None).user)\n"
        "print('APPENDED', append_memory(sys.argv[1], 'note', now=now).path)\n"
    )
    env = {**os.environ, "TZ": "Asia/Tokyo"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "memory/2026-02-17.md" in out and "memory/2026-02-16.md" not in out.split("APPENDED")[0]
    assert "APPENDED memory/2026-02-17.md" in out
    assert "Tuesday, 2026-02-17 00:30 (JST)" in out
    assert (tmp_path / "memory" / "2026-02-17.md").read_text() == "note\n"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_from_config_non_finite_numbers_are_config_errors(value: float) -> None:
    # A runtime's own settings dict (JSON5 and Python both carry NaN and Infinity) gets the key named, not a
    # ValueError or OverflowError from int().
    with pytest.raises(ConfigError, match=r"memoryFlush\.softThresholdTokens"):
        FlushSettings.from_config({"memoryFlush": {"softThresholdTokens": value}})
    with pytest.raises(ConfigError, match=r"compaction\.reserveTokensFloor"):
        FlushSettings.from_config({"reserveTokensFloor": value})
    with pytest.raises(ConfigError, match=r"contextWindow"):
        FlushSettings.from_config({}, context_window=value)


def test_from_config_compaction_that_is_not_an_object_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"agents\.defaults\.compaction: expected an object, got list"):
        FlushSettings.from_config([1])  # type: ignore[arg-type]


@pytest.mark.parametrize("compaction", [[], False, 0, ""])
def test_from_config_compaction_that_is_empty_but_not_an_object_is_a_config_error(compaction: object) -> None:
    with pytest.raises(ConfigError, match=r"agents\.defaults\.compaction: expected an object"):
        FlushSettings.from_config(compaction)  # type: ignore[arg-type]


def test_from_config_memory_flush_false_is_a_config_error_saying_how_to_turn_it_off() -> None:
    # Before: memoryFlush = false read as "not set", so the flush stayed on with every default.
    with pytest.raises(ConfigError, match=r"memoryFlush: expected an object, got bool; .*enabled = false"):
        FlushSettings.from_config({"memoryFlush": False})
    with pytest.raises(ConfigError, match=r"memoryFlush: expected an object, got list"):
        FlushSettings.from_config({"memoryFlush": []})
    assert FlushSettings.from_config(None).enabled and FlushSettings.from_config({"memoryFlush": None}).enabled
