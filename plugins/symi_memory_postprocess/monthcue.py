"""Month cue: a question that names a month favours the dated notes of that month.

"How much did Wei sell at the art event in early May?" is about what the
notes of May say; the daily note of 2026-05-04 and a note of July that
mentions an art event read alike to both sides of the search, and the date
in the file name is the one thing that tells them apart. A dated note
(``memory/2026-05-04.md``, :func:`symi_memory.chronology.file_date`) of a
month the query names gets ``boost`` added to the log-odds of its score
(0.4: a score of 0.10 becomes 0.14). "May 2026" asks for that year's May
only; "May" alone for any year's. A lower-case "may", "march" or "august"
and a short form ("Sept") are a month only after a word such as in, of,
mid, from, between or last ("in May", "mid-May"), or before a day or a
year; a capitalised one is not a month when it opens a sentence ("May I
..."), is followed by a surname ("May Chen") or is the subject of a
question's verb ("What did June say?"). "after June" and "before May" do not
name the month asked about. Undated notes, a query naming no
month and an identifier look-up (a hash, ticket or env var, where only the
needle counts; a year is not one) are left as they were.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import attrs

from symi_memory.chronology import file_date
from symi_memory.index.keyword import identifier_tokens
from symi_memory.specs import PostProcessContext
from symi_memory.types import Candidate, LazyCandidates

__all__ = ["MonthCue", "months_named"]

MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
               "november", "december")
# Short forms count only beside a day, a year or a word that makes them a date ("in Sept", "Oct 3", "Jan 2026"):
# alone, "Jan" is a name and "mar", "sep" are words of other languages.
ABBREVIATIONS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
                 "oct": 10, "nov": 11, "dec": 12}
# The month word, a day ("May 5", "May 5th,") and a year ("May 2026", "May 5, 2026", "May of 2025").
_MONTH_RE = re.compile(r"(?<!\w)(" + "|".join(MONTH_NAMES + tuple(ABBREVIATIONS)) + r")(?:\.|(?!\w))"
                       r"(?:\s+(\d{1,2})(?!\d)(?:st|nd|rd|th)?,?)?(?:\s+(?:of\s+)?(\d{4}))?(?!\w)", re.IGNORECASE)
_YEAR_RE = re.compile(r"^(?:19|20)\d\d$")
# Words after which a month word is the month: "in May", "mid-May", "from march to may", "last August", and
# another month ("march and may").
_MONTH_BEFORE_RE = re.compile(r"\b(?:in|of|early|mid|late|during|since|until|till|from|by|to|through|between|"
                              r"last|next|every|end of|(?:" + "|".join(MONTH_NAMES + tuple(ABBREVIATIONS)) +
                              r")\.?\s+(?:and|or))[\s-]+$", re.IGNORECASE)
# Otherwise "may" the verb, "march" the verb and "august" the adjective are far commoner lower-case than the month.
_WORDS_TOO = ("may", "march", "august")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?]\s+)\W*$")
# "May Chen", "June Park": a month word followed by a capitalised word is a person's name ...
_SURNAME_RE = re.compile(r"\s+(?-i:[A-Z][a-z])")
# ... and so is one that is the subject of a question's verb ("What did June say?").
_AUXILIARY_BEFORE_RE = re.compile(r"\b(?:did|does|do|will|would|can|could|should|has|had)\s+$", re.IGNORECASE)
_LOWER_WORD_RE = re.compile(r"\s+(?-i:[a-z])")
# "after June", "before May": the month bounds the time asked about and is not part of it.
_BOUNDARY_BEFORE_RE = re.compile(r"\b(?:after|before)\s+$", re.IGNORECASE)
_WINDOW = 40  # characters before a month word that these look at


# The letters other than ASCII ones that IGNORECASE matches to a month word's letters (the dotless and dotted i, the
# long s), as the ASCII letters they match: lowered alone, "Aprıl" or "ſeptember" was no month name and raised.
_ASCII_LETTERS = str.maketrans({"\u0131": "i", "\u0130": "i", "\u017f": "s"})
# Every month word of _MONTH_RE holds one of these (its first three letters).
_MONTH_STARTS = tuple(dict.fromkeys(name[:3] for name in MONTH_NAMES + tuple(ABBREVIATIONS)))


def months_named(query: str) -> set[tuple[int, int | None]]:
    """``{(month, year or None)}`` the query names ("in May", "early June 2026"); empty for none."""
    out: set[tuple[int, int | None]] = set()
    # Most queries name no month: told by a substring search per month (about 1 us) instead of _MONTH_RE, which
    # tries its alternatives at every character. Case-folded: what IGNORECASE matches of these letters (the long
    # s, for "sep") folds to them.
    folded = query.casefold()
    if not any(start in folded for start in _MONTH_STARTS):
        return out
    for m in _MONTH_RE.finditer(query):
        word, day, year = m.group(1), m.group(2), m.group(3)
        low = word.translate(_ASCII_LETTERS).lower()
        # The words around it, within a bounded window (a long query with many month words stays linear).
        start, end = m.start(), m.end()
        lo = max(0, start - _WINDOW)
        if _BOUNDARY_BEFORE_RE.search(query, lo, start):
            continue
        if not (day or year or _MONTH_BEFORE_RE.search(query, lo, start)):
            if low in ABBREVIATIONS or (word.islower() and low in _WORDS_TOO):
                continue
            if low == "may" and _SENTENCE_START_RE.search(query, lo, start):  # "May I ...", "Thanks! May we ..."
                continue
            surname = _SURNAME_RE.match(query, end)
            if word[0].isupper() and (surname and not _MONTH_RE.match(query, surname.end() - 2)
                                      or _AUXILIARY_BEFORE_RE.search(query, lo, start)
                                      and _LOWER_WORD_RE.match(query, end)):
                continue
        month = ABBREVIATIONS[low] if low in ABBREVIATIONS else MONTH_NAMES.index(low) + 1
        out.add((month, int(year) if year else None))
    return out


@attrs.frozen
class MonthCue:
    boost: float
    #: Reads its candidates through the Sequence interface alone, and hands back the ones it was given when it changes
    #: none: the pipeline gives it the backend's candidates as they are (LazyCandidates, made as they are read).
    takes_lazy_candidates: ClassVar[bool] = True

    @classmethod
    def from_config(cls, hybrid: Mapping[str, Any]) -> MonthCue | None:
        cfg = hybrid.get("monthCue") or {}
        if not cfg.get("enabled", True):
            return None
        boost = float(cfg.get("boost", 0.4))
        return cls(boost) if boost > 0 else None

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> Sequence[Candidate]:
        named = months_named(ctx.query)
        # A year ("May 2026") is a token with digits like an identifier, but it is part of the month named.
        if not named or any(not _YEAR_RE.match(t) for t in identifier_tokens(ctx.query)):
            return candidates if isinstance(candidates, LazyCandidates) else list(candidates)
        out = []
        for c in candidates:
            stamp = file_date(c.path)
            if stamp is None or not 0.0 < c.score < 1.0:
                out.append(c)
                continue
            day = datetime.fromtimestamp(stamp, tz=UTC)
            if not any(day.month == month and year in (None, day.year) for month, year in named):
                out.append(c)
                continue
            z = math.log(c.score / (1.0 - c.score)) + self.boost
            out.append(attrs.evolve(c, score=1.0 / (1.0 + math.exp(-z))))
        return out
