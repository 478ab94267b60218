"""Candidate rows kept per process for the index's (generation, touches): writes from another process.

A long-running process (serve, an MCP server) keeps the rows of its searches' candidates; a sync from the CLI or
another agent host changes the index under it. Every search after such a write must hand out the rows the index
holds now: the text, lines, path, source and file mtime a fresh read gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import apsw
import pytest

from symi_memory import load_config
from symi_memory.manager import open_memory
from symi_memory.types import SearchQuery

OVERRIDES = {"agents": {"defaults": {"memorySearch": {"provider": "none"}}}}
# The second process: open the same agent (workspace, state dir) and sync, forced or not.
CHILD = """
import sys
from pathlib import Path
from symi_memory import load_config
from symi_memory.manager import open_memory
state, ws, force = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "force"
cfg = load_config(None, state_dir=state, overrides={"agents": {"defaults": {"memorySearch": {"provider": "none"}}}})
with open_memory(cfg, workspace=ws, start=False) as mem:
    mem.sync(force=force)
"""


def _write(ws: Path, rel: str, text: str) -> None:
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    (ws / rel).write_text(text, encoding="utf-8")


def _other_process_syncs(state: Path, ws: Path, *, force: bool = False) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", CHILD, str(state), str(ws), "force" if force else "plain"], check=True,
                   env=env, timeout=120, capture_output=True)


def _found(mem, query: str = "zebras") -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    res = mem.backend.search(SearchQuery(text=query, max_results=20, min_score=0.0, candidate_limit=60))
    return {c.id: (c.path, c.source, c.start_line, c.end_line, c.text, c.mtime) for c in res.candidates}


def _in_index(db: str, ids: list[str]) -> dict[str, tuple]:
    """The same fields read straight from the index file by a connection of its own."""
    con = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        marks = ",".join("?" * len(ids))
        return {r[0]: tuple(r[1:]) for r in con.execute(
            "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.mtime FROM chunks c "
            f"LEFT JOIN files f ON f.path = c.path WHERE c.id IN ({marks})", ids)}
    finally:
        con.close()


@pytest.mark.parametrize("change", ["touch", "edit", "delete", "reindex"])
def test_a_search_after_another_process_synced_hands_out_the_rows_the_index_holds(tmp_path: Path,
                                                                                   change: str) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write(ws, "MEMORY.md", "# Memory\n\nzebras graze at dawn\n")
    _write(ws, "memory/a.md", "# A\n\nalpha note about zebras\n")
    _write(ws, "memory/b.md", "# B\n\nbeta note about zebras and lions\n")
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        db = mem.status()["dbPath"]
        before = _found(mem)
        assert {p for p, *_ in before.values()} == {"MEMORY.md", "memory/a.md", "memory/b.md"}
        assert mem.backend._rows_kept[1]  # the rows are kept
        if change == "touch":  # same content, new mtime: no new generation
            st = (ws / "memory/a.md").stat()
            os.utime(ws / "memory/a.md", (st.st_atime, st.st_mtime + 500))
        elif change == "edit":
            _write(ws, "memory/a.md", "# A\n\nalpha note about zebras, now striped\n")
        elif change == "delete":
            (ws / "memory/b.md").unlink()
        _other_process_syncs(state, ws, force=change == "reindex")
        after = _found(mem)
        assert after == _in_index(db, list(after))
        paths = {p for p, *_ in after.values()}
        if change == "touch":
            a = [v for v in after.values() if v[0] == "memory/a.md"]
            assert a and a[0][5] == pytest.approx(os.stat(ws / "memory/a.md").st_mtime)
        elif change == "edit":
            assert any(v[4].endswith("now striped\n") for v in after.values())
        elif change == "delete":
            assert "memory/b.md" not in paths
        else:
            assert paths == {"MEMORY.md", "memory/a.md", "memory/b.md"}


def test_searching_threads_end_on_the_index_another_process_wrote(tmp_path: Path) -> None:
    # Threads of one process search without pause while a second process syncs touches, edits and deletes;
    # once it is done, every thread's next search answers from the index as it is (no kept row of an older
    # index outlives the writes).
    ws, state = tmp_path / "ws", tmp_path / "state"
    for i in range(30):
        _write(ws, f"memory/n{i:02d}.md", f"# N{i}\n\nnote {i} about zebras, version 0\n")
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        db = mem.status()["dbPath"]
        stop = threading.Event()
        errors: list[BaseException] = []

        def searching() -> None:
            try:
                while not stop.is_set():
                    _found(mem)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=searching) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            # Edits and touches, a delete, then touches alone (no new generation).
            for round_ in range(1, 4):
                if round_ == 1:
                    for i in range(0, 30, 3):
                        _write(ws, f"memory/n{i:02d}.md", f"# N{i}\n\nnote {i} about zebras, version 1\n")
                if round_ == 2:
                    (ws / "memory/n29.md").unlink()
                if round_ != 2:
                    for i in range(1, 29, 3):
                        st = (ws / f"memory/n{i:02d}.md").stat()
                        os.utime(ws / f"memory/n{i:02d}.md", (st.st_atime, st.st_mtime + 100))
                _other_process_syncs(state, ws)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert not errors
        results: list[dict[str, tuple]] = []

        def once() -> None:
            results.append(_found(mem))

        for t in [threading.Thread(target=once) for _ in range(3)]:
            t.start()
            t.join()
        results.append(_found(mem))
        for found in results:
            assert found == _in_index(db, list(found))
            assert len(found) == 29 and not any(v[0] == "memory/n29.md" for v in found.values())


def test_kept_rows_stay_within_their_text_budget_and_answer_the_same(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Large chunks must not make a long-running process keep the whole indexed text: past the budget the kept
    rows start again, and every search still hands out what the index holds."""
    from symi_memory.index import backend as backend_module

    ws, state = tmp_path / "ws", tmp_path / "state"
    for i in range(12):  # each file one chunk of about 1,300 characters
        _write(ws, f"memory/n{i}.md", f"# Note {i}\n\n" + f"zebras graze at dawn in field {i}. " * 40 + "\n")
    budget = 3_000  # two of those chunks
    monkeypatch.setattr(backend_module, "ROWS_CACHE_CHARS", budget)
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        db = mem.status()["dbPath"]
        for i in range(12):
            found = _found(mem, f"field {i}")
            assert found and found == _in_index(db, list(found))
            kept = sum(len(r[6]) for r in mem.backend._rows_kept[1].values())
            assert kept <= budget


def _from_index_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Term counts of every candidate read from FTS5 (and kept for the generation), however cheap tokenizing is."""
    from symi_memory.index import backend as backend_mod

    for name in ("FTS_COUNT_FIXED_CHARS", "FTS_COUNT_CHARS_PER_TERM", "FTS_COUNT_CHARS_PER_OCCURRENCE"):
        monkeypatch.setattr(backend_mod, name, 0)


def _scores(mem, query: str) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    res = mem.backend.search(SearchQuery(text=query, max_results=20, min_score=0.0, candidate_limit=60))
    return {c.id: (c.score, c.text_score, c.text) for c in res.candidates}


@pytest.mark.parametrize("change", ["edit", "delete", "reindex"])
def test_term_counts_kept_for_the_generation_follow_another_process_writes(tmp_path: Path, change: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # A long-running process keeps the counts of query terms it read from FTS5; after another process rewrote
    # a note to hold the words more often (or removed one), the next search scores as a fresh process does.
    _from_index_always(monkeypatch)
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write(ws, "MEMORY.md", "# Memory\n\nzebras graze at dawn near okapis\n")
    _write(ws, "memory/a.md", "# A\n\nalpha note about zebras\n")
    _write(ws, "memory/b.md", "# B\n\nbeta note about zebras and okapis\n")
    for i in range(8):
        _write(ws, f"memory/f{i}.md", f"# F{i}\n\nfiller note {i} about lions\n")
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        before = _scores(mem, "zebras okapis")
        assert before == _scores(mem, "zebras okapis")  # the second search answers from the kept counts
        kept = mem.backend._postings[1]
        assert {"zebra", "okapi"} <= set(kept)
        if change == "edit":
            _write(ws, "memory/a.md", "# A\n\nalpha note about zebras: zebras, zebras and okapis, okapis\n")
        elif change == "delete":
            (ws / "memory/b.md").unlink()
        _other_process_syncs(state, ws, force=change == "reindex")
        after = _scores(mem, "zebras okapis")
    with open_memory(cfg, workspace=ws, start=False) as fresh:
        assert after == _scores(fresh, "zebras okapis")
    if change == "edit":
        assert after != before


def test_line_analyses_read_with_the_vectors_are_the_ones_the_index_holds(tmp_path: Path) -> None:
    # Supersession asks for the candidates' vectors, then their line analyses: one statement serves both, and an
    # analysis handed over in one search never answers the next one (another process rewrote a note between).
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write(ws, "memory/a.md", "# A\n\n2026-01-02: the zebra count is 12\n")
    _write(ws, "memory/b.md", "# B\n\nzebras moved to the north field\n")
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        backend, store = mem.backend, mem.backend.store
        ids = list(_found(mem))
        assert len(ids) == 2
        statements: list[str] = []
        conn = store.reader()
        conn.exec_trace = lambda _cursor, sql, _bindings: statements.append(sql) or True
        try:
            backend.candidate_vectors(ids)
            handed = backend.candidate_line_analysis(ids)
        finally:
            conn.exec_trace = None
        assert len(statements) == 1  # the vectors' read brought the analyses
        assert handed == store.line_analysis_by_id(ids) and set(handed) == set(ids)
        # Handed over but not asked for in that search; another process rewrites a note; the next search's
        # analyses are the index's.
        backend._vectors_cache.clear()
        backend.candidate_vectors(ids)
        _write(ws, "memory/a.md", "# A\n\n2026-03-04: the zebra count is 15, up from 12\n")
        _other_process_syncs(state, ws)
        later = list(_found(mem))
        got = backend.candidate_line_analysis(later)
        assert got == store.line_analysis_by_id(later) and set(got) == set(later)


def test_kept_candidate_vectors_full_do_not_lose_the_ones_a_search_asks_for(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # A long-running process keeps candidates' vectors up to VECTORS_CACHE_MAX. When a search's pool holds some kept
    # ones and some not, and keeping the new ones empties the full cache, the kept ones must still be handed out:
    # supersession judges the March car line by the June one's vector.
    from support.sqlite_memory import open_mem, write

    from symi_memory import tools
    from symi_memory.index import backend as backend_mod

    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-01.md", "# 2026-03-01\n\n- The car is a blue hatchback.\n- Booked the dentist.\n")
    write(ws, "memory/2026-06-01.md", "# 2026-06-01\n\n- Sold the hatchback; now the car is a red SUV.\n")
    write(ws, "memory/2026-02-01.md", "# 2026-02-01\n\n- The bike is a green gravel bike.\n")
    query = {"query": "what car do I drive?", "minScore": 0}
    with open_mem(tmp_path, ws, {"query": {"hybrid": {"supersession": {"enabled": True}}}}) as mem:
        mem.sync()
        fresh = tools.memory_search(mem, query)["results"]
        march = [h for h in fresh if h["path"] == "memory/2026-03-01.md"]
        assert march and march[0]["supersededBy"]["path"] == "memory/2026-06-01.md"
        backend = mem.backend
        ids = [c.id for c in backend.search(SearchQuery(text=query["query"], max_results=20, min_score=0.0,
                                                        candidate_limit=60)).candidates]
        assert len(ids) == 3
        # The car lines' vectors kept by an earlier search, the bike's not, and the cache full.
        backend._vectors_cache.clear()
        car = [c.id for c in backend.search(SearchQuery(text=query["query"], max_results=20, min_score=0.0,
                                                        candidate_limit=60)).candidates if "car" in c.text]
        backend.candidate_vectors(car)
        monkeypatch.setattr(backend_mod, "VECTORS_CACHE_MAX", len(car))
        assert set(backend.candidate_vectors(ids)) == set(ids)
        backend._vectors_cache.clear()
        backend.candidate_vectors(car)
        assert tools.memory_search(mem, query)["results"] == fresh


def test_kept_line_vectors_full_do_not_lose_the_ones_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As candidate_vectors: line vectors kept up to UNITS_CACHE_MAX; a call whose ids are partly kept, when keeping
    # the others empties the full cache, still hands out every one asked for (what a fresh process reads).
    from support.sqlite_memory import open_mem, write

    from symi_memory.index import backend as backend_mod

    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "# A\n\n- The car is a blue hatchback.\n- Booked the dentist.\n")
    write(ws, "memory/b.md", "# B\n\n- Sold the hatchback; now the car is a red SUV.\n- Bought shoes.\n")
    write(ws, "memory/c.md", "# C\n\n- The bike is a green gravel bike.\n- The car is parked.\n")
    with open_mem(tmp_path, ws) as mem:
        mem.sync()
        backend = mem.backend
        ids = [c.id for c in backend.search(SearchQuery(text="car", max_results=20, min_score=0.0,
                                                        candidate_limit=60)).candidates]
        assert len(ids) == 3
        every = backend.candidate_line_vectors(ids)
        assert set(every) == set(ids)
        backend._units_cache.clear()
        backend.candidate_line_vectors(ids[:2])
        monkeypatch.setattr(backend_mod, "UNITS_CACHE_MAX", 2)
        assert set(backend.candidate_line_vectors(ids)) == set(ids)


def test_kept_term_counts_stay_within_their_cap_with_cjk_query_terms(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # CJK bigrams of a query occur in the index (its cjk column) but never in the text column the counts are read
    # from: each such term is kept with no counts. Kept terms count against POSTINGS_CACHE_MAX all the same, so a
    # long-running process asked many CJK queries in one generation keeps a bounded number of them.
    _from_index_always(monkeypatch)
    from symi_memory.index import backend as backend_mod

    monkeypatch.setattr(backend_mod, "POSTINGS_CACHE_MAX", 8)
    ws, state = tmp_path / "ws", tmp_path / "state"
    cities = "東京 大阪 京都 札幌 福岡 神戸 横浜 名古屋 仙台 広島 奈良 金沢"
    _write(ws, "memory/cities.md", "# Cities\n\n" + "\n".join(f"{c}の天気" for c in cities.split()) + "\n")
    _write(ws, "memory/zebras.md", "# Zebras\n\nzebras graze at dawn\n")
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        for city in cities.split():
            answer = _scores(mem, f"zebras {city}の天気")
            assert len(mem.backend._postings[1]) <= 8
        with open_memory(cfg, workspace=ws, start=False) as fresh:
            assert answer == _scores(fresh, f"zebras {city}の天気")


def test_a_search_that_starts_the_kept_rows_again_keeps_its_own_candidates(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A search whose new rows take the kept rows past their text budget starts them again; the rows it found kept
    are still its candidates (they were dropped: the note found by the earlier search went missing from this one)."""
    from symi_memory.index import backend as backend_module

    ws, state = tmp_path / "ws", tmp_path / "state"
    words = ["okapi", "heron", "lynx", "otter"]
    for i, word in enumerate(words):  # each file one chunk of about 1,300 characters, with a word of its own
        _write(ws, f"memory/n{i}.md", f"# Note {i}\n\n" + f"{word} seen at dawn in field {i}. " * 40 + "\n")
    monkeypatch.setattr(backend_module, "ROWS_CACHE_CHARS", 3_000)  # two of those chunks
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        assert {v[0] for v in _found(mem, "okapi").values()} == {"memory/n0.md"}
        assert {v[0] for v in _found(mem, "heron").values()} == {"memory/n1.md"}
        # okapi's row is kept; lynx's is not, and with it the kept rows would pass the budget.
        found = _found(mem, "okapi lynx")
        assert {v[0] for v in found.values()} == {"memory/n0.md", "memory/n2.md"}
        assert found == _in_index(mem.status()["dbPath"], list(found))


@pytest.mark.parametrize("change", ["touch", "edit"])
def test_the_search_epoch_is_read_again_only_after_another_process_wrote(tmp_path: Path, change: str) -> None:
    # A search reads the index's ((index id, generation), touches) first: its kept rows and counts are those of that epoch.
    # While no other connection committed (SQLite's data version of the reading connection), the meta rows are
    # not read again; after another process's sync they are, and the search hands out what it wrote.
    ws, state = tmp_path / "ws", tmp_path / "state"
    _write(ws, "memory/a.md", "# A\n\nalpha note about zebras\n")
    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        store = mem.backend.store
        read: list[str] = []

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if "FROM meta WHERE key IN ('generation', 'touches', 'identity'," in sql:
                read.append(sql)
            return True

        first = store.search_epoch()
        store.reader().exec_trace = trace
        _found(mem)
        assert store.search_epoch() == first and read == []  # nothing written meanwhile: no meta read
        if change == "touch":
            st = (ws / "memory/a.md").stat()
            os.utime(ws / "memory/a.md", (st.st_atime, st.st_mtime + 500))
        else:
            _write(ws, "memory/a.md", "# A\n\nalpha note about zebras, now striped\n")
        _other_process_syncs(state, ws)
        after = _found(mem)
        assert read  # read again
        epoch = store.search_epoch()
        # The same index (its id), a new generation or touch.
        assert epoch == (first[0], first[1] + 1) if change == "touch" else (
            epoch[0][0] == first[0][0] and epoch[0][1] > first[0][1])
        assert after == _in_index(mem.status()["dbPath"], list(after))
        if change == "edit":
            assert any(v[4].endswith("now striped\n") for v in after.values())
        else:
            assert [v[5] for v in after.values()] == [pytest.approx(os.stat(ws / "memory/a.md").st_mtime)]


def test_a_search_whose_new_rows_another_thread_let_go_still_answers_with_them(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A search keeps the rows it read; another thread's search passing the text budget starts the kept rows again
    right after. The first search hands out the rows it read, not only those still kept (none: it answered nothing)."""
    import inspect

    from symi_memory.index import backend as backend_module

    ws, state = tmp_path / "ws", tmp_path / "state"
    for i, word in enumerate(["okapi", "heron"]):  # each file one chunk of about 1,300 characters
        _write(ws, f"memory/n{i}.md", f"# Note {i}\n\n" + f"{word} seen at dawn in field {i}. " * 40 + "\n")
    monkeypatch.setattr(backend_module, "ROWS_CACHE_CHARS", 2_000)  # one of those chunks
    code = backend_module.IndexedBackend._rows.__code__
    lines, first = inspect.getsourcelines(code)
    at = next(first + i for i, line in enumerate(lines) if "if cache is keep" in line)  # the new rows just kept
    paused, go = threading.Event(), threading.Event()

    def local(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "line" and frame.f_lineno == at and not paused.is_set():
            paused.set()
            go.wait(30)
        return local

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        return local if frame.f_code is code else None

    cfg = load_config(None, state_dir=state, overrides=OVERRIDES)
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        got: dict[str, tuple] = {}

        def okapi() -> None:
            sys.settrace(tracer)
            try:
                got.update(_found(mem, "okapi"))
            finally:
                sys.settrace(None)

        t = threading.Thread(target=okapi)
        t.start()
        assert paused.wait(30)
        assert {v[0] for v in _found(mem, "heron").values()} == {"memory/n1.md"}  # okapi's row let go for heron's
        go.set()
        t.join(30)
        assert {v[0] for v in got.values()} == {"memory/n0.md"}
