"""When a memory was written: dated file names, line order, mtimes, dates a line states about itself.

Shared by the supersession post-processor, ``as of`` search and dedup on
write, so every backend dates memory the same way. Times are epoch seconds;
a "moment" is a sortable ``(seconds, path, line)`` tuple so that lines of one
file keep their order (later lines are newer).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

__all__ = [
    "DAY",
    "HISTORY_HEADING_RE",
    "event_dates",
    "file_line_since",
    "file_date",
    "is_dated",
    "line_dates",
    "line_moment",
    "mentions_after",
    "own_moment",
    "parse_date",
]

DAY = 86_400.0

DATE_FILE_RE = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})(?:[-_.][^/]*)?\.md$")
DATE_RE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# A line that says it is about the past: "Previous dentist: ...", "Until 2026-06-20 the router was ...".
# (The look-ahead: the first letters of its words; most positions fail there, before the alternation.)
HISTORICAL_RE = re.compile(
    r"\b(?=[pfunorwsb])(?:previous(?:ly)?|former(?:ly)?|until|used to|no longer|old (?:address|number|setup|value)|"
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


@functools.lru_cache(maxsize=8192)
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
    fixed = own_moment(path, line, heading=heading)
    return (fixed if fixed is not None else (mtime if mtime is not None else 0.0), line_no)


def own_moment(path: str, line: str, *, heading: str | None) -> float | None:
    """The seconds of :func:`line_moment` that the path and the line give (a dated note's date, a past
    state's, a date the line opens with); None when only the file's mtime (or a write time) can date it."""
    dated = file_date(path)
    if dated is not None:
        return dated
    if is_historical(line, heading):
        dates = line_dates(line)
        return (min(dates) - DAY) if dates else 0.0
    lead = LEADING_DATE_RE.match(line)
    if lead:
        return parse_date(lead[1])
    return None


MONTHS = {name: k for k, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), start=1) for name in names}
# "June 2026", "early June 2026", "mid-June 2026", "end of June 2026": a month with its year.
MONTH_DATE_RE = re.compile(r"(?<![\w-])(?:(early|mid|late|end of)[\s-]+)?(" + "|".join(sorted(MONTHS, key=len, reverse=True))
                           + r")\.?\s+(\d{4})(?![\d-])", re.IGNORECASE)
# Words in a date's clause that make it a plan, a deadline or an end ("until 2026-06-20", "expected
# 2026-10-15", "is visiting from 2026-10-02"), not something that had happened when the line was written.
PLAN_RE = re.compile(
    r"\b(?:expected|expect|planned|plans?|planning|due|scheduled|deadline|target|until|till|will|next|by|before|"
    r"aim\w*|goal|booked for|should|wants?|hopes?|would|going to|(?:is|are|am|be)\s+\w+ing)\b", re.IGNORECASE)
CLAUSE_WINDOW = 500  # characters before a date that can say what it is
CLAUSE_END_RE = re.compile(r"[,;:()\u2014\u2013]|\.\s|\s-\s|->|\u2192")


FOUR_DIGITS_RE = re.compile(r"\d{4}")
LETTERS_RE = re.compile(r"[^\W\d_]+")
#: The four non-ASCII letters that match an ASCII one when case is ignored (İ ı: i, ſ: s, K: k): a line
#: without them matches a case-ignoring pattern of ASCII words only where its lowercased text holds the words.
FOLDS_RE = re.compile("[\u0130\u0131\u017f\u212a]")
_MONTH_STARTS = tuple(sorted({name[:3] for name in MONTHS}))


def may_hold(line: str, words: tuple[str, ...]) -> bool:
    """False only when no case-ignoring match of any of ``words`` (ASCII, lowercase) can start in ``line``."""
    return (not line.isascii() and FOLDS_RE.search(line) is not None) or any(w in line.lower() for w in words)


def _dated_spans(line: str) -> list[tuple[int, float]]:
    """``(position, epoch seconds)`` of every ``YYYY-MM-DD`` and "Month YYYY" date in ``line``."""
    out: list[tuple[int, float]] = []
    if not FOUR_DIGITS_RE.search(line):
        return out  # both kinds of date need a year: most lines have none, and the month pattern is slow
    for m in DATE_RE.finditer(line):
        try:
            out.append((m.start(), datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC).timestamp()))
        except ValueError:
            pass
    if not may_hold(line, _MONTH_STARTS):
        return out  # every month name starts with one of these
    for m in MONTH_DATE_RE.finditer(line):
        day = {"early": 1, "mid": 15, "late": 20, "end of": 25}.get((m[1] or "").lower().replace("-", " ").strip(), 1)
        month = MONTHS.get(m[2].lower())  # None for "ſeptember": a long s matches "s" when case is ignored
        try:
            if month is not None:
                out.append((m.start(), datetime(int(m[3]), month, day, tzinfo=UTC).timestamp()))
        except ValueError:  # "May 0000"
            pass
    return out


def event_dates(line: str) -> list[float]:
    """The dates a line records as having happened or as the start of what it states.

    "since 2026-08-03", "decommissioned on 2026-08-17", "- 2026-05-01: kickoff",
    "Production peak (2026-08-04)", "since June 2026" count; a date whose
    clause makes it a plan, a deadline or an end ("until", "expected", "due",
    "is visiting from") does not.
    """
    out = []
    for pos, stamp in _dated_spans(line):
        # What says what a date is stands near it: the look back is bounded, or a long line of dates costs
        # the square of its length (a 100 KB one took minutes).
        before = line[max(0, pos - CLAUSE_WINDOW):pos]
        cut = max((m.end() for m in CLAUSE_END_RE.finditer(before)), default=0)
        clause = before[cut:]
        if len(LETTERS_RE.findall(clause)) < 2:
            clause = before  # "Speaking at the conference (Rotterdam, 2026-10-08)": the whole line says what it is
        if not PLAN_RE.search(clause):
            out.append(stamp)
    return out


def _since(line: str) -> float | None:
    dates = event_dates(line)
    return max(dates) if dates else None


NOW_AFTER_RE = re.compile(r"\d{4}-\d{2}-\d{2}\)?[,;]?\s+(?:and\s+)?now\b", re.IGNORECASE)
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
HEADING_RE = re.compile(r"^(#{1,6})\s")
LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)]|\|)\s")
INTRO_RE = re.compile(r"\b(?:since|as of|updated|last (?:checked|updated|reviewed)|current(?:ly)?)\b", re.IGNORECASE)


def file_line_since(text: str) -> dict[int, float]:
    """``{line number: earliest date}`` for the lines of an undated note that a heading or an intro dates.

    A heading that names a date ("## 2026-05-02", "## May 2026",
    "## Versions (last checked 2026-08-28)") dates the lines under it, down
    to the next heading of its level or above; a prose line that opens a
    section or the note and says since when it holds ("Current setup since
    the router swap on 2026-06-20.") dates the rest of that section (the
    whole note, for the note's opening). A "History" section and historical
    lines ("Until 2026-06-20 the router was ...") inherit nothing: they
    describe the past. Line numbers are 1-based.
    """
    out: dict[int, float] = {}
    # (level, date) of the enclosing sections that carry a date; level 0 is the note's opening.
    scopes: list[tuple[int, float]] = []
    history_level: int | None = None
    level = 0
    opening = True  # no content line yet under the current heading
    for n, raw in enumerate(text.split("\n"), start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        h = HEADING_RE.match(stripped)
        if h:
            level = len(h[1])
            scopes = [(lv, d) for lv, d in scopes if lv < level or (lv == 0 and level > 1)]
            if history_level is not None and level <= history_level:
                history_level = None
            if HISTORY_HEADING_RE.match(stripped):
                history_level = level
            elif level > 1 or scopes == []:
                stamp = _since(stripped.lstrip("#"))
                if stamp is not None and level > 1:
                    scopes.append((level, stamp))
            opening = True
            continue
        if history_level is not None:
            continue
        if opening and not LIST_RE.match(raw):
            # Sentence by sentence: "Current setup since the swap on 2026-06-20. The old setup is below."
            for sentence in SENTENCE_RE.split(stripped):
                stamp = _since(sentence) if INTRO_RE.search(sentence) and not is_historical(sentence, None) else None
                if stamp is not None:
                    scopes.append((0 if level <= 1 else level, stamp))
                    break
        opening = False
        if scopes and not is_historical(stripped, None):
            out[n] = max(d for _, d in scopes)
    return out


@functools.lru_cache(maxsize=16384)
def line_since(line: str, inherited: float | None = None) -> float | None:
    """The earliest a line can have been written: the latest date it records as having happened, or the date
    its heading or section intro gives it (``inherited``). None for a historical line and an undated one."""
    if is_historical(line, None) and len(SENTENCE_RE.split(line)) == 1:
        # "manager until 2026-07-03, now in the Platform group": says what came after, so written after it.
        ends = line_dates(line) if NOW_AFTER_RE.search(line) else []
        return max(ends) if ends else None
    # Sentence by sentence: "Current setup since the swap on 2026-06-20. The old setup is below."
    owns = [d for sentence in SENTENCE_RE.split(line) if not is_historical(sentence, None)
            if (d := _since(sentence)) is not None]
    own = max(owns) if owns else None
    if own is None:
        return inherited
    return own if inherited is None else max(own, inherited)


def mentions_after(line: str, as_of: float) -> bool:
    """True when a line mentions a date after ``as_of`` as something that already happened.

    An undated note's line that says "since 2026-08-03" cannot have been
    written on 2026-07-01. Plans ("expected 2026-10-15", "due", "planned")
    are allowed to name later dates.
    """
    if re.search(r"\b(?:expected|planned|due|scheduled|deadline|target|until|will|next)\b", line, re.IGNORECASE):
        return False
    return any(d > as_of + DAY - 1 for d in line_dates(line))
