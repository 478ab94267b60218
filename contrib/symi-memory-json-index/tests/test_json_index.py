"""What json-index adds to the conformance suite: its file, its settings, its status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from symi_memory import ConfigError, load_config, open_memory

SLOT = {"plugins": {"slots": {"memory": "json-index"}}}


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-05-01.md").write_text("# 2026-05-01\n\n- The wifi password is on the fridge.\n",
                                                 encoding="utf-8")
    return ws


def test_the_index_survives_a_new_process_and_status_names_it(tmp_path: Path) -> None:
    ws, state = _workspace(tmp_path), tmp_path / "state"
    with open_memory(load_config(None, state_dir=state, overrides=SLOT), workspace=ws, start=False) as mem:
        assert mem.status()["dirty"] is True
        mem.sync()
    # A second manager (another process, as far as the backend knows) searches without syncing.
    with open_memory(load_config(None, state_dir=state, overrides=SLOT), workspace=ws, start=False) as mem:
        hits = mem.search("wifi password", min_score=0).results
        assert [h.path for h in hits] == ["memory/2026-05-01.md"]
        st = mem.status()
        assert (st["backend"], st["plugin"], st["files"], st["dirty"]) == ("json", "json-index", 1, False)
        saved = json.loads(Path(st["indexPath"]).read_text(encoding="utf-8"))
        assert list(saved["files"]) == ["memory/2026-05-01.md"]


def test_its_settings_are_typed(tmp_path: Path) -> None:
    bad = {**SLOT, "plugins": {**SLOT["plugins"], "entries": {"json-index": {"maxChunks": 0}}}}
    with pytest.raises(ConfigError, match=r"plugins\.entries\.json-index\.maxChunks"):
        load_config(None, state_dir=tmp_path / "state", overrides=bad)
    cfg = load_config(None, state_dir=tmp_path / "state", overrides=SLOT)
    assert cfg.get("plugins.entries.json-index") == {"fileName": "json-index.json", "maxChunks": 100_000}


def test_too_many_chunks_fail_the_sync_with_the_key_to_raise(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    small = {**SLOT, "plugins": {**SLOT["plugins"], "entries": {"json-index": {"maxChunks": 1}}}}
    (ws / "MEMORY.md").write_text("- another file, another chunk\n", encoding="utf-8")
    with open_memory(load_config(None, state_dir=tmp_path / "state", overrides=small), workspace=ws,
                     start=False) as mem:
        with pytest.raises(Exception, match=r"maxChunks = 1"):
            mem.sync()
