"""Session transcripts as searchable documents (behaviour §8).

Transcripts live in ``<stateDir>/agents/<id>/sessions/*.jsonl``. Each line is
a JSON record; only ``{"type": "message"}`` records from the user or the
assistant count. A transcript becomes one text document whose lines read
``User: …`` / ``Assistant: …``, plus a map back to the JSONL line numbers so
hits can name the line they came from. Secrets are redacted here, before
the text goes anywhere else.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import stat
from collections import deque
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from .redact import redact

__all__ = [
    "SESSIONS_PREFIX",
    "SessionDocument",
    "HEAD_BYTES",
    "TranscriptMark",
    "TranscriptScan",
    "count_newlines",
    "extract_message_text",
    "head_hash",
    "TranscriptRead",
    "list_session_files",
    "open_transcript",
    "parse_session_bytes",
    "parse_session_file",
    "read_transcript",
    "sessions_dir",
]

log = logging.getLogger("symi_memory.sessions")

SESSIONS_PREFIX = "sessions"
_ROLE_LABELS = {"user": "User", "assistant": "Assistant"}
HEAD_BYTES = 1024


def head_hash(data: bytes) -> str:
    """Short hash of the first ``HEAD_BYTES`` bytes; tells a rewritten transcript from a grown one."""
    return hashlib.sha256(data[:HEAD_BYTES]).hexdigest()[:16]


@attrs.frozen(kw_only=True)
class SessionDocument:
    """One transcript, ready for chunking.

    ``path`` is the stored path (``sessions/<file>.jsonl``). ``line_map[i]``
    is the 1-based JSONL line of text line ``i + 1``. ``size`` and
    ``newlines`` describe the bytes that were parsed (the delta tracker's
    baseline); ``content_hash`` is their sha256 and ``head_hash`` the sha256 of their first
    ``HEAD_BYTES``.
    """

    path: str
    text: str
    line_map: tuple[int, ...]
    size: int = 0
    newlines: int = 0
    content_hash: str = ""
    head_hash: str = ""
    #: Message lines found; of them, the oldest ``dropped`` are left out (:func:`read_transcript`).
    messages: int = 0
    dropped: int = 0
    #: Lines longer than the most a line may hold, skipped unread.
    long_lines: int = 0
    #: Where this read stopped, for a later one to go on from (:func:`read_transcript`); None when it cannot.
    mark: TranscriptMark | None = None
    #: The mark this read went on from: then ``text`` and ``line_map`` hold only the messages after it (the
    #: document is the one read up to that mark followed by these); None for a read of the whole file.
    since: TranscriptMark | None = None

    @property
    def partial(self) -> bool:
        """Whether some messages of the transcript are not in ``text``."""
        return bool(self.dropped or self.long_lines)

    def partial_reason(self, max_bytes: int) -> str | None:
        """What of the transcript is left out under ``sync.maxFileBytes = max_bytes`` (status ``partial``), or None."""
        if not self.partial:
            return None
        span = (self.line_map[0], self.line_map[-1]) if self.line_map else None
        return partial_reason(max_bytes, messages=self.messages, dropped=self.dropped, long_lines=self.long_lines,
                              span=span)

    def jsonl_lines(self, start_line: int, end_line: int) -> tuple[int, int]:
        """Map an inclusive 1-based text line range to JSONL line numbers."""
        if not self.line_map:
            return (start_line, end_line)
        last = len(self.line_map)
        start = self.line_map[min(max(start_line, 1), last) - 1]
        end = self.line_map[min(max(end_line, 1), last) - 1]
        return (start, end)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "text": self.text, "lineMap": list(self.line_map)}


def partial_reason(max_bytes: int, *, messages: int, dropped: int, long_lines: int,
                   span: tuple[int, int] | None) -> str | None:
    """Status ``partial``'s words for a transcript of which ``dropped`` of ``messages`` messages (the oldest) and
    ``long_lines`` lines are not indexed; ``span``: the JSONL lines of the first and last message indexed."""
    parts = []
    if dropped:
        lines = f" (JSONL lines {span[0]}-{span[1]})" if span else ""
        parts.append(f"its messages exceed sync.maxFileBytes ({max_bytes} bytes of text): only the newest "
                     f"{messages - dropped} of {messages} are searchable{lines}")
    if long_lines:
        parts.append(f"{long_lines} line{'s' if long_lines > 1 else ''} longer than sync.maxFileBytes "
                     f"({max_bytes} bytes) not indexed")
    return "; ".join(parts) or None


def sessions_dir(state_dir: str | Path, agent_id: str = "main") -> Path:
    """Return ``<stateDir>/agents/<agentId>/sessions``."""
    return Path(state_dir).expanduser() / "agents" / agent_id / "sessions"


def list_session_files(directory: str | Path) -> list[Path]:
    """List the regular ``*.jsonl`` files of a sessions directory, sorted; symlinks are skipped."""
    root = Path(directory)
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*.jsonl") if p.is_file() and not p.is_symlink())


def extract_message_text(content: Any) -> str:
    """Return the text of a message's content: a string, or the ``{"type": "text"}`` parts.

    Whitespace is collapsed to single spaces; anything else yields ``""``.
    """
    if isinstance(content, str):
        pieces = [content]
    elif isinstance(content, list):
        pieces = [
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ]
    else:
        return ""
    return " ".join(" ".join(pieces).split())


def _message_line(raw: str) -> str | None:
    found = _message(raw)
    return None if found is None else _render(*found)


def _render(label: str, text: str) -> str:
    """``Label: text`` with secrets redacted: a line of the indexed document."""
    # Redacting the single line keeps the line map exact: redact() never adds newlines.
    line = f"{label}: {redact(text)}"
    # JSON may carry lone surrogates ("\\ud800"), which no UTF-8 store or provider accepts.
    return line.encode("utf-8", "replace").decode("utf-8")


def _message(raw: str) -> tuple[str, str] | None:
    """``(label, text)`` of a JSONL line holding a user or assistant message with text, else None."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "message":
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    label = _ROLE_LABELS.get(role) if isinstance(role, str) else None
    if label is None:
        return None
    text = extract_message_text(message.get("content"))
    return (label, text) if text else None


#: A transcript is read this many bytes at a time where only its lines are counted.
READ_BLOCK = 1 << 20
#: The UTF-8 byte order mark a transcript's first line may start with.
BOM = b"\xef\xbb\xbf"


@attrs.frozen(kw_only=True)
class TranscriptMark:
    """Where a read of a transcript stopped, at the end of a whole line, with what a read going on from there needs.

    ``dev``/``ino``: the file read; ``size``: the bytes read (all of them whole lines), ``lines`` of them;
    ``hash``/``head``: their content (sha256) and head hashes. ``messages``, ``long_lines``, ``raw`` and ``rendered`` are the read's counts
    and the message text's bytes before and after redaction; a mark is only made while no message was left out
    (``limit``: the ``max_bytes`` read with).
    """

    dev: int
    ino: int
    size: int
    lines: int
    hash: str
    head: str
    messages: int
    long_lines: int
    raw: int
    rendered: int
    limit: int

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> TranscriptMark | None:
        """The mark ``data`` (:meth:`to_dict`) describes, or None when it is not one."""
        if not isinstance(data, dict):
            return None
        try:
            mark = cls(**data)
        except TypeError:
            return None
        fields = attrs.fields_dict(cls)
        ok = all(isinstance(getattr(mark, name), int if field.type in ("int", int) else str)
                 for name, field in fields.items())
        return mark if ok else None


@attrs.define
class TranscriptScan:
    """Reads a transcript a line at a time, so memory holds one line, never the file.

    After :meth:`messages` has run to the end: ``size`` bytes were read, ``newlines`` of them ``\\n``,
    ``content_hash`` their sha256, ``head_hash`` the sha256 of their first ``HEAD_BYTES``;
    ``long_lines`` counts the lines longer than ``max_line_bytes``, skipped unread (their bytes still
    counted and hashed).
    """

    name: str
    max_line_bytes: int | None = None
    size: int = 0
    newlines: int = 0
    long_lines: int = 0
    skipped: int = 0
    #: JSONL lines read (a last one without its ``\\n`` counted).
    lines: int = 0
    #: Whether the bytes read end with a whole line (or there are none).
    whole_lines: bool = True
    _sha: Any = attrs.field(factory=hashlib.sha256)
    _head: bytes = b""

    @property
    def content_hash(self) -> str:
        return self._sha.hexdigest()

    @property
    def head_hash(self) -> str:
        return head_hash(self._head)

    def _take(self, piece: bytes) -> None:
        self._sha.update(piece)
        if len(self._head) < HEAD_BYTES:
            self._head += piece[: HEAD_BYTES - len(self._head)]
        self.size += len(piece)
        if piece:
            self.whole_lines = piece.endswith(b"\n")

    def resume(self, fh: BinaryIO, mark: TranscriptMark) -> bool:
        """Take up the read ``mark`` describes on ``fh`` (the same file, opened anew): True when the ``mark.size``
        bytes read then hash as they did (all of them: a byte rewritten anywhere in them, the file also grown, makes
        the read start over), with ``fh`` then at ``mark.size``; False (nothing taken) otherwise.

        Hashing them again costs a read of the file (~15 ms per 10 MB), not its parsing, redaction or chunking."""
        if mark.size < 0:
            return False
        sha, head, left, last = hashlib.sha256(), b"", mark.size, b""
        while left:
            piece = fh.read(min(left, 1 << 20))
            if not piece:
                return False
            sha.update(piece)
            if len(head) < HEAD_BYTES:
                head += piece[: HEAD_BYTES - len(head)]
            left -= len(piece)
            last = piece
        if sha.hexdigest() != mark.hash or head_hash(head) != mark.head or mark.size and not last.endswith(b"\n"):
            return False
        self._sha, self._head = sha, head
        self.size, self.newlines, self.lines, self.whole_lines = mark.size, mark.lines, mark.lines, True
        return True

    def mark(self, fh: BinaryIO, *, messages: int, long_lines: int, raw: int, rendered: int,
             limit: int) -> TranscriptMark | None:
        """Where this read stopped (:class:`TranscriptMark`), or None when it stopped inside a line."""
        if not self.whole_lines:
            return None
        st = os.fstat(fh.fileno())
        return TranscriptMark(dev=st.st_dev, ino=st.st_ino, size=self.size, lines=self.lines, hash=self.content_hash,
                              head=self.head_hash, messages=messages,
                              long_lines=long_lines, raw=raw, rendered=rendered, limit=limit)

    def messages(self, fh: BinaryIO) -> Iterator[tuple[int, str]]:
        """``(JSONL line number, "User: …" / "Assistant: …")`` of each message line of ``fh``, in order."""
        for number, label, text in self.raw_messages(fh):
            yield number, _render(label, text)

    def raw_messages(self, fh: BinaryIO) -> Iterator[tuple[int, str, str]]:
        """``(JSONL line number, label, text)`` of each message line of ``fh``, in order; the text not redacted."""
        limit = self.max_line_bytes
        number = self.lines
        while True:
            raw = fh.readline() if limit is None else fh.readline(limit + 1)
            if not raw:
                break
            number += 1
            self.lines = number
            self._take(raw)
            if not raw.endswith(b"\n") and limit is not None and len(raw) > limit:
                # Longer than any line kept: read on to its end without keeping it.
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(READ_BLOCK)
                    self._take(raw)
                self.long_lines += 1
                if raw:
                    self.newlines += 1
                continue
            if raw.endswith(b"\n"):
                self.newlines += 1
            if number == 1 and raw.startswith(BOM):  # written with a byte order mark: JSON refuses one
                raw = raw[len(BOM):]
            text = raw.rstrip(b"\n").decode("utf-8", errors="replace")
            if not text.strip():
                continue
            try:
                found = _message(text)
            except Exception as exc:  # one odd record must never cost the rest of the transcript
                log.warning("%s line %d: skipped (%s: %s)", self.name, number, type(exc).__name__, exc)
                found = None
            if found is None:
                self.skipped += 1
                continue
            yield number, *found
        if self.skipped:
            log.debug("%s: skipped %d non-message or invalid lines", self.name, self.skipped)


def _document(scan: TranscriptScan, kept: Collection[tuple[int, str] | tuple[int, str, int]], *, messages: int,
              dropped: int = 0, long_lines: int = 0, mark: TranscriptMark | None = None,
              since: TranscriptMark | None = None) -> SessionDocument:
    """The document of the transcript ``scan`` read: the text of the ``kept`` (line number, message line, ...)."""
    return SessionDocument(
        path=f"{SESSIONS_PREFIX}/{scan.name}",
        text="\n".join(k[1] for k in kept),
        line_map=tuple(k[0] for k in kept),
        size=scan.size,
        newlines=scan.newlines,
        content_hash=scan.content_hash,
        head_hash=scan.head_hash,
        messages=messages,
        dropped=dropped,
        long_lines=long_lines,
        mark=mark,
        since=since,
    )


def parse_session_bytes(data: bytes, name: str) -> SessionDocument:
    """Parse transcript bytes; ``name`` is the file name (``abc.jsonl``)."""
    scan = TranscriptScan(name)
    found = list(scan.messages(io.BytesIO(data)))
    return _document(scan, found, messages=len(found))


def parse_session_file(path: str | Path) -> SessionDocument:
    """Read and parse one transcript file (read once, so size and text agree)."""
    p = Path(path)
    return parse_session_bytes(p.read_bytes(), p.name)


def read_transcript(abs_path: str, *, max_bytes: int,
                    since: TranscriptMark | None = None) -> tuple[SessionDocument, os.stat_result]:
    """The newest messages of the transcript at ``abs_path`` whose text fits in ``max_bytes`` UTF-8 bytes.

    The file is read a line at a time (opened as :func:`~symi_memory.workspace.read_regular` opens it), so
    memory holds at most ``max_bytes`` of message text plus one line, whatever the file's size. All of a
    transcript whose messages fit is kept; of a longer one, the oldest messages are left out
    (``dropped``), and a line longer than ``max_bytes`` is skipped (``long_lines``). ``size``, ``newlines``
    and the hashes describe every byte read. Returns the document and the file's ``fstat``.

    With ``since`` (the ``mark`` of an earlier read of this path), only the bytes after it are read when the file
    only grew since: the same file (device and inode), larger (one as large was rewritten or only touched: there is
    nothing to read on, and bytes rewritten in place far from the end would go unseen), its first ``HEAD_BYTES``
    and its last read block unchanged, the earlier read ending with a whole line, made with this ``max_bytes``, and
    no message left out now either. The document then holds only the new messages (``since`` set); its counts, size and
    hashes describe the whole file, exactly as a whole read would. On any doubt the whole file is read.
    """
    from .workspace import open_regular

    name = os.path.basename(abs_path)
    fh, st = open_regular(abs_path)
    with fh:
        if since is not None and since.limit == max_bytes and (st.st_dev, st.st_ino) == (since.dev, since.ino) \
                and st.st_size > since.size:
            doc = _read_after(fh, name, since, max_bytes)
            if doc is not None:
                return doc, st
            fh.seek(0)
        return _read_whole(fh, name, max_bytes), st


@attrs.define
class TranscriptRead:
    """A transcript opened to be read one message at a time, all of its messages (:func:`open_transcript`).

    :meth:`lines` yields ``(JSONL line, "User: …" line, its UTF-8 bytes + 1)`` of each message a read keeps: as
    :func:`read_transcript` reads them, a message whose text alone exceeds ``max_bytes`` (before or after redaction)
    left out and counted in ``long_lines``, but no older message left out for a newer one (the reader decides what
    to keep). ``since``: the mark this read went on from (only the messages after it are yielded), None for a read
    of the whole file. Use as a context manager (it closes the file).
    """

    fh: BinaryIO
    stat: os.stat_result
    scan: TranscriptScan
    max_bytes: int
    since: TranscriptMark | None = None
    #: Messages kept and their bytes (``size`` of each), with those before ``since``.
    messages: int = 0
    rendered: int = 0
    _too_long: int = 0

    def __enter__(self) -> TranscriptRead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()

    @property
    def long_lines(self) -> int:
        """Lines left out for their length, of the whole file."""
        return (self.since.long_lines if self.since else 0) + self.scan.long_lines + self._too_long

    def lines(self) -> Iterator[tuple[int, str, int]]:
        max_bytes = self.max_bytes
        for number, label, text in self.scan.raw_messages(self.fh):
            if _cost(label, text) - 1 > max_bytes:  # redacting only shortens it so far: not rendered at all
                self._too_long += 1
                continue
            line = _render(label, text)
            size = len(line.encode("utf-8")) + 1
            if size - 1 > max_bytes:
                self._too_long += 1
                continue
            self.messages += 1
            self.rendered += size
            yield number, line, size

    def mark(self) -> TranscriptMark | None:
        """Where this read stopped (after :meth:`lines` ran to the end), or None when it stopped inside a line."""
        return self.scan.mark(self.fh, messages=self.messages, long_lines=self.long_lines, raw=self.rendered,
                              rendered=self.rendered, limit=self.max_bytes)


def open_transcript(abs_path: str, *, max_bytes: int, since: TranscriptMark | None = None) -> TranscriptRead:
    """The transcript at ``abs_path`` opened to be read a message at a time (:class:`TranscriptRead`).

    With ``since`` (the :meth:`TranscriptRead.mark` of an earlier read of this path), only the bytes after it are
    read when the file only grew since, on the conditions :func:`read_transcript` sets (the same file, larger, every
    byte read then unchanged, read with this ``max_bytes``); whatever the messages' total. Else the whole file.
    """
    from .workspace import open_regular

    fh, st = open_regular(abs_path)
    try:
        name = os.path.basename(abs_path)
        scan = TranscriptScan(name, max_line_bytes=max_bytes)
        if since is not None and since.limit == max_bytes and (st.st_dev, st.st_ino) == (since.dev, since.ino) \
                and st.st_size > since.size:
            if scan.resume(fh, since):
                return TranscriptRead(fh, st, scan, max_bytes, since, since.messages, since.rendered)
            fh.seek(0)
            scan = TranscriptScan(name, max_line_bytes=max_bytes)
        return TranscriptRead(fh, st, scan, max_bytes)
    except BaseException:
        fh.close()
        raise


def _cost(label: str, text: str) -> int:
    """The bytes ``label: text`` takes before redaction, with the ``\\n`` joining it."""
    return len(label) + 3 + len(text.encode("utf-8", "replace"))


def _read_whole(fh: BinaryIO, name: str, max_bytes: int) -> SessionDocument:
    scan = TranscriptScan(name, max_line_bytes=max_bytes)
    raw: deque[tuple[int, str, str, int]] = deque()
    total = count = too_long = 0
    # Redacting costs more than the rest of the parse: only the messages kept are redacted, at the end.
    for number, label, text in scan.raw_messages(fh):
        count += 1
        cost = _cost(label, text)
        if cost - 1 > max_bytes:
            # A line within the limit whose text is not (bytes not UTF-8 read as U+FFFD, three bytes each):
            # left out as a longer line is, not taking every older message out with it.
            too_long += 1
            continue
        raw.append((number, label, text, cost))
        total += cost
        while total - 1 > max_bytes:
            total -= raw.popleft()[3]
    raw_total, raw_dropped = total, count - too_long - len(raw)
    kept: deque[tuple[int, str, int]] = deque()
    total = 0
    while raw:  # emptied as it is rendered: memory holds the limit's worth of text once, not twice
        number, label, text, _ = raw.popleft()
        line = _render(label, text)
        size = len(line.encode("utf-8")) + 1
        if size - 1 > max_bytes:  # lengthened past the limit by redaction: alone, as above
            too_long += 1
            continue
        kept.append((number, line, size))
        total += size
    while total - 1 > max_bytes:  # redaction may lengthen a line: the limit holds for the text indexed
        total -= kept.popleft()[2]
    messages, dropped = count - too_long, count - too_long - len(kept)
    long_lines = scan.long_lines + too_long
    mark = None if dropped or raw_dropped else scan.mark(fh, messages=messages, long_lines=long_lines, raw=raw_total,
                                                         rendered=total, limit=max_bytes)
    return _document(scan, kept, messages=messages, dropped=dropped, long_lines=long_lines, mark=mark)


def _read_after(fh: BinaryIO, name: str, since: TranscriptMark, max_bytes: int) -> SessionDocument | None:
    """The messages after ``since`` (:func:`read_transcript`), or None when the whole file must be read."""
    scan = TranscriptScan(name, max_line_bytes=max_bytes)
    if not scan.resume(fh, since):
        return None
    raw_total, rendered, too_long, count = since.raw, since.rendered, 0, 0
    kept: list[tuple[int, str]] = []
    for number, label, text in scan.raw_messages(fh):
        count += 1
        cost = _cost(label, text)
        if cost - 1 > max_bytes:
            too_long += 1
            continue
        # A whole read counts it against the limit before redacting, even when redaction then takes it out.
        raw_total += cost
        if raw_total - 1 > max_bytes:
            return None  # older messages leave the document now: only a whole read knows which
        line = _render(label, text)
        size = len(line.encode("utf-8")) + 1
        if size - 1 > max_bytes:
            too_long += 1
            continue
        rendered += size
        if rendered - 1 > max_bytes:
            return None
        kept.append((number, line))
    messages = since.messages + count - too_long
    long_lines = since.long_lines + scan.long_lines + too_long
    return _document(scan, kept, messages=messages, long_lines=long_lines, since=since,
                     mark=scan.mark(fh, messages=messages, long_lines=long_lines, raw=raw_total, rendered=rendered,
                                    limit=max_bytes))


def count_newlines(abs_path: str) -> int:
    """How many ``\\n`` the regular file at ``abs_path`` holds, read a block at a time."""
    from .workspace import open_regular

    fh, _ = open_regular(abs_path)
    n = 0
    with fh:
        while block := fh.read(READ_BLOCK):
            n += block.count(b"\n")
    return n


#: The times a message may carry (epoch seconds): days every ``datetime`` can show, in any time zone.
_FIRST_STAMP = -62_135_510_400.0  # 0001-01-02T00:00:00Z
_LAST_STAMP = 253_402_128_000.0  # 9999-12-30T00:00:00Z


def epoch_seconds(value: float) -> float:
    """An epoch timestamp in seconds, from seconds, milliseconds, microseconds or nanoseconds.

    The unit is told by the size (any date from 1973 to 5138 reads right): above 1e17 nanoseconds,
    above 1e14 microseconds, above 1e11 milliseconds, else seconds.
    """
    if value > 1e17:
        return value / 1e9
    if value > 1e14:
        return value / 1e6
    if value > 1e11:
        return value / 1e3
    return float(value)


def message_times(directory: str | Path, path: str, start_line: int, end_line: int, *,
                  max_line_bytes: int | None = None) -> tuple[float, float] | None:
    """``(first, last)`` ``timestamp`` of the transcript records on JSONL lines ``start_line..end_line``.

    ``path`` is the stored ``sessions/<file>.jsonl``. Timestamps are ISO
    datetimes (``2026-03-01T10:00:00Z``) or epoch seconds, milliseconds, microseconds or
    nanoseconds (:func:`epoch_seconds`);
    None when no record in the range has one. Lines are counted as the indexer counts them (``\\n`` ends one);
    a line longer than ``max_line_bytes`` (the indexer's ``sync.maxFileBytes``: it indexed none of it) is passed
    over unread, so memory holds one line of at most that, never a huge one whole.
    """
    from datetime import UTC, datetime

    name = path[len(SESSIONS_PREFIX) + 1:] if path.startswith(SESSIONS_PREFIX + "/") else None
    if not name or "/" in name:
        return None
    stamps: list[float] = []
    limit = -1 if max_line_bytes is None else max_line_bytes + 1
    try:
        # Opened as the indexer reads it: a transcript swapped for a FIFO since the sync must not hang the search,
        # nor one swapped for a symlink be read through it.
        fd = os.open(Path(directory) / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            number = 0
            while number < end_line:
                # Lines before the range are only counted: read a block at a time, never kept whole.
                raw = fh.readline(READ_BLOCK if number + 1 < start_line else limit)
                if not raw:
                    break
                if not raw.endswith(b"\n"):
                    if number + 1 < start_line or (max_line_bytes is not None and len(raw) > max_line_bytes):
                        while raw and not raw.endswith(b"\n"):  # read on to its end without keeping it
                            raw = fh.readline(READ_BLOCK)
                        number += 1
                        continue
                number += 1
                if number < start_line:
                    continue
                if number == 1 and raw.startswith(BOM):
                    raw = raw[len(BOM):]
                try:
                    value = json.loads(raw.decode("utf-8", errors="replace")).get("timestamp")
                except Exception:  # any line (nested too deep for the decoder, not an object) is only skipped
                    continue
                seconds: float | None = None
                if isinstance(value, int | float) and not isinstance(value, bool):
                    try:
                        seconds = epoch_seconds(value)
                    except OverflowError:  # an integer of hundreds of digits: no clock wrote it
                        continue
                elif isinstance(value, str):
                    try:
                        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
                    except ValueError:
                        continue
                    seconds = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
                # NaN, infinity and times outside the calendar (which no date can show) are left out.
                if seconds is not None and _FIRST_STAMP <= seconds <= _LAST_STAMP:
                    stamps.append(seconds)
    except OSError:
        return None
    return (min(stamps), max(stamps)) if stamps else None
