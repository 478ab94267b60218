"""Where this round's changes meet: unreadable memory on a damaged index, a third-party provider failing while a
transcript is read on from its tail state."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_unreadable_memory import run_without_dac_override

DAMAGED_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write
    from test_sqlite_failures import _damage

    tmp = Path(sys.argv[1])
    ws, notes = tmp / "ws", tmp / "notes"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    write(notes, "trip.md", "- the ferry leaves at 0710\\n")
    cfg = load_config(None, state_dir=tmp / "state", overrides={
        "agents": {"defaults": {"memorySearch": {"provider": "hash", "extraPaths": [str(notes)],
                                                 "sync": {"watch": False}}}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        db = Path(mem.status()["dbPath"])
    _damage(db, sys.argv[2])
    notes.chmod(0)
    try:
        with open_memory(cfg, workspace=ws, start=False) as mem:
            st = mem.status()
            out = {"warnings": st["warnings"], "dirty": st["dirty"], "damaged": "damaged" in (st["lastError"] or "")}
    finally:
        notes.chmod(0o755)
    print(json.dumps(out))
""")


def test_status_of_a_damaged_index_still_names_memory_it_cannot_read(tmp_path: Path) -> None:
    """status on an index whose skipped table is damaged (it reads that table for the files it could not read)
    dropped every warning, the extra path that cannot be read included: listing what cannot be read needs no
    index, only naming the indexed files the last sync could not read does."""
    out = run_without_dac_override(DAMAGED_CHILD, str(tmp_path), "skipped")
    notes = tmp_path / "notes"
    assert out == {"dirty": True, "damaged": True, "warnings": [
        f"extra path {notes} (memorySearch.extraPaths) cannot be read (Permission denied): nothing new is indexed "
        "from it; what the index already holds from it stays searchable until it can be read again or leaves "
        "extraPaths"]}


def test_a_third_party_provider_failing_while_a_transcript_is_read_on_catches_up_to_a_whole_index(
        tmp_path: Path) -> None:
    """A transcript read on from its tail state while a third-party provider raises its own error (a KeyError from
    its parser): the appended messages are searchable by keyword at once, and once the provider answers again the
    index holds exactly what one built from the final file holds (every chunk with its vector)."""
    import random

    from support.sqlite_memory import open_mem, write
    from test_plugin_runtime_faults import _provider_plugin
    from test_transcript_tail import append, dump, index_once, msg, random_lines, settings

    mode = {"now": "ok"}
    plugins = [("flaky-plugin", _provider_plugin(mode))]
    ms = {**settings(), "provider": "flaky", "fallback": "none"}
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    transcript = tmp_path / "state" / "agents" / "main" / "sessions" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    rng = random.Random(3)
    transcript.write_bytes(b"".join(random_lines(rng, 30)))
    with open_mem(tmp_path, ws, ms, plugins=plugins) as mem:
        mem.sync(reason="manual")
        assert mem.status()["dirty"] is False
        mode["now"] = "raise"
        for word in ("zanzibar", "quagga"):
            append(transcript, b"".join(random_lines(rng, 8)) + msg("user", f"the {word} arrived"))
            report = mem.sync(reason="manual")
            assert report.errors == ("flaky: flaky failed (KeyError: 'data')",) and report.files_indexed == 1, report
            assert [h.path for h in mem.search(word, min_score=0).results] == ["sessions/s.jsonl"]
            assert mem.status()["dirty"] is True
        mode["now"] = "ok"
        append(transcript, b"".join(random_lines(rng, 5)))
        mem.sync(reason="manual")
        got = dump(mem)
        assert got["status"]["dirty"] is False
    want = index_once(tmp_path, transcript, ms, plugins=plugins)
    assert got == want


SESSIONS_NOTES_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write

    tmp, transcripts = Path(sys.argv[1]), sys.argv[2] == "on"
    ws = tmp / "ws"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    write(ws, "sessions/private/b.md", "- the boiler code is 4471\\n")
    ms = {"provider": "hash", "extraPaths": ["sessions"], "sync": {"watch": False}}
    if transcripts:
        ms.update({"experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"]})
    cfg = load_config(None, state_dir=tmp / "state", overrides={"agents": {"defaults": {"memorySearch": ms}}})
    with open_memory(cfg, workspace=ws, start=False) as mem:
        mem.sync()
        (ws / "sessions" / "private").chmod(0)
        try:
            report = mem.sync()
            st = mem.status()
            out = {"removed": report.files_removed, "warnings": list(report.warnings), "status": st["warnings"],
                   "found": [h.path for h in mem.search("4471", min_score=0).results if "4471" in h.snippet]}
        finally:
            (ws / "sessions" / "private").chmod(0o755)
    print(json.dumps(out))
""")


@pytest.mark.parametrize("transcripts", ["off", "on"])
def test_an_unreadable_folder_of_an_extra_path_named_sessions_keeps_its_files(tmp_path: Path,
                                                                            transcripts: str) -> None:
    """An extra path inside the workspace named ``sessions`` (meeting notes) stores its files as ``sessions/...``,
    as transcripts are stored: a folder in it that cannot be read was taken for the transcripts folder's, and every
    memory file in it was dropped from the index as deleted."""
    out = run_without_dac_override(SESSIONS_NOTES_CHILD, str(tmp_path), transcripts)
    folder = tmp_path / "ws" / "sessions" / "private"
    warned = [f"folder {folder} cannot be read (Permission denied): nothing new is indexed from it; what the index "
              "already holds from it stays searchable until it can be read again"]
    assert out == {"removed": 0, "warnings": warned, "status": warned, "found": ["sessions/private/b.md"]}


def test_a_transcript_read_on_under_faiss_searches_as_one_indexed_once(tmp_path: Path) -> None:
    """faiss keeps its vectors beside the index, told of each write: a transcript read on from its tail state
    replaces its last chunk's rows and adds the new ones. Searched by vector, the grown index must answer as a
    fresh one of the final file does (no vector left for a chunk gone, none missing for a chunk added)."""
    pytest.importorskip("faiss")
    import random

    from support.sqlite_memory import settings as config
    from support.sqlite_memory import write
    from test_transcript_tail import QUERIES, append, random_lines, settings

    from symi_memory import load_config, open_memory

    def open_faiss(root: Path, ws: Path, ms: dict[str, object]):  # type: ignore[no-untyped-def]
        cfg = load_config(None, state_dir=root / "state",
                          overrides=config(ms, plugins={"slots": {"memory": "faiss"}}))
        return open_memory(cfg, workspace=ws, start=False)

    def answers(mem: object) -> dict[str, list[tuple[str, int, int, float]]]:
        return {q: [(h.path, h.start_line, h.end_line, round(h.score, 6))
                    for h in mem.search(q, max_results=20, min_score=0).results]  # type: ignore[attr-defined]
                for q in QUERIES}

    ms = {**settings(), "provider": "hash"}
    rng = random.Random(11)
    lines = random_lines(rng, 90)
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- the otter lives by the weir\n")
    transcript = tmp_path / "state" / "agents" / "main" / "sessions" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes(b"")
    with open_faiss(tmp_path, ws, ms) as mem:
        while lines:
            take, lines = lines[:9], lines[9:]
            append(transcript, b"".join(take))
            mem.sync(reason="manual")
        grown = answers(mem)
        st = mem.status()
        assert st["vector"]["available"] and "faiss" in str(st["backend"]), st["backend"]
    fresh = tmp_path / "fresh"
    write(fresh / "ws", "MEMORY.md", "- the otter lives by the weir\n")
    write(fresh / "state" / "agents" / "main" / "sessions", "s.jsonl", transcript.read_bytes())
    with open_faiss(fresh, fresh / "ws", ms) as mem:
        mem.sync(reason="manual")
        assert answers(mem) == grown


FORCE_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write

    tmp = Path(sys.argv[1])
    ws = tmp / "ws"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    write(ws, "memory/c.md", "- the cormorant dives\\n")
    write(ws, "memory/sub/d.md", "- the dipper bobs\\n")
    cfg = load_config(None, state_dir=tmp / "state", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
        "sync": {"watch": False}, "chunking": {"tokens": 24, "overlap": 6}}}}})
    mem = open_memory(cfg, workspace=ws, start=False)
    sessions = Path(mem.agent.sessions_dir)
    sessions.mkdir(parents=True, exist_ok=True)
    def say(text):
        with open(sessions / "a.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\\n")
    for i in range(20):
        say(f"the walrus sings verse {i} of the long song about harbours")
    def found(w):
        return sorted(h.path for h in mem.search(w, min_score=0).results if w in h.snippet)
    out = {"first": mem.sync().files_indexed}
    say("the otter swims")
    (sessions / "a.jsonl").chmod(0)
    (ws / "memory" / "c.md").chmod(0)
    (ws / "memory" / "sub").chmod(0)
    try:
        r = mem.sync(force=True)
        st = mem.status()
        out["force"] = {"warnings": list(r.warnings), "status": st["warnings"], "dirty": st["dirty"], "files": st["files"],
                        "skipped": st["skipped"]}
    finally:
        (sessions / "a.jsonl").chmod(0o644); (ws / "memory" / "c.md").chmod(0o644); (ws / "memory" / "sub").chmod(0o755)
    st = mem.status()
    out["readable"] = {"dirty": st["dirty"], "status": st["warnings"]}
    say("the heron waits")
    r = mem.sync()
    st = mem.status()
    out["back"] = {"warnings": list(r.warnings), "dirty": st["dirty"], "files": st["files"], "found": {w: sorted(set(found(w))) for w in ("walrus", "otter", "heron", "cormorant", "dipper")}}
    chunks = st["chunks"]
    mem.close()
    # a fresh index of the same files
    import shutil
    cfg2 = load_config(None, state_dir=tmp / "state2", overrides={"agents": {"defaults": {"memorySearch": {
        "provider": "hash", "experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
        "sync": {"watch": False}, "chunking": {"tokens": 24, "overlap": 6}}}}})
    (tmp / "state2" / "agents" / "main").mkdir(parents=True)
    shutil.copytree(sessions, tmp / "state2" / "agents" / "main" / "sessions")
    with open_memory(cfg2, workspace=ws, start=False) as m2:
        m2.sync()
        out["chunks"] = [chunks, m2.status()["chunks"]]
    print(json.dumps(out))
""")


def test_a_forced_rebuild_leaving_out_unreadable_memory_and_a_transcript_catches_up_once_readable(
        tmp_path: Path) -> None:
    """`index --force` while a transcript, a memory file and a folder cannot be read: the rebuild leaves them out
    (and the transcript's tail state with them). Readable again (a chmod: no new mtime), status says stale, and the
    next sync reads the transcript whole, appended meanwhile, to the chunks a fresh index of the same files holds."""
    out = run_without_dac_override(FORCE_CHILD, str(tmp_path))
    assert out["first"] == 4
    force = out["force"]
    assert force["files"] == 1 and force["dirty"] is False
    ws, sessions = tmp_path / "ws", tmp_path / "state" / "agents" / "main" / "sessions"
    assert force["warnings"][1:] == [
        f"the full rebuild left out the 1 files indexed from {ws}/memory/sub, which cannot be listed now: they are "
        "indexed again once it is back or can be read",
        f"the full rebuild left out {ws}/memory/c.md, {sessions}/a.jsonl, indexed before, which cannot be read now: "
        "indexed again once it can be read"], force["warnings"]
    assert out["readable"] == {"dirty": True, "status": []}
    assert out["back"] == {"warnings": [], "dirty": False, "files": 4, "found": {
        "walrus": ["sessions/a.jsonl"], "otter": ["sessions/a.jsonl"], "heron": ["sessions/a.jsonl"],
        "cormorant": ["memory/c.md"], "dipper": ["memory/sub/d.md"]}}
    assert out["chunks"][0] == out["chunks"][1]
