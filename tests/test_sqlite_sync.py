"""builtin-sqlite sync: deletes, the watcher, the stale-index safety net, awkward files (issue 3, items 3 and 6)."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from support.sqlite_memory import add_filler, open_mem, wait_for, write

from symi_memory.types import SearchQuery


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w)
    write(w, "MEMORY.md", "# Memory\n\n- The wifi password hint is periwinkle.\n")
    return w


def paths_for(mem, query: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {h.path for h in mem.search(query).results}


def chunk_texts(mem, query: str) -> list:  # type: ignore[no-untyped-def]
    """Backend candidates (full chunk text, no minScore), for checking what exactly was indexed."""
    return list(mem.backend.search(SearchQuery(text=query, max_results=6, min_score=0.0, candidate_limit=24)).candidates)


# ------------------------------------------------------------------ deletes and watching


def test_deleted_file_disappears_after_sync(tmp_path: Path, ws: Path) -> None:
    p = write(ws, "memory/2026-01-03.md", "# Jan 3\n\n- Booked the ferry to Hydra, ticket QX7731.\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert paths_for(mem, "QX7731") == {"memory/2026-01-03.md"}
        p.unlink()
        report = mem.sync()
        assert report.files_removed == 1
        assert paths_for(mem, "QX7731") == set()
        assert "memory/2026-01-03.md" not in {h.path for h in mem.search("ferry Hydra ticket").results}
        assert mem.status()["files"] == 31


def test_watcher_indexes_an_edit_without_a_manual_sync(tmp_path: Path, ws: Path) -> None:
    ms = {"sync": {"watchDebounceMs": 100, "onSearch": False, "onSessionStart": False}}
    with open_mem(tmp_path, ws, ms, start=True) as mem:
        mem.sync()
        # A second, passive manager on the same index: its searches trigger nothing, so
        # only the watcher of the first one can make the edit visible.
        with open_mem(tmp_path, ws, ms, start=False) as reader:
            assert paths_for(reader, "zeppelin") == set()
            # No settling sleep: an edit made while the watch is being set up is caught by the
            # check the watcher runs once its watch is live.
            write(ws, "MEMORY.md", "# Memory\n\n- The wifi password hint is periwinkle.\n- Ride the zeppelin at noon.\n")
            wait_for(lambda: paths_for(reader, "zeppelin") == {"MEMORY.md"}, timeout=20)
            write(ws, "memory/new/2026-03-01.md", "# new folder\n\n- octarine paint order\n")
            wait_for(lambda: paths_for(reader, "octarine") == {"memory/new/2026-03-01.md"}, timeout=20)
            (ws / "memory" / "new" / "2026-03-01.md").unlink()
            wait_for(lambda: paths_for(reader, "octarine") == set(), timeout=20)


def test_stale_index_is_reported_and_repaired_without_the_watcher(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws, {"sync": {"watch": False}}, start=True) as mem:
        mem.search("periwinkle")  # the first search of a session syncs in the background
        wait_for(lambda: mem.status()["files"] == 31 and not mem.status()["dirty"])
        write(ws, "MEMORY.md", "# Memory\n\n- The wifi password hint is periwinkle.\n- The spare key is under the gnome.\n")
        assert mem.status()["dirty"] is True
        assert mem.status()["dirty"] is True, "status must keep saying dirty until a sync ran"
        # Searches never wait, but they notice the change and sync in the background.
        wait_for(lambda: paths_for(mem, "gnome") == {"MEMORY.md"}, timeout=20, interval=0.3)
        wait_for(lambda: mem.status()["dirty"] is False)


def test_status_is_dirty_for_a_new_and_a_deleted_file(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert mem.status()["dirty"] is False
        p = write(ws, "memory/extra.md", "new\n")
        assert mem.status()["dirty"] is True
        mem.sync()
        assert mem.status()["dirty"] is False
        p.unlink()
        assert mem.status()["dirty"] is True


# ------------------------------------------------------------------------ awkward files


def test_crlf_file_line_numbers(tmp_path: Path, ws: Path) -> None:
    lines = [f"crlf entry {n} about nothing in particular" for n in range(1, 121)]
    lines[99] = "the lighthouse keeper is named Oswin"
    write(ws, "memory/crlf.md", ("\r\n".join(lines) + "\r\n").encode("utf-8"))
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        hit = next(c for c in chunk_texts(mem, "Oswin") if c.path == "memory/crlf.md")
        assert hit.start_line <= 100 <= hit.end_line <= 121
        assert "\r" not in hit.text
        want = (lines + [""])[hit.start_line - 1 : hit.end_line]  # the final newline opens an empty line 121
        assert hit.text == "\n".join(want)


def test_bom_file(tmp_path: Path, ws: Path) -> None:
    write(ws, "memory/bom.md", "\ufeffzanzibar trip plans\nsecond line\n".encode("utf-8"))
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        res = mem.search("zanzibar")
        assert [(h.path, h.start_line, h.end_line) for h in res.results] == [("memory/bom.md", 1, 3)]
        assert res.results[0].snippet.startswith("zanzibar trip plans")


def test_invalid_utf8_is_replaced_and_counted(tmp_path: Path, ws: Path) -> None:
    write(ws, "memory/latin1.md", b"caf\xe9 au lait with quetzal feathers\n\xff\xfe broken tail\n")
    with open_mem(tmp_path, ws, {"provider": "none"}) as mem:
        mem.sync()
        assert mem.status()["invalidUtf8Files"] == 1
        hit = next(c for c in chunk_texts(mem, "quetzal") if c.path == "memory/latin1.md")
        assert hit.text.startswith("caf\ufffd au lait")
        assert "broken tail" in hit.text


def test_empty_and_whitespace_files(tmp_path: Path, ws: Path) -> None:
    write(ws, "memory/empty.md", "")
    write(ws, "memory/blank.md", "\n\n   \n")
    with open_mem(tmp_path, ws) as mem:
        report = mem.sync()
        assert report.files_scanned == 33
        st = mem.status()
        assert st["lastError"] is None
        assert st["dirty"] is False
        assert mem.sync().files_indexed == 0
        assert not {"memory/empty.md", "memory/blank.md"} & {h.path for h in mem.search("note").results}


def test_file_over_max_bytes_is_skipped_and_never_read(tmp_path: Path, ws: Path) -> None:
    big = ws / "memory" / "huge.md"
    with open(big, "wb") as fh:
        fh.write(b"giraffe " * 100)
        fh.truncate(1 << 30)  # 1 GiB, sparse: reading it whole would show in peak memory
    # tracemalloc's peak covers only this test (ru_maxrss is the whole run's peak, so it could not fail).
    tracemalloc.start()
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        st = mem.status()
        assert [s["path"] for s in st["skipped"]] == ["memory/huge.md"]
        assert "maxFileBytes" in st["skipped"][0]["reason"]
        assert paths_for(mem, "giraffe") == set()
        assert st["files"] == 31
        assert st["dirty"] is False
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20, f"peak Python allocation {peak >> 20} MiB: the oversized file was read"


def test_file_growing_past_max_bytes_leaves_the_index(tmp_path: Path, ws: Path) -> None:
    p = write(ws, "memory/grows.md", "- kumquat harvest\n")
    with open_mem(tmp_path, ws, {"provider": "none", "sync": {"maxFileBytes": 2000}}) as mem:
        mem.sync()
        assert paths_for(mem, "kumquat") == {"memory/grows.md"}
        write(ws, "memory/grows.md", "- kumquat harvest\n" + "padding words here\n" * 200)
        mem.sync()
        assert paths_for(mem, "kumquat") == set()
        assert [s["path"] for s in mem.status()["skipped"]] == ["memory/grows.md"]
        write(ws, "memory/grows.md", "- kumquat harvest again\n")
        mem.sync()
        assert paths_for(mem, "kumquat") == {"memory/grows.md"}
        assert mem.status()["skipped"] == []
    assert p.exists()


def test_symlinks_and_ignored_dirs_are_skipped(tmp_path: Path, ws: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.md", "- the vault combination is marmoset\n")
    write(outside, "dir/inner.md", "- the vault combination is marmoset\n")
    os.symlink(outside / "secret.md", ws / "memory" / "link.md")
    os.symlink(outside / "dir", ws / "memory" / "linkdir")
    write(ws, "memory/node_modules/pkg.md", "- marmoset in node_modules\n")
    write(ws, "memory/.git/notes.md", "- marmoset in git\n")
    write(ws, "memory/sub/__pycache__/x.md", "- marmoset in pycache\n")
    write(ws, "memory/sub/real.md", "- a real note about a wombat\n")
    for provider in ("none", "hash"):
        with open_mem(tmp_path / provider, ws, {"provider": provider}) as mem:
            mem.sync()
            assert paths_for(mem, "marmoset") == set()
            assert paths_for(mem, "wombat") == {"memory/sub/real.md"}
            assert mem.status()["files"] == 32


def test_a_long_sync_reports_its_progress_and_a_callback_that_raises_stops_it(tmp_path: Path) -> None:
    """What integration.md promises a runtime with a big workspace: steps it can show, and a way to stop."""
    w = tmp_path / "big"
    for i in range(2000):
        write(w, f"memory/n{i:04d}.md", f"# Note {i}\nalpha beta gamma kestrel n{i}x\n")

    class Stop(Exception):
        pass

    def stop_early(p) -> None:  # type: ignore[no-untyped-def]
        if p.phase == "index":
            raise Stop

    mem = open_mem(tmp_path, w)
    with pytest.raises(Stop):
        mem.sync(progress=stop_early)
    assert mem.status()["files"] == 0  # the first build did not land, and left nothing behind
    assert not [p for p in (tmp_path / "state" / "memory").iterdir() if ".build" in p.name]
    seen: list[tuple[str, int, int]] = []
    report = mem.sync(progress=lambda p: seen.append((p.phase, p.done, p.total)))
    assert report.files_indexed == 2000 and report.embeddings_cached > 0  # what the stopped sync embedded is kept
    assert seen[0] == ("scan", 0, 2000) and seen[-1] == ("done", 2000, 2000)
    steps = [done for phase, done, total in seen if phase == "index"]
    assert len(steps) >= 4 and steps == sorted(steps) and steps[-1] == 2000
    assert [h.path for h in mem.search("n1999x", min_score=0).results][:1] == ["memory/n1999.md"]
    mem.close()
