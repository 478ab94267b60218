"""A memory root that is a mount point, unmounted: the folder below it is there (empty, or holding what was there
before the mount), and used to look like a workspace whose every file had been deleted: the next sync dropped them
all from the index. Now a root that lists no memory file while the index holds files from it is kept, with a
warning naming it, when it is on another device than when its files were listed (unmounted), or when it is empty
and held many files; `index --force` (``sync(force=True)``) is the operator's word that they were deleted. Real
folders: a bind mount when the tests run as root, else a real other file system (``/dev/shm``) reached through a
symlinked folder, and folders really emptied."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.sqlite_memory import open_mem, write

from symi_memory.workspace import EMPTIED_MIN_FILES

SHM = Path("/dev/shm")


def _other_fs(tmp_path: Path) -> Path:
    """A fresh folder on another file system than ``tmp_path`` (skips when there is none)."""
    if not SHM.is_dir() or not os.access(SHM, os.W_OK) or os.stat(SHM).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no writable /dev/shm on another file system than the test's folder")
    folder = SHM / f"symi-test-{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    return folder


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    folder = _other_fs(tmp_path)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _notes(root: Path, n: int, tag: str) -> None:
    for i in range(n):
        write(root, f"{tag}{i}.md", f"# {tag} {i}\n\n- the {tag}{i} kestrel nests by the weir\n")


def _paths(mem, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.path for h in mem.search(query, min_score=0.0).results]


def _mount(source: Path, target: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode == 0


def _umount(target: Path) -> None:
    subprocess.run(["umount", str(target)], capture_output=True, check=True)


def test_an_unmounted_workspace_mount_point_keeps_its_index_until_mounted_again(tmp_path: Path,
                                                                                   other_fs: Path) -> None:
    # The workspace is a mount point (a volume, a network share). Unmounted, the folder below it is on its parent's
    # file system and holds a file left there before the mount: not empty, but no memory file either.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "left-before-the-mount.txt").write_text("x\n", encoding="utf-8")
    write(other_fs, "MEMORY.md", "- the heron0 kestrel nests by the weir\n")
    _notes(other_fs / "memory", 3, "heron")  # fewer than EMPTIED_MIN_FILES: the device tells, not the count
    if not _mount(other_fs, ws):
        pytest.skip("not root, or bind mounts are not allowed here")
    try:
        mem = open_mem(tmp_path, ws)
        assert mem.sync().files_indexed == 4
        _umount(ws)
        report = mem.sync()
        assert report.files_removed == 0, report
        said = [w for w in report.warnings if str(ws) in w and "another file system" in w and "--force" in w]
        assert said, report.warnings
        assert mem.status()["warnings"] == said
        assert "memory/heron1.md" in _paths(mem, "heron1 kestrel")
        assert _mount(other_fs, ws)
        back = mem.sync()
        assert back.warnings == () and back.files_removed == 0 and mem.status()["warnings"] == []
        assert "memory/heron2.md" in _paths(mem, "heron2 kestrel")
        # Gone for good: the operator says so, and the index follows.
        _umount(ws)
        assert mem.sync().files_removed == 0
        forced = mem.sync(force=True)
        assert forced.errors == () and mem.status()["files"] == 0 and mem.status()["warnings"] == []
        mem.close()
    finally:
        if os.path.ismount(ws):
            _umount(ws)


def test_an_extra_path_moved_to_another_file_system_with_no_notes_keeps_its_index(tmp_path: Path,
                                                                                  other_fs: Path) -> None:
    # No mount needed: the extra path's folder is reached through a symlinked folder, first onto /dev/shm (another
    # file system), then onto a folder of the test's own file system holding no notes, as an unmount leaves it.
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    _notes(other_fs / "notes", 3, "plover")
    under = tmp_path / "below-the-mount"
    (under / "notes").mkdir(parents=True)
    (under / "notes" / ".keep").write_text("", encoding="utf-8")
    (ws / "vol").symlink_to(other_fs)
    mem = open_mem(tmp_path, ws, {"extraPaths": ["vol/notes"]})
    assert mem.sync().files_indexed == 4
    (ws / "vol").unlink()
    (ws / "vol").symlink_to(under)
    report = mem.sync()
    assert report.files_removed == 0, report
    assert any(f"extra path {ws / 'vol' / 'notes'}" in w and "another file system" in w for w in report.warnings), \
        report.warnings
    assert "vol/notes/plover1.md" in _paths(mem, "plover1 kestrel")
    (ws / "vol").unlink()
    (ws / "vol").symlink_to(other_fs)  # mounted again
    assert mem.sync().warnings == () and "vol/notes/plover2.md" in _paths(mem, "plover2 kestrel")
    mem.close()


def test_an_emptied_memory_folder_keeps_its_index_until_files_are_back_or_the_operator_confirms(tmp_path: Path) -> None:
    # memory/ on the workspace's own file system (a mount point not recorded yet, a bind mount of the same file
    # system), found empty: every note at once, with nothing else left in the folder.
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    n = EMPTIED_MIN_FILES + 2
    _notes(ws / "memory", n, "grebe")
    mem = open_mem(tmp_path, ws)
    assert mem.sync().files_indexed == n + 1
    away = tmp_path / "away"
    shutil.move(ws / "memory", away)
    (ws / "memory").mkdir()
    report = mem.sync()
    assert report.files_removed == 0, report
    assert [w for w in report.warnings if f"folder {ws / 'memory'} lists no memory files and is empty" in w], \
        report.warnings
    assert "memory/grebe5.md" in _paths(mem, "grebe5 kestrel")
    # A forced full rebuild is the operator's word: the notes were deleted.
    (ws / "memory").rmdir()
    shutil.move(away, ws / "memory")
    assert mem.sync().warnings == ()
    for f in (ws / "memory").iterdir():
        f.unlink()
    assert mem.sync().files_removed == 0
    forced = mem.sync(force=True)
    assert forced.errors == () and mem.status()["files"] == 1 and mem.status()["warnings"] == []
    mem.close()


def test_notes_deleted_on_purpose_still_leave_the_index(tmp_path: Path) -> None:
    # The ordinary cases are not held up: every note deleted from a folder that keeps other things, and the last
    # few notes deleted (fewer than EMPTIED_MIN_FILES).
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- prefers tea\n")
    _notes(ws / "memory", EMPTIED_MIN_FILES + 2, "coot")
    write(ws, "memory/todo.txt", "not a note\n")
    _notes(ws / "extra", 2, "rail")
    mem = open_mem(tmp_path, ws, {"extraPaths": ["extra"]})
    assert mem.sync().files_indexed == EMPTIED_MIN_FILES + 5
    for f in (ws / "memory").glob("*.md"):
        f.unlink()
    for f in (ws / "extra").glob("*.md"):
        f.unlink()
    report = mem.sync()
    assert report.files_removed == EMPTIED_MIN_FILES + 4 and report.warnings == (), report
    assert mem.status()["files"] == 1
    mem.close()


def test_an_unreadable_folder_and_an_emptied_extra_path_are_both_kept_and_both_named(tmp_path: Path) -> None:
    # Seam of mend34's unreadable roots and fork35's emptied ones: each keeps its files and the sync's report and
    # status name both. Root reads anything, so the run drops root's override of file permissions.
    from support.unprivileged import run_without_dac_override

    out = run_without_dac_override("""
        import json, shutil, sys
        from pathlib import Path
        from support.sqlite_memory import open_mem, write
        tmp = Path(sys.argv[1]); ws = tmp / "ws"
        write(ws, "MEMORY.md", "- prefers tea\\n")
        for i in range(12):
            write(ws, f"memory/grebe{i}.md", f"grebe{i} kestrel sighting\\n")
            write(ws, f"extra/rail{i}.md", f"rail{i} heron marsh\\n")
        mem = open_mem(tmp, ws, {"extraPaths": ["extra"]})
        first = mem.sync().files_indexed
        shutil.move(ws / "extra", tmp / "away")
        (ws / "extra").mkdir()
        (ws / "memory").chmod(0)
        try:
            r = mem.sync()
            st = mem.status()
            got = {"first": first, "removed": r.files_removed, "warnings": list(r.warnings),
                   "status": st["warnings"], "files": st["files"],
                   "found": [[h.path for h in mem.search(q).results][:1] for q in ("rail3 heron", "grebe3 kestrel")]}
        finally:
            (ws / "memory").chmod(0o755)
        mem.close()
        print(json.dumps(got))
    """, str(tmp_path))
    ws = tmp_path / "ws"
    assert out["first"] == 25 and out["removed"] == 0 and out["files"] == 25, out
    assert out["found"] == [["extra/rail3.md"], ["memory/grebe3.md"]], out
    for said in (out["warnings"], out["status"]):
        assert len(said) == 2, said
        assert said[0].startswith(f"folder {ws / 'memory'} cannot be read"), said
        assert said[1].startswith(f"extra path {ws / 'extra'} lists no memory files and is empty"), said
