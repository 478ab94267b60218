"""Month cue: a question that names a month favours the dated notes of that month.

"How much did Wei sell at the art event in early May?" is about what the
notes of May say; the daily note of 2026-05-04 and a note of July that
mentions an art event read alike to both sides of the search, and the date
in the file name is the one thing that tells them apart. A dated note
(``memory/2026-05-04.md``, :func:`symi_memory.chronology.file_date`) of a
month the query names gets ``boost`` added to the log-odds of its score
(0.4: a score of 0.10 becomes 0.14). "May 2026" asks for that year's May
only; "May" alone for any year's. A lower-case "may" is a month only after
in, of, early, mid, late, during, since, until or "end of" ("in May",
"mid-May"), or before a year. Undated notes, a query naming no month and an
identifier look-up (a hash, ticket or env var, where only the needle
counts) are left as they were.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from symi_memory.chronology import file_date
from symi_memory.index.keyword import identifier_tokens
from symi_memory.specs import PostProcessContext
from symi_memory.types import Candidate

__all__ = ["MonthCue", "months_named"]

MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
               "november", "december")
_MONTH_RE = re.compile(r"(?<!\w)(" + "|".join(MONTH_NAMES) + r")(?:\s+(\d{4}))?(?!\w)", re.IGNORECASE)
_YEAR_RE = re.compile(r"^(?:19|20)\d\d$")
# "may" the verb is far commoner than the month: lower-case, it is the month only after these or before a year.
_MAY_BEFORE_RE = re.compile(r"(?:\b(?:in|of|early|mid|late|during|since|until|from|by|end of)[\s-]+)$", re.IGNORECASE)


def months_named(query: str) -> set[tuple[int, int | None]]:
    """``{(month, year or None)}`` the query names ("in May", "early June 2026"); empty for none."""
    out: set[tuple[int, int | None]] = set()
    for m in _MONTH_RE.finditer(query):
        word, year = m.group(1), m.group(2)
        if word.lower() == "may" and word != "May" and not year and not _MAY_BEFORE_RE.search(query[:m.start()]):
            continue
        if word == "May" and not year and m.start() == 0:  # "May I ...": the sentence's first word
            continue
        out.add((MONTH_NAMES.index(word.lower()) + 1, int(year) if year else None))
    return out


@attrs.frozen
class MonthCue:
    boost: float

    @classmethod
    def from_config(cls, hybrid: Mapping[str, Any]) -> MonthCue | None:
        cfg = hybrid.get("monthCue") or {}
        if not cfg.get("enabled", True):
            return None
        boost = float(cfg.get("boost", 0.4))
        return cls(boost) if boost > 0 else None

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        named = months_named(ctx.query)
        # A year ("May 2026") is a token with digits like an identifier, but it is part of the month named.
        if not named or any(not _YEAR_RE.match(t) for t in identifier_tokens(ctx.query)):
            return list(candidates)
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
