"""The qmd-sidecar backend across processes, with the real qmd CLI: what a new process searches, what `status`
says from any process, edits made while qmd updates, two updates at once, a transcript export that fails."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from qmd_standin.helpers import PATIENT_SEARCH, QUICK_EMBED, real_qmd, write

QMD = real_qmd()
pytestmark = [
    pytest.mark.qmd,
    # What one process leaves for the next (qmd's saved state, its update lock): every CLI call is a new process.
    pytest.mark.cli_process,
    pytest.mark.skipif(QMD is None, reason="real qmd not installed; run .ci/install-qmd.sh (x86_64 + npm)"),
]


def _base(tmp_path: Path, command: str, notes: int = 0, **qmd: object) -> tuple[str, ...]:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\n\nThe zephyr project uses PostgreSQL 16.\n")
    write(ws / "memory" / "2026-05-01.md", "# May\n\nMet Bob about the zephyr migration.\n")
    for i in range(notes):
        write(ws / "memory" / f"n{i:03d}.md", f"# Note {i}\n\nword{i} about the garden project\n")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"plugins": {"slots": {"memory": "qmd-sidecar"}},
                               "memory": {"qmd": {"command": command, "update": QUICK_EMBED,
                                                          "limits": PATIENT_SEARCH, **qmd}},
                               "agents": {"defaults": {"memorySearch": {"provider": "none"}}}}), encoding="utf-8")
    return ("--config", str(cfg), "--workspace", str(ws))


def _wrapper(tmp_path: Path, after_update: str = "", before_update: str = "") -> str:
    """A ``memory.qmd.command`` running the real qmd, with shell commands around its ``update`` runs."""
    script = tmp_path / "qmd-wrap.sh"
    script.write_text(f"""#!/bin/sh
if [ "$1" = update ]; then
  {before_update or ':'}
  {shlex.quote(str(QMD))} "$@"; rc=$?
  {after_update or ':'}
  exit $rc
fi
exec {shlex.quote(str(QMD))} "$@"
""", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


def _search(cli, base, query: str) -> dict:
    code, out, err = cli(*base, "search", query, "--json", json_out=True)
    assert code == 0, err
    return out


def test_a_new_process_searches_qmd_when_the_index_is_current(tmp_path, cli):
    """A one-shot `search` (or any process before its own first update) answered from the builtin fallback ("qmd
    collections are not indexed yet") whenever qmd's index was already current, because only an update in that
    process marked the collections ready."""
    base = _base(tmp_path, str(QMD))
    code, _, err = cli(*base, "index")
    assert code == 0, err
    out = _search(cli, base, "zephyr")
    assert out["fallback"] is None and out["mode"] == "qmd", out
    assert {r["path"] for r in out["results"]} == {"MEMORY.md", "memory/2026-05-01.md"}


def test_status_is_dirty_from_any_process_until_an_update_sees_the_change(tmp_path, cli):
    """`status` said clean after a file changed, was deleted, or was moved in with an old mtime (it only looked at
    whether this process had reconciled), and a one-shot search then answered from the outdated qmd index."""
    base = _base(tmp_path, str(QMD))
    ws = tmp_path / "ws"
    code, _, err = cli(*base, "index")
    assert code == 0, err
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is False

    (ws / "memory" / "2026-05-01.md").unlink()
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is True
    out = _search(cli, base, "zephyr")
    assert [r["path"] for r in out["results"]] == ["MEMORY.md"] and out["fallback"] is None
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is False and st.get("files") == 1

    old = write(ws / "memory" / "2025-01-01.md", "# Old\n\nThe walrus notes, restored from a backup.\n")
    os.utime(old, (time.time() - 86400 * 400,) * 2)  # `cp -p`, `mv`, a backup restore keep the old mtime
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is True
    assert [r["path"] for r in _search(cli, base, "walrus")["results"]] == ["memory/2025-01-01.md"]


def test_an_edit_made_while_qmd_updates_is_not_lost(tmp_path, cli):
    """A file saved after qmd read it but before the update finished has an mtime older than the update's end:
    it was never seen as changed, so searches missed the edit until the file changed again."""
    day = tmp_path / "ws" / "memory" / "2026-05-01.md"
    command = _wrapper(tmp_path, after_update=f"echo 'The walrus moved to the north dock.' >> {shlex.quote(str(day))}")
    base = _base(tmp_path, command)
    code, _, err = cli(*base, "index")
    assert code == 0, err
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is True, "the edit made during the update is not in qmd's index yet"
    assert [r["path"] for r in _search(cli, base, "walrus")["results"]] == ["memory/2026-05-01.md"]


def _index_process(tmp_path: Path, base: tuple[str, ...]) -> subprocess.Popen[str]:
    env = {**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state")}
    return subprocess.Popen([sys.executable, "-m", "symi_memory.cli", *base, "index"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_indexing_at_once_both_end_up_on_qmd(tmp_path, cli):
    """Two first `collection add` (or `qmd update`) runs on one index at once fail ("SqliteError: constraint
    failed", "A collection already exists"): an agent host's update and an operator's `index` sent each other to
    the fallback, which then built the whole builtin index. Updates now take turns."""
    base = _base(tmp_path, str(QMD), notes=300)
    procs = [_index_process(tmp_path, base) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "not using qmd" not in err and "qmd update failed" not in err, err
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["fallback"] is None and st["fallbackIndex"] is None and st["dirty"] is False
    assert st["files"] == 302 and st["build"]["running"] is False


def test_status_from_another_process_names_the_running_update(tmp_path, cli):
    started, release = tmp_path / "update-started", tmp_path / "update-release"
    # The update is held until the status below has answered (at most 60 s), not for a fixed while that a loaded
    # host can outlast before `status` has even started.
    hold = (f"touch {shlex.quote(str(started))}; i=0; "
            f"while [ ! -e {shlex.quote(str(release))} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done")
    base = _base(tmp_path, _wrapper(tmp_path, before_update=hold))
    first = _index_process(tmp_path, base)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the index never reached qmd update"
        code, st, _ = cli(*base, "status", "--json", json_out=True)
        release.touch()
        _, err = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 0, err
    assert st["build"]["running"] is True and st["build"]["pid"] == first.pid and not st["build"]["thisProcess"]
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["build"]["running"] is False and st["dirty"] is False and st["lastUpdate"] is not None


def test_a_transcript_export_that_fails_never_stops_memory_updates(tmp_path, cli):
    """With `memory.qmd.sessions.exportDir` pointing at a file (or an export folder that cannot be written), the
    export's OSError ended the update: `index` and every `search` exited 1 and status said nothing."""
    not_a_dir = write(tmp_path / "exports.md", "a file, not a folder\n")
    base = _base(tmp_path, str(QMD), sessions={"enabled": True, "exportDir": str(not_a_dir)})
    write(tmp_path / "state" / "agents" / "main" / "sessions" / "s.jsonl",
          json.dumps({"type": "message", "message": {"role": "user", "content": "hello kestrel"}}) + "\n")
    code, _, err = cli(*base, "index")
    assert code == 0, err
    assert "cannot export session transcripts" in err
    out = _search(cli, base, "zephyr")
    assert out["fallback"] is None and {r["path"] for r in out["results"]} == {"MEMORY.md", "memory/2026-05-01.md"}
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert str(not_a_dir) in st["sessions"]["error"] and st["lastError"] == st["sessions"]["error"]
    assert st["fallback"] is None


def test_a_transcript_that_grew_makes_the_index_dirty_and_a_search_exports_it(tmp_path, cli):
    """The staleness check looked at memory files only: a new message in a transcript stayed out of qmd (and
    `status` said clean) until the next interval update."""
    base = _base(tmp_path, str(QMD), sessions={"enabled": True})
    transcript = write(tmp_path / "state" / "agents" / "main" / "sessions" / "s.jsonl",
                       json.dumps({"type": "message", "message": {"role": "user", "content": "hello there"}}) + "\n")
    code, _, err = cli(*base, "index")
    assert code == 0, err
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is False
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "message", "message": {"role": "assistant",
                                                            "content": "The kestrel nests on the water tower."}}) + "\n")
    code, st, _ = cli(*base, "status", "--json", json_out=True)
    assert st["dirty"] is True
    out = _search(cli, base, "kestrel")
    assert out["fallback"] is None and [r["source"] for r in out["results"]] == ["sessions"], out


def test_a_long_lived_process_reports_what_a_later_update_in_another_process_found(tmp_path, cli):
    """A process that had run its own update (a serve) kept reporting that update's view: after `index` in another
    process exported a transcript in part and met a file name that is not UTF-8, `status` there listed both while
    the serve's said `partial: []` and `skipped: []`."""
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    fail = tmp_path / "fail-updates"
    base = _base(tmp_path, _wrapper(tmp_path, before_update=f"[ -e {shlex.quote(str(fail))} ] && exit 1"),
                 sessions={"enabled": True})
    cfg_path, ws = Path(base[1]), Path(base[3])
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["agents"]["defaults"]["memorySearch"]["sync"] = {"maxFileBytes": 3000}
    cfg_path.write_text(json.dumps(cfg), encoding="utf-8")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    write(sessions / "s.jsonl", json.dumps({"type": "message", "message": {"role": "user", "content": "hi"}}) + "\n")
    config = load_config(cfg_path, state_dir=tmp_path / "state")
    with open_memory(config, workspace=ws, start=False) as serve:
        assert serve.sync().errors == ()
        assert (serve.status()["partial"], serve.status()["skipped"]) == ([], [])
        write(sessions / "s.jsonl", "".join(
            json.dumps({"type": "message", "message": {"role": "user", "content": f"note {n}: remember word{n:03d}x"}})
            + "\n" for n in range(100)))
        (ws / "memory").joinpath(b"bad\xff.md".decode("utf-8", "surrogateescape")).write_text("- a note\n")
        code, _, err = cli(*base, "index")
        assert code == 0, err
        code, fresh, _ = cli(*base, "status", "--json", json_out=True)
        assert [p["path"] for p in fresh["partial"]] == ["sessions/s.jsonl"], fresh
        assert [s["path"] for s in fresh["skipped"]] == ["memory/bad\\xff.md"], fresh
        st = serve.status()
        assert (st["partial"], st["skipped"]) == (fresh["partial"], fresh["skipped"]), st


def test_an_update_that_failed_in_a_fresh_process_is_what_every_process_reports(tmp_path, cli):
    """`index` in a process that had never updated failed: it saved its state with lastUpdate null, so a fresh
    `status` said qmd was never updated (it had been, by a serve), and the serve, whose own update looked newer,
    went on reporting its own state: no lastUpdateError."""
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    fail = tmp_path / "fail-updates"
    base = _base(tmp_path, _wrapper(tmp_path, before_update=f"[ -e {shlex.quote(str(fail))} ] && exit 1"))
    ws = Path(base[3])
    with open_memory(load_config(Path(base[1]), state_dir=tmp_path / "state"), workspace=ws, start=False) as serve:
        assert serve.sync().errors == ()
        # An update in another process fails: the serve says so, as a fresh process does.
        fail.touch()
        write(ws / "memory" / "later.md", "- a later note\n")
        code, _, err = cli(*base, "index")
        assert "qmd update failed" in err  # the builtin fallback indexed the notes: `index` itself succeeds
        code, fresh, _ = cli(*base, "status", "--json", json_out=True)
        assert fresh["lastUpdateError"] and "exited 1" in fresh["lastUpdateError"], fresh
        assert fresh["lastUpdate"] is not None, fresh  # qmd was updated, by the serve, before that failure
        st = serve.status()
        assert (st["lastUpdateError"], st["lastUpdate"]) == (fresh["lastUpdateError"], fresh["lastUpdate"]), st


def test_status_while_another_process_updates_never_says_clean_with_the_counts_from_before(
        tmp_path, cli, monkeypatch):
    """`status` read the last update's state (its file counts) and then, to say `dirty`, read the state file again:
    an update in another process ending in between made it say `files: 2, dirty: false` with 12 notes on disk,
    all of them in qmd's index. Both now come from one read."""
    from symi_memory import load_config
    from symi_memory.manager import open_memory
    from symi_memory_qmd.backend import QmdBackend

    base = _base(tmp_path, str(QMD))
    cfg_path, ws = Path(base[1]), Path(base[3])
    with open_memory(load_config(cfg_path, state_dir=tmp_path / "state"), workspace=ws, start=False) as host:
        assert host.sync().errors == ()
        assert (host.status()["files"], host.status()["dirty"]) == (2, False)
        for i in range(10):
            write(ws / "memory" / f"n{i}.md", f"# Note {i}\n\nword{i} about the garden\n")
        saved_state = QmdBackend._saved_state
        updated: list[int] = []

        def another_process_updates_after_the_first_read(self):  # type: ignore[no-untyped-def]
            state = saved_state(self)
            if not updated:
                code, _, err = cli(*base, "index")
                assert code == 0, err
                updated.append(code)
            return state

        monkeypatch.setattr(QmdBackend, "_saved_state", another_process_updates_after_the_first_read)
        st = host.status()
        assert updated == [0]
        # One read: the state from before the other update (2 files, 12 on disk: dirty) or after it; never a mix.
        assert (st["files"], st["dirty"]) in ((2, True), (12, False)), st
        monkeypatch.undo()
        st = host.status()
        assert (st["files"], st["dirty"]) == (12, False), st
