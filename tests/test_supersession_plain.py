"""Supersession passes over hits that no pair can be made of without reading or analysing them (issue 13), and the
tests telling such hits from the text alone never pass over one a pair could be made of."""

from __future__ import annotations

from pathlib import Path

import pytest

from symi_memory.specs import PostProcessContext
from symi_memory.supersession import (
    _content_lines,
    disposed_things,
    ended_names,
    line_analysis,
    lines_from_analysis,
    may_name_move,
    plain_chunk,
    split_lines,
    stage,
)
from symi_memory.types import Candidate
from symi_memory_postprocess.supersede import Supersession

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "bench" / "datasets"


def _texts() -> list[str]:
    """Every note of the bench datasets whole, by paragraph and by line, and the memories of their query files."""
    out: list[str] = []
    for note in sorted(DATASETS.rglob("*.md")):
        text = note.read_text(encoding="utf-8")
        out += [text, *text.split("\n\n"), *text.split("\n")]
    for data in sorted(DATASETS.rglob("*.json*")):
        for piece in data.read_text(encoding="utf-8").split('"'):
            if len(piece) > 3:
                out.append(piece.replace("\\n", "\n"))
    return out


def _flat(lines: list | None) -> bool:
    return lines is not None and not any(
        ln.historical or ln.change or ln.quantities or ln.ahead or ended_names(ln.text) or stage(ln.text)
        or disposed_things(ln.text) for ln in lines)


# What each way a pair can be made needs, in a text of plain words: a past state, a stated change, a quantity, a
# plan's day, a person leaving a role, a case's stage, a thing gone (and a word the patterns ignore case in).
NOT_PLAIN = [
    "Until 2026-06-20 the router was the FRITZ!Box.",
    "Previously the dentist was Dr Jansen.",
    "The router is new.",
    "Vitamin D: 2000 IU a day.",
    "Standup at 09:45.",
    "Nadia's visit from 2026-09-10.",
    "Ferry on 07-28.",
    "Juf Marloes retires at the end of the year.",
    "The promotion case was submitted.",
    "Sold the hatchback.",
    "The Gazelle was stolen.",
    "Wearing Hoka instead of the Asics.",
    "Swapping the tyres.",
    "SOLD THE HATCHBACK",
    "Caf\u00e9 du Nord is the place.",
    "# Notes\nThe car is blue.\nreplaced the wiper blades",
]


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_a_text_with_what_a_pair_needs_is_not_plain(text: str) -> None:
    assert not plain_chunk(text)


def test_a_text_of_plain_words_is_plain() -> None:
    # The scale bench's chunks: cluster words and common words, numbers inside words, no line any pair can use.
    assert plain_chunk("c59w27 c59w15 common268 common243\nc59w11 common9 the car is blue")
    assert plain_chunk("# Heading\n\nThe team meets in the big room; coffee is good.")


def test_no_text_called_plain_has_a_line_a_pair_could_use() -> None:
    # Soundness over every text of the bench datasets, through every way split_lines gives lines: the text
    # analysed, its stored analysis read, and a transcript's write time dating the lines.
    texts = _texts()
    plain = 0
    for text in texts:
        for _offset, line, _heading in _content_lines(text):
            if not may_name_move(line):
                assert not (ended_names(line) or stage(line) or disposed_things(line)), line
        if not plain_chunk(text):
            continue
        plain += 1
        stored = line_analysis("memory/notes.md", 1, text)
        assert _flat(split_lines("memory/notes.md", 1, text, 1.7e9)), text
        assert _flat(split_lines("memory/2026-05-01.md", 3, text, None, (1.7e9, 1.7e9))), text
        assert _flat(lines_from_analysis(stored, "memory/notes.md", 1, text, 1.7e9)), text
        assert _flat(lines_from_analysis(stored, "memory/notes.md", 1, text, None, (1.7e9, 1.7e9))), text
    assert plain > 1000 and plain < len(texts)


def _candidate(n: int, text: str, score: float) -> Candidate:
    return Candidate(id=f"c{n}", path=f"memory/n{n}.md", start_line=1, end_line=1, source="memory", text=text,
                     score=score, mtime=1.7e9 + n)


def test_plain_hits_are_passed_over_without_reading_their_vectors_or_analyses() -> None:
    read: list[str] = []

    def vectors(ids: list[str]) -> dict[str, list[float]]:
        read.append("vectors")
        return {i: [1.0, 0.0, 0.0] for i in ids}

    def analysis(ids: list[str]) -> dict[str, bytes]:
        read.append("analysis")
        return {}

    plain = [_candidate(n, f"c{n}w3 common{n} the car is blue and quiet", 1.0 - n / 10) for n in range(5)]
    ctx = PostProcessContext(query="car colour", now=1.8e9, vectors=vectors, line_analysis=analysis)
    assert Supersession().process(plain, ctx) == plain
    assert read == []
    # One hit saying the car changed: the hits are read and judged as before.
    changed = [*plain, _candidate(9, "The car is red now.", 0.9)]
    Supersession().process(changed, ctx)
    assert "vectors" in read



@pytest.mark.parametrize("body", [r"\b(?:sold|)\b", r"\b(?:|sold)\b", r"\b(?:sold||gone)\b", r"\b(?:sold|g?)\b"])
def test_a_word_pattern_that_matches_an_empty_word_is_refused(body: str) -> None:
    # An empty alternative (or one of optional letters only) makes the pattern match at every word boundary, so
    # any line "names a move"; the word sets plain_chunk and may_name_move read in its place would say none does.
    import re

    from symi_memory.supersession import _pattern_words

    assert re.compile(body).search("the car is blue")
    with pytest.raises(ValueError):
        _pattern_words(re.compile(body))
