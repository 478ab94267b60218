"""Supersession: demote a hit that a newer hit restates or changes, and say so.

Among the best ``window`` candidates, the lines most about the query are
compared pairwise (:func:`symi_memory.supersession.same_thing`, with the
chunks' stored vectors from ``ctx.vectors``; in a keyword-only index, which
stores none, a present search pairs them by their lines' terms alone). When a newer line states
the same thing as an older one, the older hit's score drops just below the
newer hit's and it carries ``superseded_by``; the newer one lists what it
``supersedes``. Hits that nothing newer restates are left exactly as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from operator import attrgetter, ge
from typing import Any, ClassVar

import attrs

from symi_memory.chronology import DAY
from symi_memory.specs import LineVector, PostProcessContext
from symi_memory.supersession import (
    THRESHOLDS,
    Line,
    Thresholds,
    asks_about_now,
    asks_about_past,
    best_lines,
    conflicting,
    cosine,
    disposed_things,
    disposes,
    disposing_lines,
    ended_names,
    focus_lines,
    gives_new_measure,
    lower_words,
    may_move_on,
    may_name_move,
    moves_on,
    names_old_value,
    plain_chunks,
    query_names,
    query_score,
    remeasured,
    remembered_lines,
    rescheduled,
    rival_subjects,
    salient,
    same_thing,
    split_lines,
    stage,
    term_weights,
    units_by_line,
)
from symi_memory.types import Candidate, LazyCandidates

__all__ = ["Supersession", "find_supersessions"]

_SCORE = attrgetter("score")
_TEXT = attrgetter("text")


def find_supersessions(candidates: Sequence[Candidate],
                       vectors: Mapping[str, Sequence[float]] | Callable[[], Mapping[str, Sequence[float]]],
                       query: str,
                       t: Thresholds = THRESHOLDS,
                       written: Mapping[str, tuple[float, float]] | None = None,
                       as_of: float | None = None,
                       line_vectors: Mapping[str, Sequence[LineVector]]
                       | Callable[[Sequence[str]], Mapping[str, Sequence[LineVector]]] | None = None,
                       query_vector: Sequence[float] | None = None,
                       analysis: Mapping[str, bytes] | None = None,
                       lexical_ok: bool = True,
                       ) -> dict[int, tuple[int, Line, Line]]:
    """``{older index: (newer index, older line, newer line)}`` for candidates a newer one supersedes.

    ``vectors``: the candidates' stored vectors by id, or the callable that reads them, called only when some two
    candidates hold the lines a pair needs (:func:`_may_pair`; most searches of a large index have none).
    The newer candidate chosen is the newest of those that restate it. With
    ``as_of``, a line dated at or after it (an undated note changed later)
    has no known date then and supersedes nothing. With ``line_vectors``
    (the candidates' stored line vectors, or the callable that fetches them
    by id, called only when some pair is worth a look), two lines are compared by their
    own vectors where both have one, else by their chunks'; with the
    ``query_vector`` too, a hit is superseded only through the lines that
    answer the query (their vectors closest to the query's), not through a
    side remark that a newer note changes. ``analysis``: the candidates' stored line analyses by id
    (:func:`symi_memory.supersession.line_analysis`), read instead of analysing their text again.
    When no candidate has a stored vector (a keyword-only index), a present search (``as_of`` None and
    ``lexical_ok``) judges each pair by its lines' terms alone.
    """
    qterms = salient(query)
    if asks_about_past(query):
        return {}
    analysed = analysis or {}
    all_lines = [split_lines(c.path, c.start_line, c.text, c.mtime, (written or {}).get(c.id), analysed.get(c.id))
                 for c in candidates]
    if not _may_pair(all_lines):
        return {}
    if callable(vectors):
        vectors = vectors()
    weights = term_weights(qterms, all_lines)
    names = query_names(query)
    facts = [_facts(lines) for lines in all_lines]
    focus: dict[int, list[Line]] = {}
    for i, fi in enumerate(facts):
        found = fi.focus(qterms)  # focus_lines(all_lines[i], qterms)
        if found:
            focus[i] = found
    # A line that says one no longer has a thing ("Sold the hatchback; now a red SUV") may be a newer version of an
    # older line naming that thing though it holds no query word: it is looked at as a newer hit's line too (only
    # through :func:`_moved_on`). Most lines name no such thing.
    reach: dict[int, list[Line]] = {}
    for i, lines in focus.items():
        extra = [ln for ln in disposing_lines(all_lines[i]) if ln not in lines]
        reach[i] = lines + extra if extra else lines
    newest = {i: max(ln.moment for ln in lines) for i, lines in focus.items()}
    # What a newer hit may be newer than, counting such lines (the pair's own lines are compared below).
    newest_reach = {i: newest[i] if reach[i] is focus[i] else max(ln.moment for ln in reach[i]) for i in focus}
    # What a newer hit must be newer than: the oldest dated line the hit holds, not its newest. A note that
    # keeps its current lines beside a past one ("Until 2026-06-20 the router was ...", under "## History" in an
    # undated note) is superseded through that older line; the line-level check below still needs the newer
    # line to be newer.
    # A past state with no date at all (moment 0: "a retired teacher", "former ...") says nothing about when.
    oldest = {i: newest[i] if (d := facts[i].dated) is None else min(newest[i], d) for i in focus}
    chunk_vecs = [vectors.get(c.id) for c in candidates]
    # A keyword-only index stores no vectors: in a present search a pair missing a chunk vector is then judged by
    # its lines' terms alone (the chunks' cosine counts as 1.0, as ``symi_memory.supersession.versions`` has it)
    # rather than not at all; so is one in an index whose newest chunks are not embedded yet (some hits have a
    # vector, some none). An "as of" search keeps to pairs with vectors: on devmem's "as of" questions the terms
    # alone paired lines written before the date that change nothing (hit@1 0.727 -> 0.705, keyword-only).
    lexical = as_of is None and lexical_ok
    sims = _cosines(chunk_vecs)
    floor = min(t.chunk_vector_lines, t.chunk_vector) if line_vectors is not None else t.chunk_vector
    # The pairs worth a look, by what costs nothing: a newer, comparably relevant hit with a close chunk vector.
    pairs: dict[int, list[tuple[int, float]]] = {}
    idx = list(focus)
    scores = [c.score for c in candidates]
    places = [(c.path, c.start_line) for c in candidates]
    # The lines a weaker newer hit could demote with (saying a value changed), and those of an older hit such a
    # line could change (a quantity or a plan's day): most hits have none, and their pairs end here.
    changers = {j: [b for b in focus[j] if id(b) in facts[j].changing] if facts[j].changing else [] for j in idx}
    # What _says_measure_changed needs of the two hits (a measured kind of quantity in both, or a plan's day in
    # both with a stated change), by what they hold: a pair without it is not asked.
    changer_kinds = {j: frozenset().union(*(facts[j].measured.get(id(b), ()) for b in changers[j])) for j in idx
                     if changers[j]}
    changer_ahead = {j: any(b.change and b.ahead for b in changers[j]) for j in changer_kinds}
    # What same_thing needs first (a past state, a stated change, a plan's day or a quantity in both), per hit:
    # a pair whose lines cannot have it is never the same thing, so it is not looked at (most pairs end here).
    says_change = {j: facts[j].changed and any(b.change for b in focus[j]) for j in idx}
    newer_valued = {j: facts[j].valued and any(b.quantities or b.ahead for b in focus[j]) for j in idx}
    valued: dict[int, list[Line]] = {}
    moving = {j: m for j in idx if facts[j].movers and (m := _Movers.of(reach[j], facts[j])) is not None}
    for i in idx:
        vi = chunk_vecs[i]
        if vi is None and not lexical:
            continue
        new_i, place_i, strong, weak = oldest[i], places[i], t.score_ratio * scores[i], t.conflict_score_ratio * scores[i]
        fi = facts[i]
        past_i, valued_i = fi.past, fi.valued
        for j in [j for j in idx if newest_reach[j] > new_i]:  # never i itself
            # Every check below must hold; the cheap ones (place, score, chunk cosine) come first, so the line
            # checks run for the few pairs they leave.
            if places[j] == place_i or (scores[j] < strong and scores[j] < weak):
                continue
            vj = chunk_vecs[j]
            cos = (1.0 if lexical else None) if vi is None or vj is None else sims[i][j] if sims is not None \
                else cosine(vi, vj)
            if cos is None or cos < floor:
                continue
            moved: bool | None = None  # _moving_on(i, j), asked at most once
            if not (past_i or says_change[j] or (valued_i and newer_valued[j])):
                mj = moving.get(j)
                moved = mj is not None and mj.may_move(all_lines[i], fi)
                if not moved:
                    continue
            if scores[j] < strong:
                kinds = changer_kinds.get(j)
                if not (kinds is not None and (not kinds.isdisjoint(fi.kinds) or (changer_ahead[j] and fi.ahead))
                        and _says_measure_changed(valued.get(i) or valued.setdefault(
                            i, [a for a in all_lines[i] if a.quantities or a.ahead]), changers[j], t, names, qterms)):
                    if moved is None:
                        mj = moving.get(j)
                        moved = mj is not None and mj.may_move(all_lines[i], fi)
                    if not moved:
                        continue
            pairs.setdefault(i, []).append((j, cos))
    if not pairs:
        return {}
    # A question asking for the state now ("how fast is the ledger endpoint now?"): an older hit is stale through
    # any of its lines whose measured value a newer line about the question says changed, naming that value as
    # the old one ("p95 dropped from 840 ms to 210 ms" for "p95 was 840 ms"), not only through its lines closest
    # to the question by meaning (here "Started the ... investigation for the ledger API"). Most searches have none.
    quoting = _quoting(pairs, all_lines, focus, newest, weights, t) if asks_about_now(query) else {}
    lv: _LineVectors | None = None
    if line_vectors is not None:
        later = {j for js in pairs.values() for j, _ in js}
        wanted = sorted(set(pairs) | later)
        stored = line_vectors([candidates[k].id for k in wanted]) if callable(line_vectors) else line_vectors
        lv = _LineVectors.of(candidates, all_lines, {k: reach[k] for k in later}, set(pairs), weights,
                             vectors, stored, query_vector,
                             {i: [a for _j, _c, a, _b in got] for i, got in quoting.items()})
    best: dict[int, list[Line]] = {}
    # An older hit's lines holding more of the query's weighted terms than any of its answer lines by meaning
    # ("Japanese lesson at 20:00" against a gift idea naming "Japanese" that is closer to the query by meaning):
    # such a line is superseded only when a newer line gives another value of one of its quantities and holds
    # all of its query terms ("Japanese lessons ... Tuesdays at 20:30"), not through a change word alone (a
    # line stating a tutor's home town and her lesson days keeps the part that did not change).
    valued_best: dict[int, list[Line]] = {}
    for i in pairs:
        answer = lv.answer_lines(i, t.answer_margin) if lv is not None and lv.to_query is not None else []
        if not answer:
            best[i] = best_lines(all_lines[i], weights, share=t.best_share)
            continue
        best[i] = answer
        # Else no newer line gives another value, or the hit has no value to change.
        if facts[i].quantified and any(b.quantities for j, _ in pairs[i] for b in focus[j]):
            floor = max(query_score(a, weights) for a in answer) + 1e-9
            # Only a line giving a quantity and scoring above the answer lines can be one (most hits have none).
            if any(a.quantities and query_score(a, weights) > floor for a in all_lines[i]):
                valued_best[i] = [a for a in best_lines(all_lines[i], weights, share=t.best_share)
                                  if a.quantities and query_score(a, weights) > floor]
    line_cos = lv.cos if lv is not None else None
    out: dict[int, tuple[int, Line, Line]] = {}
    through_past: set[int] = set()  # hits superseded through a dated past line, not being older as a whole
    # The lines of each newer hit that same_thing's first refusal lets through for an older line, by what that
    # asks of the older line (a past state, a plan's day, a quantity): most older lines are none of these, and
    # only the newer lines stating a change are left for them.
    passing: dict[tuple[int, bool, bool, bool, bool], list[tuple[int, Line]]] = {}
    focus_terms: dict[int, frozenset[str]] = {}
    restating: dict[int, list[Line]] = {}  # per older line: the lines of its hit that hold all its query terms
    for i, js in pairs.items():
        chosen: tuple[int, Line, Line] | None = None
        chosen_past = False
        olders = best[i] + valued_best.get(i, [])  # only a line the hit is returned for supersedes the hit
        n_best = len(best[i])
        for j, cos in js:
            # A pair whose newer hit is not newer than all of the older hit's lines: only a dated line of the
            # older hit that is older than the newer line can be superseded ("Until 2026-06-20 the router was
            # ...", beside current lines of the same note), not a past state with no date ("a retired teacher").
            dated_only = newest[j] <= newest[i]
            mj = moving.get(j)
            movers = mj.numbers if mj is not None else _NO_LINES  # lines that may say a state moved on (most: none)
            reach_j = newest_reach[j]
            for n, a in enumerate(olders):
                if reach_j <= a.moment:
                    continue  # no line of the newer hit is newer than this one (each check below needs one)
                if dated_only and a.moment[0] <= 0:
                    continue
                if dated_only and _restated_since(a, all_lines[i], newest[j], weights, as_of, restating):
                    continue
                by_value = n >= n_best  # a line of valued_best (never one of best[i])
                if by_value or not movers:
                    # Only focus lines sharing line_terms terms with ``a`` can count then (a line of valued_best
                    # needs a newer line giving one of its quantities; another needs one passing same_thing's
                    # first refusal).
                    held = focus_terms.get(j)
                    if held is None:
                        held = focus_terms[j] = frozenset().union(*(b.terms for b in focus[j]))
                    if len(a.terms & held) < t.line_terms:
                        continue
                # The newer lines that can count for ``a``, by what it is (kept per newer hit and kind of ``a``):
                # a moving line, or a focus line passing same_thing's first refusal (for a line of valued_best,
                # one giving a quantity).
                key = (j, by_value, a.historical, a.ahead, bool(a.quantities))
                newer = passing.get(key)  # type: ignore[assignment]
                if newer is None:
                    hist, ahead, quant = key[2:]
                    nf = len(focus[j])
                    if by_value:
                        newer = [(k, b) for k, b in enumerate(focus[j]) if b.quantities]
                    else:
                        newer = [(k, b) for k, b in enumerate(reach[j]) if b.line_no in movers or (
                            k < nf and (hist or b.change or (ahead and b.ahead) or (quant and b.quantities)))]
                    passing[key] = newer
                am = a.moment
                for k, b in newer:
                    bm = b.moment
                    if bm <= am:
                        continue  # every way below needs the newer line to be newer
                    if bm[0] == am[0] and b.path != a.path:
                        continue  # two notes of one day: a line's number in its own file says nothing of which is newer
                    if dated_only and bm[0] <= am[0]:
                        continue  # a later day, not a later line of the same day
                    if by_value and not (conflicting(a.quantities, b.quantities)
                                         and all(t in b.terms for t in a.terms if weights.get(t))):
                        continue
                    if as_of is not None and bm[0] >= as_of:
                        continue
                    if movers and not by_value and b.line_no in movers and _moved_on(
                            i, a, j, b, cos, candidates, weights, query, t, line_cos):
                        if chosen is None or b.moment > chosen[2].moment:
                            chosen, chosen_past = (j, a, b), dated_only
                        continue
                    if k >= len(focus[j]):
                        continue  # a line holding no query word, looked at only for saying a thing is gone
                    if not (a.historical or b.change or (a.ahead and b.ahead) or (a.quantities and b.quantities)):
                        continue  # same_thing's first refusal, before any set work
                    if len(a.terms & b.terms) < t.line_terms:
                        continue  # cheap refusals first: same_thing would say no before any vector
                    if not a.historical and rival_subjects((a.text,), b.text, facts[i].terms, facts[j].terms):
                        continue  # "the flight to Lisbon" and "the flight to Oslo": two things, not two versions
                    lc = line_cos(i, a, j, b) if line_cos else None
                    if lc is not None and lc < min(t.line_vector, t.conflict_line_vector):
                        continue
                    if candidates[j].score < t.score_ratio * candidates[i].score and not (
                            (b.change and (gives_new_measure(a.quantities, b.quantities) or rescheduled(a, b))
                             and (lc is None or lc >= t.line_vector))
                            or (remeasured(a, b, t, names, qterms) and (lc is None or lc >= t.conflict_line_vector))):
                        continue  # a weaker newer hit demotes only a close line whose quantity it says changed
                    if same_thing(a, b, cos, t, weights, lc, names):
                        if chosen is None or b.moment > chosen[2].moment:
                            chosen, chosen_past = (j, a, b), dated_only
        if chosen is None and i in quoting:
            # The lines the older hit answers with (closest to the question by meaning, else holding most of its
            # words): the newer line must hold each one's question words, or the hit answers about a thing the
            # newer line does not name ("Priya asked for a written plan" for "what does Priya still want for the
            # ledger work?", beside "p95 was 840 ms" that a ledger line changes).
            answer_words = [ln.terms & weights.keys() for ln in best[i]]
            for j, cos, a, b in quoting[i]:
                if as_of is not None and b.moment[0] >= as_of:
                    continue
                if not all(words <= b.terms for words in answer_words):
                    continue
                if rival_subjects([ln.text for ln in best[i]] + [a.text], b.text, facts[i].terms, facts[j].terms):
                    continue  # "the energy company" / "Water company: the monthly bill dropped from 180 euros ..."
                lc = line_cos(i, a, j, b) if line_cos else None
                if (cos < t.chunk_vector if lc is None else (lc < t.conflict_line_vector
                                                              or cos < t.chunk_vector_lines)):
                    continue
                if chosen is None or b.moment > chosen[2].moment:
                    chosen = (j, a, b)
        if chosen is not None:
            out[i] = chosen
            if chosen_past:
                through_past.add(i)
    # A hit superseded through a dated past line may hold a line newer than the hit that supersedes it, and
    # that line may supersede that hit in turn (a note's "Until 2026-04-10 ..." line and its current line that
    # changes what the dated note says): the hit then holds the current version, and the pair is no cycle
    # (every other pair points at a strictly newer hit, so each cycle holds one of these).
    for i in sorted(through_past):
        k, seen = out[i][0], {i}
        while k in out and k not in seen:
            seen.add(k)
            k = out[k][0]
        if k == i:
            del out[i]
    return out


_NO_LINES: frozenset[int] = frozenset()


def _quoting(pairs: Mapping[int, Sequence[tuple[int, float]]], all_lines: Sequence[Sequence[Line]],
             focus: Mapping[int, Sequence[Line]], newest: Mapping[int, tuple[float, int]],
             weights: Mapping[str, float], t: Thresholds) -> dict[int, list[tuple[int, float, Line, Line]]]:
    """``{older index: [(newer index, chunk cosine, older line, newer line), ...]}``: the lines of each older hit whose
    measured value a line of a newer hit (newer as a whole, on a later day) says changed, naming it as the old value
    (:func:`symi_memory.supersession.names_old_value`), the newer line holding a term of the question and sharing
    ``line_terms`` more terms with the older one. What :func:`find_supersessions` lets supersede the older hit for a
    question about now, whatever lines of it are closest to the question (their vectors' closeness is asked there).

    The newer line must also name the older hit's subject as the question does: every question word of the older
    line, and of one at least of the older hit's lines about the question. The same old value can change for
    another thing that shares two words with the older line: "Ledger API: ... p95 dropped from 840 ms to 210 ms"
    does not change "Search API p95 was 840 ms" for "how fast is the search API now?", nor "the monthly phone
    bill dropped from 40 euros to 25 euros" "Monthly gym bill was 40 euros" for "what is my gym bill now?"."""
    out: dict[int, list[tuple[int, float, Line, Line]]] = {}
    for i, js in pairs.items():
        measured = [a for a in all_lines[i] if _measured(a)]
        if not measured:
            continue
        # The question's words each line of the older hit about the question holds (focus: those holding one).
        asked = [ln.terms & weights.keys() for ln in focus[i]]
        for j, cos in js:
            if newest[j] <= newest[i]:
                continue
            for b in focus[j]:
                if not b.change or not _measured(b) or not query_score(b, weights):
                    continue
                if asked and not any(words <= b.terms for words in asked):
                    continue  # the older hit is about a thing named by a question word this line lacks
                for a in measured:
                    if b.moment[0] > a.moment[0] and a.terms & weights.keys() <= b.terms \
                            and len(names_old_value(a, b)) >= t.line_terms:
                        out.setdefault(i, []).append((j, cos, a, b))
    return out


def _may_pair(all_lines: Sequence[Sequence[Line]]) -> bool:
    """False when no two of these chunks can make a pair :func:`find_supersessions` looks at, so it finds nothing.

    Its pair loop lets a pair on only when the older hit holds a past state (``_Facts.past``), the newer one states
    a change (``says_change``, which needs ``_Facts.changed``), both give a value (a quantity or a plan's day:
    ``_Facts.valued``; two hits, since a hit is never paired with itself), or a line of the newer one names an
    ending, a stage or a thing gone (``moving``, which needs ``_Facts.movers``). A chunk holding none of these
    (every chunk of the scale bench, most chunks of a large index) is worked out no further: no focus lines, no
    facts, no vectors read. The text checks come last and only when the line flags leave the question open.
    """
    valued = 0
    for lines in all_lines:
        for ln in lines:
            if ln.historical or ln.change:
                return True
        if any(ln.quantities or ln.ahead for ln in lines):
            valued += 1
            if valued > 1:
                return True
    return any(may_name_move(ln.text) and (ended_names(ln.text) or stage(ln.text) or disposed_things(ln.text))
               for lines in all_lines for ln in lines)


def _restated_since(past: Line, lines: Sequence[Line], since: tuple[float, int], weights: Mapping[str, float],
                    as_of: float | None = None, holders: dict[int, list[Line]] | None = None) -> bool:
    """True when a line of the same hit at least as new as ``since`` holds every query term of the dated past
    line ``past``: the note states the current version itself ("Router: Ubiquiti ..." above "Until 2026-06-20
    the router was ..."), so a newer note about the past line's value does not replace the note. A current line
    about something else ("Car: a Skoda" beside "Until 2026-03-01 the car was serviced at ...") does not count,
    nor, in an "as of" search, a line written on or after ``as_of`` (not known on that date). ``holders`` keeps,
    per ``past`` line (by id, within one search), the lines holding its query terms."""
    got = holders.get(id(past)) if holders is not None else None
    if got is None:
        asked = [t for t in past.terms if weights.get(t)]
        got = [c for c in lines if c is not past and all(t in c.terms for t in asked)] if asked else []
        if holders is not None:
            holders[id(past)] = got
    return any(c.moment >= since and (as_of is None or c.moment[0] < as_of) for c in got)


class _Facts:
    """What the pair checks of :func:`find_supersessions` ask of a chunk's lines that no query changes, worked out
    once per chunk (:func:`_facts`): whether a line is a past state, has a value (a quantity or a plan's day), the
    measured kinds of quantity its lines give, and the lines that name an ending, a stage or a thing gone at all."""

    __slots__ = ("lines", "past", "valued", "quantified", "changed", "changing", "dated", "_index", "ahead", "kinds", "measured", "movers", "terms", "staged", "_words", "_asked")

    def __init__(self, lines: Sequence[Line]) -> None:
        self.lines = lines
        self.past = any(a.historical for a in lines)
        self.valued = any(a.quantities or a.ahead for a in lines)
        self.quantified = any(a.quantities for a in lines)
        self.changed = any(a.change for a in lines)
        # The lines a weaker newer hit could demote with: saying a value or a day changed, or giving a measured one.
        self.changing = frozenset(id(b) for b in lines if (b.change and (b.quantities or b.days)) or _measured(b))
        # The oldest moment a dated line of the chunk has (a past state with no date, moment 0, says nothing).
        self.dated: tuple[float, int] | None = min((ln.moment for ln in lines if ln.moment[0] > 0), default=None)
        self._index: dict[str, list[int]] | None = None
        self.ahead = any(a.ahead for a in lines)
        # {id(line): its measured kinds (a unit, or a ratio)} of the lines that give one: what
        # _says_measure_changed compares (the entry holds ``lines``, so the ids stay theirs).
        self.measured = {id(a): kinds for a in lines if a.quantities
                         and (kinds := frozenset(k for k in a.quantities if " " in k))}
        self.kinds: frozenset[str] = frozenset().union(*self.measured.values())
        self.movers = frozenset(id(ln) for ln in lines if may_name_move(ln.text) and (
            ended_names(ln.text) or stage(ln.text) or disposed_things(ln.text)))
        self.terms: frozenset[str] = frozenset().union(*(ln.terms for ln in lines))
        self.staged = any(stage(ln.text) > 0 for ln in lines)
        self._words: frozenset[str] | None = None
        self._asked = False

    def focus(self, query_terms: frozenset[str], limit: int = 6) -> list[Line]:
        """:func:`symi_memory.supersession.focus_lines` of the chunk's lines, counted through an index of the lines
        holding each term instead of a set intersection per line."""
        lines = self.lines
        if not query_terms:
            return list(lines[:limit])
        index = self._index
        if index is None and not self._asked:
            # The first search to meet this chunk asks focus_lines (building the index costs several of its calls: at
            # 10k bench chunks, which seldom come back, an index per chunk made post-processing 1.4x); a chunk met
            # again gets its index.
            self._asked = True
            return focus_lines(lines, query_terms, limit)
        if index is None:
            # Built whole before it is kept: serve's threads share the facts, and one reading a half-built index
            # would miss the query words of the lines not yet in it.
            index = {}
            for n, ln in enumerate(lines):
                for term in ln.terms:
                    index.setdefault(term, []).append(n)
            self._index = index
        counts: dict[int, int] = {}
        for term in query_terms:
            for n in index.get(term, ()):
                counts[n] = counts.get(n, 0) + 1
        if not counts:
            return list(lines[:limit])  # found by meaning alone: every line may be the one
        floor = max(1, max(counts.values()) - 1)
        return [lines[n] for n in sorted((n for n, c in counts.items() if c >= floor),
                                         key=lambda n: (-counts[n], n))[:limit]]

    @property
    def words(self) -> frozenset[str]:
        """Every word of the chunk's lines, lowercased (what :func:`hands_over` looks a name up in)."""
        if self._words is None:
            self._words = frozenset().union(*(lower_words(ln.text) for ln in self.lines))
        return self._words


_FACTS: dict[int, _Facts] = {}
# About 18.5 kB a chunk (the term index and line facts): 19 MB at the cap (4,096 put peak RSS at 100k bench chunks
# over 300 MB). A workspace's searches meet far fewer chunks again; a large index's seldom meet one again.
_FACTS_MAX = 1024


def _facts(lines: Sequence[Line]) -> _Facts:
    """The :class:`_Facts` of a chunk's lines, kept per lines list (:func:`split_lines` hands back the same list for a
    chunk search after search; the entry holds the list, so its id cannot be reused while the entry lives)."""
    got = _FACTS.get(id(lines))
    if got is not None and got.lines is lines:
        return got
    if len(_FACTS) >= _FACTS_MAX:
        _FACTS.clear()
    got = _FACTS[id(lines)] = _Facts(lines)
    return got


class _Movers:
    """The lines of a newer hit (its focus lines, and its lines saying a thing is gone) that name an ending, a stage
    or a thing gone at all: the only ones that may say an older line's state moved on (:func:`may_move_on`)."""

    __slots__ = ("lines", "numbers", "ended", "staged", "things")

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.numbers = frozenset(ln.line_no for ln in lines)
        self.ended: frozenset[str] = frozenset().union(*(ended_names(b.text) for b in lines))
        self.staged = any(stage(b.text) > 1 for b in lines)
        self.things = [thing for b in lines for thing in disposed_things(b.text)]

    @classmethod
    def of(cls, newer: Sequence[Line], facts: _Facts) -> _Movers | None:
        lines = [ln for ln in newer if id(ln) in facts.movers]
        return cls(lines) if lines else None

    def may_move(self, older: Sequence[Line], facts: _Facts) -> bool:
        """True when one of these lines may say that what a line of ``older`` (a chunk's lines, ``facts`` theirs)
        states has moved on (:func:`symi_memory.supersession.may_move_on`: an ending in a role, a later stage, the
        thing it names gone). What each way needs of the older chunk as a whole comes first: a name that ends among
        its words, a stage on one of its lines, every word of a thing gone among its terms."""
        if not ((self.ended and not self.ended.isdisjoint(facts.words)) or (self.staged and facts.staged)
                or any(thing <= facts.terms for thing in self.things)):
            return False
        return any(may_move_on(a, b) for b in self.lines for a in older)


def _moved_on(i: int, a: Line, j: int, b: Line, cos: float, candidates: Sequence[Candidate],
              weights: Mapping[str, float], query: str, t: Thresholds,
              line_cos: Callable[[int, Line, int, Line], float | None] | None) -> bool:
    """True when newer line ``b`` of hit ``j`` says that older line ``a`` of hit ``i`` moved on
    (:func:`symi_memory.supersession.moves_on`: "Juf Marloes leaves the school; ... Ilse gets Meester Daan",
    "the promotion case went to the calibration committee", "Sold the hatchback; now a red SUV" for "The car is a
    blue hatchback"), the two lines as close as two giving different values
    of one quantity (``conflict_line_vector``; without line vectors the chunks' ``chunk_vector``), and ``j``
    scoring at least ``conflict_score_ratio`` of ``i``: like a measured change, it demotes from a weaker hit."""
    if candidates[j].score < t.conflict_score_ratio * candidates[i].score or not may_move_on(a, b):
        return False
    # One no longer having the thing the older line names ("Sold the hatchback") pins the pair to it through that
    # thing's words alone; the other ways need two shared terms.
    if not disposes(a, b, weights) and (len(a.terms & b.terms) < t.line_terms or not moves_on(a, b, weights, query)):
        return False
    lc = line_cos(i, a, j, b) if line_cos else None
    if lc is None:
        return cos >= t.chunk_vector
    return lc >= t.conflict_line_vector and cos >= t.chunk_vector_lines


def _measured(line: Line) -> bool:
    """True when a line gives a measured quantity (a value with a unit, or a ratio)."""
    return any(" " in kind for kind in line.quantities)


def _says_measure_changed(older: Sequence[Line], newer: Sequence[Line], t: Thresholds,
                          names: frozenset[str], asked: frozenset[str]) -> bool:
    """True when a line of ``newer`` says something changed and gives a value of a measured quantity (with a unit,
    or a ratio) that a line of ``older`` gives another value of (:func:`gives_new_measure`), or moves a plan's day that it gives (:func:`rescheduled`), or
    measures one of its quantities again on a later day (:func:`remeasured`, no change word needed): what lets a
    weaker newer hit demote an older one."""
    return any(any((b.change and (gives_new_measure(a.quantities, b.quantities) or rescheduled(a, b)))
                   or remeasured(a, b, t, names, asked) for a in older) for b in newer)


@attrs.frozen
class _LineVectors:
    """The stored line vectors of one search's candidates: line against line, and line against the query."""

    rows: dict[tuple[int, int], int]
    matrix: Any  # unit-length rows
    to_query: list[float] | None
    answerable: dict[int, list[Line]]
    _sim: dict[tuple[int, int], float] = attrs.field(factory=dict)

    @classmethod
    def of(cls, candidates: Sequence[Candidate], all_lines: Sequence[Sequence[Line]],
           focus: Mapping[int, Sequence[Line]], older: set[int], weights: Mapping[str, float],
           vectors: Mapping[str, Sequence[float]], line_vectors: Mapping[str, Sequence[LineVector]],
           query_vector: Sequence[float] | None,
           extra: Mapping[int, Sequence[Line]] | None = None) -> _LineVectors | None:
        """The vectors of the ``focus`` lines of newer candidates and of every line of the ``older`` ones
        that names the query's subject (every line when none does), and of the ``extra`` lines of a candidate (lines
        compared though they are not about the query's subject); None when none has one (or no numpy).

        A line's vector is that of the unit starting at it (or covering it); a chunk without units whose
        only line is the chunk has its chunk vector as the line's.
        """
        if not line_vectors:
            return None
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy comes with every vector backend
            return None
        rows: dict[tuple[int, int], int] = {}
        mats: list[Any] = []
        answerable: dict[int, list[Line]] = {}
        for i in sorted(older | set(focus)):
            cid = candidates[i].id
            want: list[Line] = list(focus.get(i, ())) + list((extra or {}).get(i, ()))
            if i in older:
                # Weights are all positive: a line scores above 0 exactly when it holds a weighted term.
                about = [ln for ln in all_lines[i] if not ln.terms.isdisjoint(weights)] or list(all_lines[i])
                answerable[i] = about
                want += about
            units = line_vectors.get(cid)
            if units:
                by_line = units_by_line(units)
                for ln in want:
                    vec = by_line.get(ln.line_no)
                    if vec is not None and (i, ln.line_no) not in rows:
                        rows[(i, ln.line_no)] = len(mats)
                        mats.append(vec)
            elif len(all_lines[i]) == 1 and vectors.get(cid) is not None:
                rows[(i, all_lines[i][0].line_no)] = len(mats)
                mats.append(vectors[cid])
        if not mats or len({len(v) for v in mats}) != 1:
            return None
        m = np.asarray(mats, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1)
        norms[norms == 0] = 1.0
        m /= norms[:, None]
        to_query = None
        if query_vector is not None and len(query_vector) == m.shape[1]:
            q = np.asarray(query_vector, dtype=np.float32)
            qn = float(np.linalg.norm(q))
            if qn > 0:
                to_query = (m @ (q / qn)).tolist()
        return cls(rows=rows, matrix=m, to_query=to_query, answerable=answerable)

    def cos(self, i: int, a: Line, j: int, b: Line) -> float | None:
        """Cosine of line ``a`` of candidate ``i`` and line ``b`` of ``j``; None where either has no vector."""
        ra, rb = self.rows.get((i, a.line_no)), self.rows.get((j, b.line_no))
        if ra is None or rb is None:
            return None
        key = (ra, rb)
        got = self._sim.get(key)
        if got is None:
            # One pair at a time: a matrix product of every line pair costs more (BLAS threads on a busy host).
            got = self._sim[key] = float(self.matrix[ra] @ self.matrix[rb])
        return got

    def answer_lines(self, i: int, margin: float) -> list[Line]:
        """The lines of older candidate ``i`` naming the query's subject that are closest to the query by
        meaning (within ``margin`` of the best), best first; empty when they have no vectors."""
        if self.to_query is None:
            return []
        to_query = self.to_query
        scored = [(to_query[r], ln) for ln in self.answerable.get(i, ())
                  if (r := self.rows.get((i, ln.line_no))) is not None]
        if not scored:
            return []
        top = max(sc for sc, _ in scored)
        return [ln for sc, ln in sorted(scored, key=lambda p: -p[0]) if sc >= top - margin]


def _cosines(vecs: list[Sequence[float] | None]) -> Any:
    """Pairwise cosines of the stored vectors (None where a vector is missing), or None without numpy."""
    dims = {len(v) for v in vecs if v is not None}
    if len(dims) != 1:
        return None  # before importing numpy: a keyword-only search has no vectors to compare
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with every vector backend
        return None
    d = dims.pop()
    m = np.zeros((len(vecs), d), dtype=np.float32)
    for k, v in enumerate(vecs):
        if v is not None:
            m[k] = v
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = 1.0
    m /= norms[:, None]
    sims = (m @ m.T).tolist()
    if all(v is not None for v in vecs):
        return sims
    return [[None if vecs[a] is None or vecs[b] is None else sims[a][b] for b in range(len(vecs))]
            for a in range(len(vecs))]


def _promote(found: Mapping[int, tuple[int, Line, Line]], head: Sequence[Candidate], score: dict[int, float]) -> None:
    """The current version of each superseded hit takes the best score its older versions held (in place).

    Always in an "as of" search: what was current on the date is what the question asks for, and the hits
    left are those written by then, so the version nothing (by then) supersedes answers in the place of the
    best older one ("go-live confirmed for 07-28" in the place of the draft cutover plan of 07-15, above a
    note that only mentions the project). Also for a question that asks about now in so many words
    (:func:`symi_memory.supersession.asks_about_now`: "how fast is the ledger endpoint now?"), which asks for the
    current version as plainly (23 devmem and convmem questions: rank MRR 0.783 -> 0.784 on devmem, nothing else
    moved). In any other present search it is off (``Thresholds.promote``): on convmem it lifted newer hits that
    wrongly supersede an answer (paraphrase MRR 0.797 -> 0.769).
    """
    for k in sorted(found, key=lambda k: -head[k].score):
        j = _current(found, k)
        score[j] = max(score[j], head[k].score)


def _later_versions(head: Sequence[Candidate], later: Sequence[Candidate],
                    vectors: Mapping[str, Sequence[float]] | Callable[[], Mapping[str, Sequence[float]]],
                    ctx: PostProcessContext, t: Thresholds, written: Mapping[str, tuple[float, float]] | None,
                    analysis: Mapping[str, bytes] | None) -> dict[int, float]:
    """``{index in head: score}`` for each result of an "as of" search (``head``) whose line saying a state held
    until a day at or after the date ("Until 2026-06-20 the router was the FRITZ!Box ...") a hit of ``later``
    (left out as written after the date) supersedes, judged as of now: the score of that later version. The
    question matches the fact as it was worded later ("Wi-Fi SSIDs: ..." in June); on the date the past state
    was the fact, so it answers in the later version's place (:meth:`Supersession.process`)."""
    cutoff = ctx.as_of or 0.0
    held = {k for k, c in enumerate(head) if any(
        _held_until(ln, cutoff) for ln in split_lines(c.path, c.start_line, c.text, c.mtime, (written or {}).get(c.id),
                                                     (analysis or {}).get(c.id)))}
    if not held:
        return {}  # most "as of" searches: no result gives a past state that ended after the date
    pool = list(head) + list(later)
    found = find_supersessions(pool, vectors, ctx.query, t, written, None, ctx.line_vectors, ctx.query_vector,
                               analysis, lexical_ok=False)
    return {k: pool[n].score for k, (n, a, _b) in found.items() if k in held and n >= len(head)
            and _held_until(a, cutoff)}


def _plain(pool: Sequence[Candidate], ctx: PostProcessContext) -> bool:
    """``plain_chunks`` of the hits' texts: the answers the backend stored when it indexed them (``ctx.plain``),
    the texts of the others told here."""
    stored = ctx.plain([c.id for c in pool]) if ctx.plain is not None else None
    if not stored:
        return plain_chunks(map(_TEXT, pool))
    if not all(stored.values()):
        return False
    return plain_chunks(c.text for c in pool if c.id not in stored)


def _held_until(line: Line, cutoff: float) -> bool:
    """True when ``line`` is a past state whose end date is at or after ``cutoff``'s day: it held then (the test
    :func:`symi_memory.supersession.as_of_state` makes)."""
    return line.historical and not line.change and bool(line.dates) and min(line.dates) >= cutoff - DAY


def _current(found: Mapping[int, tuple[int, Line, Line]], k: int) -> int:
    """The end of ``k``'s supersession chain: the version nothing newer supersedes."""
    while k in found:
        k = found[k][0]
    return k


@attrs.frozen
class Supersession:
    thresholds: Thresholds = THRESHOLDS
    #: Reads its candidates through the Sequence interface alone (their scores, then its window), and hands back the
    #: ones it was given when it changes none: the pipeline gives it the backend's candidates as they are
    #: (LazyCandidates, made as they are read).
    takes_lazy_candidates: ClassVar[bool] = True

    @classmethod
    def from_config(cls, hybrid: Mapping[str, Any]) -> Supersession | None:
        cfg = hybrid.get("supersession") or {}
        if not cfg.get("enabled"):
            return None
        return cls(attrs.evolve(THRESHOLDS, window=int(cfg.get("window", THRESHOLDS.window))))

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> Sequence[Candidate]:
        # In an "as of" search, the hits left out as written after the date may be later versions of a result.
        later = sorted(ctx.left_out, key=lambda c: -c.score)[: self.thresholds.window] if ctx.as_of is not None else []
        unchanged = candidates if isinstance(candidates, LazyCandidates) else None  # handed back as given
        if not candidates or len(candidates) + len(later) < 2 or ctx.vectors is None:
            return unchanged or list(candidates)
        scores = unchanged.scores if unchanged is not None else list(map(_SCORE, candidates))
        best_first = all(map(ge, scores, islice(scores, 1, None)))
        if (best_first and unchanged is not None and unchanged.ids is not None and not later
                and ctx.plain is not None):
            # The backend's own candidates (no processor before changed them), best first: its stored answers for
            # the window's ids, read from their column. Every one stored and plain: _plain below says so too, and
            # nothing is done, without making the window's candidates (most searches of a large index).
            ids = list(unchanged.ids[: self.thresholds.window])
            stored = ctx.plain(ids)
            if len(stored) == len(ids) and all(stored.values()):
                return unchanged
        if best_first:
            # Best first already (most searches: the backend's order): the order sorting gives them (no NaN score).
            top = list(range(min(len(candidates), self.thresholds.window)))
            head = list(candidates[: len(top)])
        else:
            order = sorted(range(len(candidates)), key=[-c for c in scores].__getitem__)
            top = order[: self.thresholds.window]
            head = [candidates[i] for i in top]
        pool = head + later
        if _plain(pool, ctx):
            # No line of any of them is a past state, states a change, gives a value or names an ending, a stage
            # or a thing gone: no pair can supersede (find_supersessions, _may_pair) and no past state held on an
            # "as of" date (_later_versions), so nothing is read or analysed. Most searches of a large index.
            return unchanged or list(candidates)
        read = ctx.vectors
        got: list[Mapping[str, Sequence[float]]] = []

        def vectors() -> Mapping[str, Sequence[float]]:
            """The pool's stored vectors, read once, and only when a pair may be worth a look."""
            if not got:
                got.append(read([c.id for c in pool]))
            return got[0]

        written = ctx.written_at(pool) if ctx.written_at is not None else None
        analysis = None
        if ctx.line_analysis is not None and not asks_about_past(ctx.query):
            # One read for the candidates whose lines are not remembered from an earlier search.
            wanted = [c.id for c in pool if (written and c.id in written)
                      or not remembered_lines(c.path, c.start_line, c.text, c.mtime)]
            analysis = ctx.line_analysis(wanted) if wanted else None
        found = find_supersessions(head, vectors, ctx.query, self.thresholds, written, ctx.as_of,
                                   ctx.line_vectors, ctx.query_vector, analysis) if len(head) > 1 else {}
        outgrown = _later_versions(head, later, vectors, ctx, self.thresholds, written, analysis) if later else {}
        if not found and not outgrown:
            return unchanged or list(candidates)
        # Each older version ranks just below what supersedes it: hits in between keep their order, nothing
        # unrelated climbs. In an "as of" search, for a question about now (or with ``promote``) the current version
        # also takes the best place its older versions held.
        score = {k: c.score for k, c in enumerate(head)}
        # A question asking for the state now in so many words ("... now?", "currently", "these days") asks for
        # what is current as plainly as an "as of" search asks for what was: the current version takes the best
        # place of the older versions it supersedes there too (on devmem and convmem it cost nothing; a note giving
        # the new value in other words than the question's can score far below the one it replaces).
        if self.thresholds.promote or ctx.as_of is not None or asks_about_now(ctx.query):
            _promote(found, head, score)
        # In an "as of" search a past state that still held on the date takes the score of its later version left
        # out (written after the date): the version current then answers in its place.
        for k, best in outgrown.items():
            j = _current(found, k)
            score[j] = max(score[j], best)
        changed = True
        while changed:  # terminates: "supersedes" only points at strictly newer hits
            changed = False
            for k, (j, _a, _b) in found.items():
                cap = score[j] * self.thresholds.demote
                if score[k] > cap:
                    score[k], changed = cap, True
        supersedes: dict[int, list[dict[str, Any]]] = {}
        for j, a, _b in found.values():
            supersedes.setdefault(j, []).append({"path": a.path, "startLine": a.line_no, "endLine": a.line_no})
        out = list(candidates)
        for k, c in enumerate(head):
            changes: dict[str, Any] = {}
            if k in found:
                b = found[k][2]
                changes["superseded_by"] = {"path": b.path, "startLine": b.line_no, "endLine": b.line_no}
            if score[k] != c.score:
                changes["score"] = score[k]
            if k in supersedes:
                changes["supersedes"] = tuple(supersedes[k])
            if changes:
                out[top[k]] = attrs.evolve(c, **changes)
        return out
