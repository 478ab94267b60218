"""One path policy for memory_get on every backend (issue 14: qmd escapes, codec errors, tracebacks)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from qmd_standin.helpers import make_backend, standin_command, write

from symi_memory import tools
from symi_memory.config import load_config
from symi_memory.errors import PathRefused
from symi_memory.manager import open_memory
from symi_memory.workspace import PathRules, glob_match

BAD_TEXT = ("memory/a\x00.md", "memory/\ud800.md", "MEMORY\udcff.md", "\x00", "qmd/memory-dir-main/\ud83d.md",
            "qmd/memory-dir-main/x\x00.md")


def _qmd_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "root memory\n")
    write(ws / "memory.md", "alt memory\n")
    write(ws / "memory" / "2026-01-01.md", "daily\n")
    write(ws / "NOTES.md", "not memory: private notes\n")
    write(ws / ".git" / "x.md", "git internals\n")
    write(ws / "memory" / ".git" / "y.md", "ignored dir\n")
    write(ws / "docs" / "deep" / "z.md", "workspace doc\n")
    return ws


def test_qmd_root_collections_honour_their_mask(tmp_path: Path) -> None:
    _qmd_workspace(tmp_path)
    b = make_backend(tmp_path, standin_command())
    try:
        assert b.read_file("qmd/memory-root-main/MEMORY.md").text == "root memory\n"
        assert b.read_file("qmd/memory-alt-main/memory.md").text == "alt memory\n"
        assert b.read_file("qmd/memory-dir-main/2026-01-01.md").text == "daily\n"
        for bad in ("qmd/memory-root-main/NOTES.md", "qmd/memory-root-main/.git/x.md",
                    "qmd/memory-alt-main/NOTES.md", "qmd/memory-root-main/docs/deep/z.md",
                    "qmd/memory-alt-main/memory/2026-01-01.md", "qmd/memory-dir-main/.git/y.md",
                    "qmd/memory-root-main/memory.md"):
            with pytest.raises(PathRefused, match="^path required$"):
                b.read_file(bad)
        # Plain paths follow the builtin's rules, not "any .md in the workspace".
        for bad in ("NOTES.md", ".git/x.md", "memory/.git/y.md", "docs/deep/z.md"):
            with pytest.raises(PathRefused, match="^path required$"):
                b.read_file(bad)
    finally:
        b.close()


def test_qmd_paths_collection_inside_workspace_keeps_its_pattern(tmp_path: Path) -> None:
    ws = _qmd_workspace(tmp_path)
    write(ws / "notes" / "a.md", "top-level note\n")
    write(ws / "notes" / "sub" / "b.md", "nested note\n")
    b = make_backend(tmp_path, standin_command(), {"paths": [{"path": "notes", "name": "notes", "pattern": "*.md"}]})
    try:
        assert b.read_file("notes/a.md").text == "top-level note\n"
        assert b.read_file("qmd/notes/a.md").text == "top-level note\n"
        for bad in ("notes/sub/b.md", "qmd/notes/sub/b.md"):
            with pytest.raises(PathRefused, match="^path required$"):
                b.read_file(bad)
    finally:
        b.close()


def test_qmd_session_exports_are_refused(tmp_path: Path) -> None:
    _qmd_workspace(tmp_path)
    b = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}})
    try:
        write(b.export_dir / "abc.md", "User: the whole transcript\n")
        with pytest.raises(PathRefused, match="^path required$"):
            b.read_file("qmd/sessions-main/abc.md")
    finally:
        b.close()


def test_qmd_odd_file_system_errors_are_refusals_without_tracebacks(tmp_path: Path, caplog) -> None:
    ws = _qmd_workspace(tmp_path)
    os.symlink("loop.md", ws / "memory" / "loop.md")  # ELOOP when followed
    b = make_backend(tmp_path, standin_command())
    manager_like = type("M", (), {"read_file": lambda self, p, **kw: b.read_file(p, **kw)})()
    try:
        caplog.set_level(logging.DEBUG)
        for bad in ("qmd/memory-dir-main/loop.md", "qmd/memory-dir-main/" + "a" * 300 + ".md",
                    "qmd/memory-dir-main/2026-01-01.md/x.md", "qmd/memory-dir-main/" + "d/" * 3000 + "x.md"):
            out = tools.memory_get(manager_like, {"path": bad})
            assert out["error"] in ("path required", "qmd path escapes collection"), (bad[:60], out["error"])
        for bad in BAD_TEXT:
            assert tools.memory_get(manager_like, {"path": bad})["error"] == "path required", repr(bad)
        assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    finally:
        b.close()


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_index_backends_refuse_nul_surrogates_and_ignored_dirs(tmp_path: Path, workspace: Path, backend: str,
                                                               caplog) -> None:
    (workspace / "memory" / ".git").mkdir()
    (workspace / "memory" / ".git" / "y.md").write_text("ignored\n", encoding="utf-8")
    cfg = load_config(overrides={"plugins": {"slots": {"memory": backend}},
                                 "agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    mem = open_memory(cfg, workspace=workspace, start=False)
    caplog.set_level(logging.DEBUG)
    try:
        for bad in (*BAD_TEXT, "memory/.git/y.md", "memory/2026-01-01.md/x.md", "memory/" + "a" * 300 + ".md",
                    "memory/" + "d/" * 3000 + "x.md"):
            out = tools.memory_get(mem, {"path": bad})
            assert out["error"] == "path required", (bad[:60], out["error"])
        assert tools.memory_get(mem, {"path": "memory/2026-01-01.md"})["text"].startswith("# Jan 1")
    finally:
        mem.close()
    assert not [r for r in caplog.records if r.exc_info]


def test_memory_append_with_a_lone_surrogate_returns_the_error_shape(workspace: Path) -> None:
    cfg = load_config(overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
    mem = open_memory(cfg, workspace=workspace, start=False)
    try:
        out = tools.memory_append(mem, {"text": "broken \ud800 text"})
        assert out["bytesWritten"] == 0 and "text" in out["error"] and "Unicode" in out["error"]
        out = tools.memory_append(mem, {"text": "fine", "target": "\udcff"})
        assert out["bytesWritten"] == 0 and out["error"]
    finally:
        mem.close()


def test_glob_match_follows_qmd_masks() -> None:
    assert glob_match("**/*.md", "a.md") and glob_match("**/*.md", "x/y/a.md")
    assert glob_match("MEMORY.md", "MEMORY.md") and not glob_match("MEMORY.md", "NOTES.md")
    assert not glob_match("MEMORY.md", "sub/MEMORY.md") and not glob_match("*.md", "sub/a.md")
    assert glob_match("{a,b}.md", "b.md") and not glob_match("{a,b}.md", "c.md")


def test_builtin_rules_with_surrogate_escaped_names_are_refused(workspace: Path) -> None:
    rules = PathRules.from_workspace(workspace)
    with pytest.raises(PathRefused, match="^path required$"):
        rules.read("memory/caf\udce9.md")
