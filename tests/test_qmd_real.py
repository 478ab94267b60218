"""The qmd-sidecar backend against the real qmd CLI (installed by .ci/install-qmd.sh).

Also keeps the stand-in honest: the same offline commands run against both
and must give the same exit codes, JSON shapes and error texts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from qmd_standin.helpers import (
    PATIENT_SEARCH,
    QUICK_EMBED,
    STANDIN,
    make_backend,
    real_backend,
    real_qmd,
    write,
)
from support.unprivileged import run_without_dac_override

from symi_memory.types import SearchQuery

QMD = real_qmd()
if QMD is None and os.environ.get("SYMI_REQUIRE_QMD") == "1":
    # CI installed qmd on purpose; a silent skip there would hide a broken install.
    raise RuntimeError("SYMI_REQUIRE_QMD=1 but the real qmd was not found; check .ci/install-qmd.sh")
pytestmark = [
    pytest.mark.qmd,
    pytest.mark.skipif(QMD is None, reason="real qmd not installed; run .ci/install-qmd.sh (x86_64 + npm)"),
]


def query(text: str) -> SearchQuery:
    return SearchQuery(text=text, max_results=6, min_score=0.0, candidate_limit=24)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    write(tmp_path / "ws" / "MEMORY.md", "# Memory\n\nAlice prefers tea.\n\n## Projects\nProject zephyr uses PostgreSQL 16.\n")
    write(tmp_path / "ws" / "memory" / "2026-05-01.md", "# 2026-05-01\n\nMet Bob about the zephyr migration.\nPinned 16.2.\n")
    for i in range(4):
        write(tmp_path / "ws" / "memory" / f"2026-05-1{i}.md", f"# Day {i}\n\nlunch and weather notes {i}\n")
    write(tmp_path / "notes" / "sub" / "k.md", "# Notes\n\nintro line\nThe kraken cluster runs on ARM.\n")
    write(tmp_path / "notes" / "other.md", "# Other\n\nnothing to see\n")
    return tmp_path / "ws"


def test_real_qmd_search_through_the_backend(tmp_path, ws):
    b = real_backend(tmp_path, QMD, {"paths": [{"path": "../notes", "name": "notes"}]})
    assert b.sync().errors == ()
    res = b.search(query("zephyr"))
    assert res.fallback is None, res.fallback
    hits = {c.path: c for c in res.candidates}
    assert set(hits) == {"MEMORY.md", "memory/2026-05-01.md"}
    assert (hits["memory/2026-05-01.md"].start_line, hits["memory/2026-05-01.md"].end_line) == (2, 4)
    assert "Met Bob about the zephyr migration." in hits["memory/2026-05-01.md"].text
    assert "Project zephyr uses PostgreSQL 16." in hits["MEMORY.md"].text
    (kraken,) = b.search(query("kraken")).candidates
    assert kraken.path == "qmd/notes/sub/k.md"
    lines = b.read_file(kraken.path).text.split("\n")
    assert "The kraken cluster runs on ARM." in lines[kraken.start_line - 1 : kraken.end_line]


def test_real_qmd_sees_changed_files_after_update_and_the_sync_report_says_what_it_did(tmp_path, ws):
    """A file added and one deleted are found (and gone) after the next update. And the report: `index` on
    qmd-sidecar reported "0 files scanned, 0 indexed" whatever qmd's update did; the first one said "0 indexed" (qmd
    indexes a collection's files as it adds it, so its update found them unchanged). One workspace and index serve
    both checks: they made the same changes to the same files."""
    b = real_backend(tmp_path, QMD)
    first = b.sync(reason="manual")
    assert (first.files_scanned, first.files_indexed, first.files_removed) == (6, 6, 0), first
    assert b.search(query("walrus")).candidates == ()
    assert b.sync(reason="manual").files_indexed == 0  # nothing changed since
    write(ws / "memory" / "2026-05-12.md", "# Day 2\n\nA walrus visited the office.\n")
    (ws / "memory" / "2026-05-01.md").unlink()
    again = b.sync(reason="manual")
    assert (again.files_scanned, again.files_indexed, again.files_removed) == (5, 1, 1), again
    (hit,) = b.search(query("walrus")).candidates
    assert (hit.path, hit.start_line) == ("memory/2026-05-12.md", 2)
    assert {c.path for c in b.search(query("zephyr")).candidates} == {"MEMORY.md"}


def test_real_qmd_status_of_another_workspace_does_not_claim_the_last_ones_files(tmp_path, ws):
    """Pointing the agent at another workspace: until its first update, status said qmd held the old one's files."""
    from symi_memory_qmd.backend import QmdBackend
    from symi_memory_qmd.settings import QmdSettings

    b = real_backend(tmp_path, QMD, {"paths": [{"path": str(tmp_path / "notes"), "name": "notes"}]})
    b.sync(reason="manual")
    assert b.status()["files"] == 8
    b.close()
    write(tmp_path / "ws2" / "MEMORY.md", "# Memory\n\nnothing yet\n")
    other = QmdBackend(QmdSettings.from_config({"command": QMD, "paths": [{"path": str(tmp_path / "notes"),
                                                                            "name": "notes"}],
                                                "update": QUICK_EMBED, "limits": PATIENT_SEARCH}),
                       agent_id="main", workspace=tmp_path / "ws2", state_dir=tmp_path / "state", start=False)
    st = other.status()
    shown = {c["name"]: (c["ready"], c["files"]) for c in st["collections"]}
    assert shown == {"memory-root-main": (False, None), "memory-alt-main": (False, None),
                     "memory-dir-main": (False, None), "notes": (True, 2)}, shown
    assert st["files"] == 2 and st["dirty"] is True
    other.sync(reason="manual")
    assert other.status()["files"] == 3


def test_real_qmd_status_after_fixing_the_command_drops_the_old_commands_failure(tmp_path, ws):
    """A mistyped `memory.qmd.command` fixed in the config: status in the next process still said qmd could not run
    the old path and that searches were served by the fallback, until an update ran."""
    broken = make_backend(tmp_path, str(tmp_path / "no-such-qmd"))
    assert broken.sync(reason="manual").errors
    assert "no-such-qmd" in (broken.status()["lastError"] or "")
    broken.close()
    fixed = real_backend(tmp_path, QMD)
    st = fixed.status()
    assert (st["fallback"], st["lastError"], st["dirty"]) == (None, None, True), st
    fixed.sync(reason="manual")
    assert fixed.status()["files"] == 6
    fixed.close()
    assert make_backend(tmp_path, str(tmp_path / "no-such-qmd")).sync(reason="manual").errors
    # Another process with that same command is shown its failure.
    assert "no-such-qmd" in make_backend(tmp_path, str(tmp_path / "no-such-qmd")).status()["fallback"]["reason"]


# --------------------------------------------------------------- parity


def _run(cmd: list[str], home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_CONFIG_HOME=str(home / "c"), XDG_CACHE_HOME=str(home / "k"), NO_COLOR="1")
    env.pop("QMD_STANDIN_FAIL", None)
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*cmd, *args], cwd=home, env=env, capture_output=True, text=True, timeout=60)


def _script(ws: Path, notes: Path) -> list[tuple[str, ...]]:
    return [
        ("collection", "list"),
        ("collection", "add", str(ws), "--name", "memory-root-main", "--mask", "MEMORY.md"),
        ("collection", "add", str(ws / "memory"), "--name", "memory-dir-main", "--mask", "**/*.md"),
        ("collection", "add", str(notes), "--name", "notes", "--mask", "**/*.md"),
        ("collection", "add", str(notes), "--name", "notes", "--mask", "**/*.md"),
        ("collection", "add", str(notes), "--name", "notes-again", "--mask", "**/*.md"),
        ("collection", "add", str(notes / "missing"), "--name", "gone"),
        ("collection", "list"),
        ("collection", "show", "notes"),
        ("collection", "show", "nope"),
        ("update",),
        ("search", "zephyr", "--json", "-n", "5", "-c", "memory-dir-main"),
        ("search", "kraken", "--json", "-n", "5", "-c", "notes"),
        ("search", "nothingmatcheshere", "--json", "-n", "5", "-c", "notes"),
        ("search", "nothingmatcheshere", "-n", "5", "-c", "notes"),
        ("search", "zephyr", "--json", "-n", "5", "-c", "nope"),
        ("search", "kraken", "--json", "--no-such-flag", "-c", "notes"),
        ("search", "--json"),
        ("collection", "remove", "notes"),
        ("collection", "remove", "notes"),
        ("frobnicate",),
    ]


def _shape(proc: subprocess.CompletedProcess[str]) -> dict:
    out = proc.stdout.strip()
    shape: dict = {"rc": proc.returncode, "stderr": proc.stderr.strip().splitlines()[:1]}
    if out.startswith("["):
        shape["json"] = [
            {
                "keys": sorted(item),
                "types": {k: type(v).__name__ if k != "score" else "number" for k, v in item.items()},
                "file": item["file"],
                "line": item["line"],
                "title": item["title"],
                "snippet": item["snippet"],
            }
            for item in json.loads(out)
        ]
    else:
        names = [ln.split(" (qmd://")[0] for ln in out.splitlines() if " (qmd://" in ln]
        shape["text"] = names or [ln for ln in out.splitlines() if ln.startswith(("No ", "  Path:", "  Pattern:", "✓"))][:3]
    return shape


def test_standin_matches_real_qmd(tmp_path, ws):
    notes = tmp_path / "notes"
    # The two scripts share nothing (each its own home): the stand-in's runs go on while qmd's do.
    with ThreadPoolExecutor(max_workers=1) as pool:
        real_runs = pool.submit(lambda: [_shape(_run([QMD], tmp_path / "real", *a)) for a in _script(ws, notes)])
        fake = [_shape(_run([sys.executable, str(STANDIN)], tmp_path / "fake", *a)) for a in _script(ws, notes)]
        real = real_runs.result()
    for args, r, f in zip(_script(ws, notes), real, fake, strict=True):
        assert f == r, f"stand-in differs from qmd for: qmd {' '.join(args)}"


def test_real_qmd_finds_the_newest_messages_of_a_transcript_over_the_limit(tmp_path, ws):
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    lines = [json.dumps({"type": "message", "message": {"role": "user", "content": f"note {n}: token word{n:03d}x"}})
             for n in range(200)]
    lines.insert(1, json.dumps({"type": "tool_result", "output": "ls output\n" * 5000}))
    write(sessions / "long.jsonl", "\n".join(lines) + "\n")
    b = real_backend(tmp_path, QMD, {"sessions": {"enabled": True}}, max_transcript_bytes=3000)
    assert b.sync().errors == ()
    (hit,) = b.search(query("word199x")).candidates
    assert hit.path == "qmd/sessions-main/long.md" and "note 199: token word199x" in hit.text
    assert b.search(query("word000x")).candidates == ()
    (part,) = b.status()["partial"]
    assert part["path"] == "sessions/long.jsonl" and "of 200 are searchable" in part["reason"]


def test_real_qmd_skips_a_name_not_valid_utf8_and_status_lists_it(tmp_path, ws):
    with open(os.path.join(os.fsencode(ws / "memory"), b"caf\xe9.md"), "wb") as fh:
        fh.write(b"- the heron is hidden here\n")
    b = real_backend(tmp_path, QMD)
    report = b.sync()
    assert report.errors == ()
    assert b.search(query("heron")).candidates == ()  # qmd cannot read it: the listing below is all that says so
    assert b.status()["skipped"] == [{"path": "memory/caf\\xe9.md", "reason": "file name is not valid UTF-8"}]
    assert report.warnings == ("memory/caf\\xe9.md is not indexed: file name is not valid UTF-8",)
    assert {c.path for c in b.search(query("zephyr")).candidates} == {"MEMORY.md", "memory/2026-05-01.md"}


def _found(b, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(c.path for c in b.search(query(text)).candidates)


@pytest.mark.parametrize("setting", ["extraPaths", "qmd.paths"])
def test_real_qmd_keeps_a_folder_away_for_a_while_searchable_and_catches_up_when_back(tmp_path, ws, setting):
    # One `qmd update` updates every collection: with an extra path (or a memory.qmd.paths folder) renamed away
    # it took the folder's documents for deleted, while the core's warning said they stayed searchable.
    notes = tmp_path / "notes"

    def backend():  # type: ignore[no-untyped-def]
        if setting == "extraPaths":
            return real_backend(tmp_path, QMD, extra_paths=[str(notes)])
        return real_backend(tmp_path, QMD, {"paths": [{"path": "../notes", "name": "notes"}]})

    b = backend()
    assert b.sync().errors == ()
    assert _found(b, "kraken") == ["qmd/notes/sub/k.md"]
    os.rename(notes, tmp_path / "away")
    write(ws / "memory" / "2026-05-20.md", "# Day 20\n\nA walrus visited the office.\n")
    report = b.sync()
    assert report.errors == ()
    assert _found(b, "kraken") == ["qmd/notes/sub/k.md"]
    files = {c["name"]: (c["ready"], c["files"]) for c in b.status()["collections"]}
    assert files["notes"] == (True, 2) and files["memory-dir-main"] == (True, 6)  # the others are updated as before
    if setting == "extraPaths":
        assert report.warnings == ()  # the core's warning names an absent extra path, and it is true here too
    else:  # the core knows nothing of memory.qmd.paths: the backend says it
        assert report.warnings == (
            f"memory.qmd.paths entry {notes} does not exist: nothing new is indexed from it; what qmd already holds "
            "from it (collection notes) stays searchable until it is back or leaves memory.qmd.paths",)
    assert b.status()["warnings"] == list(report.warnings)
    other = backend()  # another process, which never updated, searches what qmd holds
    assert _found(other, "kraken") == ["qmd/notes/sub/k.md"]
    other.close()
    os.rename(tmp_path / "away", notes)
    (notes / "sub" / "k.md").unlink()  # deleted while away: goes once it is back
    write(notes / "n.md", "# N\n\nA narwhal swims past the kraken's old spot.\n")
    assert b.sync().errors == ()
    assert _found(b, "narwhal") == ["qmd/notes/n.md"]
    st = b.status()
    assert [c["files"] for c in st["collections"] if c["name"] == "notes"] == [2]  # other.md and n.md: k.md went
    assert st["warnings"] == [] and not st["dirty"]
    b.close()


def test_real_qmd_keeps_a_folder_it_cannot_read_and_updates_the_rest(tmp_path, ws):
    # An extra path qmd may not list (chmod 000) made every `qmd update` fail (EACCES): nothing new was indexed
    # anywhere, and searches went to the fallback. Root reads anything, so the run drops root's override.
    out = run_without_dac_override("""
        import json, sys
        from pathlib import Path
        from qmd_standin.helpers import real_backend, write
        from symi_memory.types import SearchQuery
        tmp, qmd = Path(sys.argv[1]), sys.argv[2]
        b = real_backend(tmp, qmd, extra_paths=[str(tmp / "notes")])
        def found(text):
            return sorted(c.path for c in b.search(SearchQuery(text=text, max_results=6, min_score=0.0,
                                                                candidate_limit=24)).candidates)
        first = b.sync()
        before = found("kraken")
        (tmp / "notes").chmod(0)
        write(tmp / "ws" / "memory" / "2026-05-20.md", "# Day 20\\n\\nA walrus visited the office.\\n")
        try:
            report = b.sync()
            st = b.status()
            away = {"errors": list(report.errors), "warnings": list(report.warnings), "kraken": found("kraken"),
                    "files": {c["name"]: c["files"] for c in st["collections"]}, "fallback": st["fallback"]}
        finally:
            (tmp / "notes").chmod(0o755)
        write(tmp / "notes" / "n.md", "# N\\n\\nA narwhal.\\n")
        b.sync()
        print(json.dumps({"first": list(first.errors), "before": before, "away": away, "back": found("narwhal"),
                          "warnings": b.status()["warnings"]}))
    """, str(tmp_path), QMD)
    assert out["first"] == [] and out["before"] == ["qmd/notes/sub/k.md"]
    assert out["away"] == {
        "errors": [], "kraken": ["qmd/notes/sub/k.md"], "fallback": None,
        "files": {"memory-root-main": 1, "memory-alt-main": 0, "memory-dir-main": 6, "notes": 2},
        "warnings": [f"memorySearch.extraPaths entry {tmp_path / 'notes'} cannot be read (Permission denied): nothing "
                     "new is indexed from it; what qmd already holds from it (collection notes) stays searchable until "
                     "it can be read again or leaves memorySearch.extraPaths"]}
    assert out["back"] == ["qmd/notes/n.md"] and out["warnings"] == []


def test_real_qmd_a_new_session_retention_makes_the_index_stale_and_the_next_sync_applies_it(tmp_path, ws):
    """memory.qmd.sessions.retentionDays changed: status says the index is stale (dirty) until the next sync, which
    drops the exports older than the new retention or brings back the ones it keeps again. Before, status said
    current and a one-shot search did not sync, so a transcript past the new retention stayed searchable (and
    one a longer retention keeps again stayed missing) until some other file changed."""
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    for name, word, days in (("old", "kestrel", 20), ("new", "osprey", 1)):
        write(sessions / f"{name}.jsonl", json.dumps({"type": "message", "message": {
            "role": "user", "content": f"the {word} nests on the water tower"}}) + "\n")
        then = time.time() - days * 86400
        os.utime(sessions / f"{name}.jsonl", (then, then))

    def backend(days):
        return real_backend(tmp_path, QMD, {"sessions": {"enabled": True, "retentionDays": days}})

    def found(b, word):
        return [c.path for c in b.search(query(word)).candidates]

    month = backend(30)
    assert month.sync().errors == () and not month.is_stale()
    assert found(month, "kestrel") == ["qmd/sessions-main/old.md"]
    month.close()
    week = backend(7)
    assert week.is_stale() and week.status()["dirty"] is True
    assert week.sync(reason="search").errors == ()
    assert found(week, "kestrel") == [] and found(week, "osprey") == ["qmd/sessions-main/new.md"]
    assert not week.is_stale() and week.status()["dirty"] is False
    week.close()
    forever = backend(None)  # the setting removed: every transcript again
    assert forever.is_stale()
    assert forever.sync(reason="search").errors == ()
    assert found(forever, "kestrel") == ["qmd/sessions-main/old.md"] and not forever.is_stale()
    forever.close()


def test_real_qmd_leaves_a_users_own_config_dir_and_index_path_alone(tmp_path, ws, monkeypatch):
    """QMD_CONFIG_DIR and INDEX_PATH set in the environment (the user's own qmd, outside symi-memory) win over
    XDG_CONFIG_HOME and XDG_CACHE_HOME in qmd: the agent's collections went into the user's config and index, and
    the private home the docs promise held neither. qmd calls no longer inherit them."""
    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.setenv("QMD_CONFIG_DIR", str(mine / "config"))
    monkeypatch.setenv("INDEX_PATH", str(mine / "index.sqlite"))
    b = real_backend(tmp_path, QMD)
    assert b.sync().errors == ()
    assert {c.path for c in b.search(query("zephyr")).candidates} == {"MEMORY.md", "memory/2026-05-01.md"}
    b.close()
    assert list(mine.iterdir()) == []
    home = tmp_path / "state" / "agents" / "main" / "qmd"
    assert "memory-root-main" in (home / "xdg-config" / "qmd" / "index.yml").read_text()
    assert (home / "xdg-cache" / "qmd" / "index.sqlite").is_file()


def test_real_qmd_keeps_a_collection_with_a_folder_it_cannot_read_and_updates_the_rest(tmp_path, ws):
    # A folder below a collection's (memory/private, chmod 000) made every `qmd update` fail (qmd lists it: EACCES),
    # every collection's: nothing new was indexed anywhere and searches went to the fallback, without a word of
    # which folder. The collection holding it is left out of updates (what qmd holds from it stays searchable) and
    # named until it can be read; one never added waits for it, the others are added and updated.
    out = run_without_dac_override("""
        import json, sys
        from pathlib import Path
        from qmd_standin.helpers import real_backend, write
        from symi_memory.types import SearchQuery
        tmp, qmd = Path(sys.argv[1]), sys.argv[2]
        private, hidden = tmp / "ws" / "memory" / "private", tmp / "notes" / ".old"
        write(private / "p.md", "# P\\n\\nThe gannet code is 4471.\\n")
        write(hidden / "h.md", "# H\\n\\nThe heron.\\n")
        write(tmp / "ws" / "memory" / "build" / "b.md", "# B\\n\\nqmd never lists build folders.\\n")
        hidden.chmod(0)  # before the first sync: the notes collection waits for it
        b = real_backend(tmp, qmd, extra_paths=[str(tmp / "notes")])
        def found(text):
            return sorted(c.path for c in b.search(SearchQuery(text=text, max_results=6, min_score=0.0,
                                                                candidate_limit=24)).candidates)
        def look(report, words=("gannet", "walrus", "kraken", "narwhal")):
            # Only words some file holds by then: a search for one no file has yet can only come back empty.
            st = b.status()
            return {"errors": list(report.errors), "warnings": list(report.warnings), "status": st["warnings"],
                    "found": {w: found(w) for w in words},
                    "ready": {c["name"]: c["ready"] for c in st["collections"]}, "fallback": st["fallback"]}
        (tmp / "ws" / "memory" / "build").chmod(0)
        out = {"first": look(b.sync(), ("gannet", "kraken"))}
        hidden.chmod(0o755)
        out["notes"] = look(b.sync(), ("gannet", "kraken"))
        private.chmod(0)
        write(tmp / "ws" / "MEMORY.md", "# Memory\\n\\nA walrus visited.\\n")
        write(tmp / "notes" / "n.md", "# N\\n\\nA narwhal.\\n")
        try:
            out["private"] = look(b.sync())
        finally:
            private.chmod(0o755)
        (private / "p.md").unlink()  # deleted while it could not be read: goes once it can
        out["back"] = look(b.sync())
        trash = tmp / "ws" / "memory" / ".trash"  # a hidden folder: qmd lists it (and indexes none of its files)
        trash.mkdir()
        trash.chmod(0)
        write(tmp / "ws" / "memory" / "2026-05-30.md", "# Day 30\\n\\nA puffin landed.\\n")
        try:
            b.sync()  # memory-dir-main left out: the puffin not indexed yet
        finally:
            trash.chmod(0o755)
        out["hidden"] = {"dirty": b.status()["dirty"], "puffin": found("puffin")}
        b.sync()
        out["hidden"]["then"] = found("puffin")
        print(json.dumps(out))
    """, str(tmp_path), QMD)
    hidden, private = tmp_path / "notes" / ".old", tmp_path / "ws" / "memory" / "private"
    ready = {"memory-root-main": True, "memory-alt-main": True, "memory-dir-main": True, "notes": True}
    assert out["first"] == {
        "errors": [], "fallback": None, "ready": {**ready, "notes": False},
        "found": {"gannet": ["memory/private/p.md"], "kraken": []},
        "warnings": [f"folder {hidden} cannot be read (Permission denied): qmd updates nothing of collection notes "
                     "meanwhile (it would fail every update); what qmd already holds from it stays searchable until "
                     "it can be read again"],
        "status": [f"folder {hidden} cannot be read (Permission denied): qmd updates nothing of collection notes "
                   "meanwhile (it would fail every update); what qmd already holds from it stays searchable until "
                   "it can be read again"]}
    assert out["notes"] == {"errors": [], "warnings": [], "status": [], "fallback": None, "ready": ready,
                            "found": {"gannet": ["memory/private/p.md"], "kraken": ["qmd/notes/sub/k.md"]}}
    said = [f"folder {private} cannot be read (Permission denied): qmd updates nothing of collection memory-dir-main "
            "meanwhile (it would fail every update); what qmd already holds from it stays searchable until it can be "
            "read again"]
    assert out["private"] == {"errors": [], "warnings": said, "status": said, "fallback": None, "ready": ready,
                              "found": {"gannet": ["memory/private/p.md"], "walrus": ["MEMORY.md"],
                                        "kraken": ["qmd/notes/sub/k.md"], "narwhal": ["qmd/notes/n.md"]}}
    assert out["back"] == {"errors": [], "warnings": [], "status": [], "fallback": None, "ready": ready,
                           "found": {"gannet": [], "walrus": ["MEMORY.md"], "kraken": ["qmd/notes/sub/k.md"],
                                     "narwhal": ["qmd/notes/n.md"]}}
    # Readable again with nothing changed in it (no file of its own to show up): what changed meanwhile beside it
    # was listed by the update that left the collection out, yet is not indexed; the index is stale until it is.
    assert out["hidden"] == {"dirty": True, "puffin": [], "then": ["memory/2026-05-30.md"]}


def test_real_qmd_keeps_transcripts_while_their_folder_cannot_be_read(tmp_path, ws):
    # The transcripts folder made unreadable for a while (chmod 000): the export listed no transcript and removed
    # every export, so the update dropped all of them from qmd's index without a word (builtin-sqlite keeps them).
    out = run_without_dac_override("""
        import json, sys
        from pathlib import Path
        from qmd_standin.helpers import real_backend, write
        from symi_memory.types import SearchQuery
        tmp, qmd = Path(sys.argv[1]), sys.argv[2]
        sessions = tmp / "state" / "agents" / "main" / "sessions"
        def say(name, text):
            write(sessions / name, json.dumps({"type": "message", "message": {"role": "user", "content": text}})
                  + "\\n")
        say("a.jsonl", "the kestrel nests on the water tower")
        b = real_backend(tmp, qmd, {"sessions": {"enabled": True}})
        def found(text):
            return sorted(c.path for c in b.search(SearchQuery(text=text, max_results=6, min_score=0.0,
                                                                candidate_limit=24)).candidates)
        b.sync()
        out = {"first": found("kestrel")}
        sessions.chmod(0)
        write(tmp / "ws" / "MEMORY.md", "# Memory\\n\\nA walrus visited.\\n")
        try:
            report = b.sync()
            out["away"] = {"errors": list(report.errors), "warnings": list(report.warnings),
                           "status": b.status()["warnings"], "kestrel": found("kestrel"), "walrus": found("walrus")}
        finally:
            sessions.chmod(0o755)
        say("b.jsonl", "the osprey dives")
        b.sync()
        out["back"] = {"kestrel": found("kestrel"), "osprey": found("osprey"), "status": b.status()["warnings"]}
        print(json.dumps(out))
    """, str(tmp_path), QMD)
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    said = [f"folder {sessions} cannot be read (Permission denied): nothing new is indexed from it; what qmd already "
            "holds from it (collection sessions-main) stays searchable until it can be read again"]
    assert out == {"first": ["qmd/sessions-main/a.md"],
                   "away": {"errors": [], "warnings": said, "status": said, "kestrel": ["qmd/sessions-main/a.md"],
                            "walrus": ["MEMORY.md"]},
                   "back": {"kestrel": ["qmd/sessions-main/a.md"], "osprey": ["qmd/sessions-main/b.md"], "status": []}}


def test_real_qmd_answers_a_query_longer_than_a_command_line_argument_may_be(tmp_path, ws):
    # The query is one argument of qmd's command line: past 128 KiB the kernel refused to run it ("Argument list too
    # long"), qmd was taken for broken ("install qmd or set memory.qmd.command") and searches went to the fallback.
    b = real_backend(tmp_path, QMD)
    assert b.sync().errors == ()
    res = b.search(query("zephyr " + " ".join(f"w{i:06d}" for i in range(40_000))))
    assert res.fallback is None, res.fallback
    assert b.status()["fallback"] is None
    assert [c.path for c in b.search(query("zephyr")).candidates]  # qmd itself still answers
    b.close()


def _bind(source: Path, target: Path) -> bool:
    import shutil

    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode == 0


def test_real_qmd_keeps_an_unmounted_memory_folder_until_it_is_back_or_index_force(tmp_path, ws):
    # memory/ is a mount point. Unmounted, the folder below it is there, empty, on the workspace's file system:
    # `qmd update` took its every document for deleted. Kept now, as builtin-sqlite keeps it (rootDevices).
    import shutil

    vol = Path("/dev/shm") / f"symi-qmd-{os.getpid()}-{time.monotonic_ns()}"
    if not Path("/dev/shm").is_dir() or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no /dev/shm on another file system than the test's folder")
    shutil.copytree(ws / "memory", vol)
    shutil.rmtree(ws / "memory")
    (ws / "memory").mkdir()
    if not _bind(vol, ws / "memory"):
        shutil.rmtree(vol)
        pytest.skip("not root, or bind mounts are not allowed here")
    try:
        b = real_backend(tmp_path, QMD)
        assert b.sync().errors == ()
        assert _found(b, "zephyr") == ["MEMORY.md", "memory/2026-05-01.md"]
        subprocess.run(["umount", str(ws / "memory")], check=True)
        write(ws / "MEMORY.md", "# Memory\n\nAlice prefers tea.\n\nProject zephyr uses PostgreSQL 17 now.\n")
        report = b.sync()
        assert report.errors == () and report.files_removed == 0, report
        said = [w for w in report.warnings if f"folder {ws / 'memory'}" in w and "another file system" in w
                and "symi-memory index --force" in w]
        assert said, report.warnings
        assert b.status()["warnings"] == said
        assert _found(b, "zephyr") == ["MEMORY.md", "memory/2026-05-01.md"]  # MEMORY.md updated, memory/ kept
        assert "PostgreSQL 17" in next(c.text for c in b.search(query("zephyr")).candidates if c.path == "MEMORY.md")
        assert _bind(vol, ws / "memory")  # back: updated as before
        write(ws / "memory" / "2026-05-20.md", "# Day 20\n\nA walrus visited the office.\n")
        back = b.sync()
        assert back.warnings == () and back.files_removed == 0 and b.status()["warnings"] == []
        assert _found(b, "walrus") == ["memory/2026-05-20.md"]
        subprocess.run(["umount", str(ws / "memory")], check=True)
        assert b.sync().files_removed == 0
        forced = b.sync(force=True)  # the operator's word that they are gone
        assert forced.errors == () and forced.files_removed == 6, forced  # the 5 notes and the walrus
        assert _found(b, "zephyr") == ["MEMORY.md"] and b.status()["warnings"] == []
        b.close()
    finally:
        if os.path.ismount(ws / "memory"):
            subprocess.run(["umount", str(ws / "memory")], check=False)
        shutil.rmtree(vol, ignore_errors=True)


def _synced_then_memory_emptied(tmp_path, ws):  # type: ignore[no-untyped-def]
    """A real-qmd backend that indexed eight more notes in memory/ (13 files there), then every note of memory/
    deleted: a folder found empty while qmd holds ten documents or more from it."""
    for i in range(8):
        write(ws / "memory" / f"2026-06-0{i}.md", f"# June {i}\n\nheron note {i}\n")
    b = real_backend(tmp_path, QMD)
    assert b.sync().errors == ()
    for f in (ws / "memory").iterdir():
        f.unlink()
    return b


def test_real_qmd_keeps_a_memory_folder_emptied_of_many_notes_until_index_force(tmp_path, ws):
    # No mount: a memory/ folder found empty while qmd holds ten documents or more from it looks unmounted too.
    b = _synced_then_memory_emptied(tmp_path, ws)
    report = b.sync()
    assert report.files_removed == 0 and any("is empty, while qmd holds 13 files" in w for w in report.warnings), \
        report.warnings
    assert _found(b, "zephyr") == ["MEMORY.md", "memory/2026-05-01.md"]
    assert b.sync(force=True).files_removed == 13
    assert _found(b, "zephyr") == ["MEMORY.md"] and b.status()["warnings"] == []
    b.close()


def test_real_qmd_index_force_drops_an_emptied_folder_while_another_sync_starts(tmp_path, ws):
    # `index --force` is what the warning tells a user who deleted every note on purpose. Its force was one attribute
    # of the backend: another sync starting while the forced one ran (here a search's, which does not wait for it)
    # cleared it, and the forced update left the folder out again: the deleted notes stayed found, still warned of.
    import threading

    b = _synced_then_memory_emptied(tmp_path, ws)
    scan, other = b._scan, []

    def scan_while_another_sync_starts():  # type: ignore[no-untyped-def]
        if not other:  # the forced update has begun: a search's sync starts in another thread (and skips: it runs)
            other.append(threading.Thread(target=b.sync, kwargs={"reason": "search"}))
            other[0].start()
            time.sleep(0.5)
        return scan()

    b._scan = scan_while_another_sync_starts
    forced = b.sync(force=True)
    other[0].join(60)
    assert forced.errors == () and forced.files_removed == 13, forced
    assert _found(b, "heron") == [] and _found(b, "zephyr") == ["MEMORY.md"]
    assert b.status()["warnings"] == []
    b.close()


def test_real_qmd_a_workspace_moved_to_another_file_system_is_not_taken_for_unmounted(tmp_path, ws):
    # The agent's workspace set to another folder, on another file system, holding no note yet (a fresh checkout of
    # the user's dotfiles). The recorded device was the old workspace's, kept under "workspace" whatever its path:
    # the new folder was taken for the old one unmounted, left out of the update with an "(unmounted?)" warning, and
    # the old workspace's notes kept being found in it. builtin-sqlite records a folder's device by its path.
    import shutil

    if not Path("/dev/shm").is_dir() or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no /dev/shm on another file system than the test's folder")
    b = real_backend(tmp_path, QMD)
    assert b.sync().errors == ()
    assert _found(b, "zephyr") == ["MEMORY.md", "memory/2026-05-01.md"]
    b.close()
    moved = Path("/dev/shm") / f"symi-qmd-ws-{os.getpid()}-{time.monotonic_ns()}"
    try:
        write(moved / "README.txt", "dotfiles\n")
        from symi_memory_qmd.backend import QmdBackend
        from symi_memory_qmd.settings import QmdSettings

        b = QmdBackend(QmdSettings.from_config({"command": QMD, "update": QUICK_EMBED, "limits": PATIENT_SEARCH}), agent_id="main", workspace=moved,
                       state_dir=tmp_path / "state", start=False)
        report = b.sync()
        assert report.errors == () and not any("unmounted" in w for w in report.warnings), report.warnings
        assert _found(b, "zephyr") == [] and b.status()["warnings"] == []
        b.close()
    finally:
        shutil.rmtree(moved, ignore_errors=True)


def test_real_qmd_a_long_query_of_repeated_words_keeps_its_last_word(tmp_path, ws):
    # A query over 100 KB of few distinct words (a log pasted with its lines repeated) is not cut by the 1,024-word
    # cap, and was cut to its first 100 KB for qmd's command line, silently: a word only past it ("migration") was
    # not searched for, and qmd (all its words required) found the notes without it too.
    b = real_backend(tmp_path, QMD)
    assert b.sync().errors == ()
    res = b.search(query("zephyr " * 16_000 + "migration"))
    assert res.fallback is None, res.fallback
    assert sorted(c.path for c in res.candidates) == ["memory/2026-05-01.md"]
    b.close()


def test_real_qmd_names_a_memory_file_it_cannot_read_in_status_and_the_chmod_makes_it_dirty(tmp_path, ws):
    """A memory file qmd may not read (chmod 000) was left out without a word: `status` said `skipped: []` and
    `dirty: false` after the chmod (no new mtime), where builtin-sqlite says `cannot read: Permission denied`.
    Root reads anything, so the run drops root's override."""
    out = run_without_dac_override("""
        import json, sys
        from pathlib import Path
        from qmd_standin.helpers import real_backend
        tmp, qmd = Path(sys.argv[1]), sys.argv[2]
        b = real_backend(tmp, qmd)
        locked = tmp / "ws" / "memory" / "2026-05-11.md"
        first = b.sync()
        clean = b.status()["dirty"]
        locked.chmod(0)
        try:
            dirty = b.status()["dirty"]
            report = b.sync()
            st = b.status()
            away = {"errors": list(report.errors), "warnings": list(report.warnings), "skipped": st["skipped"],
                    "dirty": st["dirty"]}
        finally:
            locked.chmod(0o644)
        back = b.status()["dirty"]
        b.sync()
        print(json.dumps({"first": list(first.errors), "clean": clean, "dirty": dirty, "away": away, "back": back,
                          "skipped": b.status()["skipped"]}))
    """, str(tmp_path), QMD)
    assert out["first"] == [] and out["clean"] is False
    assert out["dirty"] is True  # the chmod alone: the next update must look again
    assert out["away"] == {
        "errors": [], "dirty": False,
        "warnings": ["memory/2026-05-11.md is not indexed: cannot read: Permission denied"],
        "skipped": [{"path": "memory/2026-05-11.md", "reason": "cannot read: Permission denied"}]}
    assert out["back"] is True and out["skipped"] == []
