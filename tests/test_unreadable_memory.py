"""Memory that is there but cannot be read (a folder or file made unreadable, chmod 000): like a root that is away,
what the index holds from it stays searchable, syncs and status say which path and why, and it catches up once it
can be read again.

Before, a sync took every file of an extra path, a folder or a workspace it could not list for deleted, and dropped
them from the index without a word (a subfolder at least showed up in ``status.skipped``).

Root reads any file: the scenario runs in a child process without CAP_DAC_OVERRIDE (``setpriv``), so chmod 000
holds for it, as it does for any other user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

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


def run_without_dac_override(body: str, *args: str) -> dict:  # type: ignore[type-arg]
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("as root, a folder is unreadable only without CAP_DAC_OVERRIDE; setpriv is not installed")
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([*prefix, sys.executable, "-c", body, *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


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
