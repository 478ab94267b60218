"""Tests of the recency-boost plugin: the maths, the hooks, and a real search."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from symi_memory_recency_boost import hooks
from symi_memory_recency_boost.boost import RecencyBoost, note_timestamp

from symi_memory import ConfigError, load_config, open_memory
from symi_memory.plugins import load_plugins
from symi_memory.specs import PostProcessContext
from symi_memory.types import Candidate

DAY = 86_400.0
NOW = 1_780_000_000.0  # 2026-05-28, a fixed clock keeps the ages exact
CTX = PostProcessContext(query="q", now=NOW)
# An installed copy of this plugin would clash with the in-process one, so the
# tests disable the entry point and register the module under another id.
DISABLED = ["recency-boost"]
EXTRA = [("recency-boost-under-test", hooks)]


def cand(path: str, score: float, mtime: float | None = None) -> Candidate:
    return Candidate(id=path, path=path, start_line=1, end_line=2, score=score, text="t", mtime=mtime)


def test_fresh_notes_are_lifted_and_the_lift_fades_over_the_window() -> None:
    booster = RecencyBoost(window_days=10, boost=0.5)
    fresh, mid, old = cand("notes/a.md", 0.4, NOW), cand("notes/b.md", 0.4, NOW - 5 * DAY), cand("notes/c.md", 0.4, NOW - 30 * DAY)
    out = booster.process([fresh, mid, old], CTX)
    assert out[0].score == pytest.approx(0.4 + 0.6 * 0.5)
    assert out[1].score == pytest.approx(0.4 + 0.6 * 0.25)
    assert out[2] is old  # outside the window: untouched, never lowered
    assert all(0.0 <= c.score <= 1.0 for c in booster.process([cand("x.md", 1.0, NOW)], CTX))


def test_input_is_not_mutated() -> None:
    items = (cand("notes/a.md", 0.3, NOW),)
    out = RecencyBoost(window_days=7, boost=0.2).process(items, CTX)
    assert items[0].score == 0.3 and out[0].score > 0.3 and out is not items


def test_the_date_in_a_daily_log_name_wins_over_mtime() -> None:
    # Edited today, but the log is for a day 20 days back: no boost in a 14-day window.
    old_log = cand("memory/2026-05-08.md", 0.5, mtime=NOW)
    assert note_timestamp(old_log.path, old_log.mtime) == pytest.approx(NOW - 20 * DAY, abs=DAY)
    assert RecencyBoost(window_days=14, boost=0.3).process([old_log], CTX)[0].score == 0.5
    assert note_timestamp("memory/2026-02-31.md", 123.0) == 123.0  # not a real date: mtime


def test_excluded_prefixes_and_undated_notes_keep_their_score() -> None:
    booster = RecencyBoost(window_days=14, boost=0.3, exclude=("MEMORY.md",))
    out = booster.process([cand("MEMORY.md", 0.5, NOW), cand("notes/x.md", 0.5, None)], CTX)
    assert [c.score for c in out] == [0.5, 0.5]


def test_from_config_is_off_by_default_and_reads_every_key() -> None:
    assert RecencyBoost.from_config(hooks.DEFAULTS) is None
    on = RecencyBoost.from_config({**hooks.DEFAULTS, "enabled": True, "windowDays": 3, "boost": 2.0})
    assert on == RecencyBoost(window_days=3.0, boost=1.0, exclude=("MEMORY.md", "memory.md"))
    assert RecencyBoost.from_config({"enabled": True, "boost": 0}) is None


def test_hooks_register_the_postprocessor_and_the_config_keys(tmp_path: Path) -> None:
    plugins = load_plugins(DISABLED, extra=EXTRA)
    assert plugins.postprocessors["recency-boost"].order == hooks.ORDER
    assert plugins.owners["postprocessors"]["recency-boost"] == "recency-boost-under-test"
    defaults = hooks.symi_memory_config_defaults()
    cfg = load_config(None, state_dir=tmp_path, extra_defaults=defaults,
                      overrides={"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"recencyBoost": {"boost": 0.5}}}}}}})
    section = cfg.agent("main").memory_search["query"]["hybrid"]["recencyBoost"]
    assert section == {**hooks.DEFAULTS, "boost": 0.5}


def test_bad_settings_are_refused_with_the_key_named(tmp_path: Path) -> None:
    bad = {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"recencyBoost": {"windowDay": 3, "boost": "lots"}}}}}}}
    with pytest.raises(ConfigError) as err:
        load_config(None, state_dir=tmp_path, extra_defaults=hooks.symi_memory_config_defaults(), overrides=bad)
    text = str(err.value)
    assert "recencyBoost.windowDay: unknown key" in text and "windowDays" in text
    assert "recencyBoost.boost" in text and "not a number" in text


def _search_paths(tmp_path: Path, enabled: bool) -> list[str]:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True, exist_ok=True)
    # The stale note matches the query twice, so keyword ranking puts it first. Calibrated scores put both near
    # 0.9 (0.95 and 0.86): closing half the gap to 1.0 lifts the fresh note to 0.93, still under the stale one,
    # so the boost here closes 0.8 of it.
    (ws / "memory" / "stale.md").write_text("# Router\n\nrouter firmware router notes from the old flat\n", encoding="utf-8")
    (ws / "memory" / "fresh.md").write_text("# Network\n\nnew router in the hallway cupboard, admin page on port 8443\n", encoding="utf-8")
    now = time.time()
    os.utime(ws / "memory" / "stale.md", (now - 200 * DAY, now - 200 * DAY))
    os.utime(ws / "memory" / "fresh.md", (now - DAY, now - DAY))
    settings = {
        "plugins": {"disabled": DISABLED},
        "agents": {"defaults": {"memorySearch": {
            "provider": "none", "sync": {"watch": False},
            "query": {"minScore": 0.0, "hybrid": {"recencyBoost": {"enabled": enabled, "boost": 0.8}}},
        }}},
    }
    cfg = load_config(None, state_dir=tmp_path / f"state-{enabled}", overrides=settings,
                      extra_defaults=hooks.symi_memory_config_defaults())
    with open_memory(cfg, workspace=ws, plugins=EXTRA, start=False) as memory:
        memory.sync()
        return [hit.path for hit in memory.search("router").results]


def test_enabling_the_boost_puts_the_fresh_note_first(tmp_path: Path) -> None:
    assert _search_paths(tmp_path, enabled=False) == ["memory/stale.md", "memory/fresh.md"]
    assert _search_paths(tmp_path, enabled=True) == ["memory/fresh.md", "memory/stale.md"]
