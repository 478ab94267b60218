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


def test_a_file_swapped_for_a_fifo_or_a_symlink_after_the_listing_neither_hangs_nor_leaks(tmp_path: Path) -> None:
    # The sync read listed files with open(): a FIFO swapped in hung it, and a symlink's target outside the
    # workspace was indexed and searchable.
    import os
    import threading

    ws = _workspace(tmp_path)
    (ws / "MEMORY.md").write_text("- The router is called gatekeeper.\n", encoding="utf-8")
    fifo, link = ws / "memory" / "fifo.md", ws / "memory" / "link.md"
    fifo.write_text("- fifo\n", encoding="utf-8")
    link.write_text("- link\n", encoding="utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text("- the vault code is quokka-7731\n", encoding="utf-8")

    def swap(progress) -> None:  # type: ignore[no-untyped-def]
        if progress.path == "MEMORY.md":  # listed first, read first: the other files are listed by now
            fifo.unlink()
            os.mkfifo(fifo)
            link.unlink()
            link.symlink_to(secret)

    with open_memory(load_config(None, state_dir=tmp_path / "state", overrides=SLOT), workspace=ws,
                     start=False) as mem:
        done: list[object] = []
        worker = threading.Thread(target=lambda: done.append(mem.sync(progress=swap)), daemon=True)
        worker.start()
        worker.join(60)
        if worker.is_alive():  # hung opening the FIFO: give it a writer so the thread can end
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            worker.join(10)
            raise AssertionError("the sync hung on a file swapped for a FIFO")
        assert done, "the sync failed"
        assert not [h for h in mem.search("vault code quokka", min_score=0).results if "quokka" in h.snippet]
        assert [h.path for h in mem.search("wifi password", min_score=0).results] == ["memory/2026-05-01.md"]
        saved = json.loads(Path(mem.status()["indexPath"]).read_text(encoding="utf-8"))
        assert sorted(saved["files"]) == ["MEMORY.md", "memory/2026-05-01.md"]


def test_a_workspace_away_for_a_while_keeps_its_files_indexed(tmp_path: Path) -> None:
    # Renamed (or unmounted) for a while: its files are not deleted ones, and the index keeps them until it is back.
    ws = _workspace(tmp_path)
    with open_memory(load_config(None, state_dir=tmp_path / "state", overrides=SLOT), workspace=ws,
                     start=False) as mem:
        mem.sync()
        ws.rename(tmp_path / "away")
        report = mem.sync()
        assert report.files_removed == 0 and "does not exist" in report.warnings[0]
        assert mem.status()["dirty"] is False
        assert [h.path for h in mem.search("wifi password", min_score=0).results] == ["memory/2026-05-01.md"]
        (tmp_path / "away").rename(ws)
        (ws / "memory" / "2026-05-01.md").unlink()
        assert mem.sync().files_removed == 1
        assert not mem.search("wifi password", min_score=0).results
