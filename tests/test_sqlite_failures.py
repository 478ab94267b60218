"""builtin-sqlite when things break: embedding outages and an unreadable index file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.sqlite_memory import add_filler, open_mem, settings, write

from symi_memory import hookimpl
from symi_memory.errors import BackendError, EmbeddingError
from symi_memory.specs import ProviderSpec
from symi_memory.testing import HashEmbedder


class Outage:
    """Registers ``flaky``: HashEmbedder vectors, or an HTTP-500-style EmbeddingError while ``down``."""

    def __init__(self) -> None:
        self.down = True

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        outage = self

        class Flaky(HashEmbedder):
            def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
                if outage.down:
                    raise EmbeddingError("embeddings endpoint returned HTTP 500", provider="flaky")
                return super().embed_documents(texts)

        register(ProviderSpec(name="flaky", factory=lambda ctx: Flaky(id="flaky", model="flaky-384")))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    add_filler(w, 10)
    write(w, "MEMORY.md", "# Memory\n\n- Rolled back commit a828e60.\n- The heron nests by the reservoir.\n")
    return w


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder another user may read (pytest's temp root is private to root), removed after the test."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="symi-readonly-"))
    try:
        yield root
    finally:
        for p in [root, *root.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(p.stat().st_mode | 0o700)
        shutil.rmtree(root, ignore_errors=True)


def _readable_by_all(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o555)


def test_embedding_outage_keeps_keyword_search_and_recovers(tmp_path: Path, ws: Path) -> None:
    outage = Outage()
    with open_mem(tmp_path, ws, {"provider": "flaky"}, plugins=[("flaky", outage)]) as mem:
        report = mem.sync()
        assert report.files_indexed == 11
        assert report.errors and "HTTP 500" in report.errors[0]
        st = mem.status()
        assert "HTTP 500" in (st["lastError"] or "")
        assert st["dirty"] is True, "files without vectors are still pending"
        assert [h.path for h in mem.search("a828e60").results] == ["MEMORY.md"]
        outage.down = False
        report = mem.sync()
        indexed = mem.backend.store._read("SELECT COUNT(*) FROM (SELECT vector FROM chunks UNION "
                                          "SELECT vector FROM chunk_units)").fetchone()[0]
        assert report.files_indexed == 11 and report.embeddings_computed == indexed  # chunks and their lines
        assert report.errors == ()
        st = mem.status()
        assert st["lastError"] is None, "a sync that succeeded clears the old error"
        assert st["dirty"] is False
        assert mem.search("heron nests reservoir").results[0].path == "MEMORY.md"


def test_unreadable_index_file_is_set_aside_and_rebuilt(tmp_path: Path, ws: Path) -> None:
    db = tmp_path / "state" / "memory" / "main.sqlite"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not sqlite " * 500)
    with open_mem(tmp_path, ws) as mem:
        assert mem.status()["files"] == 0
        assert mem.sync().full
        assert mem.search("a828e60").results[0].path == "MEMORY.md"
    kept = [p for p in db.parent.iterdir() if p.name.startswith("main.sqlite.unreadable-")]
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"this is not sqlite")


def _synced(root: Path, ws: Path) -> tuple[Path, tuple[int, int]]:
    """``ws`` indexed: the index file and the (files, chunks) it holds."""
    with open_mem(root, ws) as mem:
        mem.sync()
        st = mem.status()
    return Path(st["dbPath"]), (st["files"], st["chunks"])


def _damage(db: Path, *tables: str) -> None:
    """Overwrite the pages of ``tables`` (but the root of a table of several pages) with bytes that are no b-tree
    page (a disk fault)."""
    import apsw

    con = apsw.Connection(str(db))
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [(n, size) for n, size, path, alone in con.execute(
            "SELECT pageno, pgsize, path, count(*) OVER (PARTITION BY name) = 1 FROM dbstat "
            f"WHERE name IN ({','.join('?' * len(tables))})", tables) if alone or path != "/"]
    finally:
        con.close()
    assert pages
    with open(db, "r+b") as fh:
        for n, size in pages:
            fh.seek((n - 1) * size)
            fh.write(bytes(range(256)) * (size // 256))


def test_an_index_damaged_inside_says_so_in_every_process_and_the_next_sync_rebuilds_it(tmp_path: Path,
                                                                                        ws: Path) -> None:
    db, counts = _synced(tmp_path, ws)
    _damage(db, "chunks")
    with open_mem(tmp_path, ws) as mem:
        with pytest.raises(BackendError, match=r"is damaged \(database disk image is malformed\); the next sync "
                                               r"sets it aside and rebuilds it"):
            mem.search("a828e60")
        st = mem.status()
        assert st["dirty"] is True and "the index file is damaged" in st["lastError"]
    with open_mem(tmp_path, ws) as other:  # another process: its status tells the truth too
        st = other.status()
        assert st["dirty"] is True and "the index file is damaged" in st["lastError"]
        report = other.sync()  # an ordinary sync, nothing changed on disk
        assert report.full and report.files_indexed == counts[0]
        assert (other.status()["files"], other.status()["chunks"]) == counts
        assert other.status()["dirty"] is False and other.status()["lastError"] is None
        assert other.search("a828e60").results[0].path == "MEMORY.md"
    kept = sorted(p.name for p in db.parent.iterdir() if p.name.startswith("main.sqlite."))
    assert len(kept) == 1 and kept[0].startswith("main.sqlite.unreadable-")


@pytest.mark.parametrize("table", ["files", "skipped"])
def test_status_of_an_index_damaged_where_it_counts_reports_the_damage_and_the_next_sync_rebuilds(
        tmp_path: Path, ws: Path, cli, table: str) -> None:  # type: ignore[no-untyped-def]
    """status counts every file (and lists the skipped ones): damage there made it fail with SQLite's own
    CorruptError (a traceback from `symi-memory status`), before any search had noted the damage. It now reports
    it as a search does: noted beside the index for every process, and the next sync rebuilds."""
    cfg = tmp_path / "symi.json"
    cfg.write_text(json.dumps(settings()), encoding="utf-8")
    args = ("--config", str(cfg), "--workspace", str(ws))
    db, counts = _synced(tmp_path, ws)
    _damage(db, table)
    said = ("the index file is damaged (database disk image is malformed); the next sync sets it aside and rebuilds "
            "it from the memory files (`symi-memory index`)")
    with open_mem(tmp_path, ws) as mem:
        st = mem.status()
        # A count it cannot read is unknown (None), not a guess.
        assert (st["dirty"], st["lastError"], st["files"]) == (True, said, None if table == "files" else counts[0]), st
        assert [p.name for p in db.parent.iterdir() if p.name.endswith(".damaged")] == ["main.sqlite.damaged"]
    code, out, err = cli(*args, "status")
    assert (code, err) == (0, ""), err
    assert [line.split(None, 1) for line in out.splitlines() if "damaged" in line] == [["lastError", said]], out
    assert ("files  unknown" in out) is (table == "files"), out
    code, st, err = cli(*args, "status", "--json", json_out=True)
    assert (code, err, st["lastError"], st["dirty"]) == (0, "", said, True), err
    with open_mem(tmp_path, ws) as other:  # another process: its next sync sets the damaged file aside, rebuilds
        assert other.sync().full
        st = other.status()
        assert ((st["files"], st["chunks"]), st["dirty"], st["lastError"]) == (counts, False, None)
        assert other.search("a828e60").results[0].path == "MEMORY.md"


@pytest.mark.parametrize("tables", [("chunks",), ("embedding_cache",), ("meta",)])
def test_a_forced_reindex_repairs_an_index_damaged_inside(tmp_path: Path, ws: Path, cli,  # type: ignore[no-untyped-def]
                                                          tables: tuple[str, ...]) -> None:
    cfg = tmp_path / "symi.json"
    cfg.write_text(json.dumps(settings()), encoding="utf-8")
    args = ("--config", str(cfg), "--workspace", str(ws))
    assert cli(*args, "index")[0] == 0
    db = tmp_path / "state" / "memory" / "main.sqlite"
    _damage(db, *tables)
    code, out, err = cli(*args, "index", "--force")  # what the error message of a damaged index says to run
    assert code == 0, err
    assert "moved it to" in err
    code, out, err = cli(*args, "search", "a828e60")
    assert code == 0 and "MEMORY.md" in out, err


@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_index_this_process_may_only_read_answers_searches_and_says_why_it_cannot_sync(what: str,
                                                                                          root: Path) -> None:
    """A read-only index file, or one in a folder the process may not write (a read-only mount, another
    user's state dir): status and search answer from it; a sync fails saying why, not 'readonly database'."""
    import os

    from support.unprivileged import Unprivileged

    ws = root / "ws"
    write(ws, "memory/a.md", "- the otter lives by the weir\n")
    with open_mem(root, ws) as mem:
        mem.sync()
        mem.search("otter")
        db = Path(mem.status()["dbPath"])
    write(ws, "memory/b.md", "- the heron nests by the reservoir\n")  # on disk, not indexed
    _readable_by_all(root)
    if what == "file":
        if os.geteuid() == 0:
            for p in [root, *root.rglob("*")]:
                os.chown(p, 65534, 65534)
        db.chmod(0o444)
    else:
        db.parent.chmod(0o555)
    with Unprivileged(), open_mem(root, ws) as mem:
        st = mem.status()
        assert st["files"] == 1 and st["dirty"] is True
        assert "is read-only for this process" in st["lastError"]
        assert [h.path for h in mem.search("otter weir").results] == ["memory/a.md"]
        with pytest.raises(BackendError, match="is read-only for this process .*nothing can be indexed until the "
                                               "file and its folder are writable"):
            mem.sync()
        if what == "file":
            # Its owner makes it writable again (a long-running watcher or server holds it open): the next sync
            # writes. SQLite kept the connection read-only for its life: every sync failed until a restart.
            for p in db.parent.glob(db.name + "*"):
                p.chmod(0o644)
            mem.sync()
            assert [h.path for h in mem.search("heron nests reservoir").results][:1] == ["memory/b.md"]
            assert mem.status()["lastError"] is None


class Counting:
    """Registers ``counting``: HashEmbedder vectors, counting the texts it is asked for."""

    def __init__(self) -> None:
        self.texts = 0

    @hookimpl
    def symi_memory_register_embedding_providers(self, register: Callable[[Any], None]) -> None:
        outer = self

        class Counted(HashEmbedder):
            def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
                outer.texts += len(texts)
                return super().embed_documents(texts)

        register(ProviderSpec(name="counting", factory=lambda ctx: Counted(id="counting", model="counting-384")))


def test_a_full_rebuild_of_an_index_this_process_may_only_read_fails_before_paying_for_every_vector(
        root: Path) -> None:
    """A full rebuild's commits of vectors mid-run are skipped when the index is busy, but not when it is read-only:
    the rebuild fails at the first one (after one provider batch), as before, not after embedding everything."""
    import os

    from support.unprivileged import Unprivileged

    ws = root / "ws"
    _twenty_notes(ws, "otter")
    counting = Counting()
    with open_mem(root, ws, {"provider": "counting"}, plugins=[("counting", counting)]) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    built = counting.texts
    assert built == 20 + 20 * 10
    _twenty_notes(ws, "heron")  # new text: none of it is in the cache
    _readable_by_all(root)
    if os.geteuid() == 0:
        for p in [root, *root.rglob("*")]:
            os.chown(p, 65534, 65534)
    db.chmod(0o444)
    counting.texts = 0
    with Unprivileged(), open_mem(root, ws, {"provider": "counting"}, plugins=[("counting", counting)]) as mem:
        with pytest.raises(BackendError, match="is read-only for this process"):
            mem.sync(force=True)
    assert 0 < counting.texts <= 64 < built


def test_a_process_still_holding_a_damaged_index_never_gets_the_rebuilt_one_set_aside(tmp_path: Path,
                                                                                      ws: Path) -> None:
    """A long-running process (an agent's server) keeps its connections while another process (`symi-memory
    index`) sets the damaged file aside and rebuilds it: the healthy rebuilt index must stay in place."""
    db, _ = _synced(tmp_path, ws)
    _damage(db, "chunks")
    with open_mem(tmp_path, ws) as held, open_mem(tmp_path, ws) as other:
        with pytest.raises(BackendError, match="is damaged"):
            held.search("a828e60")
        assert other.sync().full  # sets the damaged file aside, rebuilds a fresh one
        assert other.search("a828e60").results[0].path == "MEMORY.md"
        # The process that found the damage now reads the rebuilt file, not the one set aside.
        assert held.search("a828e60").results[0].path == "MEMORY.md"
        assert held.status()["dirty"] is False and other.status()["dirty"] is False
        other.sync()
        held.sync()
        assert other.search("a828e60").results[0].path == "MEMORY.md"
    kept = sorted(p.name for p in db.parent.iterdir() if p.name.startswith("main.sqlite.unreadable-")
                  and not p.name.endswith(("-wal", "-shm")))
    assert len(kept) == 1, kept


def test_two_processes_recovering_the_same_damaged_index_set_aside_only_the_damaged_file(tmp_path: Path,
                                                                                        ws: Path) -> None:
    """Both processes saw the marker before either moved the file: the second must not set aside the file the
    first just rebuilt (its rebuild would go on into a file nobody reads)."""
    db, _ = _synced(tmp_path, ws)
    _damage(db, "chunks")
    with open_mem(tmp_path, ws) as first, open_mem(tmp_path, ws) as second:
        with pytest.raises(BackendError, match="is damaged"):
            first.search("a828e60")
        why = second.backend.store.damaged()
        assert why is not None  # second read the marker: the damaged file is still in place
        first.sync()  # sets it aside and rebuilds
        second.backend.store.recover_damaged(why)  # what second's sync does next with what it read
        assert first.search("a828e60").results[0].path == "MEMORY.md"
        second.sync()
        assert second.search("a828e60").results[0].path == "MEMORY.md"
        assert first.status()["files"] == second.status()["files"] == 11
    kept = sorted(p.name for p in db.parent.iterdir() if p.name.startswith("main.sqlite.unreadable-")
                  and not p.name.endswith(("-wal", "-shm")))
    assert len(kept) == 1, kept


def test_a_damaged_index_this_process_may_only_read_keeps_answering_status_after_a_sync(root: Path) -> None:
    """The damaged file cannot be set aside from a folder this process may not write: the sync says why, and the
    memory keeps answering (status, searches of the undamaged tables) instead of failing on closed connections."""
    from support.unprivileged import Unprivileged

    ws = root / "ws"
    add_filler(ws, 10)
    write(ws, "MEMORY.md", "# Memory\n\n- Rolled back commit a828e60.\n")
    db, _ = _synced(root, ws)
    _damage(db, "chunks")
    _readable_by_all(root)
    db.parent.chmod(0o555)
    with Unprivileged(), open_mem(root, ws) as mem:
        with pytest.raises(BackendError, match="is damaged"):
            mem.search("a828e60")
        with pytest.raises(BackendError, match="read-only for this process"):
            mem.sync()
        st = mem.status()
        assert st["dirty"] is True and "damaged" in st["lastError"]
        with pytest.raises(BackendError, match="is damaged"):
            mem.search("a828e60")
    assert [p.name for p in db.parent.iterdir() if "unreadable" in p.name] == []


def test_a_damage_marker_left_after_the_index_was_removed_by_hand_does_not_name_the_new_file(tmp_path: Path,
                                                                                             ws: Path) -> None:
    """The user deleted the damaged index by hand (the marker beside it stays): the new file often gets the
    freed inode number, which the marker names. A fresh file is never damaged."""
    db, _ = _synced(tmp_path, ws)
    _damage(db, "chunks")
    with open_mem(tmp_path, ws) as mem, pytest.raises(BackendError, match="is damaged"):
        mem.search("a828e60")
    marker = Path(f"{db}.damaged")
    left = json.loads(marker.read_text(encoding="utf-8"))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    # The next file made there often gets the freed inode number (ext4 gives it back at once); make that so here.
    db.touch()
    marker.write_text(json.dumps({**left, "dev": db.stat().st_dev, "ino": db.stat().st_ino}), encoding="utf-8")
    with open_mem(tmp_path, ws) as mem:
        st = mem.status()
        assert st["lastError"] is None or "damaged" not in st["lastError"]
        mem.sync()
        assert mem.search("a828e60").results[0].path == "MEMORY.md"
    assert [p.name for p in db.parent.iterdir() if "unreadable" in p.name] == []


def test_an_index_read_from_a_folder_this_process_may_not_write_follows_another_users_syncs(
        root: Path) -> None:
    """In a folder this process may not write the index is read as a file nobody changes (SQLite's immutable
    mode). When its owner syncs meanwhile, this process must answer from the new index: not miss the new notes
    forever, nor call the healthy file damaged ("database disk image is malformed" from pages that moved)."""
    from support.unprivileged import Unprivileged

    ws = root / "ws"
    add_filler(ws, 30)
    write(ws, "memory/a.md", "- the otter lives by the weir\n")
    db, _ = _synced(root, ws)
    _readable_by_all(root)
    db.parent.chmod(0o555)
    with Unprivileged():
        reader = open_mem(root, ws)
    try:
        with Unprivileged():
            assert [h.path for h in reader.search("otter weir").results] == ["memory/a.md"]
        # The owner (this test's own user) adds a note and rebuilds the index, then closes it.
        write(ws, "memory/b.md", "- the heron nests by the reservoir\n")
        with open_mem(root, ws) as owner:
            owner.sync(force=True)
        with Unprivileged():
            assert reader.search("heron reservoir").results[0].path == "memory/b.md"
            assert [h.path for h in reader.search("otter weir").results][:1] == ["memory/a.md"]
            st = reader.status()
            assert st["lastError"] is None or "damaged" not in st["lastError"]
    finally:
        with Unprivileged():
            reader.close()


def test_index_check_finds_damage_no_search_read_and_the_same_run_rebuilds_it(tmp_path: Path, ws: Path,
                                                                              cli) -> None:  # type: ignore[no-untyped-def]
    # The index of chunks by path is read by syncs of changed files only: damage there stays unseen by searches
    # and status, until `index --check` reads every page.
    cfg = tmp_path / "symi.json"
    cfg.write_text(json.dumps(settings()), encoding="utf-8")
    args = ("--config", str(cfg), "--workspace", str(ws))
    assert cli(*args, "index")[0] == 0
    code, out, err = cli(*args, "index", "--check", "--json")
    assert code == 0, err
    assert json.loads(out)["check"]["damage"] is None and json.loads(out)["check"]["checked"] is True
    db = tmp_path / "state" / "memory" / "main.sqlite"
    _damage(db, "chunks_path")
    code, out, err = cli(*args, "search", "a828e60")
    assert code == 0 and "MEMORY.md" in out, err  # searches do not see it
    code, out, err = cli(*args, "status", "--json")
    assert json.loads(out)["dirty"] is False
    code, out, err = cli(*args, "index", "--check")
    assert code == 0, err
    assert "index check" in err and "damaged" in err and "rebuilt" in err
    assert "full reindex" in out
    kept = [p for p in db.parent.iterdir() if p.name.startswith("main.sqlite.unreadable-")]
    assert len(kept) == 1
    code, out, err = cli(*args, "index", "--check")
    assert code == 0 and "intact" in err, err
    assert json.loads(cli(*args, "status", "--json")[1])["dirty"] is False


def test_a_damage_check_is_recorded_for_every_process_until_a_sync_rebuilds(tmp_path: Path, ws: Path) -> None:
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        assert mem.check_integrity() is None
        db = Path(mem.status()["dbPath"])
    _damage(db, "chunks_path")
    with open_mem(tmp_path, ws) as mem:
        assert mem.status()["dirty"] is False
        problem = mem.check_integrity()
        assert problem is not None and "\n" not in problem
    with open_mem(tmp_path, ws) as other:  # another process: its status tells the truth too
        st = other.status()
        assert st["dirty"] is True and "the index file is damaged" in st["lastError"]
        assert other.sync().full
        assert other.check_integrity() is None and other.status()["dirty"] is False


def _twenty_notes(ws: Path, animal: str) -> None:
    """Twenty notes of ten lines each naming ``animal``: 220 texts to embed (each note and each line)."""
    for i in range(20):
        write(ws, f"memory/n{i}.md", "\n".join(f"- note {i} line {j}: the {animal} {i * 100 + j}" for j in range(10)) + "\n")


def _rebuilt_by_an_older_release(db: Path) -> None:
    """What a release from before ``chunks.plain`` leaves of the index, as tables go, after rebuilding it."""
    import apsw

    from symi_memory.index.db import SCHEMA_VERSION

    con = apsw.Connection(str(db))
    with con:
        con.execute("ALTER TABLE chunks DROP COLUMN plain")
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),))
        con.execute("DELETE FROM meta WHERE key IN ('plain_version', 'plain_pending')")
        con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    con.close()


def test_a_search_that_finds_an_older_schema_and_then_damage_says_so_as_any_search_does(tmp_path: Path,
                                                                                        ws: Path) -> None:
    """A release from before this schema rebuilt the index this process has open (at its own schema, without
    chunks.plain), and the file is damaged inside: the search brings it up to this schema again and retries, and
    the retry's read of the damaged pages is handled as any search's is (BackendError 'is damaged', the damage
    recorded beside the index for every process, the next sync sets the file aside and rebuilds). Before, the
    retry skipped that handling: the raw SQLite error went out and nothing was recorded."""
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        counts = (mem.status()["files"], mem.status()["chunks"])
        db = Path(mem.status()["dbPath"])
        _rebuilt_by_an_older_release(db)
        _damage(db, "files")  # read by the search in the statement the old schema fails, so only on the retry
        with pytest.raises(BackendError, match=r"is damaged \(database disk image is malformed\); the next sync "
                                               r"sets it aside and rebuilds it"):
            mem.search("a828e60")
        # Recorded beside the index (what status in any process reports; this one's cannot count the files, whose
        # table is what is damaged, and says so).
        assert [p.name for p in db.parent.iterdir() if p.name.endswith(".damaged")] == ["main.sqlite.damaged"]
        st = mem.status()
        assert st["dirty"] is True and st["files"] is None and "the index file is damaged" in st["lastError"]
    with open_mem(tmp_path, ws) as other:  # another process: its next sync sets the damaged file aside, rebuilds
        assert other.sync().full
        assert (other.status()["files"], other.status()["chunks"]) == counts
        assert other.status()["dirty"] is False and other.status()["lastError"] is None
        assert other.search("a828e60").results[0].path == "MEMORY.md"
    kept = [p.name for p in db.parent.iterdir() if p.name.startswith("main.sqlite.unreadable-")]
    assert len(kept) == 1, kept


@pytest.mark.parametrize("table", ["meta", "sqlite_schema"])
def test_a_sync_that_finds_an_older_schema_on_a_damaged_file_sets_it_aside_and_rebuilds(tmp_path: Path, ws: Path,
                                                                                        table: str) -> None:
    """As above for a sync (a watcher's, an append's) in the process that had the index open: bringing the index up
    to this schema again reads the damaged pages, and that is handled as the sync's own reads are (the file set
    aside, the index rebuilt from the memory files). Before, the upgrade ran outside that handling: the sync
    failed with the raw SQLite error ('database disk image is malformed', 'file is not a database'), every time."""
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        counts = (mem.status()["files"], mem.status()["chunks"])
        db = Path(mem.status()["dbPath"])
        _rebuilt_by_an_older_release(db)
        _damage(db, table)
        assert mem.sync().full
        assert (mem.status()["files"], mem.status()["chunks"]) == counts
        assert mem.status()["dirty"] is False and mem.status()["lastError"] is None
        assert mem.search("a828e60").results[0].path == "MEMORY.md"
    kept = [p.name for p in db.parent.iterdir() if p.name.startswith("main.sqlite.unreadable-")]
    assert len(kept) == 1, kept


def _damage_free_pages(db: Path) -> None:
    """Damage the index where only a write looks: its first free page (the list SQLite allocates new pages from)
    points past the end of the file. Reads (searches, the cache's look-ups) never touch it."""
    import sqlite3
    import struct

    with sqlite3.connect(db) as conn:  # pages on the free list: a table filled and dropped
        conn.execute("CREATE TABLE scratch(x BLOB)")
        conn.executemany("INSERT INTO scratch VALUES (?)", [(b"\0" * 4000,) for _ in range(200)])
        conn.commit()
        conn.execute("DROP TABLE scratch")
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    with open(db, "r+b") as f:
        f.seek(32)
        assert struct.unpack(">I", f.read(4))[0] != 0  # a free list there is
        f.seek(32)
        f.write(struct.pack(">I", pages + 1000))


def test_a_full_rebuild_of_an_index_damaged_where_it_writes_pays_for_the_vectors_once(tmp_path: Path) -> None:
    """A full rebuild's commits of vectors mid-run skip an index that is busy, not one that is damaged: the first
    one's "database disk image is malformed" sets the file aside and builds a new one (after one provider batch),
    as before. Skipped like a busy index's, the rebuild paid for every vector, failed at the swap on the same damage,
    and the new file's rebuild (its cache empty) paid for every vector again."""
    ws = tmp_path / "ws"
    _twenty_notes(ws, "otter")
    counting = Counting()
    with open_mem(tmp_path, ws, {"provider": "counting"}, plugins=[("counting", counting)]) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    texts = counting.texts
    assert texts == 20 + 20 * 10
    _damage_free_pages(db)
    _twenty_notes(ws, "heron")  # new text: none of it is in the cache
    counting.texts = 0
    with open_mem(tmp_path, ws, {"provider": "counting"}, plugins=[("counting", counting)]) as mem:
        report = mem.sync(force=True)
        assert report.full and not report.errors
        assert mem.search("heron 1907").results[0].path == "memory/n19.md"
    assert texts < counting.texts <= texts + 64, counting.texts


def test_status_from_a_new_thread_on_an_index_file_that_is_no_database_any_more_says_so(tmp_path: Path,
                                                                                         ws: Path) -> None:
    """An index file overwritten whole (not a database any more) while a process (a server) runs: status from a
    thread with no connection to it yet raised NotADBError, since it began every status with a read transaction on
    a new connection; before that it said the file is damaged. It says so again, and the next sync rebuilds."""
    import threading

    import apsw

    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        db = tmp_path / "state" / "memory" / "main.sqlite"
        other = apsw.Connection(str(db))
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        other.close()
        db.write_bytes(b"not an index " * (db.stat().st_size // 13 + 1))
        answer: dict[str, Any] = {}

        def status() -> None:
            try:
                answer["status"] = mem.status()
            except Exception as exc:
                answer["error"] = exc

        t = threading.Thread(target=status)
        t.start()
        t.join(timeout=60)
        assert "error" not in answer, answer
        st = answer["status"]
        assert (st["files"], st["dirty"]) == (None, True), st
        assert "the index file is damaged (file is not a database)" in st["lastError"], st
        assert mem.sync().full
        assert (mem.status()["dirty"], mem.search("a828e60").results[0].path) == (False, "MEMORY.md")
