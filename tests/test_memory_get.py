"""memory_get path rules and line windows (spec/behaviour.md §2), through the real CLI and the library."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from symi_memory.errors import PathRefused
from symi_memory.workspace import PathRules, list_memory_files, read_lines


def test_cli_get_acceptance(cli, workspace: Path, tmp_path: Path) -> None:
    extra = tmp_path / "team-docs"
    extra.mkdir()
    (extra / "x.md").write_text("team note\n", encoding="utf-8")
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    (workspace / "NOTES.md").write_text("no\n", encoding="utf-8")
    (workspace / "memory" / "x.txt").write_text("no\n", encoding="utf-8")
    os.symlink(outside, workspace / "memory" / "link.md")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[agents.defaults.memorySearch]\nextraPaths = ["{extra}"]\nprovider = "none"\n', encoding="utf-8")
    base = ("--config", str(cfg), "--workspace", str(workspace), "get")

    code, out, _ = cli(*base, "MEMORY.md")
    assert code == 0 and out == (workspace / "MEMORY.md").read_text(encoding="utf-8")
    code, data, _ = cli(*base, "memory/2026-01-01.md", "--from", "2", "--lines", "1", "--json", json_out=True)
    assert code == 0 and data == {"text": "second line", "path": "memory/2026-01-01.md"}
    code, data, _ = cli(*base, "memory/2099-01-01.md", "--json", json_out=True)
    assert code == 0 and data == {"text": "", "path": "memory/2099-01-01.md"}
    for bad in ("../etc/passwd", "NOTES.md", "memory/x.txt", "memory/link.md", str(outside)):
        code, data, _ = cli(*base, bad, "--json", json_out=True)
        assert code == 1, bad
        assert data == {"path": bad, "text": "", "disabled": True, "error": "path required"}
    code, data, _ = cli(*base, os.path.relpath(extra / "x.md", workspace), "--json", json_out=True)
    assert code == 0 and data["text"] == "team note\n"


@pytest.fixture
def rules(workspace: Path) -> PathRules:
    return PathRules.from_workspace(workspace)


def test_traversal_that_resolves_elsewhere_is_refused(rules: PathRules, workspace: Path) -> None:
    (workspace / "NOTES.md").write_text("x", encoding="utf-8")
    for bad in ("memory/../NOTES.md", "memory/../../etc/passwd.md", "/etc/passwd", "", "   ", "memory"):
        with pytest.raises(PathRefused):
            rules.resolve(bad)


def test_symlinked_directory_inside_memory_is_refused(rules: PathRules, workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "a.md").write_text("secret", encoding="utf-8")
    os.symlink(target, workspace / "memory" / "sub")
    with pytest.raises(PathRefused):
        rules.read("memory/sub/a.md")
    assert "memory/sub/a.md" not in [f.path for f in list_memory_files(workspace)]


def test_an_absolute_path_through_another_name_of_the_workspace_is_the_same_file(workspace: Path,
                                                                                 tmp_path: Path) -> None:
    """"Resolved first, then checked" (spec/behaviour.md §2): a workspace configured through a symlink (macOS's
    /tmp is /private/tmp; a home folder linked to a data disk) refused its own files asked for by their real
    path, and a workspace configured by its real path refused them asked for through the link. A symlink below
    the workspace is still refused, however the path reaches it."""
    alias = tmp_path / "alias"
    os.symlink(workspace, alias)
    real_memory = str(workspace / "MEMORY.md")
    text = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    linked = PathRules.from_workspace(alias)
    direct = PathRules.from_workspace(workspace)
    for rules, asked in ((linked, real_memory), (direct, str(alias / "MEMORY.md")),
                         (direct, str(alias / "memory" / "2026-01-01.md")), (linked, str(alias / "MEMORY.md"))):
        res = rules.read(asked)
        assert res.path in ("MEMORY.md", "memory/2026-01-01.md"), asked
        assert res.text == (text if res.path == "MEMORY.md" else (workspace / res.path).read_text(encoding="utf-8"))
    os.symlink(workspace, workspace / "memory" / "loop")
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    for rules in (linked, direct):
        for bad in (str(alias / "memory" / "loop" / "MEMORY.md"), str(workspace / "memory" / "loop" / "MEMORY.md"),
                    str(alias / ".." / "outside.md"), str(outside), str(alias / "NOTES.md")):
            with pytest.raises(PathRefused):
                rules.read(bad)


def test_directories_are_refused(rules: PathRules, workspace: Path) -> None:
    (workspace / "memory" / "dir.md").mkdir()
    with pytest.raises(PathRefused):
        rules.read("memory/dir.md")


def test_absolute_path_inside_workspace_is_accepted(rules: PathRules, workspace: Path) -> None:
    res = rules.read(str(workspace / "memory" / "2026-01-01.md"), from_line=3, lines=5)
    assert (res.path, res.text) == ("memory/2026-01-01.md", "third line\n")


def test_line_windows() -> None:
    text = "a\nb\nc"
    assert read_lines(text, None, None) == text
    assert read_lines(text, 0, 1) == "a"
    assert read_lines(text, 2, None) == "b\nc"
    assert read_lines(text, None, 2) == "a\nb"
    assert read_lines(text, 2, 0) == "b"
    assert read_lines(text, 9, 3) == ""


def _lines_by_split(text: str, from_line: int | None, lines: int | None) -> str:
    """The window as spec/behaviour.md §2 states it, on a list of every line (what read_lines did)."""
    if from_line is None and lines is None:
        return text
    all_lines = text.split("\n")
    start = max(1, from_line or 1)
    end = len(all_lines) if lines is None else start - 1 + max(1, lines)
    return "\n".join(all_lines[start - 1 : end])


def test_line_windows_match_the_spec_at_every_edge() -> None:
    texts = ["", "\n", "\n\n", "a", "a\n", "a\nb", "a\n\nb\n", "\na\n\n\nb\nc", "x\n" * 70000 + "tail"]
    counts = [None, -3, 0, 1, 2, 3, 4, 5, 69999, 70000, 70001, 70002, 10**30, -(10**30)]
    for text in texts:
        for from_line in counts:
            for lines in counts:
                want = _lines_by_split(text, from_line, lines)
                assert read_lines(text, from_line, lines) == want, (text[:20], from_line, lines)


def test_a_window_of_a_big_file_does_not_hold_every_line_in_memory() -> None:
    """``memory_get`` with ``from``/``lines`` split the whole text into a list of lines to take a few: on a 108 MB
    file of short lines 5 s and 1 GB, against 0.5 s and 220 MB for the whole file (bench/get_window.py). Now the
    window is found in the text, so a window costs no more memory than the text it is cut from."""
    import tracemalloc

    text = "line abc\n" * 300_000  # 2.7 MB
    tracemalloc.start()
    try:
        for from_line, lines in ((5, 1), (150_000, 3), (299_999, None), (None, 2), (10**9, 1)):
            tracemalloc.reset_peak()
            read_lines(text, from_line, lines)
            _, peak = tracemalloc.get_traced_memory()
            assert peak < 1_000_000, (from_line, lines, peak)
    finally:
        tracemalloc.stop()


def test_listing_dedupes_skips_symlinks_and_ignored_dirs(workspace: Path, tmp_path: Path) -> None:
    (workspace / "memory" / "node_modules").mkdir()
    (workspace / "memory" / "node_modules" / "x.md").write_text("x", encoding="utf-8")
    (workspace / "memory" / ".git").mkdir()
    (workspace / "memory" / ".git" / "y.md").write_text("y", encoding="utf-8")
    (workspace / "memory" / "deep" / "er").mkdir(parents=True)
    (workspace / "memory" / "deep" / "er" / "z.md").write_text("z", encoding="utf-8")
    os.symlink(workspace / "MEMORY.md", workspace / "memory" / "alias.md")
    (workspace / "memory.md").write_text("lower", encoding="utf-8")
    paths = [f.path for f in list_memory_files(workspace, ["memory", str(workspace / "MEMORY.md")])]
    assert paths == ["MEMORY.md", "memory.md", "memory/2026-01-01.md", "memory/deep/er/z.md"]


def test_a_file_below_the_filesystem_root_keeps_its_whole_name() -> None:
    # extraPaths = ["/"] stored "../../mp/notes.md" for /tmp/notes.md: the part below a root was cut one character
    # past the root's separator, and the root "/" ends with one already. (Listing "/" itself walks the whole file
    # system, too long for a test: the prefix each listed path loses is checked, for "/" and for a folder.)
    from symi_memory.workspace import _with_sep

    for root, path, below in (("/", "/tmp/notes.md", "tmp/notes.md"),
                              (os.path.join("/srv", "ws"), os.path.join("/srv", "ws", "a.md"), "a.md")):
        assert path[len(_with_sep(root)):] == below
        assert _with_sep(os.path.realpath(root)) + below == os.path.realpath(path)
