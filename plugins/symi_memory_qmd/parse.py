"""Parsing ``qmd search|vsearch|query --json`` output.

Shapes observed from the real CLI (@tobilu/qmd 2.8.3, ``--json -n N -c C``):

- stdout is a JSON array (``[]`` when nothing matches, exit 0)::

      [{"docid": "#840496", "score": 0.46,
        "file": "qmd://memory-dir-main/2026-05-01.md", "line": 3,
        "title": "2026-05-01",
        "snippet": "@@ -2,4 @@ (1 before, 0 after)\\n\\nMet with Bob...\\nDecided...\\n"}]

  ``score`` is rounded to two decimals and is 0 for BM25 hits in very small
  collections. ``line`` is the best-matching line; the snippet header gives
  the first line and the line count of the excerpt (the count includes the
  empty string after a final newline). Paths keep their case and spaces.
- Without ``--json`` an empty answer is the text ``No results found.``.
- Unknown flags are ignored (exit 0); an unknown collection prints
  ``Collection not found: X`` on stderr and exits 1; a missing query prints
  ``Usage: qmd search [options] <query>`` and exits 1.
- ``vsearch`` without embeddings prints ``[]`` plus a warning on stderr;
  ``query`` and ``embed`` without the model runtime exit 1
  (``NoBinaryFoundError``).
- Older builds reject flags ("unknown option", "unrecognized option", ...).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

__all__ = [
    "QmdHit",
    "QmdParseError",
    "is_flag_rejection",
    "parse_search_output",
    "snippet_lines",
    "added_changes",
    "update_changes",
    "update_counts",
]

_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? @@[^\n]*(?:\n|$)")
_NO_RESULTS = re.compile(r"no results found", re.IGNORECASE)
_FLAG_REJECTED = re.compile(
    r"unknown (flag|option|argument)|unrecognized (flag|option|argument)|invalid option|unexpected argument",
    re.IGNORECASE,
)


class QmdParseError(ValueError):
    """qmd's output held no JSON result array."""


@attrs.frozen(kw_only=True)
class QmdHit:
    """One qmd result: ``collection``/``rel`` from ``qmd://<collection>/<rel>``."""

    collection: str
    rel: str
    score: float
    start_line: int
    end_line: int
    text: str
    docid: str = ""
    title: str = ""


def is_flag_rejection(message: str) -> bool:
    """Tell whether an error text says the mode rejected one of our flags."""
    return bool(_FLAG_REJECTED.search(message))


def snippet_lines(snippet: str, line: int | None) -> tuple[int, int, str]:
    """Split ``@@ -start,count @@`` off a snippet: ``(start, end, body)``.

    The end comes from the lines the body really has (a trailing newline does
    not add one), capped by the header's count. Without a header the hit's
    ``line`` is used for both ends.
    """
    m = _HEADER.match(snippet)
    if not m:
        start = max(1, int(line or 1))
        body = snippet.rstrip("\n")
        return start, start + max(0, body.count("\n")), body
    start = max(1, int(m.group(1)))
    count = int(m.group(2)) if m.group(2) is not None else 1
    body = snippet[m.end():].rstrip("\n")
    n = body.count("\n") + 1 if body else 1
    return start, start + max(1, min(n, count or n)) - 1, body


def _find_array(text: str) -> list[Any] | None:
    decoder = json.JSONDecoder()
    pos = text.find("[")
    while pos != -1:
        try:
            value, _ = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        pos = text.find("[", pos + 1)
    return None


def parse_search_output(stdout: str) -> list[QmdHit]:
    """Parse a search answer, tolerating log noise around the JSON array."""
    items = _find_array(stdout)
    if items is None:
        if _NO_RESULTS.search(stdout) or not stdout.strip():
            return []
        preview = stdout.strip()[:80]
        raise QmdParseError(f"qmd printed no JSON result array (starts with {preview!r})")
    hits = []
    for item in items:
        uri = str(item.get("file") or "")
        if not uri.startswith("qmd://") or "/" not in uri[6:]:
            continue
        collection, rel = uri[6:].split("/", 1)
        start, end, body = snippet_lines(str(item.get("snippet") or ""), item.get("line"))
        try:
            score = float(item.get("score") or 0.0)
        except (TypeError, ValueError):
            score = 0.0
        hits.append(
            QmdHit(
                collection=collection,
                rel=rel,
                score=score,
                start_line=start,
                end_line=end,
                text=body,
                docid=str(item.get("docid") or ""),
                title=str(item.get("title") or ""),
            )
        )
    return hits


_UPDATE_HEAD = re.compile(r"^\[\d+/\d+\] (\S+) \(")
_INDEXED = re.compile(r"^Indexed: (\d+) new, (\d+) updated, (\d+) unchanged, (\d+) removed")


def update_changes(text: str) -> dict[str, tuple[int, int, int, int]]:
    """What ``qmd update`` did per collection, from its report: ``(new, updated, unchanged, removed)``. Collections it
    does not report are left out."""
    out: dict[str, tuple[int, int, int, int]] = {}
    name = None
    for line in text.splitlines():
        line = line.strip()
        head = _UPDATE_HEAD.match(line)
        if head is not None:
            name = head.group(1)
            continue
        done = _INDEXED.match(line)
        if done is not None and name is not None:
            new, updated, unchanged, removed = (int(g) for g in done.groups())
            out[name] = (new, updated, unchanged, removed)
            name = None
    return out


def added_changes(text: str) -> tuple[int, int, int, int] | None:
    """What ``qmd collection add`` indexed as it added a collection (``Indexed: N new, ...``), or None."""
    for line in text.splitlines():
        done = _INDEXED.match(line.strip())
        if done is not None:
            new, updated, unchanged, removed = (int(g) for g in done.groups())
            return new, updated, unchanged, removed
    return None


def update_counts(text: str) -> dict[str, int]:
    """Documents per collection after ``qmd update``, from its report (``[1/3] <name> (<mask>)`` ... ``Indexed: N
    new, N updated, N unchanged, N removed``): new + updated + unchanged. Collections it does not report are left out.
    """
    return {name: new + updated + unchanged for name, (new, updated, unchanged, _) in update_changes(text).items()}
