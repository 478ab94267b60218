"""A search's candidates made as they are read (``LazyCandidates``): the same candidates, in the same order, as the
tuple made at once, whatever reads them; post-processors that do not say they take them get the tuple."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from support.sqlite_memory import open_mem, write

from symi_memory import hookimpl, tools
from symi_memory.index.backend import _make_candidates
from symi_memory.specs import PostProcessContext, PostProcessorSpec
from symi_memory.types import Candidate, LazyCandidates, SearchQuery


def _columns(n: int) -> tuple[Sequence[Any], ...]:
    return ([f"id{i}" for i in range(n)], [f"memory/n{i}.md" for i in range(n)], list(range(1, n + 1)),
            list(range(2, n + 2)), [1.0 - i / 100 for i in range(n)], [f"text {i}" for i in range(n)],
            ["memory"] * n, tuple(0.5 if i % 2 else None for i in range(n)),
            tuple(0.25 if i % 3 else None for i in range(n)), [float(i) if i % 4 else None for i in range(n)],
            tuple(i % 5 == 0 for i in range(n)))


def test_lazy_candidates_read_as_the_tuple_made_at_once() -> None:
    columns = _columns(37)
    eager = _make_candidates(*columns)
    for read in (lambda s: list(s), lambda s: s[::-1], lambda s: s[3:30:4], lambda s: [s[i] for i in (5, -1, 0, 36)],
                 lambda s: s[40:], lambda s: s[-3:], lambda s: s[10:2], lambda s: [c for c in s if c.identifier_match]):
        lazy = LazyCandidates(_make_candidates, columns, columns[4])
        got = read(lazy)
        assert list(got) == list(read(eager))
        assert [repr(c) for c in got] == [repr(c) for c in read(eager)]
    lazy = LazyCandidates(_make_candidates, columns, columns[4])
    assert len(lazy) == 37 and lazy.scores == columns[4]
    first = lazy[0]
    assert lazy[:1] == (first,) and lazy[0] is first and next(iter(lazy)) is first  # each made once
    assert lazy == eager and eager == lazy and lazy != eager[:-1] and lazy != list(reversed(eager))
    assert lazy.index(eager[7]) == 7 and eager[9] in lazy and lazy.count(eager[2]) == 1
    with pytest.raises(IndexError):
        lazy[37]
    with pytest.raises(IndexError):
        lazy[-38]
    assert hash(lazy) == hash(eager)  # equal to the tuple: hashed as it is


def test_lazy_candidates_make_only_what_is_read() -> None:
    made: list[int] = []

    def make(*columns: Sequence[Any]) -> tuple[Candidate, ...]:
        made.append(len(columns[0]))
        return _make_candidates(*columns)

    columns = _columns(50)
    lazy = LazyCandidates(make, columns, columns[4])
    assert made == [] and len(lazy) == 50 and list(lazy.scores[:3]) == [1.0, 0.99, 0.98]
    lazy[:10]
    lazy[4]
    assert made == [10]  # the first ten, once
    lazy[19]
    assert made == [10, 10]
    assert len(list(lazy)) == 50 and made == [10, 10, 30]


class _Recording:
    """A post-processor of a plugin that does not say it takes lazily made candidates: it must get a tuple."""

    seen: list[type] = []

    def process(self, candidates: Sequence[Candidate], ctx: PostProcessContext) -> Sequence[Candidate]:
        _Recording.seen.append(type(candidates))
        return candidates + ()  # a tuple's own operation


def test_a_search_answers_the_same_with_every_kind_of_processor(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(12):
        write(ws, f"memory/note-{i}.md", f"# Note {i}\n\nThe heron count at lake {i} was {i * 7} this spring.\n")

    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            register(PostProcessorSpec(name="recording", order=900, factory=lambda hybrid: _Recording()))

    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        plain = [tools.memory_search(mem, {"query": q, "minScore": 0}) for q in ("heron count", "lake 7", "spring")]
        cands = mem.backend.search(SearchQuery(text="heron count", max_results=10, min_score=0.0, candidate_limit=40))
        assert isinstance(cands.candidates, LazyCandidates)
        eager = [attrs.asdict(c) for c in cands.candidates]
        assert [c["score"] for c in eager] == sorted((c["score"] for c in eager), reverse=True)
    with open_mem(tmp_path, ws, plugins=[("recording", Plugin())]) as mem:
        assert [tools.memory_search(mem, {"query": q, "minScore": 0})
                for q in ("heron count", "lake 7", "spring")] == plain
        assert _Recording.seen and set(_Recording.seen) == {tuple}


def test_a_search_result_does_what_a_tuple_of_its_candidates_does(tmp_path: Path) -> None:
    """A third-party caller of ``backend.search`` (a backend wrapping builtin-sqlite, a cache of results) gets
    ``BackendResult.candidates`` as it got the tuple: it concatenates, repeats, hashes, copies and pickles like one
    (a copy or a pickle is a tuple of equal candidates), and a non-integer index is a TypeError."""
    import copy
    import pickle

    ws = tmp_path / "ws"
    for i in range(6):
        write(ws, f"memory/note-{i}.md", f"# Note {i}\n\nThe heron count at lake {i} was {i * 7} this spring.\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        result = mem.backend.search(SearchQuery(text="heron count", max_results=10, min_score=0.0,
                                                candidate_limit=40))
    got = result.candidates
    assert isinstance(got, LazyCandidates) and len(got) > 2
    eager = tuple(got)
    assert got + () == eager and () + got == eager and got + eager[:1] == eager + eager[:1]
    assert got + got == eager + eager  # two searches' candidates, one after the other
    assert got * 2 == eager * 2 and 2 * got == eager * 2
    assert hash(got) == hash(eager) and hash(result) == hash(attrs.evolve(result, candidates=eager))
    for again in (copy.deepcopy(got), pickle.loads(pickle.dumps(got)), copy.deepcopy(result).candidates,
                  pickle.loads(pickle.dumps(result)).candidates):
        assert again == eager and type(again) is tuple
    for key in ("0", 1.0, None):
        with pytest.raises(TypeError):
            got[key]  # type: ignore[index]


def test_supersession_reads_its_window_ids_from_the_column_when_every_one_is_plain() -> None:
    from symi_memory_postprocess.supersede import Supersession

    made: list[int] = []

    def make(*columns: Sequence[Any]) -> tuple[Candidate, ...]:
        made.append(len(columns[0]))
        return _make_candidates(*columns)

    columns = _columns(50)
    texts = {cid: text for cid, text in zip(columns[0], columns[5], strict=True)}
    asked: list[list[str]] = []

    def plain(answers: dict[str, bool]) -> Any:
        def read(ids: Sequence[str]) -> dict[str, bool]:
            asked.append(list(ids))
            return {cid: answers[cid] for cid in ids if cid in answers}
        return read

    proc = Supersession()
    window = proc.thresholds.window
    every = dict.fromkeys(texts, True)
    lazy = LazyCandidates(make, columns, columns[4], ids=columns[0])
    ctx = PostProcessContext(query="heron", now=0.0, vectors=lambda ids: {}, plain=plain(every))
    assert proc.process(lazy, ctx) is lazy  # nothing can supersede: handed back as given
    assert made == [] and asked == [columns[0][:window]]  # the window's ids, from the column: no candidate made
    # One stored answer missing, or one not plain: the window is made and looked at as before.
    for answers in ({**every, "id3": False}, {k: v for k, v in every.items() if k != "id3"}):
        made.clear()
        lazy = LazyCandidates(make, columns, columns[4], ids=columns[0])
        got = proc.process(lazy, PostProcessContext(query="heron", now=0.0, vectors=lambda ids: {},
                                                    plain=plain(answers)))
        assert made and made[0] == window and list(got) == list(_make_candidates(*columns))
    # Without the id column the window is made, with the same answer.
    made.clear()
    lazy = LazyCandidates(make, columns, columns[4])
    assert proc.process(lazy, PostProcessContext(query="heron", now=0.0, vectors=lambda ids: {},
                                                 plain=plain(every))) is lazy
    assert made == [window]


def test_the_final_cut_makes_only_the_candidates_it_returns() -> None:
    """The cut to maxResults (one result per line range) reads the backend's candidates a slice at a time: a search
    that returns 6 of 50 makes 6 (iterating them all made every one: a third more pipeline time a search at 10k)."""
    from symi_memory.pipeline import Pipeline

    made: list[int] = []

    def make(*columns: Sequence[Any]) -> tuple[Candidate, ...]:
        made.append(len(columns[0]))
        return _make_candidates(*columns)

    columns = _columns(50)
    got = Pipeline(processors=[]).run("heron", LazyCandidates(make, columns, columns[4], ids=columns[0]),
                                      max_results=6, min_score=0.0)
    assert [c.id for c in got] == [f"id{i}" for i in range(6)] and made == [6]
    # Repeats of a line range are read past, a slice of what is still wanted at a time; the first candidate below
    # minScore ends the reading (they are best first).
    paths, starts, ends = list(columns[1]), list(columns[2]), list(columns[3])
    for i in (1, 2, 5):  # the pieces of one long line: the same lines as the one before
        paths[i], starts[i], ends[i] = paths[i - 1], starts[i - 1], ends[i - 1]
    repeated = (columns[0], paths, starts, ends, *columns[4:])
    made.clear()
    got = Pipeline(processors=[]).run("heron", LazyCandidates(make, repeated, columns[4], ids=columns[0]),
                                      max_results=6, min_score=0.0)
    assert [c.id for c in got] == ["id0", "id3", "id4", "id6", "id7", "id8"] and made == [6, 3]
    made.clear()
    got = Pipeline(processors=[]).run("heron", LazyCandidates(make, repeated, columns[4], ids=columns[0]),
                                      max_results=6, min_score=0.965)
    assert [c.id for c in got] == ["id0", "id3"] and made == [6]

def test_a_search_makes_each_candidate_from_its_own_chunk_row_whichever_is_read_first(tmp_path: Path) -> None:
    """The candidates' fields are read from their rows as they are made: each candidate, whether made alone, in a
    slice or with the rest, carries its own chunk's id, path, lines, text, source and file mtime, and the stored
    plain answers handed out are those of the candidates' own chunks."""
    ws = tmp_path / "ws"
    for i in range(4):
        write(ws, f"memory/note-{i}.md", "".join(f"# Part {j}\n\nThe heron count at lake {i}-{j} was {i * j}.\n\n"
                                                 for j in range(3)))
    write(ws, "memory/other.md", "# Other\n\nHerons were counted again.\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        backend = mem.backend
        store = backend.store
        rowids = [k for (k,) in store._read("SELECT rowid FROM chunks")]
        by_id = {r.id: r for r in store.candidate_rows(rowids).values()}
        for first in (3, slice(1, 4), None):
            got = backend.search(SearchQuery(text="heron count lake", max_results=10, min_score=0.0,
                                             candidate_limit=40)).candidates
            assert isinstance(got, LazyCandidates) and len(got) >= 5
            if isinstance(first, int):
                got[first]
            elif first is not None:
                got[first]
            for c in got:
                row = by_id[c.id]
                assert (c.path, c.start_line, c.end_line, c.text, c.source, c.mtime) == (
                    row.path, row.start_line, row.end_line, row.text, row.source, row.mtime)
            assert len({c.id for c in got}) == len(got)
            ids = [c.id for c in got]
            assert backend.candidate_plain(ids) == backend.candidate_plain(list(reversed(ids)))
            assert set(backend.candidate_plain(ids)) <= set(ids)
