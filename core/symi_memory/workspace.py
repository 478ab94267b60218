"""The memory files of a workspace: what gets indexed, and what memory_get may read.

Implements spec/behaviour.md §2 once, for every backend.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from .errors import PathRefused
from .types import ReadResult

__all__ = [
    "IGNORED_DIRS",
    "NOT_UTF8",
    "AbsentRoot",
    "absent_roots",
    "emptied_roots",
    "emptied_why",
    "folder_device",
    "root_devices",
    "root_folders",
    "unreadable_within",
    "why_unlistable",
    "bom_encoding",
    "MemoryFile",
    "PathRoot",
    "PathRules",
    "check_request_path",
    "glob_match",
    "list_memory_files",
    "open_regular",
    "path_candidates",
    "printable_path",
    "read_allowed",
    "read_lines",
    "read_regular",
    "stored_path",
]

#: Why a file whose name is not valid UTF-8 is not indexed (it cannot be stored or cited); ``status.skipped`` says it.
NOT_UTF8 = "file name is not valid UTF-8"
IGNORED_DIRS = frozenset({".git", "node_modules", ".venv", "venv", ".tox", "__pycache__"})
ROOT_FILES = ("MEMORY.md", "memory.md")


@attrs.frozen(kw_only=True)
class MemoryFile:
    """A Markdown file to index. ``path`` is workspace-relative with ``/``."""

    path: str
    abs_path: str
    mtime: float
    size: int
    source: str = "memory"


def stored_path(abs_path: str, workspace: str) -> str:
    """Workspace-relative path with ``/`` (``../x.md`` outside the workspace)."""
    return os.path.relpath(abs_path, workspace).replace(os.sep, "/")


def _with_sep(folder: str) -> str:
    """``folder`` ending with one separator: the part of a path below it follows (the root ``/`` has it already)."""
    return folder if folder.endswith(os.sep) else folder + os.sep


def _walk_md(root: str, problems: dict[str, str] | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """Yield ``(path, stat)`` of regular, non-symlink ``.md`` files below ``root``, sorted, symlinked dirs skipped.

    A folder or file that cannot be listed or stat'ed (unreadable, nested
    deeper than PATH_MAX, gone meanwhile) is left out; with ``problems`` its
    path and the reason are recorded there, and the walk goes on.
    """
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if problems is not None and (current != root or not isinstance(exc, NotADirectoryError)):
                problems[current] = f"cannot list folder: {exc.strerror or exc}"
            continue
        files = []
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in IGNORED_DIRS:
                        stack.append(entry.path)
                elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    files.append(entry)
            except OSError as exc:
                if problems is not None:
                    problems[entry.path] = f"cannot stat: {exc.strerror or exc}"
        for entry in reversed(files):
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if problems is not None:
                    problems[entry.path] = f"cannot stat: {exc.strerror or exc}"
                continue
            yield entry.path, st


def _regular_md(path: str) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and path.endswith(".md"):
        return st
    return None


def list_memory_files(workspace: str | Path, extra_paths: Iterable[str] = (),
                      problems: dict[str, str] | None = None) -> list[MemoryFile]:
    """All Markdown memory files, symlinks skipped, de-duplicated by real path.

    ``problems`` (when given) receives ``{stored path: reason}`` for folders
    and files that could not be listed; they are left out, the rest is listed.

    Order: ``MEMORY.md``, ``memory.md``, ``memory/**``, then extra paths.
    No symlink is ever followed below a root, so a file's real path is its
    root's real path plus its relative part: each root is resolved once, not
    each file (10k files list in a few milliseconds).
    """
    ws = str(workspace)
    found: list[MemoryFile] = []
    seen: set[str] = set()

    def add_tree(root: str) -> None:
        real_root = _with_sep(os.path.realpath(root))
        stored_root = stored_path(root, ws)
        prefix = len(_with_sep(root))
        found_problems: dict[str, str] | None = {} if problems is not None else None
        for path, st in _walk_md(root, found_problems):
            rel = path[prefix:]
            real = real_root + rel
            if real in seen:
                continue
            seen.add(real)
            stored = stored_root + "/" + rel.replace(os.sep, "/") if stored_root != "." else rel.replace(os.sep, "/")
            found.append(MemoryFile(path=stored, abs_path=path, mtime=st.st_mtime, size=st.st_size))
        if problems is not None and found_problems:
            for path, why in found_problems.items():
                problems[printable_path(stored_path(path, ws))] = why

    def add_file(path: str, st: os.stat_result) -> None:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            found.append(MemoryFile(path=stored_path(path, ws), abs_path=path, mtime=st.st_mtime, size=st.st_size))

    try:
        top = set(os.listdir(ws))
    except OSError:
        top = set()
    for name in ROOT_FILES:
        p = os.path.join(ws, name)
        st = _regular_md(p)
        # On case-insensitive file systems both names hit one file; only the exact name counts.
        if st is not None and name in top:
            add_file(p, st)
    mem = os.path.join(ws, "memory")
    if os.path.isdir(mem) and not os.path.islink(mem):
        add_tree(mem)
    for extra in extra_paths:
        p = os.path.normpath(os.path.join(ws, os.path.expanduser(extra)))
        if os.path.islink(p):
            continue
        if os.path.isdir(p):
            add_tree(p)
        else:
            st = _regular_md(p)
            if st is not None:
                add_file(p, st)
    return found


#: How :attr:`AbsentRoot.why` starts for a root (or a folder or file below one) that is there but cannot be read.
UNREADABLE = "cannot be read"


#: How :attr:`AbsentRoot.why` starts for a root folder that is there but lists no memory file now while the index
#: holds files from it, and looks unmounted or emptied by accident (:func:`emptied_roots`).
EMPTIED = "lists no memory files"
#: An empty root folder (no entry at all) on the file system its files were indexed from is taken for one emptied
#: by accident (a mount point unmounted before its device was recorded, a bind mount on the same file system) only
#: when the index holds at least this many files from it: deleting a few notes, the last ones, is ordinary.
EMPTIED_MIN_FILES = 10


@attrs.frozen
class AbsentRoot:
    """A root the configuration names that cannot be listed now (the workspace, or one of its extra paths), or a
    folder or file below one that cannot be read now.

    A folder renamed, removed, unmounted or made unreadable for a while is not every file in it deleted: a sync keeps
    what the index holds from it (:meth:`holds`) and reports it (:attr:`warning`) until it is back or readable.
    """

    #: "workspace", "extra path", "folder" (below a root, or the transcripts folder), "entry" (below a root, not even
    #: known to be a folder or a file), "file" (an indexed file a sync could not read)
    kind: str
    path: str  # as resolved: absolute when the workspace is
    why: str  # "does not exist", "is a file, not a folder", "cannot be read (Permission denied)"
    #: Stored paths (:func:`stored_path`) of its files start with this plus "/"; "" for the workspace itself
    #: (every stored path not leading out of it with "../").
    stored: str
    #: What the index holds from it is of this source: "memory" (the workspace, extra paths) or "sessions" (the
    #: session transcripts, stored as ``sessions/<name>`` from the state dir's transcripts folder).
    source: str = "memory"

    def holds(self, stored: str) -> bool:
        """Whether the file stored under this path was listed from this root."""
        if not self.stored:
            return stored != ".." and not stored.startswith("../")
        return stored == self.stored or stored.startswith(self.stored + "/")

    @property
    def emptied(self) -> bool:
        """Whether it is there but lists no memory file, and looks unmounted or emptied by accident."""
        return self.why.startswith(EMPTIED)

    @property
    def unreadable(self) -> bool:
        """Whether it is there but cannot be read (not gone)."""
        return self.why.startswith(UNREADABLE)

    @property
    def warning(self) -> str:
        """What a sync and ``status()`` report about it, naming the root and why it cannot be listed."""
        until = "it can be read again" if self.unreadable else "it is back"
        shown = printable_path(self.path)
        if self.emptied:
            named = {"extra path": "extra path ", "folder": "folder "}.get(self.kind, "workspace ")
            return (f"{named}{shown} {self.why}: what the index holds from it stays searchable until its files are "
                    "back (mount it again); if they were deleted on purpose, `symi-memory index --force` "
                    "(sync(force=True)) drops them from the index")
        if self.kind == "workspace":
            if self.unreadable:
                return (f"workspace {shown} {self.why}: nothing new is indexed from it and appends fail; what the "
                        f"index already holds from it stays searchable until {until}")
            return (f"workspace {shown} {self.why}: nothing new is indexed from it and appends fail; what the "
                    "index already holds from it stays searchable until it is back. If it moved or is mistyped, "
                    "set the workspace to the folder that holds MEMORY.md and memory/ (agents.defaults.workspace, "
                    "--workspace, open_memory(workspace=...))")
        if self.kind == "file":
            return (f"file {shown} {self.why}: what the index holds from it (as last read) stays searchable until "
                    f"{until}")
        if self.kind in ("folder", "entry"):
            named = "folder " if self.kind == "folder" else ""
            return (f"{named}{shown} {self.why}: nothing new is indexed from it; what the index already holds from "
                    f"it stays searchable until {until}")
        if self.why == NOT_MARKDOWN:
            return (f"extra path {shown} (memorySearch.extraPaths) {self.why}: only .md files and folders are "
                    "indexed; name a .md file or a folder, or take it out of extraPaths")
        return (f"extra path {shown} (memorySearch.extraPaths) {self.why}: nothing new is indexed from it; what "
                f"the index already holds from it stays searchable until {until} or leaves extraPaths")


def absent_roots(workspace: str | Path, extra_paths: Iterable[str] = (), *,
                 unreadable: bool = False) -> list[AbsentRoot]:
    """The roots :func:`list_memory_files` cannot list now: the workspace when it is missing or not a folder,
    and each extra path that does not exist (one inside a missing workspace is the workspace's).

    With ``unreadable``, also the workspace and each extra folder that is there but cannot be listed (a folder
    made unreadable, chmod 000): ``why`` is then ``cannot be read (<reason>)``.
    """
    ws = str(workspace)
    out: list[AbsentRoot] = []
    if not os.path.isdir(ws):
        out.append(AbsentRoot("workspace", ws, _why_absent(ws), ""))
    elif unreadable and (why := why_unlistable(ws)):
        out.append(AbsentRoot("workspace", ws, why, ""))
    for extra in extra_paths:
        p = os.path.normpath(os.path.join(ws, os.path.expanduser(extra)))
        if os.path.islink(p) or (p.endswith(".md") and not os.path.isdir(p) and os.path.lexists(p)):
            continue  # listed (a Markdown file), or left out as it always is (a symlink)
        stored = stored_path(p, ws)
        if stored == "." or (out and out[0].holds(stored)):
            continue
        if os.path.isdir(p):
            if unreadable and (why := why_unlistable(p)):
                out.append(AbsentRoot("extra path", p, why, stored))
            continue
        why = _why_absent(p)
        if why == IS_A_FILE and os.path.splitext(p)[1]:
            why = NOT_MARKDOWN  # notes.txt: never indexed, not a folder away for a while ("notes" may be)
        out.append(AbsentRoot("extra path", p, why, stored))
    return out


def root_folders(workspace: str | Path, extra_paths: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    """``(kind, path, stored)`` of each folder memory is listed from that is there now: the workspace, its
    ``memory/`` folder (often a mount of its own) and each extra path that is a folder (not a symlink)."""
    ws = str(workspace)
    if not os.path.isdir(ws):
        return []
    out = [("workspace", ws, "")]
    mem = os.path.join(ws, "memory")
    if os.path.isdir(mem) and not os.path.islink(mem):
        out.append(("folder", mem, "memory"))
    for extra in extra_paths:
        p = os.path.normpath(os.path.join(ws, os.path.expanduser(extra)))
        stored = stored_path(p, ws)
        if stored == "." or os.path.islink(p) or not os.path.isdir(p) or any(r[1] == p for r in out):
            continue
        out.append(("extra path", p, stored))
    return out


def _device(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def root_devices(workspace: str | Path, extra_paths: Iterable[str], listed: Iterable[str]) -> dict[str, int]:
    """The device (``st_dev``) of each root folder (:func:`root_folders`) that lists memory files now (``listed``:
    their stored paths), by path: what :func:`emptied_roots` compares with when one lists none."""
    listed = list(listed)
    out: dict[str, int] = {}
    for kind, path, stored in root_folders(workspace, extra_paths):
        root = AbsentRoot(kind, path, "", stored)
        if any(root.holds(p) for p in listed) and (dev := _device(path)) is not None:
            out[path] = dev
    return out


def emptied_roots(workspace: str | Path, extra_paths: Iterable[str], listed: Iterable[str],
                  indexed: Callable[[], Iterable[str]], recorded: dict[str, int],
                  known: Iterable[AbsentRoot] = ()) -> list[AbsentRoot]:
    """The root folders that are there but list no memory file (``listed``: the stored paths listed now) while the
    index holds files from them (``indexed()``: its memory files' stored paths, asked only when a root lists none),
    and look unmounted or emptied by
    accident rather than emptied on purpose:

    - the folder is on another device than when its files were last listed (``recorded``, from
      :func:`root_devices`): a mount point unmounted (the folder below it is on its parent's file system), or
      another disk mounted there; or
    - the folder is empty (no entry at all) and the index holds at least :data:`EMPTIED_MIN_FILES` files from it.

    What the index holds from them is kept (``why`` starts with :data:`EMPTIED`) until files are listed from them
    again, or a forced full rebuild (the operator's word that they were deleted) drops them. A folder that still
    holds anything but memory files (the notes deleted, the rest kept) is not one: its files go as deleted.
    Roots below one of ``known`` (already away or unreadable) are left to it."""
    listed, known = list(listed), list(known)
    held_paths: list[str] | None = None
    out: list[AbsentRoot] = []
    for kind, path, stored in root_folders(workspace, extra_paths):
        root = AbsentRoot(kind, path, "", stored)
        if any(r.source == "memory" and (r.holds(stored) if stored else not r.stored) for r in [*known, *out]):
            continue
        if any(root.holds(p) for p in listed):
            continue
        if held_paths is None:
            held_paths = list(indexed())
        held = sum(1 for p in held_paths if root.holds(p))
        if not held:
            continue
        why = emptied_why(path, held, recorded.get(path))
        if why is None:
            continue
        out.append(AbsentRoot(kind, path, why, stored))
    return out


def emptied_why(path: str, held: int, recorded: int | None) -> str | None:
    """Why a root folder that lists no memory file now, while ``held`` indexed files came from it, looks unmounted
    or emptied by accident (the two rules of :func:`emptied_roots`; ``recorded``: its device when its files were
    last listed, :func:`root_devices`), or None: emptied on purpose, its files go as deleted. Also what the
    qmd-sidecar backend asks of its collections' folders."""
    if not held:
        return None
    now = _device(path)
    if recorded is not None and now is not None and recorded != now:
        return f"{EMPTIED} and is on another file system than when its {held} indexed files were listed (unmounted?)"
    if held >= EMPTIED_MIN_FILES and _empty_folder(path):
        return f"{EMPTIED} and is empty, while the index holds {held} files from it (unmounted?)"
    return None


def folder_device(path: str | Path) -> int | None:
    """The device (``st_dev``) of ``path``, None when it cannot be looked at: what :func:`emptied_why` compares."""
    return _device(str(path))


def _empty_folder(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def why_unlistable(folder: str | Path) -> str | None:
    """``cannot be read (<reason>)`` when ``folder`` (there) cannot be listed, or listed but not entered (read but no
    search permission, ``chmod -R 644``: its names are listed, but none of its files or folders can be opened or even
    told apart), else None."""
    try:
        with os.scandir(folder):
            pass
        os.stat(os.path.join(folder, "."))  # looks a name up in it, as opening any file in it must
    except (FileNotFoundError, NotADirectoryError):
        return None  # gone meanwhile: the next look says so
    except OSError as exc:
        return f"{UNREADABLE} ({exc.strerror or exc})"
    return None


#: How :func:`list_memory_files` words a folder it could not list and an entry it could not stat, and their kind.
_UNLISTED = (("cannot list folder: ", "folder"), ("cannot stat: ", "entry"))


def unreadable_within(problems: dict[str, str], workspace: str | Path,
                      known: Iterable[AbsentRoot] = ()) -> list[AbsentRoot]:
    """The folders (and entries) below the roots that :func:`list_memory_files` could not list, from its
    ``problems``, as :class:`AbsentRoot` of kind ``folder``: what the index holds from them is kept, as from a root
    that is away. Those below a memory root in ``known`` are that root's."""
    ws = str(workspace)
    known = list(known)
    out: list[AbsentRoot] = []
    for stored, why in problems.items():
        found = next(((head, kind) for head, kind in _UNLISTED if why.startswith(head)), None)
        if found is None or any(root.source == "memory" and root.holds(stored) for root in known):
            continue
        head, kind = found
        out.append(AbsentRoot(kind, os.path.normpath(os.path.join(ws, stored)), f"{UNREADABLE} ({why[len(head):]})",
                              stored))
    return out


def _why_absent(path: str) -> str:
    """Why ``path`` is no folder to list: a file, a path that cannot be reached (a folder on the way this user may
    not enter: it exists, and a mistyped path is not the fix), or nothing there."""
    try:
        os.stat(path)
    except PermissionError:
        return "cannot be reached (permission denied)"
    except OSError:
        return "does not exist"
    return IS_A_FILE


#: Why a root is no folder to list (:func:`_why_absent`), and why an extra path naming a file is never listed.
IS_A_FILE = "is a file, not a folder"
NOT_MARKDOWN = "is not a Markdown file"


def printable_path(path: str) -> str:
    """``path`` as valid UTF-8: bytes a file name holds that are not UTF-8 shown as ``\\xNN``."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte (text from JSON, "\\ud800")
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def path_candidates(text: str) -> tuple[str, ...]:
    """The paths :func:`printable_path` may have made ``text`` from: ``text`` itself, and (when it holds ``\\xNN``
    escapes of bytes 0x80-0xff, the only ones it writes) the path with those bytes back. A path of valid UTF-8 that
    itself holds such an escape (a literal backslash) reads the same as the other: both are offered."""
    if "\\x" not in text:
        return (text,)
    raw = re.sub(r"\\x([89a-f][0-9a-f])", lambda m: chr(0xDC00 + int(m.group(1), 16)), text)
    return (text,) if raw == text else (text, raw)


def read_lines(text: str, from_line: int | None, lines: int | None) -> str:
    """Lines ``[max(1, from), +max(1, lines))`` of ``text`` (1-based); whole text if both are None.

    The window is found in the text (newlines counted a block at a time), not cut from a list of every line: a
    window of a big file costs what the window does, not a string per line of the file.
    """
    if from_line is None and lines is None:
        return text
    start = _past_newlines(text, 0, max(1, from_line or 1) - 1)
    if start < 0:
        return ""
    if lines is None:
        return text[start:]
    end = _past_newlines(text, start, max(1, lines))
    return text[start:] if end < 0 else text[start : end - 1]


def _past_newlines(text: str, pos: int, count: int) -> int:
    """The offset just past the ``count``-th newline at or after ``pos``; -1 when the text has fewer."""
    size = len(text)
    block = 1 << 16
    while count > 0:
        end = min(size, pos + block)
        found = text.count("\n", pos, end)
        if found < count:
            if end == size:
                return -1
            count -= found
            pos = end
            continue
        for _ in range(count):  # in this block: at most one block's newlines
            pos = text.index("\n", pos, end) + 1
        return pos
    return pos


#: Byte order marks of the encodings other than UTF-8 a memory file may be in (UTF-32 first: its little-endian
#: mark starts with UTF-16's). Windows PowerShell's ``>`` and Notepad's "Unicode" write UTF-16 with a mark.
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"),
         (b"\xfe\xff", "utf-16-be"))


def bom_encoding(head: bytes) -> tuple[str, int] | None:
    """``(codec, mark length)`` when ``head`` (a file's first bytes) starts with a UTF-16 or UTF-32 byte order
    mark; None for anything else (UTF-8, with or without its mark)."""
    for mark, codec in _BOMS:
        if head.startswith(mark):
            return codec, len(mark)
    return None


def decode_text(data: bytes) -> tuple[str, bool]:
    """UTF-8 (or UTF-16/32 with a byte order mark) with replacement, BOM dropped, CRLF/CR normalised.

    Returns (text, had_invalid_bytes).
    """
    marked = bom_encoding(data[:4])
    codec, data = (marked[0], data[marked[1]:]) if marked else ("utf-8", data)
    try:
        text = data.decode(codec)
        bad = False
    except UnicodeDecodeError:
        text = data.decode(codec, errors="replace")
        bad = True
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, bad


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def glob_match(pattern: str, rel: str) -> bool:
    """Whether a ``/``-separated relative path matches a collection glob (``**/*.md``, ``MEMORY.md``, ``notes/*.md``).

    ``**/`` matches zero or more directories, ``*`` and ``?`` stay within one
    path part, ``{a,b}`` is an alternation, ``[...]`` a character class.
    """
    rx = _GLOB_CACHE.get(pattern)
    if rx is None:
        out, i = [], 0
        while i < len(pattern):
            c = pattern[i]
            if pattern.startswith("**/", i):
                out.append("(?:[^/]*/)*")
                i += 3
                continue
            if pattern.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "{" and "}" in pattern[i:]:
                end = pattern.index("}", i)
                out.append("(?:" + "|".join(re.escape(a) for a in pattern[i + 1 : end].split(",")) + ")")
                i = end
            elif c == "[" and "]" in pattern[i + 1 :]:
                end = pattern.index("]", i + 1)
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
            else:
                out.append(re.escape(c))
            i += 1
        rx = _GLOB_CACHE[pattern] = re.compile("".join(out) + r"\Z")
    return rx.match(rel) is not None


def check_request_path(path: object) -> str:
    """The requested path, stripped, or :class:`PathRefused`.

    Refuses what no file system path can be: non-strings, empty text, a NUL
    byte, and text that is not valid Unicode (a lone surrogate), so callers
    never see a codec or ``embedded null byte`` message.
    """
    if not isinstance(path, str):
        raise PathRefused()
    text = path.strip()
    if not text or "\x00" in text:
        raise PathRefused()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused() from None
    return text


@attrs.frozen
class PathRoot:
    """One place ``memory_get`` may read: a file, or a directory with a glob (default ``**/*.md``)."""

    lexical: str
    real: str
    is_dir: bool
    pattern: str = "**/*.md"


_Root = PathRoot  # older name, kept for callers inside the package


@attrs.define
class PathRules:
    """Which paths ``memory_get`` may read (spec/behaviour.md §2); every backend's read goes through here.

    A path is allowed when, after resolution, it is one of the root files or
    lies below a root directory, matches that root's glob, passes through
    none of the directories the walker ignores (:data:`IGNORED_DIRS`), has no
    symlink on the way, and is a regular ``.md`` file (or missing). Every
    refusal is a :class:`PathRefused`; an ``escape_message`` replaces the
    text for paths that resolve outside their root (qmd's wording).
    """

    workspace: str
    roots: list[PathRoot]
    escape_message: str = "path required"
    #: Whether ``workspace`` is the agent's workspace (not a qmd collection's folder): named when it is a file.
    is_workspace: bool = True

    @classmethod
    def from_workspace(cls, workspace: str | Path, extra_paths: Iterable[str] = ()) -> PathRules:
        ws = str(workspace)
        roots: list[PathRoot] = []
        real_ws = os.path.realpath(ws)
        for name in ROOT_FILES:
            roots.append(PathRoot(os.path.join(ws, name), os.path.join(real_ws, name), False))
        mem = os.path.join(ws, "memory")
        if not os.path.islink(mem):
            roots.append(PathRoot(mem, os.path.join(real_ws, "memory"), True))
        for extra in extra_paths:
            p = os.path.normpath(os.path.join(ws, os.path.expanduser(extra)))
            if os.path.islink(p):
                continue
            if os.path.isdir(p):
                roots.append(PathRoot(p, os.path.realpath(p), True))
            elif p.endswith(".md"):
                roots.append(PathRoot(p, os.path.realpath(p), False))
        return cls(workspace=ws, roots=roots)

    @classmethod
    def for_directory(cls, directory: str | Path, pattern: str = "**/*.md", *,
                      escape_message: str = "path required") -> PathRules:
        """Rules for paths relative to one directory, limited to ``pattern`` (a qmd collection)."""
        d = os.path.normpath(str(directory))
        return cls(workspace=d, roots=[PathRoot(d, os.path.realpath(d), True, pattern)],
                   escape_message=escape_message, is_workspace=False)

    def add_directory(self, directory: str | Path, pattern: str = "**/*.md") -> None:
        """Allow one more directory (not a symlink), limited to ``pattern``."""
        d = os.path.normpath(os.path.join(self.workspace, str(directory)))
        if not os.path.islink(d):
            self.roots.append(PathRoot(d, os.path.realpath(d), True, pattern))

    def resolve(self, path: str) -> tuple[str, str]:
        """Return ``(absolute path, stored path)`` or raise :class:`PathRefused`."""
        text = check_request_path(path)
        cand = os.path.normpath(os.path.join(self.workspace, os.path.expanduser(text)))
        if not cand.endswith(".md"):
            raise PathRefused()
        found = self._resolve_at(cand, text)
        if found is False:
            # Under no root as asked: perhaps through another name of a root's folder (a symlink above it, or its
            # real path when the root was named through one). Asked again as that root names it, every check below
            # the root applies as to any path: nothing is allowed that was not allowed asked for directly.
            moved = self._as_a_root_names_it(cand)
            if moved is not None:
                found = self._resolve_at(moved, text)
        if isinstance(found, tuple):
            return found
        if not found and self.escape_message != "path required":
            raise PathRefused(self.escape_message)
        raise PathRefused()

    def _resolve_at(self, cand: str, text: str) -> tuple[str, str] | bool:
        """``(absolute path, stored path)`` for ``cand`` (absolute, normalised) under a root as named; else whether
        a root directory took it in (``True``: under one, refused by its glob or an ignored directory). Raises
        :class:`PathRefused` for a path under a root that resolves elsewhere or is no regular file."""
        matched_dir = False
        for root in self.roots:
            if root.is_dir:
                prefix = root.lexical.rstrip(os.sep) + os.sep
                if not cand.startswith(prefix):
                    continue
                matched_dir = True
                rel = cand[len(prefix) :].replace(os.sep, "/")
                if any(part in IGNORED_DIRS for part in rel.split("/")[:-1]) or not glob_match(root.pattern, rel):
                    continue  # another root may still allow it (a nested extra path)
                expected = root.real.rstrip(os.sep) + os.sep + cand[len(prefix) :]
            elif cand == root.lexical:
                expected = root.real
            else:
                continue
            # A symlink anywhere below the root (file or directory) changes the real path.
            try:
                real = os.path.realpath(cand)
            except (OSError, ValueError):
                raise PathRefused() from None
            if real != expected:
                raise PathRefused(self.escape_message)
            try:
                st = os.lstat(cand)
            except FileNotFoundError:
                return cand, stored_path(cand, self.workspace)
            except NotADirectoryError:
                raise PathRefused(self._not_a_folder(text)) from None
            except (OSError, ValueError):
                raise PathRefused() from None
            if not stat.S_ISREG(st.st_mode):
                raise PathRefused()
            return cand, stored_path(cand, self.workspace)
        return matched_dir

    def _as_a_root_names_it(self, cand: str) -> str | None:
        """``cand`` with its shortest leading folders that resolve to the workspace or a root's folder replaced by
        that folder's name in the rules (``/private/tmp/ws/MEMORY.md`` for a workspace ``/tmp/ws``); None when no
        leading folder does. The shortest, so a symlink below a root is still met by the checks below it."""
        if len(cand) > 4096 or not os.path.isabs(cand):
            return None
        try:
            names = {os.path.realpath(self.workspace): self.workspace}
            for root in self.roots:
                folder = root.lexical if root.is_dir else os.path.dirname(root.lexical)
                names.setdefault(root.real if root.is_dir else os.path.realpath(folder), folder)
        except (OSError, ValueError):
            return None
        parts = cand.split(os.sep)
        for i in range(2, len(parts)):
            prefix = os.sep.join(parts[:i])
            try:
                if not os.path.isdir(prefix):  # nothing deeper can be a root's folder
                    return None
                named = names.get(os.path.realpath(prefix))
            except (OSError, ValueError):
                return None
            if named is not None:
                return None if named == prefix else os.path.join(named, *parts[i:])
        return None

    def _not_a_folder(self, asked: str) -> str:
        """Why a path on the way to a memory file is not a folder: the workspace replaced by a file is named as
        such; a file inside it asked for as a folder (``MEMORY.md/x.md``) is refused as any path that is no memory
        file is."""
        if self.is_workspace and os.path.lexists(self.workspace) and not os.path.isdir(self.workspace):
            return (f"cannot read {asked}: the workspace {os.path.normpath(self.workspace)} is a file, not a folder; "
                    "set the workspace to the folder that holds MEMORY.md and memory/")
        return "path required"

    def read(self, path: str, *, from_line: int | None = None, lines: int | None = None,
             shown: str | None = None) -> ReadResult:
        """``memory_get``: a missing allowed file gives empty text, never an error.

        ``shown`` replaces the stored path in the result (qmd's ``qmd/<collection>/<rel>``).
        """
        abs_path, rel = self.resolve(path)
        return read_allowed(abs_path, shown if shown is not None else rel, from_line=from_line, lines=lines)


def read_regular(abs_path: str) -> tuple[bytes, os.stat_result]:
    """The bytes and ``fstat`` of the regular file at ``abs_path``, as the indexer reads a listed file.

    The file is opened without following a symlink and without waiting on a FIFO, so a file swapped for
    either after :func:`list_memory_files` listed it is refused (an ``OSError`` saying so) instead of
    reading the link's target (which may be outside the workspace) or hanging the sync; so is a device
    or a directory. A file that is gone raises ``FileNotFoundError``. Backends read listed files with
    it and leave out the ones it refuses; :func:`decode_text` then decodes the bytes (byte order
    marks, CRLF).
    """
    fh, st = open_regular(abs_path)
    with fh:
        return fh.read(), st


def open_regular(abs_path: str) -> tuple[BinaryIO, os.stat_result]:
    """The open file (binary) and ``fstat`` of the regular file at ``abs_path``, refused as :func:`read_regular`
    refuses it; for reading a large file (a transcript) a piece at a time. The caller closes it."""
    try:
        fd = os.open(abs_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symlink, not a regular file", abs_path) from None
        raise
    fh = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", abs_path)
    except BaseException:
        fh.close()
        raise
    return fh, st


def read_allowed(abs_path: str, shown: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
    """Read a path :class:`PathRules` allowed; a file that vanished or cannot be opened reads as refused or empty."""
    try:
        fd = os.open(abs_path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return ReadResult(path=shown, text="")
    except OSError:
        # A symlink swapped in since the check (ELOOP), a directory, no permission: never read it.
        raise PathRefused() from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise PathRefused()
        data = fh.read()
    text, _ = decode_text(data)
    return ReadResult(path=shown, text=read_lines(text, from_line, lines))
