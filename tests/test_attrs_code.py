"""The CLI keeps attrs' compiled methods between processes (symi_memory/cli/attrs_code.py): the classes it
builds from the saved code are the ones attrs builds itself."""

from __future__ import annotations
import __future__

import linecache
import marshal
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attr._make
import attrs

from symi_memory.cli import attrs_code

FLAGS = __future__.annotations.compiler_flag  # attrs' module compiles with it, and so does the cache


def _define(name: str) -> tuple[type, type]:
    """A hashable frozen class and a mutable one, defined now (through whatever compiles attrs' methods)."""
    frozen = attrs.frozen(kw_only=True)(type(name, (), {"__annotations__": {"a": "int", "b": "str"},
                                                        "__module__": __name__, "__qualname__": name}))
    mutable = attrs.define(type(name + "M", (), {"__annotations__": {"x": "int"}, "b": attrs.field(default="d"),
                                                 "__module__": __name__, "__qualname__": name + "M"}))
    return frozen, mutable


def _same_code(a, b) -> bool:
    if a != b or a.co_linetable != b.co_linetable or a.co_flags != b.co_flags or a.co_filename != b.co_filename:
        return False
    return all(_same_code(x, y) if hasattr(x, "co_code") else (type(x) is type(y) and x == y)
               for x, y in zip(a.co_consts, b.co_consts, strict=True))


def test_saved_code_is_what_attrs_compiles(tmp_path):
    path = str(tmp_path / "cache.marshal")
    uninstall = attrs_code.install(path, write=True)
    try:
        _define("Saved")
    finally:
        uninstall()
    assert attr._make._compile_and_eval is not uninstall  # attrs is back to its own helper
    cache = attrs_code.AttrsCodeCache(path, flags=FLAGS)
    assert len(cache.entries) == 2
    checked = 0
    for (filename, script) in list(cache.entries):
        found = re.search(r"hash\(\(\n +(-?)(7+),\n", script)
        variants = [script]
        if found is not None:  # the per-process number: any of the saved width, of either sign and another width
            width = len(found.group(2))
            numbers = [random.randint(10 ** (width - 1), 10 ** width - 1) for _ in range(3)]
            numbers += [-numbers[0], 12345, -7]
            variants = [script[:found.start(1)] + str(n) + script[found.end(2):] for n in numbers]
        for text in variants:
            assert _same_code(cache.code(text, filename), compile(text, filename, "exec", FLAGS, True))
            checked += 1
    assert checked == 7


def test_classes_from_saved_code_behave_alike(tmp_path):
    path = str(tmp_path / "cache.marshal")
    plain_frozen, plain_mutable = _define("Alike")
    for _ in range(2):  # the first run saves the code, the second builds the classes from it
        uninstall = attrs_code.install(path, write=True)
        try:
            frozen, mutable = _define("Alike")
            hits = uninstall.cache.compiled == 0
        finally:
            uninstall()
    assert hits
    one, other = frozen(a=1, b="x"), plain_frozen(a=1, b="x")
    assert hash(one) == hash(other)  # same qualified name: the same number mixed in
    assert repr(one) == repr(other)
    assert one == frozen(a=1, b="x") and one != frozen(a=2, b="x")
    assert mutable(3) == mutable(3) and repr(mutable(3)) == repr(plain_mutable(3))
    for method in ("__init__", "__eq__", "__hash__", "__repr__"):
        assert _same_code(getattr(frozen, method).__code__, getattr(plain_frozen, method).__code__)


def test_a_class_whose_fields_changed_keeps_only_its_current_code(tmp_path):
    """After an upgrade changes a class, its old script's entries are dropped when the new one is saved;
    other classes' entries stay (another command may build them)."""
    path = str(tmp_path / "cache.marshal")
    for fields in ({"a": "int"}, {"a": "int", "c": "float"}):
        # As in a new process: attrs names a script registered already under another file name ("-1").
        for name in [n for n in linecache.cache if n.endswith(".Changing>")]:
            del linecache.cache[name]
        uninstall = attrs_code.install(path, write=True)
        try:
            attrs.define(type("Changing", (), {"__annotations__": fields, "__module__": __name__,
                                                "__qualname__": "Changing"}))
            if len(fields) == 1:
                _define("Other")
        finally:
            uninstall()
    saved = attrs_code.AttrsCodeCache(path).entries
    changing = [script for name, script in saved if name.endswith(".Changing>")]
    assert len(changing) == 1 and "self.c" in changing[0]
    assert sum(name.endswith((".Other>", ".OtherM>")) for name, _ in saved) == 2


def test_a_damaged_file_is_compiled_over(tmp_path):
    path = tmp_path / "cache.marshal"
    for damaged, kept in ((b"\x00not marshal", 2), (marshal.dumps({"key": "x", ("a", "b"): (1, 2)}), 3)):
        path.write_bytes(damaged)
        uninstall = attrs_code.install(str(path), write=True)
        try:
            frozen, _ = _define("Damaged")
        finally:
            uninstall()
        assert frozen(a=1, b="x") == frozen(a=1, b="x")
        # The two classes' entries; ("a", "b") is another class's as far as the file can tell, so it stays.
        assert len(attrs_code.AttrsCodeCache(str(path)).entries) == kept


def test_the_cli_saves_the_code_and_a_second_run_compiles_nothing(tmp_path):
    """Two one-shot `status` runs: the first saves every class's code, the second finds all of it."""
    cache = tmp_path / "cache.marshal"
    code = textwrap.dedent(
        f"""
        import contextlib, io, sys
        from symi_memory.cli import attrs_code
        install = attrs_code.install
        seen = {{}}
        def recording(path=None):
            uninstall = install({str(cache)!r}, write=True)
            seen["cache"] = uninstall.cache
            return uninstall
        attrs_code.install = recording
        from symi_memory.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main(["--state-dir", {str(tmp_path / "state")!r}, "--workspace", {str(tmp_path)!r}, "status"])
        print(rc, len(seen["cache"].used), seen["cache"].compiled)
        """
    )
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              # One hash seed for both runs: each __hash__ then mixes in the same number,
                              # whose sign and width pick the saved entry (test_saved_code_... covers others).
                              env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1",
                                   "PYTHONHASHSEED": "7"})
        assert done.returncode == 0, done.stderr
        runs.append([int(x) for x in done.stdout.split()])
    (rc1, used1, added1), (rc2, used2, added2) = runs
    assert rc1 == rc2 == 0
    assert used1 > 50 and added1 == used1  # the config schema, specs, types...: all compiled, then saved
    assert used2 == used1 and added2 == 0
    assert Path(cache).is_file()


def test_overlapping_installs_leave_attrs_as_it_was(tmp_path):
    # Two CLI calls in one process (two threads running main()) install and uninstall in any order: when both
    # are done, attrs compiles with its own helper again, not with a finished call's cache.
    original = attr._make._compile_and_eval
    first = attrs_code.install(str(tmp_path / "a.marshal"), write=False)
    second = attrs_code.install(str(tmp_path / "b.marshal"), write=False)
    first()  # the first call returns while the second still runs
    _define("DuringSecond")
    assert second.cache.compiled >= 2  # the second call's cache still serves
    second()
    assert attr._make._compile_and_eval is original
    _define("AfterBoth")
    assert first.cache.compiled == 0 and second.cache.compiled == len(second.cache.used)
