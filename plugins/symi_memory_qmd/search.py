"""Searching qmd: one call per collection, merged by best score.

Several ``-c`` flags in one call misbehave in qmd, so every collection gets
its own call. A mode that rejects one of our flags is retried with ``query``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from symi_memory.index.analysis import capped_query
from symi_memory.types import Candidate

from .collections import CollectionSpec
from .parse import QmdHit, is_flag_rejection, parse_search_output
from .paths import display_path
from .runner import QmdFailed, QmdRunner

__all__ = ["QmdSearcher", "hits_to_candidates"]

log = logging.getLogger("symi_memory.qmd")

#: The most bytes of query handed to qmd: the query is one argument of its command line, and the kernel refuses
#: an argument over 128 KiB (E2BIG, "Argument list too long"), which was taken for a broken qmd and sent searches
#: to the fallback for a while. The query is cut to its first 1,024 distinct words first
#: (:func:`~symi_memory.index.analysis.capped_query`, as the core cuts every search's); repeats and long words can
#: still make more: past it each word is kept once, and only then is the text cut.
MAX_QUERY_BYTES = 100_000

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
        text, _ = capped_query(text)  # said by the core's search when it cut it (a direct call cuts it here)
        if len(text) > MAX_QUERY_BYTES // 4 and len(raw := text.encode("utf-8")) > MAX_QUERY_BYTES:
            # Each word once first (a pasted log repeats its lines): every word is still looked up, and qmd's
            # keyword search (all words required, repeats adding nothing) finds the same; cut only if still over.
            text = " ".join(dict.fromkeys(text.split()))
            if len(once := text.encode("utf-8")) > MAX_QUERY_BYTES:
                cut = once[:MAX_QUERY_BYTES].decode("utf-8", "ignore")
                text = cut.rsplit(None, 1)[0] if any(c.isspace() for c in cut) else cut  # no word cut in two
            log.info("qmd: the query was cut to %d bytes (of %d; each word once, then its first ones): a longer "
                     "argument cannot be run", len(text.encode("utf-8")), len(raw))
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

