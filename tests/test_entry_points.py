"""Plugin discovery reads the entry points itself; it must find what importlib.metadata finds."""

from __future__ import annotations

import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from symi_memory.entry_points import find
from symi_memory.plugins import load_plugins


def _rows(eps) -> list[tuple[str, str, str, str]]:
    return sorted((e.name, e.value, e.dist.name if e.dist else "?", e.dist.version if e.dist else "?") for e in eps)


def _dist(folder: Path, dirname: str, name: str, version: str, entry_points: str) -> None:
    info = folder / dirname
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nA description.\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")


@pytest.mark.parametrize("group", ["symi_memory", "console_scripts", "pytest11"])
def test_the_installed_entry_points_are_those_importlib_metadata_lists(group: str) -> None:
    ours = _rows(find(group))
    assert ours == _rows(metadata.entry_points(group=group))
    if group == "symi_memory":
        assert ("builtin-sqlite", "symi_memory_sqlite.hooks", "symi-memory", metadata.version("symi-memory")) in ours


def test_the_first_folder_on_sys_path_wins_and_entry_points_load(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "demo_plugin-1.0.dist-info", "demo-plugin", "1.0",
          "# a comment\n[console_scripts]\ndemo = demo_mod:main\n\n[symi_memory]\ndemo-one = demo_mod:Holder.value\n"
          "demo-two = demo_mod [extra]\n")
    (first / "demo_mod.py").write_text("class Holder:\n    value = 42\n", encoding="utf-8")
    # The same distribution (its name spelled another way) further down sys.path is shadowed.
    _dist(second, "Demo.Plugin-2.0.dist-info", "Demo.Plugin", "2.0", "[symi_memory]\ndemo-old = demo_mod\n")
    # An egg-info folder counts too.
    _dist(second, "other_thing.egg-info", "other-thing", "0.3", "[symi_memory]\nother = demo_mod:Holder\n")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    monkeypatch.delitem(sys.modules, "demo_mod", raising=False)

    ours = [e for e in find("symi_memory") if e.dist and e.dist.name != "symi-memory"]
    theirs = [e for e in metadata.entry_points(group="symi_memory") if e.dist.name != "symi-memory"]
    assert _rows(ours) == _rows(theirs) == [("demo-one", "demo_mod:Holder.value", "demo-plugin", "1.0"),
                                            ("demo-two", "demo_mod [extra]", "demo-plugin", "1.0"),
                                            ("other", "demo_mod:Holder", "other-thing", "0.3")]
    loaded = {e.name: e.load() for e in ours}
    assert loaded["demo-one"] == 42
    assert loaded["demo-two"].Holder is loaded["other"]


def test_a_zip_on_sys_path_is_read_through_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_plugin-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-plugin\nVersion: 0.1\n")
        zf.writestr("zipped_plugin-0.1.dist-info/entry_points.txt", "[symi_memory]\nzipped = zipped_mod\n")
        zf.writestr("zipped_mod.py", "")
    monkeypatch.syspath_prepend(str(archive))
    assert ("zipped", "zipped_mod", "zipped-plugin", "0.1") in _rows(find("symi_memory"))


def test_a_disabled_plugin_is_listed_with_its_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dist(tmp_path, "demo_plugin-1.0.dist-info", "demo-plugin", "1.0", "[symi_memory]\ndemo = demo_hooks_mod\n")
    (tmp_path / "demo_hooks_mod.py").write_text("raise ImportError('must not be imported while disabled')\n",
                                                encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = load_plugins(["demo"])
    (info,) = [i for i in plugins.disabled_infos() if i.id == "demo"]
    assert (info.distribution, info.version, info.disabled) == ("demo-plugin", "1.0", True)
    assert "demo" not in plugins.failed
