"""Same-thing detection: which memories restate (or change) which, and which of them is current.

Two memories state the same thing when their chunks' stored vectors are
close *and* a line of each shares enough salient terms (names, identifiers,
the words around numbers) with the other, judged line by line so that a
note which only partly restates an older chunk still counts. The newer one
(see :mod:`symi_memory.chronology`) is current; the older is superseded.

The supersession post-processor, dedup on write and ``history`` use this
module, and every threshold lives in :data:`THRESHOLDS`.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
import zlib
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from .chronology import (
    DAY,
    FOLDS_RE,
    HISTORICAL_RE,
    HISTORY_HEADING_RE,
    LEADING_DATE_RE,
    event_dates,
    file_date,
    is_historical,
    line_dates,
    line_moment,
    line_since,
    parse_date,
)

__all__ = ["THRESHOLDS", "Line", "forget_lines", "answered_later", "as_of_state", "closest_lines", "identifiers", "LINE_ANALYSIS_VERSION", "line_analysis", "lines_from_analysis", "remembered_lines", "value_starts", "best_lines", "conflicting", "quantities", "query_score", "term_weights", "asks_about_past", "asks_about_now", "names_old_value", "calendar_days", "rescheduled", "restates", "units_by_line", "same_thing", "states_change", "values", "Thresholds", "cosine", "focus_lines", "line_overlap", "salient", "split_lines", "versions", "written_after", "gives_new_measure", "ended_names", "hands_over", "stage", "later_stage", "moves_on", "may_move_on", "case_stage", "disposed_things", "disposes", "disposing_lines", "lower_words", "plain_chunk", "plain_chunks", "may_name_move", "PLAIN_FACT", "PLAIN_VERSION", "plain_fact", "plain_of_fact"]


@attrs.frozen(kw_only=True)
class Thresholds:
    """Every tuning knob of same-thing detection, in one place.

    ``chunk_vector``: least cosine between two chunks' stored vectors for them
    to be candidates for the same thing, when their lines have no vectors of
    their own. ``line_vector``: with line vectors (``chunking.units``), the
    least cosine of the two lines' vectors, and ``chunk_vector_lines`` the
    least cosine of their chunks'; ``conflict_line_vector``: the least line
    cosine instead when the two lines give a quantity of the same kind with
    different values (standup at 09:45, then at 09:15: 0.45 apart by
    meaning; fit on devmem and convmem together, 0.3 gave the same figures).
    ``answer_margin``: with the query's vector
    too, a hit is superseded only through its lines whose cosine with the
    query is within this of its best line's (instead of ``best_share``). ``conflict_cover``: two lines giving
    different quantities of one kind (09:45, then 10:00) state the same thing
    when the newer one holds at least this share of the older one's weighted
    query terms. ``best_share``: a hit counts as superseded only through its
    lines whose weighted query terms reach this share of its best line's
    (1.0: only its best lines; 0.6 on devmem + convmem caught more stale
    lines but cost convmem MRR 0.01 more). ``line_terms``/``line_overlap``:
    least shared salient terms (count, and share of the smaller line's terms)
    between a line of each; ``restate_overlap``: the share above which a
    line restates the other outright. ``score_ratio``: a newer hit scoring
    below this share of the older one's score is about something else for
    this query and demotes nothing (0.5, fit with ``line_vector`` 0.6 and
    ``window`` 20 on devmem and convmem together; 0.25 let weak newer hits
    push answers out of the top ten on convmem). ``conflict_score_ratio``:
    a newer hit scoring between this share and ``score_ratio`` of the
    older one's still demotes it when its line says the older line's
    measured quantity changed (a change word and a different value with a
    unit: 1000 IU, then "raised to 2000 IU") or moved a plan's day
    (:func:`rescheduled`), their lines' cosine reaching ``line_vector``
    (0.1, fit on devmem and convmem: 0.3 left a rebooked flight, scoring
    0.23 of the first booking, below it; 0.3 and 0.2 gave the same figures
    before moved days counted; without the unit, clock times of unrelated
    events demoted answers). The same two bounds (this share, ``conflict_line_vector``) let a newer line that says
    the older line's state moved on demote it (:func:`moves_on`: the person it names leaves the role, its case
    reached a later stage, or one no longer has the thing it names: :func:`disposes`). ``promote``: the current version also
    takes the score of the best older version it supersedes in a present search (off: on devmem and convmem it
    cost hit@5, paraphrase MRR and stale>gold); an "as of" search always does it (it gained an answer there
    and cost none), and so does a question asking about now in so many words (:func:`asks_about_now`). ``demote``: a superseded hit's score becomes the
    current hit's score times this, so it ranks just below it.
    ``moved_line_vector``/``moved_cover``: two lines that give a plan's day (:func:`rescheduled`: a visit
    from 2026-09-10, then from 2026-10-02) state the same thing when their line cosine reaches this and the
    newer one holds every weighted query term the older one does (``moved_cover`` 1.0: a summer holiday's
    dates are not moved by the autumn holiday's) or gives the same value of another quantity ("10% of
    carriers on 07-15", then "go-live ... with 10% of carriers" on 07-28). 0.45: the draft and confirmed
    cutover lines are 0.58 apart by meaning; 0.45 and 0.6 gave the same figures otherwise.
    ``subject_line_vector``: two lines that share none of the query's words are still about its subject when
    their own vectors are this close (0.7: the dev set's "Sourdough: fed Gert 1:5:5 ..." and "Gert: now feeding
    1:10:10 ... instead of 1:5:5" are 0.74 apart; the least cosine of any pair judged the same thing is 0.6).
    ``remeasure_spread``: a newer line on a later day that gives another value of a measured quantity of the older
    line, in the same unit and shape, within this share of the old value (13.6 kg, then 13.2 kg at a vet check),
    and names the question's subject where the older line does, measures it again (:func:`remeasured`): it
    supersedes without a change word, also from a hit down to ``conflict_score_ratio`` of the older one's score
    and lines only ``conflict_line_vector`` apart, and without holding half the older line's query words. 0.25:
    a 40 mg tablet and an 8 mg one, or a 14,400 pound target and a 1,046 pound payment, are other things measured
    (without the bound convmem lost c012 and c169 their answers).
    ``as_of_undated``: in an "as of" search, the score factor of hits from
    undated notes changed after the as-of date (their lines' dates are unknown); twice (0.36) when the hit's
    lines closest to the query by meaning all record being written after the date (:func:`answered_later`). ``as_of_answer_share``: in
    an "as of" search, a line of an undated note closest to the query by meaning counts among the lines the hit
    answers with (whose dates say whether it existed then) only when its weighted query terms reach this share
    of those of the note's line holding most of them.
    ``dup_*``: dedup on write: how many hits are looked at, the least
    calibrated 0..1 search score of a hit worth comparing, and how close
    (cosine of the new text and a stored line, and their term overlap) a
    restatement is (``dup_lexical``: the overlap alone, without vectors);
    ``dup_lines``: how many stored lines (most words in common first) are
    embedded and compared. New text that says something changed ("moved
    to", "raised", "from April") with values the stored line lacks is never
    a restatement.
    ``window``: how many of the best candidates are compared (a whole number, 0 or more: 0 compares none; a
    negative or fractional one raises ValueError or TypeError when the thresholds are made).
    ``change_*``: how close a stored line must be for new text with
    different values to count as changing it (``change_marked_vector`` when
    the new text says that something changed: "moved to", "now", "instead").
    """

    chunk_vector: float = 0.4
    line_vector: float = 0.6
    conflict_line_vector: float = 0.4
    moved_line_vector: float = 0.45
    subject_line_vector: float = 0.7
    remeasure_spread: float = 0.25
    moved_cover: float = 1.0
    chunk_vector_lines: float = 0.3
    answer_margin: float = 0.05
    conflict_cover: float = 0.5
    best_share: float = 1.0
    line_terms: int = 2
    line_overlap: float = 0.3
    restate_overlap: float = 0.75
    score_ratio: float = 0.5
    conflict_score_ratio: float = 0.1
    demote: float = 0.98
    promote: bool = False
    window: int = attrs.field(default=20, validator=[attrs.validators.instance_of(int), attrs.validators.ge(0)])
    as_of_undated: float = 0.6
    as_of_answer_share: float = 0.5
    dup_hits: int = 5
    dup_min_score: float = 0.02
    dup_lines: int = 12
    dup_vector: float = 0.76
    dup_overlap: float = 0.3
    dup_lexical: float = 0.6
    change_vector: float = 0.6
    change_marked_vector: float = 0.45
    change_overlap: float = 0.2


THRESHOLDS = Thresholds()

TOKEN_RE = re.compile(r"\d+(?:[.:,/-]\d+)*|[^\W\d_]+|\w+", re.UNICODE)
# TOKEN_RE for an ASCII line (the same tokens; a quarter faster).
ASCII_TOKEN_RE = re.compile(r"\d+(?:[.:,/-]\d+)*|[a-zA-Z]+|\w+", re.ASCII)
PAST_QUERY_RE = re.compile(
    r"\b(?:did|was|were|had|back in|ago|originally|used to|before|at first|last (?:year|month|week|time)|"
    r"in (?:early |mid-?|late |the (?:start|middle|end) of )?(?:january|february|march|april|may|june|july|august|september|october|november|december))\b|"
    r"\d{4}-\d{2}-\d{2}", re.IGNORECASE)
CHANGE_RE = re.compile(  # the look-ahead: the first letters of its words (most positions fail there)
    r"\b(?=[nmcirsfaubldqe])(?:now|new|newly|moved?|changed?|instead|replaced?|replacing|no longer|switched|since|from now|anymore|"
    r"updated?|became|reached|retir\w*|swap\w*|sold|bought|cancell?ed|starting|from (?:now|today|then) on|"
    r"raised|lowered|increased|decreased|reduced|dropped|stopped|quit|ended|"
    r"from (?:january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|next))\b",
    re.IGNORECASE)
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing done down during each few for from further had has have having he her here hers
him his how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours
out over own same she should so some such than that the their them then there these they this those through to too
under up very was we were what when where which while who whom why will with would you your yours am pm get got
us myself ourselves yourself yourselves himself herself themselves
which whats what's use used using one two new now currently current today still again anymore any much many
""".split())


def _stem(tok: str) -> str:
    t = tok.lower()
    if t[:1].isdigit():
        return t
    for suffix in ("ing", "ed", "es", "s"):
        if len(t) > len(suffix) + 3 and t.endswith(suffix):
            t = t[: -len(suffix)]
            break
    return t[:7]


def salient(text: str) -> frozenset[str]:
    """Stemmed content words, names, identifiers and numbers of ``text``."""
    return _salient_of(TOKEN_RE.findall(text))


def _salient_of(tokens: Sequence[str]) -> frozenset[str]:
    return frozenset({term for tok in set(tokens) if (term := _TOKENS[tok][0]) is not None})


def _salient_term(tok: str) -> str | None:
    low = tok.lower()
    if low in STOPWORDS or (len(low) < 2 and not low.isdigit()):
        return None
    return sys.intern(_stem(low))


def values(text: str) -> frozenset[str]:
    """Numbers, times, identifiers and capitalised names: what changes when a fact changes."""
    return _values_of(TOKEN_RE.findall(text))


def _values_of(tokens: Sequence[str]) -> frozenset[str]:
    if not tokens:
        return frozenset()
    out = {v for tok in set(tokens[1:]) if (v := _TOKENS[tok][2]) is not None}
    first = _TOKENS[tokens[0]][1]
    if first is not None:
        out.add(first)
    return frozenset(out)


def _value(tok: str) -> tuple[str | None, str | None]:
    """What ``tok`` adds to :func:`values` as the first token of a line, and later in it."""
    # A capital on the first word only starts the sentence; it does not make a name.
    if any(ch.isdigit() for ch in tok):
        return tok.lower(), tok.lower()
    return None, (tok.lower() if tok[:1].isupper() and tok.lower() not in STOPWORDS else None)


# The words a match of chronology.HISTORICAL_RE (bit 1) or CHANGE_RE (bit 2) starts with: a line none of whose
# tokens, lowercased, is one of them (or starts like retir\w*, swap\w*) has no match, unless it holds one of
# the four non-ASCII letters that match an ASCII one when case is ignored (chronology.FOLDS_RE).
_HISTORICAL_WORDS = frozenset("previous previously former formerly until used no old retired replaced was superseded "
                              "before".split())
_CHANGE_WORDS = frozenset("now new newly move moved change changed instead replace replaced replacing no switched since "
                          "from anymore update updated became reached sold bought cancelled canceled starting raised "
                          "lowered increased decreased reduced dropped stopped quit ended".split())


class _TokenFacts(dict[str, tuple[str | None, str | None, str | None, int]]):
    """``{token: (salient term, value as a line's first token, value later in it, keyword bits)}``, each
    worked out once (a plain dict lookup on a hit): splitting the lines of chunks not seen before is most of
    what supersession costs a search, and analysing every chunk's lines is what it costs an index build."""

    MAX = 65536

    def __missing__(self, tok: str) -> tuple[str | None, str | None, str | None, int]:
        if len(self) >= self.MAX:
            self.clear()
        low = tok.lower()
        bits = (1 if low in _HISTORICAL_WORDS else 0) | (
            2 if low in _CHANGE_WORDS or low.startswith(("retir", "swap")) else 0)
        facts = (_salient_term(tok), *_value(tok), bits)
        self[tok] = facts
        return facts


_TOKENS = _TokenFacts()


def _char_classes() -> bytes:
    """A ``bytes.translate`` table sorting ASCII characters for the patterns ``line_analysis`` may skip:
    ``d`` a digit, ``-``, ``v``, ``w`` another word character, ``p`` one of ``.:/`` (which, like ``-`` and
    word characters, QUANTITY_RE's number may not follow), a space for the rest. Every match of the date
    patterns holds ``dd-dd``; every QUANTITY_RE match starts ``d`` or ``vd`` at the start or after a space."""
    table = bytearray(b" " * 256)
    for ch in range(128):
        c = chr(ch)
        if c.isdigit():
            table[ch] = ord("d")
        elif c in "-v":
            table[ch] = ch
        elif c.isalpha() or c == "_":
            table[ch] = ord("w")
        elif c in ".:/":
            table[ch] = ord("p")
    return bytes(table)


_CHAR_CLASSES = _char_classes()


# A number and the unit after it: "13.6 kg", "380 ms", "76%", "09:45", "1:10:10", "v0.4.2".
QUANTITY_RE = re.compile(r"(?<![\w.:/-])(v?\d+(?:[.:,/]\d+)*)(?:\s*(%|[^\W\d_]+))?", re.UNICODE)
DAY_MONTH_RE = re.compile(r"\d{2}-\d{2}")
DATE_LIKE_RE = re.compile(r"^\d{4}(?:-\d{2}){0,2}$|^\d{2}-\d{2}$")
UNITS = frozenset("""
% kg g mg km m cm mm ms s sec min mins minute minutes h hr hrs hour hours day days week weeks month months year years
gb mb tb kb gbe ghz mhz mbps x k eur euro euros pound pounds dollar dollars percent pct degrees kilos kilo lbs mph kmh
kph bpm rpm events msgs messages doses dose times tablets pills ml l w kw kwh v mah iu
""".split())


DIGITS_RE = re.compile(r"\d+")
_SHAPES: dict[str, str] = {}


def quantities(text: str) -> dict[str, frozenset[str]]:
    """The numbers of a line by kind: ``{"9:9": {"09:45"}, "9.9 kg": {"13.6"}}``.

    A kind is the number's shape (digits as 9) and its unit when one of
    :data:`UNITS` follows. Dates are left out: lines about different events
    name different dates without either changing the other.
    """
    out: dict[str, set[str]] = {}
    for num, unit in QUANTITY_RE.findall(text):
        unit = unit.lower()
        if not unit and DATE_LIKE_RE.match(num):
            continue
        shape = _SHAPES.get(num)
        if shape is None:
            if len(_SHAPES) >= 65536:
                _SHAPES.clear()
            shape = _SHAPES[num] = DIGITS_RE.sub("9", num)
        if shape == "9" and unit not in UNITS:
            continue  # a bare count ("two doses" is a unit; "15 minutes" is one; "3 people" is not) says little
        kind = f"{shape} {unit}" if unit in UNITS else (f"{shape} ratio" if _ratio(num) else shape)
        out.setdefault(kind, set()).add(num.lower())
    return {k: frozenset(v) for k, v in out.items()}


def _ratio(num: str) -> bool:
    """True for numbers joined by colons that no clock shows: "1:5:5", "1:10:10", "3:2" (a feed, a mix, odds),
    not "09:45", "9:15" or "10:32:05". A ratio is a measured quantity; a clock time is a moment."""
    parts = num.split(":")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return False
    return any(len(p) == 1 for p in parts[1:]) or (len(parts) >= 3 and len(parts[0]) == 1)


def gives_new_measure(a: Mapping[str, frozenset[str]], b: Mapping[str, frozenset[str]]) -> bool:
    """True when ``b`` gives a value of a measured quantity of ``a`` (one with a unit, or a ratio) that ``a`` does
    not give, whether or not it also names ``a``'s value as the old one ("raised from 1000 IU to 2000 IU", "now
    1:10:10 instead of 1:5:5"): with a change word, what says a measurement changed."""
    return any(" " in kind and kind in b and not (b[kind] <= vals) for kind, vals in a.items())


def conflicting(a: Mapping[str, frozenset[str]], b: Mapping[str, frozenset[str]], *, measured: bool = False) -> bool:
    """True when two lines give a quantity of the same kind and share no value of it (09:45 vs 10:00).

    ``measured``: only quantities with a unit or ratios count (1000 IU vs 2000 IU, 10 vs 30 minutes, 1:5:5 vs
    1:10:10), not clock times, which differ between any two events.
    """
    return any(kind in b and not (vals & b[kind]) and (not measured or " " in kind) for kind, vals in a.items())


#: A day without its year this far before the line that names it is read as next year's.
HALF_YEAR_S = 183 * DAY
# A calendar day: "2026-07-28", or "07-28" (the year of the line's own date; the next year's when that is half a year
# or more before the line).
CALENDAR_DAY_RE = re.compile(r"(?<![\d-])(?:(\d{4})-)?(\d{2})-(\d{2})(?![\d-])")


def calendar_days(text: str, written: float) -> tuple[frozenset[str], bool]:
    """The calendar days a line names, as ``MM-DD``, and whether one of them is a plan's: still ahead when the
    line was written (``written``, epoch seconds of its date; 0 when unknown, as for an undated note whose
    mtime says only when it was last changed: "visit from 2026-09-10" in a June note,
    "10% of carriers on 07-15"), or a full date in a clause that makes it a plan ("is visiting from
    2026-10-02", "expected 2026-10-15": what an undated note, whose writing date is unknown, can tell)."""
    if "-" not in text:
        return frozenset(), False
    found = CALENDAR_DAY_RE.findall(text)
    if not found:
        return frozenset(), False
    days: set[str] = set()
    ahead = False
    full: list[float] = []
    try:
        year = datetime.fromtimestamp(written, UTC).year if written > 0 else None
    except (ValueError, OverflowError, OSError):  # a time no calendar holds (epoch microseconds read as ms)
        year, written = None, 0.0
    for yyyy, mm, dd in found:  # ("" for no year, month, day)
        y = int(yyyy) if yyyy else year
        try:
            stamp = datetime(y or 2000, int(mm), int(dd), tzinfo=UTC).timestamp()
            if y is not None and not yyyy and stamp < written - HALF_YEAR_S:
                # A day without its year, half a year or more before the line: next year's ("01-05" in December).
                y += 1
                stamp = datetime(y, int(mm), int(dd), tzinfo=UTC).timestamp()
        except ValueError:
            continue  # "22-45", a range or a score rather than a day
        days.add(f"{mm}-{dd}")
        ahead = ahead or (y is not None and written > 0 and stamp > written)
        if yyyy:
            full.append(stamp)
    if not ahead and full:
        happened = set(event_dates(text))
        ahead = any(stamp not in happened for stamp in full)
    return frozenset(days), ahead


def _own_date(path: str, line: str, written: float | None) -> float | None:
    """When a line was written, where it says so: its message's time, its dated note's date, a date it opens
    with ("- 2026-05-01: kickoff"); None for an undated note's line (an mtime says when the note last changed)."""
    if written is not None:
        return written
    dated = file_date(path)
    if dated is not None:
        return dated
    lead = LEADING_DATE_RE.match(line)
    return parse_date(lead[1]) if lead else None


def rescheduled(a: Line, b: Line) -> bool:
    """True when older line ``a`` and newer line ``b`` both give a plan's day (:func:`calendar_days`) and
    ``b`` names none of ``a``'s days: the same kind of value (a day) changed, like 09:45 becoming 10:00.

    Lines about different events name different days without either changing the other, and a line that
    records a day as past ("the school year started on 2026-08-31") moves no plan; a plan's day is what a
    later plan for the same thing moves ("visit from 2026-09-10", then "is visiting from 2026-10-02").
    """
    return a.ahead and b.ahead and a.days.isdisjoint(b.days)


@attrs.frozen
class Line:
    """One line of a chunk, with what same-thing detection needs."""

    path: str
    line_no: int
    text: str
    terms: frozenset[str]
    moment: tuple[float, int]
    historical: bool = False
    change: bool = False
    values: frozenset[str] = frozenset()
    dates: tuple[float, ...] = ()
    quantities: Mapping[str, frozenset[str]] = attrs.field(factory=dict, eq=False, hash=False)
    days: frozenset[str] = frozenset()
    ahead: bool = False


def split_lines(path: str, start_line: int, text: str, mtime: float | None,
                written: tuple[float, float] | None = None, stored: bytes | None = None) -> list[Line]:
    """The non-empty, non-heading lines of a chunk with their terms and moments.

    ``written`` is the chunk's known ``(first, last)`` write time (a
    transcript's message timestamps); lines then share the last one.
    ``stored`` is the chunk's :func:`line_analysis` as its index keeps it: read instead of analysing
    the text again (when it is of another version or does not fit the text, the text is analysed).
    """
    key = (path, start_line, text, mtime)
    if not written:
        got = _LINES.get(key)
        if got is not None:
            return got
    lines = lines_from_analysis(stored, path, start_line, text, mtime, written) if stored is not None else None
    if lines is None:
        lines = _split(path, start_line, text, mtime, written[1] if written else None)
    if not written:
        # Chunks come back search after search; their lines' terms and moments do not change.
        if len(_LINES) >= _LINES_MAX:
            _LINES.clear()
        _LINES[key] = lines
    return lines


def remembered_lines(path: str, start_line: int, text: str, mtime: float | None) -> bool:
    """True when :func:`split_lines` of this chunk (without a write time) needs no analysis: it is remembered."""
    return (path, start_line, text, mtime) in _LINES


def forget_lines() -> None:
    """Forget every remembered :func:`split_lines` answer, so the next search reads the index's stored analyses
    (or analyses the text) again: for tests and tools that check what an index stores."""
    _LINES.clear()


# split_lines' answers by (path, start line, text, mtime): the same list each time (see _chunk_terms).
_LINES: dict[tuple[str, int, str, float | None], list[Line]] = {}
_LINES_MAX = 4096


def _content_lines(text: str) -> Iterator[tuple[int, str, str | None]]:
    """``(offset in the chunk, stripped line, the heading above it)`` of each line a chunk's analysis covers:
    not blank, not a heading. :func:`_split`, :func:`line_analysis` and :func:`lines_from_analysis` all walk
    these, so a stored analysis lines up with the text it was made from."""
    heading: str | None = None
    for offset, raw in enumerate(text.split("\n")):
        stripped = raw.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            heading = stripped
            continue
        yield offset, stripped, heading


def _split(path: str, start_line: int, text: str, mtime: float | None, written: float | None) -> list[Line]:
    out = []
    for offset, stripped, heading in _content_lines(text):
        n = start_line + offset
        tokens = TOKEN_RE.findall(stripped)
        moment = line_moment(path, n, stripped, heading=heading, mtime=mtime, written=written)
        days, ahead = calendar_days(stripped, _own_date(path, stripped, written) or 0.0)
        out.append(Line(path=path, line_no=n, text=stripped, terms=_salient_of(tokens), moment=moment,
                        historical=is_historical(stripped, None), change=states_change(stripped),
                        values=_values_of(tokens), dates=tuple(line_dates(stripped)),
                        quantities=quantities(stripped), days=days, ahead=ahead))
    return out


#: The encoding of :func:`line_analysis`; an index keeps analyses of this version (a stored one of another
#: version is not read: the text is analysed at query time instead). Bump it whenever what it stores
#: changes (any rule :func:`line_analysis` calls): the next sync of an existing index then refills every
#: chunk's analysis (``IndexStore.fill_line_analysis``), with search analysing the text meanwhile.
#: Version 2: the JSON is zlib-compressed behind one version byte (version 1 was the JSON alone, 1.2x the
#: chunk text: at 100k chunks it took the index from 1.24x to 1.45x raw vectors + text). Version 3: ratios
#: ("1:5:5") are a quantity kind of their own (``"9:9:9 ratio"``), no longer read as clock times.
LINE_ANALYSIS_VERSION = 3
_NONE: frozenset[str] = frozenset()


def line_analysis(path: str, start_line: int, text: str) -> bytes:
    """What :func:`split_lines` finds in a chunk's lines that no query, mtime or write time changes, encoded
    (compact JSON) for an index to store beside the chunk when it indexes it (see ``StoredLineAnalysis``).

    Per line: its offset in the chunk, its salient terms, the moment its path and text give it (None: the
    file's mtime dates it, read at query time), whether it is a past state and states a change, its values
    and dates, its quantities, and the calendar days it names and whether one is a plan's. Chunk ``path``
    and ``start_line`` are part of it (a dated note's date; line numbers): a chunk moved or renumbered is
    analysed again, as the index does when it rewrites its rows.
    """
    # What it stores is exactly what is_historical, states_change, own_moment, _own_date, calendar_days,
    # line_dates, quantities, _salient_of and _values_of give each line (tests/test_line_analysis_fast.py holds
    # it to them); it skips what cannot change their answer: the keyword patterns when no token starts one, and
    # for an ASCII line (_char_classes) the date patterns without "dd-dd" and the quantity pattern without a
    # number starting a word.
    rows: list[list[Any]] = [[LINE_ANALYSIS_VERSION, _chunk_key(path, start_line, text)]]
    dated = file_date(path)
    last_heading: str | None = None
    past_heading = False
    for offset, stripped, heading in _content_lines(text):
        plain = stripped.isascii()
        tokens = (ASCII_TOKEN_RE if plain else TOKEN_RE).findall(stripped)
        facts = [_TOKENS[tok] for tok in set(tokens)]
        terms = {f[0] for f in facts if f[0] is not None}  # in the order _salient_of adds them
        bits = {f[3] for f in facts}
        if plain:
            classes = stripped.encode("ascii").translate(_CHAR_CLASSES)
            dateish = b"dd-dd" in classes
            numbers = classes.startswith((b"d", b"vd")) or b" d" in classes or b" vd" in classes
        else:
            dateish = numbers = True
        folds = not plain and FOLDS_RE.search(stripped) is not None
        historical = bool((folds or 1 in bits or 3 in bits) and HISTORICAL_RE.search(stripped))
        change = bool((folds or 2 in bits or 3 in bits) and CHANGE_RE.search(stripped))
        dates = line_dates(stripped) if dateish else []
        lead = LEADING_DATE_RE.match(stripped) if dateish and dated is None else None
        lead_date = parse_date(lead[1]) if lead else None
        own: float | None
        if dated is not None:
            own = dated
        else:
            if heading is not last_heading:
                last_heading = heading
                past_heading = heading is not None and bool(HISTORY_HEADING_RE.match(heading))
            if historical or past_heading:
                own = (min(dates) - DAY) if dates else 0.0
            else:
                own = lead_date
        days, ahead = calendar_days(stripped, (dated if dated is not None else lead_date) or 0.0) if dateish \
            else (_NONE, False)
        flags = (1 if historical else 0) | (2 if change else 0) | (4 if ahead else 0)
        rows.append([offset, " ".join(frozenset(terms)), own, flags, " ".join(_values_of(tokens)), dates,
                     {kind: " ".join(vals) for kind, vals in quantities(stripped).items()} if numbers else {},
                     " ".join(days)])
    packed = _ENCODER.encode(rows).encode("utf-8", "surrogatepass")
    return bytes((LINE_ANALYSIS_VERSION,)) + zlib.compress(packed, 6)


# json.dumps(rows, separators=(",", ":"), ensure_ascii=False), without making an encoder per chunk.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _chunk_key(path: str, start_line: int, text: str) -> int:
    """A checksum of what an analysis depends on besides mtimes: one stored for another chunk is not read."""
    return zlib.crc32(f"{path}\0{start_line}\0{text}".encode("utf-8", "surrogatepass"))


def lines_from_analysis(data: bytes, path: str, start_line: int, text: str, mtime: float | None,
                        written: tuple[float, float] | None = None) -> list[Line] | None:
    """The lines :func:`split_lines` gives for a chunk, from its stored :func:`line_analysis` and the
    chunk's ``mtime`` and ``written`` times; None when ``data`` is of another version or was made for another
    ``path``, ``start_line`` or ``text`` (a checksum of them is stored with it)."""
    if not data or data[0] != LINE_ANALYSIS_VERSION:
        return None  # another version (the first byte), or not an analysis at all
    try:
        rows = json.loads(zlib.decompress(data[1:]).decode("utf-8", "surrogatepass"))
    except (ValueError, zlib.error):
        return None
    if not isinstance(rows, list) or not rows or rows[0] != [LINE_ANALYSIS_VERSION, _chunk_key(path, start_line, text)]:
        return None  # another version, or the analysis of another chunk (path, start line or text)
    rows = rows[1:]
    out = []
    at = 0
    undated = mtime if mtime is not None else 0.0
    try:
        for offset, stripped, _heading in _content_lines(text):
            offset_, terms, own, flags, vals, dates, quants, days = rows[at]
            if offset_ != offset:
                return None
            at += 1
            n = start_line + offset
            if written:
                moment = (written[1], n)
                day_set, ahead = calendar_days(stripped, written[1])
            else:
                moment = (own if own is not None else undated, n)
                day_set, ahead = (frozenset(days.split()) if days else _NONE), bool(flags & 4)
            out.append(Line(path=path, line_no=n, text=stripped, terms=frozenset(terms.split()) if terms else _NONE,
                            moment=moment, historical=bool(flags & 1), change=bool(flags & 2),
                            values=frozenset(vals.split()) if vals else _NONE, dates=tuple(dates),
                            quantities={kind: frozenset(v.split()) for kind, v in quants.items()} if quants else {},
                            days=day_set, ahead=ahead))
    except (IndexError, TypeError, ValueError, AttributeError):
        return None
    return out if at == len(rows) else None


_TERMS: dict[int, tuple[Sequence[Line], frozenset[str]]] = {}
_TERMS_MAX = 4096


def _chunk_terms(lines: Sequence[Line]) -> frozenset[str]:
    """Every term of a chunk's lines, remembered per lines list (:func:`split_lines` hands back the same list
    for a chunk search after search; the entry holds the list, so its id cannot be reused while it lives)."""
    key = id(lines)
    got = _TERMS.get(key)
    if got is not None and got[0] is lines:
        return got[1]
    terms = frozenset().union(*(ln.terms for ln in lines)) if lines else frozenset()
    if len(_TERMS) >= _TERMS_MAX:
        _TERMS.clear()
    _TERMS[key] = (lines, terms)
    return terms


def term_weights(query_terms: frozenset[str], chunks: Sequence[Sequence[Line]]) -> dict[str, float]:
    """How telling each query term is among these chunks: ``log(1 + n / chunks holding it)``.

    A name on every line of a chat ("Priya: ...") weighs little; the one
    identifier only two chunks share weighs most. Relative to the candidates,
    so it does not depend on how scores are scaled.
    """
    n = len(chunks) or 1
    df = {t: 0 for t in query_terms}
    for lines in chunks:
        for t in query_terms & _chunk_terms(lines):
            df[t] += 1
    return {t: math.log(1.0 + n / d) for t, d in df.items() if d}


def query_score(line: Line, weights: Mapping[str, float]) -> float:
    if line.terms.isdisjoint(weights):
        return 0  # most lines hold no query term: what the sum below gives them, without building a set
    return sum(weights[t] for t in line.terms & weights.keys())


def best_lines(lines: Sequence[Line], weights: Mapping[str, float], limit: int = 6,
               share: float = 1.0) -> list[Line]:
    """The lines most about the query: those whose weighted query terms reach ``share`` of the best line's
    (up to ``limit``, best first).

    A chunk found by meaning alone (no query term on any line) gives its first lines.
    """
    scored = [(query_score(ln, weights), ln) for ln in lines]
    best = max((sc for sc, _ in scored), default=0.0)
    if best <= 0:
        return list(lines[:limit])
    return [ln for sc, ln in sorted(scored, key=lambda p: -p[0]) if sc >= share * best - 1e-9][:limit]


def focus_lines(lines: Sequence[Line], query_terms: frozenset[str], limit: int = 6) -> list[Line]:
    """The lines most about the query: sharing the most query terms, or one fewer (up to ``limit``)."""
    if not query_terms:
        return list(lines[:limit])
    scored = [(len(ln.terms & query_terms), ln) for ln in lines]
    best = max((s for s, _ in scored), default=0)
    if best == 0:
        return list(lines[:limit])  # found by meaning alone: every line may be the one
    floor = max(1, best - 1)
    return [ln for s, ln in sorted(scored, key=lambda p: -p[0]) if s >= floor][:limit]


def line_overlap(a: frozenset[str], b: frozenset[str]) -> tuple[int, float]:
    """Shared terms, and their share of the smaller set."""
    shared = len(a & b)
    small = min(len(a), len(b))
    return shared, (shared / small if small else 0.0)


def cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    if a is None or b is None or len(a) != len(b):
        return None
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else None


# Where a question asks a second one: "..., and when is she coming?", "...; who ...", "... and is she still
# there?". An auxiliary starts a question only before its subject: "what did Wei say and do at the party" is one
# question; do/does/has/have are main verbs before an article too ("... and do the dishes"), so they need a pronoun
# or a name.
_SUBJECT = r"(?:(?:i|you|he|she|it|we|they|there)\b|(?-i:[A-Z]))"
CLAUSE_SPLIT_RE = re.compile(
    r"[;?]|,?\s+\b(?:and|but|or)\s+(?=(?:when|what|where|who|whom|which|why|how)\b|"
    r"(?:is|are|will|can)\s+(?:" + _SUBJECT + r"|(?:the|this|that|these|those|my|your|his|her|our|their)\b)|"
    r"(?:does|do|has|have)\s+" + _SUBJECT + ")",
    re.IGNORECASE)
# A clause in the present or future: a present-tense or modal auxiliary, or "now".
PRESENT_CLAUSE_RE = re.compile(
    r"\b(?:is|are|am|does|do|has|have|will|shall|should|can|now|currently|these days|still)\b", re.IGNORECASE)
# A request to the assistant opening a clause ("Can you remind me?", "and do you remember why?") has no tense of
# the subject's.
REQUEST_RE = re.compile(r"^\W*(?:(?:and|but|so|also)\s+)?(?:(?:can|could|will|would)\s+you|"
                        r"do\s+you\s+(?:know|remember|recall))\b", re.IGNORECASE)


def asks_about_past(query: str) -> bool:
    """True for a question about a past event ("what did ... suggest", "back in May").

    Such a query wants the old memory, so supersession leaves its ranking alone. A question that also asks
    about now in a clause of its own ("What did Wei's mother buy in July, and when is she coming to visit?")
    is not one: its present clause wants the current version. A clause with no tense of its own ("..., and
    where?", "who picked up the bill?") goes with the past.
    """
    if not PAST_QUERY_RE.search(query):
        return False
    return not any(PRESENT_CLAUSE_RE.search(REQUEST_RE.sub("", clause)) and not PAST_QUERY_RE.search(clause)
                   for clause in CLAUSE_SPLIT_RE.split(query) if clause)


# A question that asks for the state as it is now, in so many words.
NOW_QUERY_RE = re.compile(
    r"\b(?:now|nowadays|currently|current|these days|at the moment|at present|latest|any ?more|still)\b", re.IGNORECASE)


def asks_about_now(query: str) -> bool:
    """True for a question that asks for the current state in so many words ("how fast is the ledger endpoint
    now?", "what is the current ...", "... these days?") and is no past question (:func:`asks_about_past`).

    An older note is then stale for it through any line whose measured value a newer line says changed
    (:func:`names_old_value`), not only through the lines closest to the question by meaning."""
    return NOW_QUERY_RE.search(query) is not None and not asks_about_past(query)


def names_old_value(a: Line, b: Line) -> frozenset[str]:
    """The terms newer line ``b`` shares with older line ``a`` besides the values, when ``b`` says a measured
    quantity of ``a`` (one with a unit, or a ratio) changed and names ``a``'s value of it as the old one beside a
    new one ("p95 dropped from 840 ms to 210 ms" for "p95 was 840 ms; ..."): empty when it does not.

    Quoting the old value is what ties the two lines to one measurement, however far apart by meaning a model puts
    them (the two lines above are 0.57 apart under all-MiniLM-L6-v2); the shared terms left (``p95``,
    ``serializ``) say which measurement, and the caller asks for ``line_terms`` of them."""
    if not b.change or not a.quantities or not b.quantities:
        return frozenset()
    quoted: set[str] = set()
    for kind, vals in a.quantities.items():
        new = b.quantities.get(kind)
        if " " in kind and new and vals <= new and not new <= vals:
            quoted |= vals
            unit = _salient_term(kind.split(" ", 1)[1])
            if unit is not None:
                quoted.add(unit)
    if not quoted:
        return frozenset()
    return frozenset(t for t in a.terms & b.terms if t not in quoted)


def states_change(line: str) -> bool:
    """True when a line says something changed ("moved to", "the new router", "instead", "since")."""
    return bool(CHANGE_RE.search(line))


def restates(a: Line, b: Line, t: Thresholds = THRESHOLDS) -> bool:
    """True when ``b`` says what ``a`` says: nearly all terms shared and no new value."""
    _shared, share = line_overlap(a.terms, b.terms)
    return share >= t.restate_overlap and values(b.text) <= values(a.text) | values(b.text) & values(a.text)


def _identifier(term: str) -> bool:
    return any(ch.isdigit() or ch in "_./" for ch in term)


def same_thing(a: Line, b: Line, chunk_cos: float | None, t: Thresholds = THRESHOLDS,
               weights: Mapping[str, float] | None = None, line_cos: float | None = None,
               names: frozenset[str] = frozenset()) -> bool:
    """True when newer line ``b`` changes what older line ``a`` states.

    Needs the chunks' vectors to be close (``chunk_cos``) and the lines to
    share salient terms; then ``a`` must describe a past state ("Previous
    dentist: ..."), or the two must give a quantity of the same kind with
    different values (standup at 09:45, then at 10:00), or ``b`` must say that
    something changed ("moved to", "the new router", "instead") with a value
    ``a`` does not have. A plain restatement is not a change: both stay true.

    With the query's term ``weights`` (:func:`term_weights`), both lines must
    be about the query's subject (share a query term), and ``b`` must not
    answer the query less fully than ``a`` unless the two conflict outright:
    a newer line that lacks the exact identifier asked for does not replace
    the line that has it.

    With the two lines' own stored vectors (``line_cos``) their cosine must
    reach ``line_vector`` instead, and the chunks' need only reach ``chunk_vector_lines``.
    """
    # Each True below needs a past-state line, a stated change, or a quantity of one kind in both lines:
    # without any of these, say no before the set work (most pairs a search looks at end here).
    moved = rescheduled(a, b)
    if not (a.historical or b.change or moved or (a.quantities and b.quantities
                                                   and not a.quantities.keys().isdisjoint(b.quantities))):
        return False
    conflict = conflicting(a.quantities, b.quantities)
    loose = False  # lines only as close as a moved day needs (``moved_line_vector``)
    if line_cos is not None:
        floor = t.conflict_line_vector if conflict else t.line_vector
        moved = moved and line_cos >= t.moved_line_vector
        loose = line_cos < floor
        if (loose and not moved) or (chunk_cos is not None and chunk_cos < t.chunk_vector_lines):
            return False
    elif chunk_cos is None or chunk_cos < t.chunk_vector:
        return False
    shared, share = line_overlap(a.terms, b.terms)
    if shared < t.line_terms:
        return False
    if weights:
        if not a.terms & b.terms & weights.keys() and not _same_subject(line_cos, t):
            return False  # not about the query's subject
        if any(_identifier(term) for term in (a.terms - b.terms) & weights.keys()):
            return False  # the older line has the exact identifier asked for, the newer one does not
        covers = query_score(b, weights) / (query_score(a, weights) or 1.0)
        # A measurement taken again on a later day (13.6 kg, then "coat good, 13.2 kg" at a vet check) answers the
        # question as fully as the older one through its unit, whatever words it words the subject with.
        if ((covers >= t.conflict_cover or remeasured(a, b, t, names, weights.keys())) and conflict and not loose) or (moved and (
                covers >= t.moved_cover - 1e-9 or _shares_quantity(a, b))):
            return True
    if loose or share < t.line_overlap:
        return False
    if a.historical:
        return True
    if any(d <= a.moment[0] + DAY for d in b.dates):
        return False  # "since 2026-08-03" restates the state that ``a`` (from 2026-08-03 or later) already records
    new = _new_values(a, b)
    if not (b.change and new):
        return False
    # A newer line still stating every value of the older one adds a fact to it rather than changing it when its
    # new values are said of something the older line does not name ("Washed the car; the SUV now has new Michelin
    # tyres" for "now the car is a red SUV"); not when they are said of the older line's subject ("neurologist is
    # Dr. Adeyemi at Leeds General Infirmary" for "referred me to a neurologist at Leeds General Infirmary") or it
    # names an older value as the one replaced ("moved from Q-Park to the Zuid garage" for "Parking: Q-Park").
    if a.values and a.values <= b.values and not _names_as_old(b.text, a.values):
        return _said_of(b.text, new, a.terms - a.values)
    return True


def _said_of(text: str, new: Container[str], subject: frozenset[str]) -> bool:
    """True when a clause of ``text`` holding one of the values ``new`` also holds a term of ``subject``."""
    for clause in CLAUSE_END_RE.split(text):
        toks = TOKEN_RE.findall(clause)
        if any(tok.lower() in new for tok in toks) and not subject.isdisjoint(_salient_of(toks)):
            return True
    return False


# Where a line's clauses end: ";", a sentence's end.
CLAUSE_END_RE = re.compile(r";|[.!?](?:\s+|$)")


# Before a value a line names as the one it replaces: "from Q-Park", "instead of the hatchback", "replaced the ...".
_AS_OLD_RE = re.compile(r"\b(?:from|instead of|rather than|than|replac\w*|no longer|not|swapp?\w*|sold)\s+"
                        r"(?:(?:the|a|an|my|our|his|her|their|old)\s+)?([\w.:/-]+)", re.IGNORECASE)


def _names_as_old(text: str, old: frozenset[str]) -> bool:
    """True when ``text`` names one of the values ``old`` as the one replaced (:data:`_AS_OLD_RE`)."""
    return any(tok.lower() in old for m in _AS_OLD_RE.finditer(text) for tok in TOKEN_RE.findall(m.group(1)))


def query_names(query: str) -> frozenset[str]:
    """The terms of the names a question gives its subject by: its capitalised words after the first ("How much does
    Biscuit weigh?" -> biscuit)."""
    toks = TOKEN_RE.findall(query)
    return frozenset(term for tok in toks[1:] if tok[:1].isupper() and (term := _salient_term(tok)) is not None)


def remeasured(a: Line, b: Line, t: Thresholds = THRESHOLDS, names: frozenset[str] = frozenset(),
               asked: Container[str] = frozenset()) -> bool:
    """True when newer line ``b``, written on a later day, measures again a quantity that ``a`` gives: a value with
    the same unit and shape, none of ``a``'s values of it, and one within ``remeasure_spread`` of one of them and
    not equal to it (13.6 kg, then "coat good, 13.2 kg" at a vet check; "12.90 kg" restates "12.9 kg"), naming each
    name of the question's subject (``names``, :func:`query_names`) that ``a`` names (a suitcase weighed on the same
    scale is not the dog), and sharing a term of the question with ``a`` when ``a`` holds one that is not a reading
    word (``_READING_TERMS``: the puppy weighed, then the neighbours' labrador weighed). Without a change
    word that is what says a measured value moved; the same unit with a far-off value (a 40 mg tablet, then an 8 mg
    one; a 14,400 pound target, then a 1,046 pound payment) is as likely another thing measured, and so is a newer
    value labelled by a word that neither ``a`` nor the question (``asked``, its terms) uses (:func:`_labelled_apart`:
    "jumped 121 cm" is not "118 cm tall")."""
    if b.moment[0] < a.moment[0] + DAY or not (a.terms & names) <= b.terms:
        return False  # not a later day, or the newer line lacks a name of the question's subject the older one gives
    subject = {term for term in a.terms if term in asked and term not in _READING_TERMS}
    if subject and subject.isdisjoint(b.terms):
        return False  # the two share only a reading word of the question ("weighed the puppy", "weighed the labrador")
    for kind, vals in a.quantities.items():
        new = b.quantities.get(kind)
        if " " not in kind or not new or vals & new:
            continue
        olds = [fx for x in vals if (fx := _magnitude(x))]
        for y in new:
            # Each newer value's label is read once (a long line of values would otherwise read it per pair).
            fy = _magnitude(y)
            if fy and any(fx != fy and max(fx, fy) <= min(fx, fy) * (1 + t.remeasure_spread) for fx in olds) and (
                    not _labelled_apart(b.text, y, kind.split(" ", 1)[1], a.terms, asked)):
                return True
    return False


# Where a clause ends: what a value's own label does not reach across.
_CLAUSE_END_RE = re.compile(r"[,;:()\[\]!?]|\.(?!\d)|\s[-\u2013\u2014]\s")
_WORD_AFTER_RE = re.compile(r"[ \t]+([^\W\d_]+)")
# Words that read a value off without naming what is measured ("the meter reads 64 percent", "measured 134 cm").
_READING_TERMS = frozenset({"measur", "weigh", "read", "show"})


def _labelled_apart(text: str, value: str, unit: str, known: frozenset[str], asked: Container[str]) -> bool:
    """True when every place ``text`` gives ``value`` with ``unit`` labels it by a word that neither ``known``
    (the older line's terms) nor ``asked`` holds, nor a word that only reads a value off (``_READING_TERMS``): the
    nearest content word before it in its clause ("Lotte jumped 121 cm", "the water at 37.5 degrees") or the word
    right after its unit ("98 cm wide", "a 5.5 kg sack"), or, for a value alone after a colon, the words of the
    clause before it when none of them is such a word ("the desk height: 115 cm"). Such a value measures another
    thing than the older
    line's; a value alone in its clause ("coat good, 13.2 kg, but one ear ..."), or labelled by the older line's or
    the question's words ("height 134 cm", "weighs 2.3 kg after the winter"), measures it again."""
    found = False
    for m in QUANTITY_RE.finditer(text):
        if m[1].lower() != value or (m[2] or "").lower() != unit:
            continue
        found = True
        labels = []
        clauses = _CLAUSE_END_RE.split(text[:m.start()])
        for tok in reversed(TOKEN_RE.findall(clauses[-1])):
            if tok[:1].isdigit():
                break
            if (term := _salient_term(tok)) is not None:
                labels.append(term)
                break
        after = _WORD_AFTER_RE.match(text, m.end())
        if after and (term := _salient_term(after[1])) is not None:
            labels.append(term)
        if not labels and len(clauses) > 1 and text[:m.start()].rstrip().endswith(":"):
            # Alone after a colon: the words before it name what is measured ("the desk height: 115 cm", "Mochi at
            # the vet: 10.1 kg"); one the older line or the question uses is enough.
            named = [term for tok in TOKEN_RE.findall(clauses[-2]) if not tok[:1].isdigit()
                     and (term := _salient_term(tok)) is not None]
            if named and not any(term in known or term in asked or term in _READING_TERMS for term in named):
                continue
        if all(term in known or term in asked or term in _READING_TERMS for term in labels):
            return False
    return found


def _magnitude(num: str) -> float | None:
    try:
        return abs(float(num.replace(",", "")))
    except ValueError:
        return None


# Words after which a name says which one of a thing is meant: "the flight to Lisbon", "the bill for the flat".
_OF_WORDS = frozenset("to for of".split())
_NOT_QUALIFIERS = _HISTORICAL_WORDS | _CHANGE_WORDS


@functools.lru_cache(maxsize=16384)
def qualified_terms(text: str) -> Mapping[str, frozenset[str]]:
    """``{term: the terms that say which one of it a line means}``: the content word right before it ("energy
    company", "checkout page") and the one after "to", "for" or "of" and an optional "the" ("flight to Lisbon").
    Only words side by side in one clause count (no punctuation between), neither a number, a day or month, nor a
    change or past-state word ("new router", "previous dentist" name a version, not another thing), and no word ending
    in "ed" before another ("skipped Tuesday bouldering")."""
    toks = [(m.group(), m.start(), m.end()) for m in TOKEN_RE.finditer(text)]
    out: dict[str, set[str]] = {}

    def term(k: int) -> str | None:
        tok = toks[k][0]
        low = tok.lower()
        if any(ch.isdigit() for ch in tok) or low in _NOT_QUALIFIERS or low.startswith(("retir", "swap")) \
                or low.rstrip("s") in _CALENDAR_NAMES:
            return None  # a day or month is a value ("Japanese Tuesdays"), not a thing
        return _salient_term(tok)

    def joined(k: int) -> bool:  # token k and k + 1 have only spaces between them
        return text[toks[k][2]:toks[k + 1][1]].strip(" \t") == "" and toks[k][2] < toks[k + 1][1]

    for k in range(len(toks) - 1):
        if not joined(k):
            continue
        head = term(k)
        if head is None or (len(toks[k][0]) > 4 and toks[k][0].lower().endswith("ed")):
            continue  # "skipped Tuesday", "booked flight": a verb before a word, not a word for which one
        nxt = term(k + 1)
        if nxt is not None:
            out.setdefault(nxt, set()).add(head)
        elif toks[k + 1][0].lower() in _OF_WORDS and k + 2 < len(toks) and joined(k + 1):
            n = k + 2
            if toks[n][0].lower() == "the" and n + 1 < len(toks) and joined(n):
                n += 1
            name = term(n)
            if name is not None:
                out.setdefault(head, set()).add(name)
    return {h: frozenset(q) for h, q in out.items()}


def rival_subjects(older: Iterable[str], newer: str, older_terms: Container[str], newer_terms: Container[str]) -> bool:
    """True when line ``newer`` names a thing that a line of ``older`` also names, each with its own word for which
    one ("the flight to Lisbon" / "the flight to Oslo", "the energy company" / "Water company"), no such word of
    either held by the other side (``older_terms``: the terms of the older hit, ``newer_terms``: of the newer line's
    hit): two things of one kind, not two versions of one. A version that names the one it replaces holds its word
    ("moved from the Lisbon flight to the Oslo one"), and one sharing a word for which one is about the same thing
    ("the ledger serializer, now orjson" for "the JSON serialisation of the ledger API")."""
    theirs = qualified_terms(newer)
    if not theirs:
        return False
    for text in older:
        for head, mine in qualified_terms(text).items():
            other = theirs.get(head)
            if other and all(q not in newer_terms for q in mine) and all(q not in older_terms for q in other) \
                    and not _named_as_new(newer, other | {head}):
                return True
    return False


def _named_as_new(text: str, terms: Container[str]) -> bool:
    """True when ``text`` brings in the thing named by ``terms`` as a new value: a change word at most four words
    before its first mention in a clause ("moved to Harbour Clinic", "now is in the Zeus Room", "I now live at Elm
    Street"): the new place of one thing, not a second thing of the older line's kind."""
    for clause in CLAUSE_END_RE.split(text):
        toks = TOKEN_RE.findall(clause)
        k = next((k for k, tok in enumerate(toks) if _salient_term(tok) in terms), None)
        if k is not None and any(tok.lower() in _CHANGE_WORDS for tok in toks[max(0, k - 4):k]):
            return True
    return False


def _same_subject(line_cos: float | None, t: Thresholds) -> bool:
    """True when two lines that share no query word are still about one subject by their own vectors: so close
    (``subject_line_vector``) that the newer one names the older one's subject differently ("Gert: now feeding
    1:10:10 ..." for "Sourdough: fed Gert 1:5:5 ..." when asked how the sourdough starter is fed)."""
    return line_cos is not None and line_cos >= t.subject_line_vector


def _shares_quantity(a: Line, b: Line) -> bool:
    """True when the two lines give the same value of a quantity kind ("10% of carriers" in both): what pins
    two plans with different days to one thing, when the newer line words the subject differently."""
    return any(vals & b.quantities[kind] for kind, vals in a.quantities.items() if kind in b.quantities)


# The person a line names, ending in a role: "Juf Marloes leaves the school", "Trainer Henk retires", "Dr. Verbeek
# hands over his patients to ...", "Mr. Bakker left the housing company", "Mevrouw Jansen steps down", "Ms. Peel
# is replaced by ...". The name is up to three capitalised words right before the verb (its last one is matched).
_NAME = r"((?:[A-Z][\w'.-]*\s+){0,2}[A-Z][\w'-]*)"
ENDING_RE = re.compile(
    _NAME + r"\s+(?:(?:(?:is|was|has been|gets|got)\s+replaced|retire[sd]?|is retiring|has retired|steps\s+down|"
    r"stepped\s+down|resign(?:s|ed)?|quits|hands\s+over|handed\s+over)\b(?P<more>[^;,.]*)|"
    r"(?:leaves|left|is\s+leaving|has\s+left)\b(?P<rest>[^;,.]*))\b")
# Someone taking a role over from the person a line names: "Ms. Osei took over from Mr. Bakker".
TAKEOVER_RE = re.compile(r"\b(?:takes|took|has\s+taken)\s+over\s+from\s+" + _NAME)
# After "leaves"/"left": what makes it an absence rather than an ending ("leaves for a ski holiday on Friday",
# "left the parent evening early").
TEMPORARY_WORDS = frozenset("""for early late today tonight tomorrow until till holiday holidays vacation trip weekend
while briefly break lunch meeting evening afternoon morning""".split())
# After the other endings: what makes it standing in for a while ("is replaced by Meester Daan during her maternity
# leave", "hands over to Trainer Femke for today's lesson" - but "retires for health reasons" is an ending).
STAND_IN_WORDS = TEMPORARY_WORDS - {"for", "evening", "afternoon", "morning"} | {"leave", "sick", "ill", "temporarily"}
# Before a name in its clause: what makes its ending supposed, not said ("If Juf Marloes retires, ...").
SUPPOSING_WORDS = frozenset("if whether unless suppose supposing should".split())
# Right before a stage (up to two words between): what makes it not reached ("not approved yet", "hasn't been
# submitted", "if it is submitted before June", "will be approved once ...").
NOT_REACHED_RE = re.compile(r"(?:\b(?:not|never|if|unless|whether|will|would|could|might|should)|n['\u2019]t)"
                            r"[ \t]+(?:[\w'\u2019-]+[ \t]+){0,2}$", re.IGNORECASE)
_CALENDAR_NAMES = frozenset("""monday tuesday wednesday thursday friday saturday sunday january february march april
may june july august september october november december""".split())
# Stages of a case's process, in order: planned, being prepared, submitted, with a committee, decided. A line's stage
# is the latest it names.
STAGES = tuple((rank, re.compile(pattern, re.IGNORECASE)) for rank, pattern in (
    (1, r"\b(?:will be|is to be|to be) (?:discussed|considered|reviewed|decided)\b|\bon the agenda\b"),
    (2, r"\b(?:needs?|needed|requires|is missing|waiting for|preparing|being (?:prepared|written|drafted))\b"),
    (3, r"\b(?:submitted|sent in|handed in|filed|lodged)\b"),
    (4, r"\b(?:went|goes|has gone|was sent|was passed|was forwarded|moved) (?:on )?to (?:the )?(?:[\w'\u2019-]+ ){0,2}"
        r"(?:committee|board|panel|council|jury)\b|\b(?:under|in) review\b|\bbeing reviewed\b"),
    (5, r"\b(?:approved|rejected|granted|denied|declined|turned down|signed off)\b"),
))
# A question whose answer is a person: what a person ending in a role changes.
ASKS_PERSON_RE = re.compile(r"\b(?:who|whom|whose)\b", re.IGNORECASE)
# Where a line's clauses end, for a case and its stage to be read in one: at ";" and at a sentence's end (not at ":",
# after which a label's content follows: "Promotion to Principal Engineer: case submitted ...").
CASE_CLAUSE_RE = re.compile(r";|[.!?](?:\s+|$)")
# A quoted title names the title, not the case: "Talk submitted ...: \"Claim checks and other lies ...\"".
QUOTED_RE = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d")
POSSESSIVE_RE = re.compile(r"\b([A-Z][\w-]*)['\u2019]s\b")
# A word every match of ENDING_RE, TAKEOVER_RE or a stage needs: a line without one is passed over in one search.
_MOVE_WORD_RE = re.compile(
    r"\b(?:replaced|retir\w*|steps?|stepped|resign\w*|quits|hands?|handed|leaves|left|leaving|takes|took|taken|"
    r"discussed|considered|reviewed|decided|agenda|needs?|needed|requires|missing|waiting|preparing|being|"
    r"submitted|sent|filed|lodged|went|goes|gone|passed|forwarded|moved|review|approved|rejected|granted|denied|"
    r"declined|turned|signed)\b")


@functools.lru_cache(maxsize=16384)
def _names_a_move(text: str) -> bool:
    """True when ``text`` holds a word of :data:`_MOVE_WORD_RE` (matched on the lowered text: the pattern is lower
    case, and a case-sensitive search is about four times faster than an IGNORECASE one on a line without such a
    word, which is most lines). Kept per text: :func:`ended_names` and :func:`stage` both ask, for every focus line
    of every hit a search pairs."""
    return _MOVE_WORD_RE.search(text.lower()) is not None


@functools.lru_cache(maxsize=16384)
def ended_names(text: str) -> frozenset[str]:
    """The last words, lowercased, of the names ``text`` says end in a role (:data:`ENDING_RE`,
    :data:`TAKEOVER_RE`), not of those leaving for a while ("leaves for a ski holiday", "left ... early")."""
    if not _names_a_move(text):
        return frozenset()
    out = set()
    for m in ENDING_RE.finditer(text):
        rest = m["rest"]
        if rest is not None and not TEMPORARY_WORDS.isdisjoint(w.lower() for w in TOKEN_RE.findall(rest)):
            continue
        if m["more"] is not None and not STAND_IN_WORDS.isdisjoint(w.lower() for w in TOKEN_RE.findall(m["more"])):
            continue
        if not _supposed(text, m.end(1) - len(m[1].split()[-1])):
            out.add(m[1].split()[-1].lower())
    out.update(m[1].split()[-1].lower() for m in TAKEOVER_RE.finditer(text) if not _supposed(text, m.start()))
    return frozenset(out)


def _supposed(text: str, start: int) -> bool:
    """True when the clause of ``text`` before ``start`` supposes what follows rather than saying it ("If Juf
    Marloes retires, ...", "nobody knows whether Coach Wouter leaves")."""
    clause = _CLAUSE_END_RE.split(text[max(0, start - 200):start])[-1]
    return not SUPPOSING_WORDS.isdisjoint(w.lower() for w in TOKEN_RE.findall(clause))


def hands_over(a: Line, b: Line) -> bool:
    """True when newer line ``b`` says a person older line ``a`` names ends in the role ("Juf Marloes leaves the
    school", "Trainer Henk retires") and names someone ``a`` does not (who follows: "... gets Meester Daan"): the
    older line's named value ended, though ``b`` holds no change word and no value of the same kind."""
    if not b.values:
        return False
    ended = ended_names(b.text)
    if not ended:
        return False
    words = lower_words(a.text)
    if not any(n in words and not _other_person(a.text, b.text, n) for n in ended):
        return False
    return any(v.isalpha() and v not in ended and v not in _CALENDAR_NAMES for v in _new_values(a, b))


# Words before a name that give no first name: "Juf Marloes" and "Marloes" are one person, "Femke Jansen" and
# "Henk Jansen" two.
TITLES = frozenset("juf meester coach trainer dr mr mrs ms miss mevrouw meneer mevr dhr prof opa oma".split())


@functools.lru_cache(maxsize=4096)
def _other_person(a_text: str, b_text: str, last: str) -> bool:
    """True when the two texts give the name ending in ``last`` different first names ("Femke Jansen" against
    "Henk Jansen retires"): two people of one family name."""
    before = re.compile(r"\b([A-Z][\w'-]*)\.?\s+(?i:" + re.escape(last) + r")\b")
    firsts_a = {m[1].lower() for m in before.finditer(a_text)} - TITLES
    firsts_b = {m[1].lower() for m in before.finditer(b_text)} - TITLES
    return bool(firsts_a) and bool(firsts_b) and firsts_a.isdisjoint(firsts_b)


@functools.lru_cache(maxsize=16384)
def lower_words(text: str) -> frozenset[str]:
    """The set of this text's word tokens, lower-cased (kept for the 16,384 latest texts)."""
    return frozenset(tok.lower() for tok in TOKEN_RE.findall(text))


@functools.lru_cache(maxsize=16384)
def stage(text: str) -> int:
    """The latest stage of a case's process ``text`` names (:data:`STAGES`: 1 planned ... 5 decided); 0 for none.
    A stage named as not reached or supposed (:data:`NOT_REACHED_RE`, :func:`_supposed`) is not named."""
    if not _names_a_move(text):
        return 0
    return max((rank for rank, pattern in STAGES
                if any(not NOT_REACHED_RE.search(text, max(0, m.start() - 60), m.start()) and not _supposed(text, m.start())
                       for m in pattern.finditer(text))), default=0)


def case_stage(text: str, asked: frozenset[str]) -> int:
    """The latest stage (:func:`stage`) ``text`` gives in a clause naming every word of ``asked`` (salient terms):
    the stage of that case, not of something else the line mentions ("Talk submitted ...: \"Claim checks and other
    lies ...\"" gives no stage of the claim check); quoted text is left out."""
    if not stage(text):
        return 0
    return max((stage(clause) for clause in CASE_CLAUSE_RE.split(QUOTED_RE.sub(" ", text))
                if asked <= salient(clause)), default=0)


def later_stage(a: Line, b: Line, weights: Mapping[str, float], query: str = "") -> bool:
    """True when newer line ``b`` puts the case older line ``a`` is about at a later stage of its process ("the
    promotion case needs two peer letters", then "the promotion case went to the calibration committee").

    The same case: ``b`` holds every weighted query word ``a`` holds, at least two (a subject named by one word,
    "claim", is not one case), each line gives its stage in a clause naming them all (:func:`case_stage`), and
    ``b`` names no one's case the query does not ("Tom's promotion case" when asked about Lena's)."""
    asked = frozenset(term for term in a.terms if weights.get(term))
    if len(asked) < 2 or not asked <= b.terms:
        return False
    old = case_stage(a.text, asked)
    if not old or case_stage(b.text, asked) <= old:
        return False
    named = {tok.lower() for tok in TOKEN_RE.findall(query)}
    return all(m[1].lower() in named for m in POSSESSIVE_RE.finditer(b.text))


def moves_on(a: Line, b: Line, weights: Mapping[str, float], query: str = "") -> bool:
    """True when newer line ``b`` says the state older line ``a`` gives has moved on, about the query's subject:
    the person ``a`` names ends in the role (:func:`hands_over`) when the query asks for a person ("Who is Ilse's
    teacher?": a question about her classroom keeps the lines naming the old teacher) and the two lines share a
    weighted query word, or the case ``a`` is about is at a later stage (:func:`later_stage`), or one no longer has
    the thing ``a`` answers with (:func:`disposes`: "Sold the hatchback; now a red SUV")."""
    return ((ASKS_PERSON_RE.search(query) is not None and hands_over(a, b)
             and not a.terms.isdisjoint(b.terms & weights.keys()) and (query_names(query) & a.terms) <= b.terms
             and _in_asked_clause(a, ended_names(b.text), weights)) or later_stage(a, b, weights, query)
            or disposes(a, b, weights))


# :data:`CASE_CLAUSE_RE`, but a title's or an initial's full stop ends no sentence ("Building manager Mr. Bakker").
PERSON_CLAUSE_RE = re.compile(r";|(?<!\b(?:Mr|Ms|Dr|St|Jr|Sr))(?<!\b(?:Mrs|Dhr))(?<!\b(?:Mevr|Prof))(?<!\b[A-Z])[.!?](?:\s+|$)")


def _in_asked_clause(a: Line, names: frozenset[str], weights: Mapping[str, float]) -> bool:
    """True when a name of ``names`` is in a clause of ``a`` (:data:`PERSON_CLAUSE_RE`) holding the most query weight:
    "Ilse's class teacher is Juf Marloes; Meester Joris teaches her gym" answers "Who teaches Ilse gym?" with
    Meester Joris, and Juf Marloes leaving does not end that."""
    clauses = [c for c in PERSON_CLAUSE_RE.split(a.text) if c.strip()]
    if len(clauses) < 2:
        return True
    scored = [(sum(weights.get(t, 0.0) for t in salient(c)), c) for c in clauses]
    top = max(score for score, _ in scored)
    return any(score >= top and not names.isdisjoint(lower_words(c)) for score, c in scored)


def may_move_on(a: Line, b: Line) -> bool:
    """What :func:`moves_on` needs from the two texts alone, for a pair not yet worth a look (no query weights)."""
    return hands_over(a, b) or (stage(a.text) > 0 and stage(b.text) > 1) or disposes(a, b)


# Having a thing ends, the thing right after the words: "sold the hatchback", "gave the Pixel 6 to my sister",
# "moved out of the Vondelstraat flat", "no longer have the Volvo", "wearing Hoka now instead of the Asics".
DISPOSE_RE = re.compile(
    r"\b(?:sold|sell(?:s|ing)?|gave(?:\s+up\s+on|\s+away)?|(?:given|giv(?:e|es|ing))\s+(?:up\s+on|away)|"
    r"trad(?:ed|e|es|ing)\s+in|scrapped|(?:stopped|quit)\s+using|"
    r"(?:got|get|getting)\s+rid\s+of|returned|handed\s+(?:back|in)|donated|replaced|swapped|"
    r"(?:switched|upgraded|moved)\s+(?:away\s+)?from|moved\s+out\s+of|"
    r"no\s+longer\s+(?:have|has|own|owns|use|uses|drive|drives|ride|rides|rent|rents|(?:live|lives)\s+in)|"
    r"instead\s+of|rather\s+than|in\s+place\s+of)\s+(?P<obj>[^;,.!?():\n]*)", re.IGNORECASE)
# The same, the thing before the words: "the Gazelle was stolen", "the ThinkPad has been returned", "the flat is gone".
# Not "was replaced": "Coach Wouter was replaced by Trainer Femke for today's lesson" is a person standing in, which
# the handover rule (:func:`hands_over`) judges.
DISPOSED_RE = re.compile(
    r"(?P<obj>[^;,.!?():\n]*?)\s+(?:was|were|is|are|got|has\s+been|have\s+been)\s+(?:sold|stolen|scrapped|"
    r"written\s+off|returned|given\s+away|traded\s+in|totall?ed|gone)\b", re.IGNORECASE)
# A word one of the two patterns needs: a line without one is passed over in one search.
_DISPOSE_WORD_RE = re.compile(
    r"\b(?:sold|sell\w*|gave|given|giv\w*|trad\w*|scrapped|using|rid|returned|handed|donated|replaced|swapped|from|out|"
    r"longer|instead|rather|place|stolen|written|totall?ed|gone)\b")  # on the lowered text (faster than IGNORECASE)
# Where the thing's words end: a preposition, a conjunction or an adverb after it ("gave the Pixel 6 *to* my sister",
# "drove the hatchback *to* Lyon").
_THING_END = frozenset("""to for with at in on from by into onto of and or but because after before so since when
while as than there then where which that who whom today yesterday tonight now instead via through about over under
back away off out up down last ago this next""".split())
# Words that describe one's having had the thing, not which thing it is ("sold my *old* hatchback").
_THING_ASIDE = frozenset({"old", "former", "previou", "trusty", "belove", "little"})
# Whose the thing is, when it is not the writer's: "Tom sold *his* hatchback", "sold *Anna's* bike".
_OTHERS = frozenset({"his", "her", "their", "its"})
# Days and months as salient terms (:func:`_stem`): a thing named only by them is a moved day, not a thing.
_CALENDAR_TERMS = frozenset(_stem(w) for w in """monday mondays tuesday tuesdays wednesday wednesdays thursday thursdays
friday fridays saturday saturdays sunday sundays january february march april may june july august september october
november december weekend weekends morning mornings evening evenings""".split())
_POSSESSIVE_START_RE = re.compile(r"\s*(?:the\s+)?[A-Z][\w-]*['\u2019]s\b")


def _thing(words: Sequence[str]) -> frozenset[str] | None:
    """The salient terms of the thing ``words`` (a disposal's object, nearest word first) name, up to the first word
    of :data:`_THING_END` and at most five words on; None when it is someone else's (:data:`_OTHERS`), names
    nothing, or names only a day, a month or a number ("Fridays replaced Thursdays", "moved from 2026-07-04": a
    moved day or time, which :func:`rescheduled` and the quantity rules judge with their own checks)."""
    out = set()
    named = False
    for n, tok in enumerate(words):
        low = tok.lower()
        if low in _THING_END or n >= 5:
            break
        if low in _OTHERS:
            return None
        term = _TOKENS[tok][0]
        if term is not None and term not in _THING_ASIDE:
            out.add(term)
            named = named or not (term[:1].isdigit() or term in _CALENDAR_TERMS)
    return frozenset(out) if named else None


@functools.lru_cache(maxsize=16384)
def disposed_things(text: str) -> tuple[frozenset[str], ...]:
    """The things ``text`` says one no longer has, each as its salient terms: what follows "sold", "gave ... to",
    "moved out of", "no longer have", "instead of" (:data:`DISPOSE_RE`), or comes before "was stolen", "was sold",
    "is gone" (:data:`DISPOSED_RE`), as far as the thing's words go (:func:`_thing`). Someone else's thing ("Tom sold
    his hatchback", "sold Anna's bike") is left out."""
    if not _DISPOSE_WORD_RE.search(text.lower()):
        return ()
    out = []
    for m in DISPOSE_RE.finditer(text):
        if _POSSESSIVE_START_RE.match(m["obj"]) or _for_a_while(text, m.start("obj")):
            continue
        thing = _thing(TOKEN_RE.findall(m["obj"]))
        if thing:
            out.append(thing)
    for m in DISPOSED_RE.finditer(text):
        if _for_a_while(text, m.end()):
            continue
        words = TOKEN_RE.findall(m["obj"])
        thing = _thing(words[::-1])
        if thing:
            out.append(thing)
    return tuple(out)


# What makes letting a thing go last a while only ("is replaced by Meester Daan during her maternity leave").
_FOR_A_WHILE = frozenset({"temporarily", "until", "till", "while", "during", "briefly", "meanwhile"})
_SENTENCE_END_RE = re.compile(r"[;.!?](?:\s|$)")


def _for_a_while(text: str, at: int) -> bool:
    """True when the rest of ``text``'s clause from ``at`` says it lasts a while (:data:`_FOR_A_WHILE`)."""
    end = _SENTENCE_END_RE.search(text, at)
    rest = text[at:end.start() if end else len(text)]
    return not _FOR_A_WHILE.isdisjoint(w.lower() for w in TOKEN_RE.findall(rest))


_DISPOSING: dict[int, tuple[Sequence[Line], tuple[Line, ...]]] = {}


def disposing_lines(lines: Sequence[Line]) -> tuple[Line, ...]:
    """The lines of a chunk that say a thing is gone (:func:`disposed_things`), remembered per lines list like
    :func:`_chunk_terms` (:func:`split_lines` hands back the same list for a chunk search after search): one lookup
    per candidate and search instead of one per line. Most chunks have none."""
    key = id(lines)
    got = _DISPOSING.get(key)
    if got is not None and got[0] is lines:
        return got[1]
    found = tuple(ln for ln in lines if disposed_things(ln.text))
    if len(_DISPOSING) >= _TERMS_MAX:
        _DISPOSING.clear()
    _DISPOSING[key] = (lines, found)
    return found


def _pattern_words(pattern: re.Pattern[str]) -> tuple[frozenset[bytes], tuple[bytes, ...]]:
    r"""The whole words a ``\b(?:word|...)\b`` pattern of lower-case words matches (``"steps?"`` gives step and steps),
    and the word starts of its ``\w*`` words (``retir\w*``), as ASCII bytes: what :func:`plain_chunk` and
    :func:`may_name_move` look for in place of the pattern. A pattern of another shape raises, so a change to one
    that they could no longer follow is noticed at import, not by a missed supersession."""
    body = pattern.pattern
    if not (body.startswith(r"\b(?:") and body.endswith(r")\b")):
        raise ValueError(f"not a pattern of whole words: {body!r}")
    words: set[bytes] = set()
    starts: list[bytes] = []
    for alt in body[len(r"\b(?:"):-len(r")\b")].split("|"):
        if alt.endswith(r"\w*") and alt[:-3].isalpha() and alt[:-3].islower():
            starts.append(alt[:-3].encode("ascii"))
            continue
        forms = [""]
        at = 0
        while at < len(alt):
            ch = alt[at]
            if not (ch.isascii() and ch.isalpha() and ch.islower()):
                raise ValueError(f"not a pattern of whole words: {body!r}")
            if alt[at + 1:at + 2] == "?":
                forms = [f + ch for f in forms] + forms
                at += 2
            else:
                forms = [f + ch for f in forms]
                at += 1
        if "" in forms:  # an empty word: the pattern matches at every word boundary, which no word set says
            raise ValueError(f"not a pattern of whole words: {body!r}")
        words.update(f.encode("ascii") for f in forms)
    return frozenset(words), tuple(starts)


_MOVE_WORDS, _MOVE_STARTS = _pattern_words(_MOVE_WORD_RE)
_DISPOSE_WORDS, _DISPOSE_STARTS = _pattern_words(_DISPOSE_WORD_RE)


def _starts_re(starts: Sequence[bytes]) -> re.Pattern[bytes]:
    """A word of _word_runs starting with one of ``starts`` (one scan: a quarter of the time of a ``in`` per start)."""
    return re.compile(b" (?:" + b"|".join(re.escape(w) for w in dict.fromkeys(starts)) + b")")


# The words _MOVE_WORD_RE (ended_names, stage) or _DISPOSE_WORD_RE (disposed_things) need, and the starts of those
# matched as ``\w*``.
_MOVER_WORDS = _MOVE_WORDS | _DISPOSE_WORDS
_MOVER_STARTS_RE = _starts_re(_MOVE_STARTS + _DISPOSE_STARTS)
# With the words that HISTORICAL_RE or CHANGE_RE matches start with (as _TokenFacts' bits: a line whose analysis
# finds no such token is no past state and states no change).
_FLAG_WORDS = _MOVER_WORDS | frozenset(w.encode("ascii") for w in _HISTORICAL_WORDS | _CHANGE_WORDS)
_FLAG_STARTS_RE = _starts_re(_MOVE_STARTS + _DISPOSE_STARTS + (b"retir", b"swap"))


def _words_re(words: frozenset[bytes], starts: Sequence[bytes]) -> re.Pattern[bytes]:
    """A word of _word_runs that is one of ``words`` or starts with one of ``starts``: ``_starts_re(starts)``
    and ``not words.isdisjoint(runs.split())`` in one scan (about half their time on a chunk of plain words).

    The alternatives are a trie of the words (a common start written once): at each space the scan tries a few
    letters, not every word. A word must end where the word of the runs does (a space or the end follows it:
    the runs hold no other byte than a word character or a space); a start may be followed by anything."""
    if any(not w or w.strip(b"abcdefghijklmnopqrstuvwxyz0123456789_") for w in (*words, *starts)):
        raise ValueError("words and starts of lower-case ASCII word characters only")
    trie: dict[int, Any] = {}
    for word, whole in [(w, True) for w in words] + [(s, False) for s in starts]:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[-1 if whole else -2] = True

    def alternatives(node: dict[int, Any]) -> bytes:
        if -2 in node:  # a start ends here: any word going on from here is one
            return b""
        alts = [re.escape(bytes([ch])) + alternatives(nxt) for ch, nxt in sorted(node.items()) if ch >= 0]
        if -1 in node:
            alts.append(rb"(?![a-z0-9_])")
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return re.compile(b" " + alternatives(trie))


# What plain_chunk looks for in the word runs: a word of _FLAG_WORDS, or one starting as _FLAG_STARTS_RE says.
_FLAG_RE = _words_re(_FLAG_WORDS, _MOVE_STARTS + _DISPOSE_STARTS + (b"retir", b"swap"))
# bytes.translate table: an ASCII word character (``\w``: a letter, a digit, ``_``) stays, any other byte is a space.
_WORD_BYTES = bytes(ch if chr(ch).isascii() and (chr(ch).isalnum() or ch == ord("_")) else ord(" ")
                    for ch in range(256))
# ``bytes.lower`` (A-Z to a-z, nothing else) and then _WORD_BYTES, in one table.
_LOWER_WORD_BYTES = bytes(_WORD_BYTES[ord(bytes([ch]).lower())] for ch in range(256))


def _word_runs(raw: bytes) -> bytes:
    r"""ASCII ``raw`` lowered, each run of other bytes than word characters a space, behind a space: each word of
    it (a maximal run of ``\w``, the only places a ``\b(?:word|...)\b`` pattern can match) is ``b" " + word``
    followed by a space or the end."""
    return b" " + raw.translate(_LOWER_WORD_BYTES)


def may_name_move(text: str) -> bool:
    """False when :func:`ended_names`, :func:`stage` and :func:`disposed_things` all find nothing in ``text``: an
    ASCII text without a word of :data:`_MOVE_WORD_RE` or :data:`_DISPOSE_WORD_RE`. Told by set and byte work
    instead of the two pattern scans (most lines of a large index, seen for the first time, name no move)."""
    if not text.isascii():
        return True
    runs = _word_runs(text.encode("ascii"))
    return _MOVER_STARTS_RE.search(runs) is not None or not _MOVER_WORDS.isdisjoint(runs.split())


def plain_chunk(text: str) -> bool:
    """True when no line :func:`split_lines` gives for a chunk of this ``text`` (whether it analyses the text, reads
    a stored :func:`line_analysis`, or dates the lines by a write time) is a past state, states a change, gives a
    quantity or a plan's day, or names an ending, a stage or a thing gone (:func:`ended_names`, :func:`stage`,
    :func:`disposed_things`): what every pair supersession looks at needs of one of its hits.

    Told from the whole text at once, without splitting or analysing its lines, by what each of those needs: a
    word ``HISTORICAL_RE`` or ``CHANGE_RE`` starts with (the words :func:`line_analysis` looks for before running
    them), ``dd-dd`` for a calendar day, a number starting a word for a quantity (:func:`_char_classes`), a word of
    :func:`may_name_move`. A line break or a heading only adds what a line of its own would need, so the text as
    a whole is plain only when each of its lines is. A text that is not ASCII is never called plain."""
    if not text.isascii():  # told at once (str knows it): nothing worth remembering
        return False
    known = _PLAIN.get(text)
    if known is not None:
        return known
    plain = _plain_text(text)
    _remember_plain(text, plain)
    return plain


#: The rules of :func:`plain_chunk` beyond those ``LINE_ANALYSIS_VERSION`` covers (it looks for what
#: :func:`line_analysis` finds): bump it whenever :func:`plain_chunk` may answer otherwise for some text. An index
#: keeps each chunk's answer as :func:`plain_fact` gives it (``StoredPlain``); a stored fact of other versions is
#: not read (the text is told at query time instead) and the next sync refills it.
PLAIN_VERSION = 1
#: :func:`plain_fact` is this, plus 1 for a plain chunk: the two versions, then the answer in the lowest bit.
PLAIN_FACT = (LINE_ANALYSIS_VERSION << 8 | PLAIN_VERSION) << 1


def plain_fact(text: str) -> int:
    """:func:`plain_chunk`'s answer for ``text`` as an index stores it beside the chunk (an integer naming the
    versions of the rules it was told by: :func:`plain_of_fact` reads it back). Not remembered: an index tells
    every chunk it writes once, and the texts a search meets are remembered by :func:`plain_chunk`."""
    return PLAIN_FACT | _plain_text(text)


def plain_of_fact(fact: int | None) -> bool | None:
    """The answer a stored :func:`plain_fact` holds, or None when there is none or it was told by other rules."""
    if fact is None or fact >> 1 != PLAIN_FACT >> 1:
        return None
    return bool(fact & 1)


def _remember_plain(text: str, plain: bool) -> None:
    """Keep ``text``'s answer: by text (what the answer depends on alone), as the best hits of one index come back
    search after search. Bounded by the memory kept: each text's characters (ASCII, a byte each) and what an entry
    costs beside them (the string's header, the dict's slot), so short texts are bounded too; a dict of strings and
    booleans, which the collector does not track."""
    global _PLAIN_CHARS
    cost = len(text) + _PLAIN_ENTRY_COST
    if _PLAIN_CHARS + cost > PLAIN_KEPT_CHARS:
        _PLAIN.clear()
        _PLAIN_CHARS = 0
    if cost <= PLAIN_KEPT_CHARS:
        _PLAIN[text] = plain
        _PLAIN_CHARS += cost


def plain_chunks(texts: Iterable[str]) -> bool:
    """``all(map(plain_chunk, texts))``: the texts not remembered are told together, in one pass over them joined by
    line breaks, and remembered plain when that says so (a search's window of new hits: one scan of the flag words
    instead of one for each text, the scans costing more than the bytes they read).

    Why the joined text is plain exactly when each text is (ASCII texts; :func:`_plain_text`'s three tests): a line
    break is a space in the character classes and in the word runs. ``dd-dd`` holds no space, so it is in the joined
    classes only inside one text. A text starting ``d`` or ``vd`` starts the joined text or follows a line break
    (`` d``, `` vd``), and a `` d`` or `` vd`` of the joined classes is inside one text or a text's start after the
    break (the break cannot be the ``v``, nor the space before it and the ``v`` be the end of a text: ``v`` and
    ``d`` would be apart). A flag-word match is a space and word characters after it (:func:`_words_re`): inside one
    text's runs (each text's runs start with a space, as the break is one), and the whole-word test after it sees a
    space, or the end, where the text ends, as in the text alone. tests/test_supersession_plain.py checks it on
    random texts of flag words, numbers, dashes and line breaks."""
    unknown: list[str] = []
    for text in texts:
        if not text.isascii():
            return False
        known = _PLAIN.get(text)
        if known is None:
            unknown.append(text)
        elif not known:
            return False
    if len(unknown) < 2:
        return all(map(plain_chunk, unknown))
    if not _plain_text("\n".join(unknown)):
        return all(map(plain_chunk, unknown))  # one at least is not: each told (and remembered) alone
    for text in dict.fromkeys(unknown):  # each is plain: remembered (once) as plain_chunk remembers it
        _remember_plain(text, True)
    return True


#: :func:`plain_chunk`'s answers are kept within about this many bytes (4 MB): the ASCII texts' characters, and
#: ``_PLAIN_ENTRY_COST`` for each text.
PLAIN_KEPT_CHARS = 4_000_000
# What a remembered answer holds beside its text's characters: a str's header (49 bytes for ASCII), its dict slot
# and index (about 40 with the table's slack).
_PLAIN_ENTRY_COST = 96
_PLAIN: dict[str, bool] = {}
_PLAIN_CHARS = 0


def _plain_text(text: str) -> bool:
    """:func:`plain_chunk`, worked out."""
    if not text.isascii():
        return False
    raw = text.encode("ascii")
    classes = raw.translate(_CHAR_CLASSES)
    # ``dd-dd`` needs a ``-`` (found at once where there is one: a search for one byte).
    if (b"-" in raw and b"dd-dd" in classes) or classes.startswith((b"d", b"vd")) or b" d" in classes \
            or b" vd" in classes:
        return False
    return _FLAG_RE.search(_word_runs(raw)) is None


def disposes(a: Line, b: Line, weights: Mapping[str, float] | None = None) -> bool:
    """True when newer line ``b`` says one no longer has the thing older line ``a`` names (:func:`disposed_things`):
    every word of the thing is one of ``a``'s, and one at least is not the question's ("Sold the hatchback; now a red
    SUV" for "The car is a blue hatchback" when asked what car one drives: the value the older line answers with,
    not the subject the question names). With the query's ``weights``, ``a`` must be about the question (hold one of
    its words). What ``b`` then says, it says about the older line's value, though it shares no word with the
    question: the older line is no longer current. Washing the hatchback, its tyres, "replaced the hatchback's wiper
    blades", "sold my old bike" or "Tom sold his hatchback" end nothing ``a`` states."""
    things = disposed_things(b.text)
    if not things:
        return False
    named = [thing for thing in things if thing <= a.terms]  # most older lines name none of them: no more work
    if not named:
        return False
    if weights is not None and (a.terms.isdisjoint(weights)
                                or any(_identifier(term) for term in (a.terms - b.terms) & weights.keys())):
        return False  # not about the question, or the older line has the exact identifier asked for (as same_thing)
    asked = weights.keys() if weights is not None else frozenset()
    named = [thing for thing in named if not thing <= asked]
    if not named:
        return False
    # The older line already says it let the thing go ("I gave up on Speckled Buff ... Switched to Laguna B-Mix"): a
    # newer line saying so again ("switched from Speckled Buff") restates the change, it does not make it.
    own = disposed_things(a.text)
    return any(not any(thing & gone for gone in own) for thing in named)


def _new_values(a: Line, b: Line) -> set[str]:
    """The values of ``b`` that ``a`` does not state: not a name ``a`` opens with, not a date ``a`` writes out
    in full ("07-28" is "2026-07-28")."""
    words = {tok.lower() for tok in TOKEN_RE.findall(a.text)}
    out = set()
    for v in b.values - a.values:
        if v in words or (DAY_MONTH_RE.fullmatch(v) and any(w.endswith("-" + v) for w in words)):
            continue
        out.add(v)
    return out


def describe(line: Line, start: int | None = None, end: int | None = None) -> dict[str, Any]:
    return {"path": line.path, "startLine": start if start is not None else line.line_no,
            "endLine": end if end is not None else line.line_no}


_BY_LINE: dict[int, tuple[Any, dict[int, Any]]] = {}
_BY_LINE_MAX = 4096


def units_by_line(units: Sequence[tuple[int, int, Any]]) -> dict[int, Any]:
    """``{line: vector}`` of a chunk's stored line vectors (``(start, end, vector)`` units): the vector of the
    first unit covering each line. Do not change the dict: it is shared.

    Remembered per units list: the backend hands back the same list for a chunk search after search
    (the entry holds the list, so its id cannot be reused while the entry lives).
    """
    key = id(units)
    got = _BY_LINE.get(key)
    if got is not None and got[0] is units:
        return got[1]
    by_line: dict[int, Any] = {}
    for a, b, v in units:
        for n in range(a, b + 1):
            by_line.setdefault(n, v)
    if len(_BY_LINE) >= _BY_LINE_MAX:
        _BY_LINE.clear()
    _BY_LINE[key] = (units, by_line)
    return by_line


def closest_lines(lines: Sequence[Line], units: Sequence[tuple[int, int, Sequence[float]]] | None,
                  query_vector: Sequence[float] | None, margin: float = THRESHOLDS.answer_margin) -> list[Line]:
    """The lines whose stored vectors (``units``, ``(start, end, vector)``) are closest to the query's, within
    ``margin`` of the best, best first; empty without vectors."""
    if not units or query_vector is None:
        return []
    by_line = units_by_line(units)
    have = [ln for ln in lines if ln.line_no in by_line]
    if not have:
        return []
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with every vector backend
        scored = [(cos, ln) for ln in have if (cos := cosine(by_line[ln.line_no], query_vector)) is not None]
    else:
        m = np.asarray([by_line[ln.line_no] for ln in have], dtype=np.float32)
        q = np.asarray(query_vector, dtype=np.float32)
        if m.ndim != 2 or m.shape[1] != q.shape[0]:
            return []
        norms = np.linalg.norm(m, axis=1) * (float(np.linalg.norm(q)) or 1.0)
        norms[norms == 0] = 1.0
        scored = list(zip(((m @ q) / norms).tolist(), have, strict=True))
    if not scored:
        return []
    top = max(sc for sc, _ in scored)
    return [ln for sc, ln in sorted(scored, key=lambda p: -p[0]) if sc >= top - margin]


IDENT_RE = re.compile(r"(?<![\w.-])(?:\d{1,3}(?:\.\d{1,3}){3}|(?=[\w.-]*[^\W\d_])(?=[\w.-]*[\d_.])"
                      r"[^\W_][\w.-]{3,}[^\W_])(?![\w-])", re.UNICODE)


@functools.lru_cache(maxsize=16384)
def identifiers(text: str) -> frozenset[str]:
    """Names that pin a value down: ``kessler-backups-eu2``, ``vault.kessler.home``, ``10.20.0.1``, ``CT_105``."""
    return frozenset(m[0].lower() for m in IDENT_RE.finditer(text) if not DATE_LIKE_RE.match(m[0]))


def value_starts(dated: Sequence[tuple[Line, float]]) -> dict[str, float]:
    """``{identifier: the earliest known date a line states it}`` from ``(line, date)`` pairs."""
    out: dict[str, float] = {}
    for ln, since in dated:
        if ln.historical:
            continue
        for v in identifiers(ln.text):
            if since < out.get(v, math.inf):
                out[v] = since
    return out


def _about_query(ln: Line, others: Sequence[Line], weights: Mapping[str, float], zero: bool = False) -> bool:
    """True unless ``ln`` holds some of the query's weighted words but under ``as_of_answer_share`` of what the
    line of ``others`` holding most of them does (``zero``: a line holding none counts as about the query)."""
    score = query_score(ln, weights)
    if zero and score == 0:
        return True
    top = max((query_score(o, weights) for o in others), default=0.0)
    return score >= THRESHOLDS.as_of_answer_share * top


def _answer_lines(c: Any, inherited: Mapping[int, float] | None, weights: Mapping[str, float] | None,
                  query_terms: frozenset[str], answer: Sequence[Line] | None = None,
                  starts: Mapping[str, float] | None = None, strict: bool = False) -> list[tuple[Line, float | None]]:
    """The lines of undated candidate ``c`` most about the query (``answer`` when known, by meaning), each
    with the earliest it can have been written: its own or its heading's date, else the latest of the
    dates its identifiers are first known from (``starts``, :func:`value_starts`).

    ``strict``: a line close by meaning counts only when it is about the query by its words too
    (:func:`_about_query`); what leaves a hit out of an "as of" search uses this, while what vouches that a
    hit held on the date keeps every close line."""
    lines = split_lines(c.path, c.start_line, c.text, c.mtime)
    focus = best_lines(lines, weights) if weights is not None else (
        focus_lines(lines, query_terms) if query_terms else lines)
    if answer:
        if weights and strict:
            # A line close to the query by meaning that shares only a little of the query's weighted words (a
            # name on every note) is near it through that word, not as an answer: "Dentist: same practice as
            # Nadia since July 2026" beside "Knee: physio with Martijn ... discharged on 2026-08-05" for "How
            # often does Nadia see the physio for her knee?". Its date says nothing about when the answer was
            # written. A line sharing no query word is close by meaning alone (a paraphrase) and stays.
            answer = [ln for ln in answer if _about_query(ln, focus, weights, zero=True)]
        focus = list(answer) + [ln for ln in focus if ln not in answer]
    out = []
    for ln in focus:
        since = line_since(ln.text, (inherited or {}).get(ln.line_no))
        if since is not None and c.mtime is not None and since > c.mtime:
            since = None  # after the file was last written: a plan, not something that had happened
        if since is None and starts and not ln.historical:
            known = [starts[v] for v in identifiers(ln.text) if v in starts]
            since = max(known) if known else None
        out.append((ln, since))
    return out


def written_after(c: Any, cutoff: float, query_terms: frozenset[str],
                  written: tuple[float, float] | None = None, inherited: Mapping[int, float] | None = None,
                  weights: Mapping[str, float] | None = None, answer: Sequence[Line] | None = None,
                  starts: Mapping[str, float] | None = None) -> bool:
    """True when candidate ``c`` was written at or after ``cutoff`` (epoch seconds), as far as can be told.

    A dated note: its date. A transcript chunk with message timestamps: its
    first message. An undated note: when each of its lines most about the
    query (by the query's term ``weights`` among the candidates) records
    something that happened at or after the cutoff ("since 2026-08-03",
    "decommissioned on 2026-08-17", "since June 2026"), or sits under a
    heading or section intro dated then (``inherited``, ``{line: date}``);
    otherwise it is kept, since its lines' dates are unknown. ``answer``:
    the lines closest to the query by their stored vectors, when known.
    """
    if written is not None:
        return written[0] >= cutoff
    dated = file_date(c.path)
    if dated is not None:
        return dated >= cutoff
    focus = _answer_lines(c, inherited, weights, query_terms, answer, starts, strict=True)
    if not focus or not all(since is not None and since >= cutoff for _, since in focus):
        return False
    focus_lines_ = [ln for ln, _ in focus]
    # A past state of the subject ("Until 2026-06-20 the router was ...", under "## History") is what an
    # "as of" search asks for: the hit stays while such a line of it may still have held then.
    for ln in split_lines(c.path, c.start_line, c.text, c.mtime):
        if (ln.historical and (weights is None or (query_score(ln, weights) > 0 and _about_query(ln, focus_lines_, weights)))
                and line_since(ln.text, None) is None and not (ln.dates and min(ln.dates) < cutoff - DAY)):
            return False
    return True


def as_of_state(c: Any, cutoff: float, inherited: Mapping[int, float] | None,
                weights: Mapping[str, float] | None, answer: Sequence[Line] | None = None,
                starts: Mapping[str, float] | None = None) -> str:
    """``"held"`` when the lines of undated ``c`` most about the query are known to hold on the day before
    ``cutoff``: dated before it, or a past state whose end date is at or after it ("Until 2026-06-20 the
    router was ..."); else ``"unknown"``. Lines recorded as written at or after the cutoff did not exist
    then and do not count either way, as long as one line is known to hold ("Until 2026-06-20 the router
    was ..." beside "gatekeeper is the subnet router ... (moved from atlas on 2026-06-21)")."""
    focus = _answer_lines(c, inherited, weights, frozenset(), answer, starts)
    held = False
    for ln, since in focus:
        if since is not None and since < cutoff:
            held = True
        elif ln.historical and not ln.change and ln.dates and min(ln.dates) >= cutoff - DAY:
            held = True
        elif since is None:
            return "unknown"
        # else: recorded as written at or after the cutoff, so not part of the hit as memory stood then
    return "held" if held else "unknown"


def answered_later(c: Any, cutoff: float, inherited: Mapping[int, float] | None, answer: Sequence[Line]) -> bool:
    """True when every line of undated ``c`` closest to the query by meaning (``answer``) records that it was
    written at or after ``cutoff`` ("The legacy ingester was decommissioned on 2026-08-17" as of 2026-08-10):
    what makes the hit look close to the question did not exist on the date."""
    if not answer:
        return False
    for ln in answer:
        if ln.historical:
            return False
        since = line_since(ln.text, (inherited or {}).get(ln.line_no))
        if since is None or since < cutoff or (c.mtime is not None and since > c.mtime):
            return False
    return True


def versions(candidates: Sequence[Any], vectors: Mapping[str, Sequence[float]] | None, query: str,
             t: Thresholds = THRESHOLDS) -> list[Line]:
    """Every version of the fact the best candidate states, oldest first.

    The fact is the best candidate's line most about the query; a version is
    a line of another candidate that restates or changes it (or that it
    changes), judged like supersession (stored vectors when there are any,
    terms always).
    """
    if not candidates:
        return []
    qterms = salient(query)
    best = candidates[0]
    anchor_lines = focus_lines(split_lines(best.path, best.start_line, best.text, best.mtime), qterms)
    if not anchor_lines:
        return []
    anchor = anchor_lines[0]
    found = {(anchor.path, anchor.line_no): anchor}
    va = (vectors or {}).get(best.id)
    all_lines = [split_lines(c.path, c.start_line, c.text, c.mtime) for c in candidates]
    weights = term_weights(qterms, all_lines)
    for c, lines in zip(candidates[1:], all_lines[1:], strict=True):
        cos = cosine(va, (vectors or {}).get(c.id)) if vectors is not None else 1.0
        if cos is None:
            cos = 1.0 if vectors is None else None
        focus = focus_lines(lines, qterms)
        # A line saying one no longer has the thing the fact names ("Sold the hatchback") is a version of it too.
        for ln in focus + [ln for ln in disposing_lines(lines) if ln not in focus]:
            older, newer = (ln, anchor) if ln.moment < anchor.moment else (anchor, ln)
            if restates(older, newer, t) and (cos or 0.0) >= t.chunk_vector or same_thing(older, newer, cos, t) or (
                    newer.moment > older.moment and disposes(older, newer, weights)
                    and (cos is None or cos >= t.chunk_vector_lines)):
                found.setdefault((ln.path, ln.line_no), ln)
    return sorted(found.values(), key=lambda ln: (ln.moment, ln.path))
