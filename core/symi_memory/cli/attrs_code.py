"""The compiled methods of attrs classes, kept between one-shot CLI processes.

attrs writes each class's ``__init__``, ``__eq__``, ``__hash__``, ``__repr__``... as Python source and
compiles it when the class is defined. A one-shot ``search`` defines ~105 classes (config schema, types,
specs, index records, the plugins' settings), and compiling their methods was ~60 ms of its CPU on the
2-core VM: more than any other single step of its start. The compiled code depends only on the source
text and the file name attrs gives it, so the code objects are saved once (marshal, as ``.pyc`` files are)
beside the package's bytecode, and later processes load them instead of compiling.

The one part of attrs' source that changes from process to process is the number each ``__hash__`` mixes
in (the hash of a string, which Python salts per process). The saved code is keyed by the source with that
number replaced by a placeholder of the same sign and width (``-777...``), and the number it was compiled
with is swapped for this process's one in the loaded code object, which is then the one ``compile`` would
have made (tests check that it is equal, line table included). So each such class has a few entries (a
sign and a width each), made as they come up. Anything unexpected (another attrs
whose helper has another shape, a script whose hash line is not where it is looked for, a constant that
would collide) compiles as before. Only the CLI installs this, for the length of :func:`~symi_memory.cli.main`.
"""

from __future__ import annotations

import marshal
import os
import re
import sys
import threading
from types import CodeType
from typing import Any

__all__ = ["AttrsCodeCache", "install"]

#: The literal attrs' ``__hash__`` starts its tuple with: ``return hash((\n        <number>,``.
_HASH_LITERAL = re.compile(r"(hash\(\(\n[ ]+)(-?)(\d+)(,\n)")
#: In the file's name: what its entries hold ({(file name, keyed source): (code, number or None)}).
FORMAT = "v1"
#: Beyond this many saved entries, the file keeps only this run's (a backstop: see AttrsCodeCache.save).
MAX_ENTRIES = 1000
# The installs in force (their compile_and_eval, oldest first) and attrs' own helper while there are any: calls
# of main() in one process (two threads) may finish in any order, and attrs gets its own helper back when the
# last one does (not a finished call's).
_ACTIVE: list[Any] = []
_ORIGINAL: list[Any] = []
_ACTIVE_LOCK = threading.Lock()


def _shape(key_script: str) -> str:
    """A saved script without its hash placeholder: the same for all of one class's entries."""
    return _HASH_LITERAL.sub(lambda m: f"{m.group(1)}#{m.group(4)}", key_script)


def _swap_constant(code: CodeType, old: int | None, new: int) -> tuple[CodeType, int]:
    """``code`` with the constant ``old`` replaced by ``new`` in it and its nested code; and how many
    (-1: ``new`` is a constant there already, which the compiler would have shared)."""
    consts = list(code.co_consts)
    swapped = 0
    for i, c in enumerate(consts):
        if isinstance(c, CodeType):
            consts[i], n = _swap_constant(c, old, new)
            if n < 0:
                return code, -1
            swapped += n
        elif type(c) is int and c == old:
            if any(type(k) is int and k == new for k in code.co_consts):
                return code, -1
            consts[i] = new
            swapped += 1
    if swapped <= 0:
        return code, swapped
    return code.replace(co_consts=tuple(consts)), swapped


class AttrsCodeCache:
    """Code objects of attrs' generated scripts, keyed by file name and (placeholder) source."""

    def __init__(self, path: str | None, *, flags: int = 0) -> None:
        self.path = path
        #: The ``__future__`` flags attrs compiles with (those of its own module, which ``compile`` inherits).
        self.flags = flags
        self.entries: dict[tuple[str, str], tuple[CodeType, int | None]] = {}
        self.used: set[tuple[str, str]] = set()
        self.added = 0  # since the last save
        #: Scripts compiled (not found saved) by this cache in all.
        self.compiled = 0
        if path is not None:
            try:
                with open(path, "rb") as fh:
                    loaded = marshal.loads(fh.read())
                if isinstance(loaded, dict):  # what this version writes; anything else in it is left out
                    self.entries = {k: v for k, v in loaded.items() if type(k) is tuple and len(k) == 2
                                    and type(k[0]) is str and type(k[1]) is str}
            except (OSError, ValueError, EOFError, TypeError):
                self.entries = {}

    def _compile(self, script: str, filename: str) -> CodeType:
        return compile(script, filename, "exec", self.flags, True)

    def code(self, script: str, filename: str) -> CodeType:
        """What ``compile(script, filename, "exec")`` gives in attrs' module, from the saved code when there is some."""
        literals = _HASH_LITERAL.findall(script)
        if len(literals) != script.count("def __hash__("):
            return self._compile(script, filename)  # a shape not seen before: not cached
        if len(literals) > 1:
            return self._compile(script, filename)
        number = None
        key_script = script
        if literals:
            # Keyed by the script with a placeholder of the number's sign and width: the saved code's line
            # table (which records columns) is then this script's, and only the constant differs.
            sign, digits = literals[0][1], literals[0][2]
            number, text = int(sign + digits), sign + "7" * len(digits)
            key_script = _HASH_LITERAL.sub(lambda m: f"{m.group(1)}{text}{m.group(4)}", script)
        key = (filename, key_script)
        saved = self.entries.get(key)
        self.used.add(key)
        if type(saved) is not tuple or len(saved) != 2 or type(saved[0]) is not CodeType:
            saved = None  # none, or not what this version writes
        if saved is None:
            code = self._compile(script, filename)
            self.entries[key] = (code, number)
            self.added += 1
            self.compiled += 1
            return code
        code, saved_number = saved
        if number is None or number == saved_number:
            return code
        swapped, count = _swap_constant(code, saved_number, number)
        return swapped if count == 1 else self._compile(script, filename)

    def save(self) -> None:
        """Write the entries out (when this run compiled new ones); best effort, never raises."""
        if self.path is None or not self.added:
            return
        # A class this run built whose saved script is another one (an upgrade changed its fields) keeps only
        # the current script's entries (one per sign and width of its hash number).
        shapes = {(name, _shape(script)) for name, script in self.used}
        names = {name for name, _ in shapes}
        entries = {k: v for k, v in self.entries.items() if k[0] not in names or (k[0], _shape(k[1])) in shapes}
        if len(entries) > MAX_ENTRIES:
            entries = {k: v for k, v in entries.items() if k in self.used}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(marshal.dumps(entries))
            os.replace(tmp, self.path)  # readers find the old file or the new one, whole
        except (OSError, ValueError):
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self.added = 0


def default_path(flags: int = 0) -> str | None:
    """Beside the package's bytecode (``symi_memory/__pycache__``); None when bytecode is not kept there.

    The code depends only on the source, the file name (both in each key), the compile flags and the Python
    version (both in the file's name): not on the attrs version, whose scripts are the keys.
    """
    if sys.pycache_prefix is not None or sys.implementation.cache_tag is None:
        return None
    from .. import __file__ as package_file

    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    name = f"attrs-methods-{FORMAT}.{sys.implementation.cache_tag}{opt}.flags-{flags:x}.marshal"
    return os.path.join(os.path.dirname(package_file), "__pycache__", name)


def install(path: str | None = None, *, write: bool | None = None) -> Any:
    """Route attrs' compiling through an :class:`AttrsCodeCache` until the returned ``uninstall()`` is called,
    which also saves new entries when ``write`` (by default: unless ``sys.dont_write_bytecode``, as for
    ``.pyc`` files). ``path``: the file (by default :func:`default_path`). A no-op when attrs' helper does not
    have the expected shape."""
    import attr._make as make

    original = getattr(make, "_compile_and_eval", None)
    code_obj = getattr(original, "__code__", None)
    if code_obj is None or code_obj.co_varnames[:4] != ("script", "globs", "locs", "filename"):
        return lambda: None
    import __future__

    # attrs' own ``compile`` inherits its module's ``from __future__`` flags: the cache compiles with the same.
    flags = 0
    for feature in __future__.all_feature_names:
        flag = getattr(__future__, feature).compiler_flag
        if code_obj.co_flags & flag:
            flags |= flag
    cache = AttrsCodeCache(path if path is not None else default_path(flags), flags=flags)

    def compile_and_eval(script: str, globs: dict[str, Any] | None, locs: Any = None, filename: str = "") -> None:
        eval(cache.code(script, filename), globs, locs)

    with _ACTIVE_LOCK:
        if not _ACTIVE:
            _ORIGINAL[:] = [original]
        _ACTIVE.append(compile_and_eval)
        setattr(make, "_compile_and_eval", compile_and_eval)  # noqa: B010 (attrs' module global, looked up per call)

    def uninstall() -> None:
        with _ACTIVE_LOCK:
            if compile_and_eval in _ACTIVE:
                _ACTIVE.remove(compile_and_eval)
                if make._compile_and_eval is compile_and_eval:  # else a later install's, or someone else's
                    setattr(make, "_compile_and_eval", _ACTIVE[-1] if _ACTIVE else _ORIGINAL[0])  # noqa: B010
        if write if write is not None else not sys.dont_write_bytecode:
            cache.save()

    uninstall.cache = cache  # type: ignore[attr-defined]
    return uninstall
