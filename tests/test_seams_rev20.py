"""Where this round's changes meet: unreadable memory on a damaged index, a third-party provider failing while a
transcript is read on from its tail state."""

from __future__ import annotations

import textwrap
from pathlib import Path

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
