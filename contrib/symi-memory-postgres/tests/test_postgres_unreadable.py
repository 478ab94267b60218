"""Memory that is there but cannot be read (chmod 000) keeps its rows on the server, as on builtin-sqlite: syncs and
status say which path and why, and it catches up once readable. Before, a sync deleted the rows of every file of an
extra path or folder it could not list, without a word. Root reads any file: the scenario runs in a child process
without CAP_DAC_OVERRIDE (``setpriv``)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from pg_support import PgServer, pg_config
from support.unprivileged import run_without_dac_override

pytestmark = pytest.mark.postgres

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.config.fields import deep_merge
    from symi_memory.manager import open_memory

    tmp, pg = Path(sys.argv[1]), json.loads(sys.argv[2])
    ws, notes = tmp / "ws", tmp / "notes"

    def write(path, text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    write(ws / "MEMORY.md", "- prefers tea\\n")
    write(ws / "memory/sub/b.md", "- the boiler code is 4471\\n")
    write(ws / "memory/c.md", "- the cormorant dives\\n")
    write(notes / "trip.md", "- the ferry leaves at 0710\\n")
    ms = {"provider": "hash", "sync": {"watch": False}, "extraPaths": [str(notes)]}
    cfg = load_config(None, state_dir=tmp / "state",
                      overrides=deep_merge(pg, {"agents": {"defaults": {"memorySearch": ms}}}))
    mem = open_memory(cfg, workspace=ws, start=False)

    def found():
        return {w: sorted(h.path for h in mem.search(w, min_score=0).results if w in h.snippet)
                for w in ("ferry", "4471", "cormorant", "deep", "narwhal")}

    def look(report):
        st = mem.status()
        return {"removed": report.files_removed, "warnings": list(report.warnings), "found": found(),
                "files": st["files"], "status": st["warnings"], "dirty": st["dirty"]}

    out = {"first": mem.sync().files_indexed}
    notes.chmod(0)
    (ws / "memory" / "sub").chmod(0)
    write(ws / "memory/c.md", "- the cormorant dives deep\\n").chmod(0)
    try:
        out["unreadable"] = look(mem.sync())
    finally:
        for p in (notes, ws / "memory" / "sub"):
            p.chmod(0o755)
        (ws / "memory" / "c.md").chmod(0o644)
    write(notes / "new.md", "- a narwhal surfaced\\n")
    out["back"] = look(mem.sync())
    mem.close()
    print(json.dumps(out))
""")


def test_unreadable_memory_keeps_its_rows_and_is_reported(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    out = run_without_dac_override(CHILD, str(tmp_path), json.dumps(pg_config(pg_server, pg_schema)))
    ws, notes = tmp_path / "ws", tmp_path / "notes"
    assert out["first"] == 4
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
        "removed": 0, "warnings": warned, "status": warned, "files": 4, "dirty": False,
        "found": {"ferry": ["../notes/trip.md"], "4471": ["memory/sub/b.md"], "cormorant": ["memory/c.md"],
                  "deep": [], "narwhal": []}}
    assert out["back"] == {
        "removed": 0, "warnings": [], "status": [], "files": 5, "dirty": False,
        "found": {"ferry": ["../notes/trip.md"], "4471": ["memory/sub/b.md"], "cormorant": ["memory/c.md"],
                  "deep": ["memory/c.md"], "narwhal": ["../notes/new.md"]}}


TRANSCRIPTS_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from symi_memory import load_config
    from symi_memory.config.fields import deep_merge
    from symi_memory.manager import open_memory

    tmp, pg = Path(sys.argv[1]), json.loads(sys.argv[2])
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("- prefers tea\\n", encoding="utf-8")
    ms = {"provider": "hash", "sync": {"watch": False}, "experimental": {"sessionMemory": True},
          "sources": ["memory", "sessions"]}
    cfg = load_config(None, state_dir=tmp / "state",
                      overrides=deep_merge(pg, {"agents": {"defaults": {"memorySearch": ms}}}))
    mem = open_memory(cfg, workspace=ws, start=False)
    sessions = Path(mem.agent.sessions_dir)
    sessions.mkdir(parents=True)

    def say(name, text):
        with open(sessions / name, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\\n")

    def look(report):
        st = mem.status()
        return {"removed": report.files_removed, "warnings": list(report.warnings), "status": st["warnings"],
                "files": st["files"], "found": {w: sorted(h.path for h in mem.search(w, min_score=0).results
                                                          if w in h.snippet) for w in ("walrus", "otter", "heron")}}

    say("a.jsonl", "the walrus sings")
    out = {"first": mem.sync().files_indexed}
    say("a.jsonl", "the otter swims")
    (sessions / "a.jsonl").chmod(0)
    try:
        out["file"] = look(mem.sync())
    finally:
        (sessions / "a.jsonl").chmod(0o644)
    say("a.jsonl", "the heron waits")
    sessions.chmod(0)
    try:
        out["folder"] = look(mem.sync())
    finally:
        sessions.chmod(0o755)
    out["back"] = look(mem.sync())
    mem.close()
    print(json.dumps(out))
""")


def test_unreadable_transcripts_keep_their_rows_and_are_reported(tmp_path: Path, pg_server: PgServer,
                                                                  pg_schema: str) -> None:
    """The transcripts folder (sessions/ in the state dir) that cannot be listed dropped every transcript's rows; a
    transcript that cannot be read was named at a path in the workspace."""
    out = run_without_dac_override(TRANSCRIPTS_CHILD, str(tmp_path), json.dumps(pg_config(pg_server, pg_schema)))
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    assert out["first"] == 2
    said = [f"file {sessions}/a.jsonl cannot be read (Permission denied): what the index holds from it (as last "
            "read) stays searchable until it can be read again"]
    assert out["file"] == {"removed": 0, "warnings": said, "status": said, "files": 2,
                           "found": {"walrus": ["sessions/a.jsonl"], "otter": [], "heron": []}}
    said = [f"folder {sessions} cannot be read (Permission denied): nothing new is indexed from it; what the index "
            "already holds from it stays searchable until it can be read again"]
    assert out["folder"] == {"removed": 0, "warnings": said, "status": said, "files": 2,
                             "found": {"walrus": ["sessions/a.jsonl"], "otter": [], "heron": []}}
    assert out["back"] == {"removed": 0, "warnings": [], "status": [], "files": 2,
                           "found": {"walrus": ["sessions/a.jsonl"], "otter": ["sessions/a.jsonl"],
                                     "heron": ["sessions/a.jsonl"]}}
