"""Maximal Marginal Relevance with Unicode-aware Jaccard similarity."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from symi_memory.specs import PostProcessContext
from symi_memory.types import Candidate

__all__ = ["Mmr", "jaccard", "tokens"]

WORD_RE = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> frozenset[str]:
    return frozenset(t.lower() for t in WORD_RE.findall(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


@attrs.frozen
class Mmr:
    lambda_: float

    @classmethod
    def from_config(cls, hybrid: Mapping[str, Any]) -> Mmr | None:
        cfg = hybrid.get("mmr") or {}
        if not cfg.get("enabled"):
            return None
        return cls(min(1.0, max(0.0, float(cfg.get("lambda", 0.7)))))

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> list[Candidate]:
        if len(candidates) < 2 or self.lambda_ >= 1.0:
            return list(candidates)
        scores = [c.score for c in candidates]
        lo, hi = min(scores), max(scores)
        rel = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
        toks = [tokens(c.text) for c in candidates]
        remaining = list(range(len(candidates)))
        # max similarity of each remaining candidate to anything chosen, updated as we go: O(n^2), not O(n^3).
        max_sim = [0.0] * len(candidates)
        chosen: list[int] = []
        while remaining:
            best = remaining[0]
            best_val = self.lambda_ * rel[best] - (1 - self.lambda_) * max_sim[best]
            for i in remaining[1:]:
                val = self.lambda_ * rel[i] - (1 - self.lambda_) * max_sim[i]
                # Ties go to the higher raw score.
                if val > best_val or (val == best_val and scores[i] > scores[best]):
                    best, best_val = i, val
            chosen.append(best)
            remaining.remove(best)
            for i in remaining:
                sim = jaccard(toks[i], toks[best])
                if sim > max_sim[i]:
                    max_sim[i] = sim
        return [candidates[i] for i in chosen]
