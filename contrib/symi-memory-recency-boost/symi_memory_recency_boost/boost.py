"""The recency boost: close part of the gap to a perfect score for fresh notes.

A note's date is the one in its file name (``memory/2026-07-03.md``,
``memory/2026-07-03-offsite.md``) or else its modification time. A note
``age`` days old, within ``windowDays``, gets

    score + (1 - score) * boost * (1 - age / windowDays)

so a note written just now closes ``boost`` of its gap to 1.0, the lift fades
linearly to nothing at the window's edge, scores stay within 0..1, and older
notes keep their score (unlike temporal decay, nothing is ever lowered).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from symi_memory.specs import PostProcessContext
from symi_memory.types import Candidate

__all__ = ["RecencyBoost", "note_timestamp"]

log = logging.getLogger("symi_memory.plugins.recency_boost")

DAY = 86_400.0
NAME_DATE = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})(?:[-_.][^/]*)?\.md$")


def note_timestamp(path: str, mtime: float | None) -> float | None:
    """Epoch seconds of a note: the date in its file name (UTC midnight), else ``mtime``."""
    m = NAME_DATE.search(path)
    if m:
        try:
            return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC).timestamp()
        except ValueError:
            pass  # 2026-02-31 is not a date; fall back to the file's mtime
    return mtime


@attrs.frozen(kw_only=True)
class RecencyBoost:
    """The post-processor; build it with :meth:`from_config`."""

    window_days: float
    boost: float
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, settings: Mapping[str, Any]) -> RecencyBoost | None:
        """None when ``enabled`` is false or the settings make the boost a no-op."""
        if not settings.get("enabled"):
            return None
        window = float(settings.get("windowDays", 14.0))
        boost = min(1.0, max(0.0, float(settings.get("boost", 0.2))))
        if window <= 0 or boost == 0:
            log.info("recencyBoost is enabled but windowDays=%s, boost=%s make it a no-op", window, boost)
            return None
        return cls(window_days=window, boost=boost, exclude=tuple(settings.get("exclude", ())))

    def lift(self, age_days: float) -> float:
        """The share of the gap to 1.0 a note of this age gets (0 outside the window)."""
        if age_days < 0:
            age_days = 0.0  # clock skew or a note dated today in a later time zone
        if age_days >= self.window_days:
            return 0.0
        return self.boost * (1.0 - age_days / self.window_days)

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        """New candidates with boosted scores; the input is left untouched."""
        out = []
        for c in candidates:
            stamp = None if c.path.startswith(self.exclude) else note_timestamp(c.path, c.mtime)
            lift = 0.0 if stamp is None else self.lift((ctx.now - stamp) / DAY)
            out.append(attrs.evolve(c, score=c.score + (1.0 - c.score) * lift) if lift > 0 else c)
        return out
