"""Temporal decay: ``score * exp(-ln2 / halfLife * ageDays)`` for dated notes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from symi_memory.chronology import file_date  # one dated-file rule, shared with supersession
from symi_memory.specs import PostProcessContext
from symi_memory.types import Candidate

__all__ = ["TemporalDecay", "file_date", "is_evergreen"]

DAY = 86_400.0


def is_evergreen(path: str) -> bool:
    """``MEMORY.md``, ``memory.md`` and undated notes under ``memory/`` never decay."""
    if path in ("MEMORY.md", "memory.md"):
        return True
    return path.startswith("memory/") and file_date(path) is None


@attrs.frozen
class TemporalDecay:
    half_life_days: float

    @classmethod
    def from_config(cls, hybrid: Mapping[str, Any]) -> TemporalDecay | None:
        cfg = hybrid.get("temporalDecay") or {}
        if not cfg.get("enabled"):
            return None
        return cls(max(1.0, float(cfg.get("halfLifeDays", 30))))

    def multiplier(self, age_days: float) -> float:
        return math.exp(-math.log(2) / self.half_life_days * max(0.0, age_days))

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        out = []
        for c in candidates:
            # Evergreen notes never age; an identifier lookup (hash, ticket ID) is not a stale fact.
            if is_evergreen(c.path) or c.identifier_match:
                out.append(c)
                continue
            stamp = file_date(c.path)
            if stamp is None:
                stamp = c.mtime
            if stamp is None:
                out.append(c)
                continue
            out.append(attrs.evolve(c, score=c.score * self.multiplier((ctx.now - stamp) / DAY)))
        return out
