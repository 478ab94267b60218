"""Memory that is there but cannot be read (a folder or file made unreadable, chmod 000): like a root that is away,
what the index holds from it stays searchable, syncs and status say which path and why, and it catches up once it
can be read again.

Before, a sync took every file of an extra path, a folder or a workspace it could not list for deleted, and dropped
them from the index without a word (a subfolder at least showed up in ``status.skipped``).

Root reads any file: the scenario runs in a child process without CAP_DAC_OVERRIDE (``setpriv``), so chmod 000
holds for it, as it does for any other user.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.unprivileged import run_without_dac_override

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write

    tmp, backend = Path(sys.argv[1]), sys.argv[2]
    ws, notes = tmp / "ws", tmp / "notes"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    write(ws, "memory/a.md", "- fed the axolotl\\n")
    write(ws, "memory/sub/b.md", "- the boiler code is 4471\\n")
    write(ws, "memory/c.md", "- the cormorant dives\\n")
    write(notes, "trip.md", "- the ferry leaves at 0710\\n")
    cfg = load_config(None, state_dir=tmp / "state", overrides={
        "plugins": {"slots": {"memory": backend}},
        "agents": {"defaults": {"memorySearch": {"provider": "hash", "extraPaths": [str(notes)]}}}})
    mem = open_memory(cfg, workspace=ws, start=False)

    def found(word):
        return sorted(h.path for h in mem.search(word, min_score=0).results if word in h.snippet)

    def seen():
        return {w: found(w) for w in ("ferry", "4471", "cormorant", "deep", "narwhal", "axolotl")}

    def look(report):
        st = mem.status()
        return {"removed": report.files_removed, "errors": list(report.errors), "warnings": list(report.warnings),
                "found": seen(), "files": st["files"], "status": st["warnings"], "dirty": st["dirty"]}

    out = {"first": mem.sync().files_indexed}
    notes.chmod(0)
    (ws / "memory" / "sub").chmod(0)
    write(ws, "memory/c.md", "- the cormorant dives deep\\n").chmod(0)
    try:
        out["unreadable"] = look(mem.sync())
    finally:
        for p in (notes, ws / "memory" / "sub"):
            p.chmod(0o755)
        (ws / "memory" / "c.md").chmod(0o644)
    st = mem.status()  # readable again, before any sync: what a search's staleness check sees
    out["readable"] = {"dirty": st["dirty"], "status": st["warnings"]}
    write(notes, "new.md", "- a narwhal surfaced\\n")
    (ws / "memory" / "sub" / "b.md").unlink()
    out["back"] = look(mem.sync())
    ws.chmod(0)
    try:
        out["workspace"] = look(mem.sync())
        out["force"] = list(mem.sync(force=True).errors)
    finally:
        ws.chmod(0o755)
    out["workspace back"] = look(mem.sync())
    mem.close()
    print(json.dumps(out))
""")


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_unreadable_memory_is_kept_reported_and_caught_up(tmp_path: Path, backend: str) -> None:
    if backend == "faiss":
        pytest.importorskip("faiss")
    out = run_without_dac_override(CHILD, str(tmp_path), backend)
    ws, notes = tmp_path / "ws", tmp_path / "notes"
    assert out["first"] == 5
    warned = [
        f"extra path {notes} (memorySearch.extraPaths) cannot be read (Permission denied): nothing new is indexed "
        "from it; what the index already holds from it stays searchable until it can be read again or leaves "
        "extraPaths",
        f"folder {ws}/memory/sub cannot be read (Permission denied): nothing new is indexed from it; what the index "
        "already holds from it stays searchable until it can be read again",
        f"file {ws}/memory/c.md cannot be read (Permission denied): what the index holds from it (as last read) "
        "stays searchable until it can be read again",
    ]
    assert out["unreadable"] == {
        "removed": 0, "errors": [], "warnings": warned, "status": warned, "files": 5, "dirty": False,
        "found": {"ferry": ["../notes/trip.md"], "4471": ["memory/sub/b.md"], "cormorant": ["memory/c.md"],
                  "deep": [], "narwhal": [], "axolotl": ["memory/a.md"]}}
    # Readable again (chmod changes no mtime): the edit made meanwhile is not indexed yet, which status says (a search
    # then syncs), and nothing is said to be unreadable any more.
    assert out["readable"] == {"dirty": True, "status": []}
    # Readable again: what changed meanwhile comes in (a new note, an edit), what was deleted goes.
    back = out["back"]
    assert (back["removed"], back["warnings"], back["status"], back["dirty"]) == (1, [], [], False), back
    assert back["found"] == {"ferry": ["../notes/trip.md"], "4471": [], "cormorant": ["memory/c.md"],
                             "deep": ["memory/c.md"], "narwhal": ["../notes/new.md"], "axolotl": ["memory/a.md"]}
    away = (f"workspace {ws} cannot be read (Permission denied): nothing new is indexed from it and appends fail; "
            "what the index already holds from it stays searchable until it can be read again")
    unread = out["workspace"]
    assert (unread["removed"], unread["errors"], unread["warnings"], unread["status"]) == (0, [], [away], [away])
    assert unread["files"] == 5 and unread["found"] == back["found"]
    assert len(out["force"]) == 1 and out["force"][0].startswith(
        f"the full rebuild of the index waits until the workspace {ws} is back"), out["force"]
    assert out["workspace back"]["warnings"] == [] and out["workspace back"]["found"] == back["found"]


TRANSCRIPTS_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write

    tmp, backend = Path(sys.argv[1]), sys.argv[2]
    ws = tmp / "ws"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    cfg = load_config(None, state_dir=tmp / "state", overrides={
        "plugins": {"slots": {"memory": backend}},
        "agents": {"defaults": {"memorySearch": {
            "provider": "hash", "experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"],
            "sync": {"watch": False, "maxFileBytes": 400}}}}})
    mem = open_memory(cfg, workspace=ws, start=False)
    sessions = Path(mem.agent.sessions_dir)

    def say(name, text):
        with open(sessions / name, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\\n")

    def seen():
        return {w: sorted(h.path for h in mem.search(w, min_score=0).results if w in h.snippet)
                for w in ("walrus", "pelican", "otter", "heron")}

    def look(report):
        st = mem.status()
        return {"removed": report.files_removed, "errors": list(report.errors), "warnings": list(report.warnings),
                "found": seen(), "files": st["files"], "status": st["warnings"], "dirty": st["dirty"],
                "partial": [p["path"] for p in st["partial"]]}

    sessions.mkdir(parents=True, exist_ok=True)
    say("a.jsonl", "the walrus sings")
    say("b.jsonl", "the pelican flies")
    for i in range(40):  # more message text than sync.maxFileBytes: indexed in part (its newest messages)
        say("c.jsonl", f"filler message number {i} of a long session")
    out = {"first": mem.sync().files_indexed}
    say("a.jsonl", "the otter swims")  # appended while it cannot be read: read on from the last sync once it can
    (sessions / "a.jsonl").chmod(0)
    try:
        out["file"] = look(mem.sync())
    finally:
        (sessions / "a.jsonl").chmod(0o644)
    out["file back"] = look(mem.sync())
    say("b.jsonl", "the heron waits")
    sessions.chmod(0)
    try:
        out["folder"] = look(mem.sync())
        out["folder full"] = list(mem.sync(force=True).warnings)
    finally:
        sessions.chmod(0o755)
    out["folder back"] = look(mem.sync())
    mem.close()
    print(json.dumps(out))
""")


@pytest.mark.parametrize("backend", ["builtin-sqlite", "faiss"])
def test_unreadable_transcripts_are_kept_reported_and_caught_up(tmp_path: Path, backend: str) -> None:
    """The session transcripts (sessions/ in the state dir) as the memory files: a transcripts folder that cannot be
    listed kept nothing (every transcript dropped from the index, status silent), and a transcript that cannot be
    read was named at a path in the workspace where no transcript is."""
    if backend == "faiss":
        pytest.importorskip("faiss")
    out = run_without_dac_override(TRANSCRIPTS_CHILD, str(tmp_path), backend)
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    assert out["first"] == 4
    file_warned = [f"file {sessions}/a.jsonl cannot be read (Permission denied): what the index holds from it (as "
                   "last read) stays searchable until it can be read again"]
    assert out["file"] == {
        "removed": 0, "errors": [], "warnings": file_warned, "status": file_warned, "files": 4, "dirty": False,
        "partial": ["sessions/c.jsonl"],
        "found": {"walrus": ["sessions/a.jsonl"], "pelican": ["sessions/b.jsonl"], "otter": [], "heron": []}}
    caught_up = {"walrus": ["sessions/a.jsonl"], "pelican": ["sessions/b.jsonl"], "otter": ["sessions/a.jsonl"],
                 "heron": []}
    assert out["file back"] == {"removed": 0, "errors": [], "warnings": [], "status": [], "files": 4, "dirty": False,
                                "partial": ["sessions/c.jsonl"], "found": caught_up}
    folder_warned = [f"folder {sessions} cannot be read (Permission denied): nothing new is indexed from it; what the "
                     "index already holds from it stays searchable until it can be read again"]
    # Still said to be indexed in part: its rows are kept as they were.
    assert out["folder"] == {"removed": 0, "errors": [], "warnings": folder_warned, "status": folder_warned,
                             "files": 4, "dirty": False, "partial": ["sessions/c.jsonl"], "found": caught_up}
    assert out["folder full"] == [
        *folder_warned, f"the full rebuild left out the 3 files indexed from {sessions}, which cannot be listed now: "
        "they are indexed again once it is back or can be read"]
    assert out["folder back"] == {"removed": 0, "errors": [], "warnings": [], "status": [], "files": 4, "dirty": False,
                                  "partial": ["sessions/c.jsonl"], "found": {**caught_up, "heron": ["sessions/b.jsonl"]}}


WORKSPACE_UNSEARCHABLE_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write

    tmp = Path(sys.argv[1])
    ws = tmp / "ws"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    write(ws, "memory/a.md", "- fed the axolotl\\n")
    cfg = load_config(None, state_dir=tmp / "state", overrides={
        "agents": {"defaults": {"memorySearch": {"provider": "hash", "sync": {"watch": False}}}}})
    mem = open_memory(cfg, workspace=ws, start=False)
    out = {"first": mem.sync().files_indexed}
    ws.chmod(0o644)  # `chmod -R 644`: listed, but nothing in it can be opened
    try:
        report = mem.sync()
        st = mem.status()
        out["unsearchable"] = {"removed": report.files_removed, "warnings": list(report.warnings),
                               "status": st["warnings"], "files": st["files"],
                               "found": [h.path for h in mem.search("axolotl", min_score=0).results
                                         if "axolotl" in h.snippet]}
    finally:
        ws.chmod(0o755)
    mem.close()
    print(json.dumps(out))
""")


def test_a_workspace_that_can_be_listed_but_not_entered_keeps_its_files(tmp_path: Path) -> None:
    """A workspace without search permission (`chmod -R 644`) lists its names but opens none: a sync took every
    file in it for deleted and dropped them all from the index without a word."""
    out = run_without_dac_override(WORKSPACE_UNSEARCHABLE_CHILD, str(tmp_path))
    ws = tmp_path / "ws"
    warned = [f"workspace {ws} cannot be read (Permission denied): nothing new is indexed from it and appends fail; "
              "what the index already holds from it stays searchable until it can be read again"]
    assert out == {"first": 2, "unsearchable": {"removed": 0, "warnings": warned, "status": warned, "files": 2,
                                                "found": ["memory/a.md"]}}


WATCHER_CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from support.sqlite_memory import write

    tmp = Path(sys.argv[1])
    ws = tmp / "ws"
    write(ws, "MEMORY.md", "- prefers tea\\n")
    write(ws, "memory/a.md", "- fed the axolotl\\n")
    write(ws, "memory/private/b.md", "- the boiler code is 4471\\n")

    def config(watch):
        return load_config(None, state_dir=tmp / "state", overrides={"agents": {"defaults": {"memorySearch": {
            "provider": "hash", "sync": {"watch": watch, "watchDebounceMs": 50}}}}})

    with open_memory(config(False), workspace=ws, start=False) as mem:
        mem.sync()
    (ws / "memory" / "private").chmod(0)
    out = {}
    try:
        with open_memory(config(True), workspace=ws) as mem:
            time.sleep(3)  # past the watchers' first look at the files
            write(ws, "memory/new.md", "- a narwhal surfaced\\n")
            deadline = time.monotonic() + 10
            while mem.status()["files"] != 4 and time.monotonic() < deadline:  # status syncs nothing
                time.sleep(0.2)
            out["files"] = mem.status()["files"]
    finally:
        (ws / "memory" / "private").chmod(0o755)
    print(json.dumps(out))
""")


def test_the_watcher_sees_changes_while_a_folder_cannot_be_read(tmp_path: Path) -> None:
    """A sync goes on past a folder it cannot read; the file watcher did not: watching memory/ failed on it at its
    start, and tried again every second for as long as it lasted, so no change to any memory file was seen (until
    the 30-second recheck, or a search's staleness check)."""
    out = run_without_dac_override(WATCHER_CHILD, str(tmp_path))
    assert out == {"files": 4}
