"""When a memory was written: dated file names, line order, mtimes, dates a line states about itself.

Shared by the supersession post-processor, ``as of`` search and dedup on
write, so every backend dates memory the same way. Times are epoch seconds;
a "moment" is a sortable ``(seconds, path, line)`` tuple so that lines of one
file keep their order (later lines are newer).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = [
    "DAY",
    "HISTORY_HEADING_RE",
    "file_date",
    "is_dated",
    "line_dates",
    "line_moment",
    "mentions_after",
    "parse_date",
]

DAY = 86_400.0

DATE_FILE_RE = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})(?:[-_.][^/]*)?\.md$")
DATE_RE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# A line that says it is about the past: "Previous dentist: ...", "Until 2026-06-20 the router was ...".
HISTORICAL_RE = re.compile(
    r"\b(?:previous(?:ly)?|former(?:ly)?|until|used to|no longer|old (?:address|number|setup|value)|"
    r"retired|replaced by|was replaced|superseded|before the (?:swap|move|change))\b",
    re.IGNORECASE,
)
HISTORY_HEADING_RE = re.compile(r"^#{1,6}\s*(?:history|previously|archive[d]?|old|past|changelog|superseded)\b",
                                re.IGNORECASE)
# "- 2026-05-01: kickoff" / "v0.1.0 — 2026-05-27: first read-out": the line dates itself.
LEADING_DATE_RE = re.compile(r"^\s*(?:[-*+]\s*)?(?:\S+\s+[—–-]\s+)?(\d{4}-\d{2}-\d{2})\b")


def parse_date(value: str) -> float | None:
    """Epoch seconds (UTC midnight) of ``YYYY-MM-DD``, else None."""
    m = DATE_RE.fullmatch(value.strip())
    if not m:
        return None
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC).timestamp()
    except ValueError:
        return None


def file_date(path: str) -> float | None:
    """Epoch seconds (UTC midnight) of a dated note under ``memory/``, else None.

    ``memory/2026-02-10.md``, ``memory/2026-02-10-topic.md`` and
    ``memory/sub/2026-02-10.md`` are all dated.
    """
    if not path.startswith("memory/"):
        return None
    m = DATE_FILE_RE.search(path)
    if not m:
        return None
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC).timestamp()
    except ValueError:
        return None


def is_dated(path: str) -> bool:
    return file_date(path) is not None


def line_dates(line: str) -> list[float]:
    """Every valid ``YYYY-MM-DD`` date a line mentions, as epoch seconds."""
    out = []
    for m in DATE_RE.finditer(line):
        try:
            out.append(datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC).timestamp())
        except ValueError:
            pass
    return out


def is_historical(line: str, heading: str | None) -> bool:
    """True for a line that describes a past state (or sits under a "History" heading)."""
    return bool(HISTORICAL_RE.search(line)) or (heading is not None and bool(HISTORY_HEADING_RE.match(heading)))


def line_moment(path: str, line_no: int, line: str, *, heading: str | None, mtime: float | None,
                written: float | None = None) -> tuple[float, int]:
    """When a line was true, as a sortable ``(seconds, line_no)``.

    - a dated note: its date (lines later in the file are newer);
    - ``written``: a known write time (a transcript line's timestamp);
    - a line that dates itself at its start (``- 2026-05-01: kickoff``): that date;
    - a historical line in an undated note ("Previous dentist: ...", under
      "## History"): just before the earliest date it mentions, else the epoch;
    - otherwise the file's mtime (line order within the file).
    """
    if written is not None:
        return (written, line_no)
    dated = file_date(path)
    if dated is not None:
        return (dated, line_no)
    if is_historical(line, heading):
        dates = line_dates(line)
        return ((min(dates) - DAY) if dates else 0.0, line_no)
    lead = LEADING_DATE_RE.match(line)
    if lead:
        stamp = parse_date(lead[1])
        if stamp is not None:
            return (stamp, line_no)
    return (mtime if mtime is not None else 0.0, line_no)


def mentions_after(line: str, as_of: float) -> bool:
    """True when a line mentions a date after ``as_of`` as something that already happened.

    An undated note's line that says "since 2026-08-03" cannot have been
    written on 2026-07-01. Plans ("expected 2026-10-15", "due", "planned")
    are allowed to name later dates.
    """
    if re.search(r"\b(?:expected|planned|due|scheduled|deadline|target|until|will|next)\b", line, re.IGNORECASE):
        return False
    return any(d > as_of + DAY - 1 for d in line_dates(line))
