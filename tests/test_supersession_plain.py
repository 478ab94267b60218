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
    plain_chunks,
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


def _assert_flat_every_way(text: str) -> None:
    """Every way split_lines gives a plain text's lines (analysed with an mtime, a dated file's, a transcript's write
    times, a stored analysis with either) holds no line a pair could be made of."""
    stored = line_analysis("memory/notes.md", 1, text)
    assert _flat(split_lines("memory/notes.md", 1, text, 1.7e9)), text
    assert _flat(split_lines("memory/2026-05-01.md", 3, text, None, (1.7e9, 1.7e9))), text
    assert _flat(split_lines("sessions/s.jsonl", 3, text, None, (1.7e9, 1.7e9))), text
    assert _flat(lines_from_analysis(stored, "memory/notes.md", 1, text, 1.7e9)), text
    assert _flat(lines_from_analysis(stored, "memory/notes.md", 1, text, None, (1.7e9, 1.7e9))), text


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
        _assert_flat_every_way(text)
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


def _first_words(pattern: str, flags: int = 0) -> set[tuple[str, bool]]:
    r"""``(word, open)`` for each first word a ``\b...`` pattern of words can match: ``open`` when ``\w*`` follows
    its letters (``retir\w*``). Any other shape raises, so a change to a pattern this cannot read fails the test."""
    import re._parser as sre  # type: ignore[import-not-found]

    def walk(states: set[tuple[str, bool, bool]], items: list) -> set[tuple[str, bool, bool]]:
        for op, arg in items:
            name = str(op)
            if name == "AT" or name == "ASSERT":  # \b, the look-ahead on first letters
                continue
            if name == "LITERAL":
                ch = chr(arg)
                states = {(w, o, True) if d or not ch.isalpha() else (w + ch, o, False) for w, o, d in states}
            elif name == "MAX_REPEAT" and arg[:2] == (0, 1):
                states = states | walk(states, list(arg[2]))
            elif name == "MAX_REPEAT" and arg[0] == 0 and str(arg[2][0][0]) == "IN":  # \w*
                states = {(w, True, True) if not d else (w, o, d) for w, o, d in states}
            elif name == "BRANCH":
                states = set().union(*(walk(states, list(branch)) for branch in arg[1]))
            elif name == "SUBPATTERN":
                states = walk(states, list(arg[3]))
            else:
                raise ValueError(f"a pattern of another shape: {op} in {pattern!r}")
        return states

    return {(w, o) for w, o, _d in walk({("", False, False)}, list(sre.parse(pattern, flags)))}


def test_every_first_word_of_the_patterns_a_pair_needs_makes_a_text_not_plain() -> None:
    # plain_chunk reads word sets in place of HISTORICAL_RE and CHANGE_RE (hand-kept beside them, shared with
    # line_analysis) and of the move and dispose word patterns: a word added to a pattern and not to its set
    # would let a hit that can make a pair be passed over. Each first word, alone, in any case, must not be plain.
    from symi_memory.chronology import HISTORICAL_RE
    from symi_memory.supersession import _DISPOSE_WORD_RE, _MOVE_WORD_RE, CHANGE_RE

    checked = 0
    for pat in (HISTORICAL_RE, CHANGE_RE, _MOVE_WORD_RE, _DISPOSE_WORD_RE):
        words = _first_words(pat.pattern, pat.flags)
        assert words and all(w for w, _o in words)
        for word, open_ in words:
            for text in (word, word.upper(), word.capitalize(), f"the {word}xyz thing" if open_ else f"the ({word}) thing"):
                assert not plain_chunk(text), (pat.pattern[:40], text)
                checked += 1
    assert checked > 300
    # The check sees a word added to a pattern: "altered" is no word of the sets.
    grown = CHANGE_RE.pattern.replace("|switched|", "|switched|altered|")
    assert ("altered", False) in _first_words(grown, CHANGE_RE.flags) and plain_chunk("altered")


def test_no_text_of_mutated_pattern_words_called_plain_has_a_line_a_pair_could_use() -> None:
    # The words of every pattern the rules use, in other cases, glued, hyphenated, plural, cut short, beside
    # numbers, dates, times, currency, fractions and the letters that match ASCII ones when case is ignored, in
    # lines joined by \n or \r\n under headings: a text called plain must give flat lines through every path.
    import random
    import re

    import symi_memory.chronology as chronology
    import symi_memory.supersession as supersession

    sources = [v.pattern for m in (supersession, chronology) for v in vars(m).values() if isinstance(v, re.Pattern)]
    sources += [p.pattern for _rank, p in supersession.STAGES]
    words = sorted({w for s in sources if isinstance(s, str) for w in re.findall(r"[a-z]{2,}", re.sub(r"\\[a-zA-Z]", " ", s))})
    odd = ["3pm", "\u00bd", "1st", "\u20ac5", "$5", "5%", "2026-07-28", "07-28", "09:45", "1:5:5", "v0.4.2", "V2", "x3", "-3",
           ".5", "_3", "due:2026-07-28", "x07-28", "\u212a", "\u017f", "\u0131", "\uff13", "\u4e2d\u6587", "\u00a0", "yesterday", "June 2026", "Tuesday"]
    plain_words = "the car is blue and quiet team meets in big room Anna Juf Marloes hatchback router case".split()
    rnd = random.Random(13)

    def word() -> str:
        w = rnd.choice(words)
        w = rnd.choice([w, w.upper(), w.capitalize(), w + "s", w + "ed", "re-" + w, w + "-car", "x" + w, w[:-1], w + "_",
                        w + "2", "2" + w, "(" + w + ")", w + "."])
        return w

    found = plain = 0
    for _ in range(4000):
        lines = []
        for _ in range(rnd.randint(1, 4)):
            toks = [rnd.choice(plain_words) for _ in range(rnd.randint(1, 6))]
            for _ in range(rnd.choice([0, 0, 1, 2])):
                toks.insert(rnd.randrange(len(toks) + 1), word() if rnd.random() < 0.6 else rnd.choice(odd))
            lines.append(rnd.choice(["", "", "- ", "# ", "## History\n"]) + rnd.choice([" ", ", ", "; ", "\t"]).join(toks))
        text = rnd.choice(["\n", "\r\n"]).join(lines)
        if not plain_chunk(text):
            found += 1
            continue
        plain += 1
        _assert_flat_every_way(text)
    assert plain > 500 and found > 500


def test_the_one_scan_for_flag_words_finds_what_the_word_sets_find() -> None:
    # plain_chunk looks for a word of _FLAG_WORDS or a word starting as _FLAG_STARTS_RE says with one trie pattern
    # (_FLAG_RE): it must answer as the two did, for every word, its cut and grown forms, in any case and beside
    # any separator (a word cut short or grown by a letter is not a whole word of the set; a start still is).
    import random

    from symi_memory.supersession import _FLAG_RE, _FLAG_STARTS_RE, _FLAG_WORDS, _word_runs, _words_re

    words = sorted(w.decode() for w in _FLAG_WORDS)
    starts = [p.decode() for p in _FLAG_STARTS_RE.pattern[len(b" (?:"):-1].split(b"|")]
    forms = [f for w in words + starts for f in (w, w[:-1], w + "s", w + "x", "x" + w, w + "_", w + "2", w.upper(),
                                                    w.capitalize())] + ["c12w3", "common45", "the", "a", "_", "9"]
    rnd = random.Random(7)
    seen = {True: 0, False: 0}
    for _ in range(20000):
        text = "".join(rnd.choice(forms) + rnd.choice([" ", "  ", "-", ".", "_", "\n", "'", ""])
                       for _ in range(rnd.randint(0, 4)))
        runs = _word_runs(text.encode("ascii"))
        before = _FLAG_STARTS_RE.search(runs) is None and _FLAG_WORDS.isdisjoint(runs.split())
        assert (_FLAG_RE.search(runs) is None) == before, text
        seen[before] += 1
    assert min(seen.values()) > 3000
    for word in words + starts:
        assert _FLAG_RE.search(_word_runs(word.encode("ascii"))) is not None, word
    with pytest.raises(ValueError):
        _words_re(frozenset({b"two words"}), ())


def test_plain_chunk_answers_the_same_for_a_text_seen_before() -> None:
    # Answers are remembered by text: asked again, plain and not plain alike come back as they were worked out.
    import symi_memory.supersession as supersession

    texts = ["c59w27 c59w15 common268 common243", "Sold the hatchback.", "Vitamin D: 2000 IU a day.", "the car is blue"]
    first = [plain_chunk(t) for t in texts]
    assert first == [True, False, False, True]
    assert all(supersession._PLAIN.get(t) is p for t, p in zip(texts, first, strict=True))
    assert [plain_chunk(t) for t in texts] == first


@pytest.mark.parametrize("length", [8, 400])
@pytest.mark.parametrize("ascii_text", [True, False])
def test_remembered_answers_hold_about_the_memory_they_are_bounded_by(monkeypatch: pytest.MonkeyPatch, length: int,
                                                                       ascii_text: bool) -> None:
    # plain_chunk's answers are kept within PLAIN_KEPT_CHARS (bytes: 4 MB): short chunks (a
    # one-line memory each) and non-ASCII ones (up to 4 bytes a character) must not hold several times that.
    import gc
    import tracemalloc

    import symi_memory.supersession as supersession

    bound = 100_000
    monkeypatch.setattr(supersession, "PLAIN_KEPT_CHARS", bound)
    supersession._PLAIN.clear()
    monkeypatch.setattr(supersession, "_PLAIN_CHARS", 0)
    mark = "x" if ascii_text else "\U0001f697"
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2 * bound // length):
            plain_chunk(f"{mark}{i} ".ljust(length, "c"))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        supersession._PLAIN.clear()
    assert held <= 1.5 * bound, (held, len(supersession._PLAIN))


def test_texts_told_together_are_plain_exactly_when_each_is() -> None:
    # plain_chunks tells the texts it has not seen from their join by line breaks: random texts of flag words,
    # numbers starting a word or inside one, dd-dd days, dashes, v before a digit, spaces and line breaks at either
    # end (where a join could make or break a match), each window fresh, answer as all(map(plain_chunk, ...)) over
    # the same texts told alone. Half the windows have texts seen before (remembered either way) in them.
    import random

    import symi_memory.supersession as supersession

    pieces = ["c5w12", "common9", "the", "car", "is", "blue", "sold", "anymore", "retired", "swapped", "changed",
              "v", "d", "vd", "v2", "2", "12", "12-30", "1-2", "-", "30-", "-12", "x9", "9x", "q17", "now", "moved",
              "before", "until", "\n", " ", "", "#", ".", ":", "v0.4", "Was", "WAS", "ended"]
    rng = random.Random(13)
    plain_seen = not_plain_seen = 0
    for round_ in range(3000):
        texts = []
        for _ in range(rng.randint(1, 6)):
            words = [rng.choice(pieces) for _ in range(rng.randint(0, 5))]
            texts.append(rng.choice(["", " ", "\n"]) + rng.choice([" ", "\n", ""]).join(words)
                         + rng.choice(["", " ", "\n", "v", "1"]))
        if round_ % 2:
            supersession._PLAIN.clear()
        alone = all(supersession._plain_text(t) for t in texts)
        assert plain_chunks(list(texts)) is alone, texts
        assert all(supersession._PLAIN.get(t, supersession._plain_text(t)) is supersession._plain_text(t)
                   for t in texts)
        plain_seen += alone
        not_plain_seen += not alone
    assert plain_seen > 300 and not_plain_seen > 300
    assert plain_chunks([]) and not plain_chunks(["plain words", "caf\u00e9 ok"])


def test_no_join_boundary_makes_or_hides_what_plain_chunk_looks_for() -> None:
    # The join's line break meets every pair of ASCII characters (with digits, a dash, "v", a colon or a word
    # around them: "12-" + "05", "2026-" + "05-01", "v" + "2"), every flag word or start cut in two across it
    # ("mo" + "ved", "Retir" + "ed", upper and lower case), "\r", "\r\n", "\x0b" to "\x1f", empty texts and
    # spaces: their join is plain exactly when each is, plain_chunks over the two fresh texts answers as plain_chunk
    # over each alone, and remembers each right.
    import symi_memory.supersession as supersession

    chars = [chr(c) for c in range(128)]
    lefts = ["", "x", "1", "12", "12-", "2026-", "v", "a:", "a/", "moved\n", "\r", " "]
    rights = ["", "x", "1", "05", "-05", "05-01", "2", "d", " to", ":1", "\r\n", " "]
    pairs = [(left + a, b + right) for i, a in enumerate(chars) for j, b in enumerate(chars)
             for left, right in [(lefts[(i + j) % len(lefts)], rights[(i * 7 + j) % len(rights)])]]
    pairs += [(a, b) for a in lefts + chars for b in rights + chars]
    words = sorted(w.decode("ascii") for w in supersession._FLAG_WORDS)
    words += [s.decode("ascii") + "ed" for s in supersession._MOVE_STARTS + supersession._DISPOSE_STARTS]
    for word in words:
        for cut in range(len(word) + 1):
            for head, tail in [(word[:cut], word[cut:]), (word[:cut].upper(), word[cut:].upper())]:
                pairs += [(head, tail), ("the " + head, tail + " car"), (head + "\r", "\r" + tail)]
    not_plain = 0
    for a, b in pairs:
        supersession._PLAIN.clear()
        alone = supersession._plain_text(a), supersession._plain_text(b)
        # Exactly: a join that hid a flag would answer wrongly, one that made a flag would tell each text again.
        assert supersession._plain_text(a + "\n" + b) is all(alone), (a, b)
        assert plain_chunks([a, b]) is all(alone), (a, b)
        assert all(supersession._PLAIN.get(t, p) is p for t, p in zip((a, b), alone, strict=True)), (a, b)
        not_plain += not all(alone)
    supersession._PLAIN.clear()
    assert 0 < not_plain < len(pairs)


def test_texts_told_together_are_remembered_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # plain_chunks remembers a plain window's texts itself: within PLAIN_KEPT_CHARS as plain_chunk keeps them (the
    # count of what is kept is the texts' characters and an entry's cost each, cleared when full), a text asked
    # twice in one window counted once.
    import symi_memory.supersession as supersession

    bound = 20_000
    monkeypatch.setattr(supersession, "PLAIN_KEPT_CHARS", bound)
    supersession._PLAIN.clear()
    monkeypatch.setattr(supersession, "_PLAIN_CHARS", 0)
    try:
        for i in range(2_000):
            window = [f"c{i}w{k} common words " * (1 + k % 3) for k in range(5)]
            assert plain_chunks(window + window[:2])
            kept = sum(len(t) + supersession._PLAIN_ENTRY_COST for t in supersession._PLAIN)
            assert kept == supersession._PLAIN_CHARS <= bound
            assert all(supersession._PLAIN[t] for t in supersession._PLAIN)
        assert plain_chunks([("x" * bound) + " a", "and the rest"])  # too long to keep: told, not remembered
        assert ("x" * bound) + " a" not in supersession._PLAIN
    finally:
        supersession._PLAIN.clear()
