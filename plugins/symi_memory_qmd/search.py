"""Searching qmd: one call per collection, merged by best score, then the limits.

Several ``-c`` flags in one call misbehave in qmd, so every collection gets
its own call. A mode that rejects one of our flags is retried with ``query``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

from symi_memory.citations import format_citation
from symi_memory.types import Candidate

from .collections import CollectionSpec
from .parse import QmdHit, is_flag_rejection, parse_search_output
from .paths import display_path
from .runner import QmdFailed, QmdRunner

__all__ = ["QmdSearcher", "apply_limits", "hits_to_candidates"]

log = logging.getLogger("symi_memory.qmd")

_FOOTER = "\n\nSource: "


class QmdSearcher:
    """Runs ``qmd <mode> <query> --json -n <limit> -c <collection>`` per collection."""

    def __init__(self, runner: QmdRunner, mode: str, *, timeout_ms: int, workers: int = 3) -> None:
        self.runner = runner
        self.mode = mode
        self.timeout_ms = timeout_ms
        self.workers = workers

    def _one(self, text: str, limit: int, collection: str) -> list[QmdHit]:
        args = [text, "--json", "-n", str(limit), "-c", collection]
        mode = self.mode
        try:
            out = self.runner.run([mode, *args], timeout_ms=self.timeout_ms)
        except QmdFailed as exc:
            if mode == "query" or not is_flag_rejection(exc.stderr + "\n" + exc.stdout):
                raise
            log.warning("qmd %s rejected a flag (%s); retrying with qmd query", mode, exc)
            self.mode = "query"
            out = self.runner.run(["query", *args], timeout_ms=self.timeout_ms)
        return parse_search_output(out.stdout)

    def search(self, text: str, limit: int, collections: Sequence[str]) -> list[QmdHit]:
        """All collections' hits, best score first (ties keep collection order)."""
        # A leading dash would be read as a flag.
        text = text.strip().lstrip("-").strip()
        if not text or not collections:
            return []
        if len(collections) == 1 or self.workers <= 1:
            results = [self._one(text, limit, c) for c in collections]
        else:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(collections))) as pool:
                results = list(pool.map(lambda c: self._one(text, limit, c), collections))
        merged = [hit for hits in results for hit in hits]
        merged.sort(key=lambda h: -h.score)
        return merged


def hits_to_candidates(
    hits: Sequence[QmdHit], collections: Mapping[str, CollectionSpec], workspace: Path
) -> list[Candidate]:
    """Map hits to candidates with display paths; duplicates keep their best score."""
    out: list[Candidate] = []
    seen: set[tuple[str, int, int]] = set()
    for hit in hits:
        spec = collections.get(hit.collection)
        path = display_path(spec, hit.collection, hit.rel, workspace)
        key = (path, hit.start_line, hit.end_line)
        if key in seen:
            continue
        seen.add(key)
        mtime = None
        if spec is not None:
            try:
                mtime = os.stat(os.path.join(spec.path, hit.rel)).st_mtime
            except OSError:
                mtime = None
        out.append(
            Candidate(
                id=f"qmd:{hit.collection}/{hit.rel}#{hit.start_line}-{hit.end_line}",
                path=path,
                start_line=hit.start_line,
                end_line=hit.end_line,
                score=hit.score,
                text=hit.text,
                source=spec.source if spec is not None else "memory",
                text_score=hit.score,
                mtime=mtime,
            )
        )
    return out


def apply_limits(
    candidates: Sequence[Candidate],
    *,
    max_results: int,
    max_snippet_chars: int,
    max_injected_chars: int,
    cite: bool,
) -> list[Candidate]:
    """Cap the count, each snippet, and the total injected text.

    The total counts what the agent will see: the trimmed snippet plus the
    ``\\n\\nSource: path#L5-L7`` footer when citations apply. The last hit
    that does not fit is cut to the room left, if any text still fits.
    """
    out: list[Candidate] = []
    used = 0
    for cand in candidates[: max(0, max_results)]:
        text = cand.text.strip()[:max_snippet_chars].strip()
        footer = len(_FOOTER) + len(format_citation(cand.path, cand.start_line, cand.end_line)) if cite else 0
        room = max_injected_chars - used - footer
        if room <= 0:
            break
        if len(text) > room:
            text = text[:room].rstrip()
            if text:
                out.append(_with_text(cand, text))
            break
        out.append(_with_text(cand, text))
        used += len(text) + footer
    return out


def _with_text(cand: Candidate, text: str) -> Candidate:
    return attrs.evolve(cand, text=text)
