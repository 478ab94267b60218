"""The qmd-sidecar backend driving the qmd stand-in: indexing, search, failures, fallback, updates."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
from qmd_standin.helpers import make_backend, standin_command, write

from symi_memory.errors import PathRefused
from symi_memory.presentation import present
from symi_memory.types import SearchQuery


def query(text: str, key: str | None = None) -> SearchQuery:
    return SearchQuery(text=text, max_results=6, min_score=0.0, candidate_limit=24, session_key=key)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    write(tmp_path / "ws" / "MEMORY.md", "# Memory\n\nAlice prefers tea.\n\n## Projects\nProject zephyr uses PostgreSQL 16.\n")
    write(tmp_path / "ws" / "memory" / "2026-05-01.md", "# 2026-05-01\n\nMet Bob about the zephyr migration.\nPinned 16.2.\n")
    write(tmp_path / "notes" / "sub" / "k.md", "# Notes\n\nThe kraken cluster runs on ARM.\n")
    return tmp_path / "ws"


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


def calls(log_file: Path) -> list[list[str]]:
    if not log_file.exists():
        return []
    return [json.loads(line)["argv"] for line in log_file.read_text().splitlines()]


def test_indexes_workspace_and_extra_path_and_maps_hits(tmp_path, ws, log_file):
    b = make_backend(tmp_path, standin_command(QMD_STANDIN_LOG=str(log_file)), {"paths": [{"path": "../notes", "name": "Notes"}]})
    assert b.sync().errors == ()
    res = b.search(query("zephyr"))
    assert res.mode == "qmd" and res.fallback is None
    got = {(c.path, c.start_line, c.end_line) for c in res.candidates}
    assert got == {("MEMORY.md", 5, 6), ("memory/2026-05-01.md", 2, 4)}
    assert all("zephyr" in c.text for c in res.candidates)
    (kraken,) = b.search(query("kraken")).candidates
    assert (kraken.path, kraken.start_line, kraken.end_line) == ("qmd/notes/sub/k.md", 2, 3)
    assert b.read_file(kraken.path).text.startswith("# Notes")
    assert b.read_file("memory/2026-05-01.md", from_line=3, lines=1).text == "Met Bob about the zephyr migration."
    # One call per collection, each with a single -c, run in the private home with NO_COLOR.
    searches = [a for a in calls(log_file) if a[0] == "search"]
    assert sorted(a[a.index("-c") + 1] for a in searches[:4]) == sorted(
        ["memory-root-main", "memory-alt-main", "memory-dir-main", "notes"]
    )
    assert all(a.count("-c") == 1 and "--json" in a for a in searches)
    entry = json.loads(log_file.read_text().splitlines()[0])
    assert entry["cwd"] == str(tmp_path / "state" / "agents" / "main" / "qmd") and entry["noColor"] == "1"
    assert (tmp_path / "state" / "agents" / "main" / "qmd" / "xdg-config" / "qmd" / "standin.json").is_file()
    st = b.status()
    assert st["backend"] == "qmd" and st["fallback"] is None and st["lastUpdate"] is not None
    assert [c["name"] for c in st["collections"]] == ["memory-root-main", "memory-alt-main", "memory-dir-main", "notes"]


def test_memory_get_rules_with_qmd_backend(tmp_path, ws):
    write(ws / "NOTES.md", "not memory")
    b = make_backend(tmp_path, standin_command(), {"paths": [{"path": "../notes", "name": "notes"}]})
    for bad, message in [
        ("qmd/notes/../../ws/NOTES.md", "qmd path escapes collection"),
        ("qmd/other/x.md", "unknown qmd collection: other"),
        ("qmd/notes/sub/k.txt", "path required"),
        ("NOTES.md", "path required"),
        ("memory/../NOTES.md", "path required"),
    ]:
        with pytest.raises(PathRefused) as err:
            b.read_file(bad)
        assert str(err.value) == message
    assert b.read_file("MEMORY.md").text.startswith("# Memory")


def test_changed_file_is_found_after_update_and_changed_collection_is_re_added(tmp_path, ws, log_file):
    cmd = standin_command(QMD_STANDIN_LOG=str(log_file))
    b = make_backend(tmp_path, cmd, {"paths": [{"path": "../notes", "name": "notes", "pattern": "sub/*.md"}]})
    b.sync()
    assert b.search(query("walrus")).candidates == ()
    write(ws / "memory" / "2026-05-01.md", "# 2026-05-01\n\nThe walrus arrived.\n")
    b.sync()
    assert [c.path for c in b.search(query("walrus")).candidates] == ["memory/2026-05-01.md"]
    # A new process with a different pattern for "notes": removed and re-added; the rest is kept.
    b2 = make_backend(tmp_path, cmd, {"paths": [{"path": "../notes", "name": "notes", "pattern": "**/*.md"}]})
    assert b2.sync().errors == ()
    assert ["collection", "remove", "notes"] in calls(log_file)
    assert not any(a[:3] == ["collection", "remove", "memory-dir-main"] for a in calls(log_file))
    assert [c.path for c in b2.search(query("kraken")).candidates] == ["qmd/notes/sub/k.md"]


def test_hang_is_killed_after_timeout_with_its_children_and_qmd_is_retried(tmp_path, ws):
    control, pids = tmp_path / "control", tmp_path / "pids"
    control.write_text("")
    cmd = standin_command(QMD_STANDIN_CONTROL=str(control), QMD_STANDIN_PIDFILE=str(pids))
    b = make_backend(tmp_path, cmd, {"limits": {"timeoutMs": 700}}, retry_after_s=0.0)
    b.sync()
    control.write_text("hang")
    started = time.monotonic()
    res = b.search(query("zephyr"))
    assert time.monotonic() - started < 20  # the stand-in hangs forever: any return proves the timeout
    assert res.fallback is not None and res.fallback.from_ == "qmd" and "timed out after 700 ms" in res.fallback.reason
    status_fb = b.status()["fallback"]
    assert status_fb["from"] == "qmd" and res.fallback.reason.startswith(status_fb["reason"])
    for pid in pids.read_text().split():
        assert _gone(int(pid)), f"process {pid} survived the timeout"
    control.write_text("")
    res = b.search(query("zephyr"))
    assert res.fallback is None and len(res.candidates) == 2
    assert b.status()["fallback"] is None


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 20  # a loaded 2-core machine may take a while to reap
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if "State:\tZ" in state:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("garbage", "no JSON result array"),
        ("huge", "printed more than"),
        ("crash", "exited 134"),
    ],
)
def test_broken_qmd_output_falls_back_with_a_reason(tmp_path, ws, caplog, mode, reason):
    control = tmp_path / "control"
    b = make_backend(tmp_path, standin_command(QMD_STANDIN_CONTROL=str(control)), retry_after_s=60)
    b.sync()
    control.write_text(mode)
    b.runner.max_output_bytes = 2_000_000
    with caplog.at_level(logging.WARNING, logger="symi_memory.qmd"):
        res = b.search(query("zephyr"))
    assert res.candidates == () and res.fallback is not None and reason in res.fallback.reason
    assert any("builtin-sqlite" in r.getMessage() for r in caplog.records)
    # Inside the retry window qmd is not asked again.
    control.write_text("")
    assert b.search(query("zephyr")).fallback is not None


def test_missing_qmd_binary_falls_back(tmp_path, ws):
    b = make_backend(tmp_path, str(tmp_path / "no-such-qmd"))
    report = b.sync()
    assert report.errors and "cannot run" in report.errors[0]
    res = b.search(query("zephyr"))
    assert res.fallback is not None and "cannot run" in res.fallback.reason
    assert b.status()["backend"] == "qmd" and b.status()["fallback"]["from"] == "qmd"


def test_missing_model_only_warns_on_embed_and_breaks_vsearch(tmp_path, ws, caplog, log_file):
    cmd = standin_command(QMD_STANDIN_FAIL="missing-model", QMD_STANDIN_LOG=str(log_file))
    b = make_backend(tmp_path, cmd)
    with caplog.at_level(logging.WARNING, logger="symi_memory.qmd"):
        assert b.sync().errors == ()
    assert any("qmd embed failed" in r.getMessage() for r in caplog.records)
    assert len(b.search(query("zephyr")).candidates) == 2
    v = make_backend(tmp_path, cmd, {"searchMode": "vsearch"})
    v.sync()
    res = v.search(query("zephyr"))
    assert res.fallback is not None and "NoBinaryFoundError" in res.fallback.reason


def test_no_results_text_means_none(tmp_path, ws):
    b = make_backend(tmp_path, standin_command(QMD_STANDIN_FAIL="no-results", QMD_STANDIN_FAIL_ON="search"))
    b.sync()
    res = b.search(query("zephyr"))
    assert res.candidates == () and res.fallback is None


def test_noise_around_json_is_tolerated(tmp_path, ws):
    b = make_backend(tmp_path, standin_command(QMD_STANDIN_FAIL="noise", QMD_STANDIN_FAIL_ON="search"))
    b.sync()
    assert len(b.search(query("zephyr")).candidates) == 2


def test_rejected_flag_retries_with_query(tmp_path, ws, log_file):
    cmd = standin_command(QMD_STANDIN_FAIL="reject-flag", QMD_STANDIN_LOG=str(log_file))
    b = make_backend(tmp_path, cmd, {"searchMode": "search"})
    b.sync()
    res = b.search(query("zephyr"))
    assert res.fallback is None and {c.path for c in res.candidates} == {"MEMORY.md", "memory/2026-05-01.md"}
    modes = [a[0] for a in calls(log_file) if a[0] in ("search", "vsearch", "query")]
    assert "search" in modes and modes[-1] == "query"
    assert b.status()["searchMode"] == "query"


def test_scope_denial_returns_nothing_and_logs_channel(tmp_path, ws, caplog, log_file):
    b = make_backend(tmp_path, standin_command(QMD_STANDIN_LOG=str(log_file)))
    b.sync()
    before = len(calls(log_file))
    with caplog.at_level(logging.WARNING, logger="symi_memory.qmd"):
        res = b.search(query("zephyr", key="agent:main:discord:group:123"))
    assert res.candidates == () and res.fallback is None
    assert len(calls(log_file)) == before  # qmd was not even asked
    msg = " ".join(r.getMessage() for r in caplog.records)
    assert "channel=discord" in msg and "chatType=group" in msg
    assert len(b.search(query("zephyr", key="agent:main:discord:dm:123")).candidates) == 2
    open_scope = make_backend(tmp_path, standin_command(), {"scope": {"default": "allow", "rules": []}})
    open_scope.sync()
    assert len(open_scope.search(query("zephyr", key="agent:main:discord:group:1")).candidates) == 2


def test_limits_apply_to_qmd_hits(tmp_path, ws):
    for i in range(5):
        write(ws / "memory" / f"2026-06-0{i + 1}.md", f"# d{i}\n\nzephyr note {i} " + "z" * 300 + "\n")
    b = make_backend(tmp_path, standin_command(), {"limits": {"maxResults": 3, "maxSnippetChars": 40, "maxInjectedChars": 4000}})
    b.sync()
    res = b.search(query("zephyr"))
    hits = present(res.candidates, citations="off", session_key=None, budget=res.budget)
    assert len(hits) == 3 and all(len(h.snippet) <= 40 for h in hits)
    tight = make_backend(tmp_path, standin_command(), {"limits": {"maxInjectedChars": 120}})
    tight.sync()
    res = tight.search(query("zephyr"))
    hits = present(res.candidates, citations="on", session_key=None, budget=res.budget)
    # What the agent sees, citation footers included, stays within memory.qmd.limits.maxInjectedChars.
    assert hits and sum(len(h.snippet) for h in hits) <= 120 < sum(len(c.text) for c in res.candidates)


def test_update_debounce_queue_and_embed_interval(tmp_path, ws, log_file):
    cmd = standin_command(QMD_STANDIN_LOG=str(log_file))
    b = make_backend(tmp_path, cmd, {"update": {"debounceMs": 60_000, "embedInterval": "60m"}})
    b.sync(reason="boot", force=True)
    b.sync(reason="interval")  # inside debounce: skipped
    names = [a[0] for a in calls(log_file) if a[0] in ("update", "embed")]
    assert names == ["update", "embed"]
    b.sync(reason="manual")  # forced: runs, but embed waits for embedInterval
    names = [a[0] for a in calls(log_file) if a[0] in ("update", "embed")]
    assert names == ["update", "embed", "update"]


def test_forced_update_waits_behind_an_active_one(tmp_path, ws):
    import threading

    from symi_memory_qmd.updater import UpdateScheduler

    order: list[str] = []
    gate = threading.Event()

    def work(reason: str, embed: bool) -> None:
        order.append(f"start {reason} embed={embed}")
        if reason == "slow":
            gate.wait(5)
        order.append(f"end {reason}")

    s = UpdateScheduler(work=work, interval_s=0, debounce_s=0, embed_interval_s=3600)
    t = threading.Thread(target=s.run, kwargs={"reason": "slow", "force": True})
    t.start()
    while not order:
        time.sleep(0.01)
    assert s.run(reason="skipped", force=False) is False
    f = threading.Thread(target=s.run, kwargs={"reason": "forced", "force": True})
    f.start()
    f.join(0.2)
    assert f.is_alive(), "a forced update must wait while another one runs"
    gate.set()
    t.join(5)
    f.join(5)
    assert order == ["start slow embed=True", "end slow", "start forced embed=False", "end forced"]


def test_boot_update_in_background_or_waited_for(tmp_path, ws):
    waited = make_backend(tmp_path, standin_command(), {"update": {"waitForBootSync": True}}, start=True)
    try:
        assert len(waited.search(query("zephyr")).candidates) == 2
    finally:
        waited.close()
    bg = make_backend(tmp_path, standin_command(), start=True)
    try:
        deadline = time.monotonic() + 10
        while bg.status()["lastUpdate"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(bg.search(query("zephyr")).candidates) == 2
    finally:
        bg.close()


def _transcript(path: Path, *turns: tuple[str, str]) -> None:
    lines = [json.dumps({"type": "message", "message": {"role": r, "content": t}}) for r, t in turns]
    write(path, "\n".join(lines) + "\n")


def test_sessions_export_search_and_maintenance(tmp_path, ws):
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    _transcript(sessions / "abc.jsonl", ("user", "Where is the okapi?"), ("assistant", "The okapi is in zone 4."))
    _transcript(sessions / "old.jsonl", ("user", "ancient okapi talk"))
    os.utime(sessions / "old.jsonl", (time.time() - 10 * 86400,) * 2)
    b = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True, "retentionDays": 7}})
    b.sync()
    export = tmp_path / "state" / "agents" / "main" / "qmd" / "sessions"
    assert sorted(p.name for p in export.glob("*.md")) == ["abc.md"]
    assert (export / "abc.md").read_text() == "User: Where is the okapi?\nAssistant: The okapi is in zone 4.\n"
    (hit,) = b.search(query("okapi")).candidates
    assert (hit.path, hit.source, hit.start_line) == ("qmd/sessions-main/abc.md", "sessions", 1)
    assert "zone 4" in hit.text
    # Transcripts are searchable but never readable whole, as with the builtin (issue 14).
    with pytest.raises(PathRefused, match="^path required$"):
        b.read_file(hit.path)
    stamp = (export / "abc.md").stat().st_mtime_ns
    time.sleep(0.02)
    b.sync(reason="manual")
    assert (export / "abc.md").stat().st_mtime_ns == stamp  # unchanged source: not rewritten
    (sessions / "abc.jsonl").unlink()
    b.sync(reason="manual")
    assert list(export.glob("*.md")) == []


def test_wired_through_plugin_registry_and_config(tmp_path, ws):
    from importlib.metadata import entry_points

    from symi_memory import load_config
    from symi_memory.plugins import load_plugins
    from symi_memory.specs import BackendContext

    others = {ep.name for ep in entry_points(group="symi_memory")} - {"qmd-sidecar"}
    spec = load_plugins(disabled=others).backend("qmd-sidecar")
    config = load_config(
        state_dir=tmp_path / "state",
        overrides={"memory": {"backend": "qmd", "qmd": {"command": standin_command(), "update": {"waitForBootSync": True}}}},
        extra_defaults={},
    )
    backend = spec.factory(BackendContext(config=config, agent=config.agent("main", workspace=ws), services=None))
    backend.start()
    try:
        assert {c.path for c in backend.search(query("zephyr")).candidates} == {"MEMORY.md", "memory/2026-05-01.md"}
    finally:
        backend.close()


def test_manager_serves_from_builtin_sqlite_while_qmd_hangs(tmp_path, ws):
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    control = tmp_path / "control"
    control.write_text("")
    config = load_config(
        state_dir=tmp_path / "state",
        overrides={
            "memory": {
                "backend": "qmd",
                "qmd": {
                    "command": standin_command(QMD_STANDIN_CONTROL=str(control)),
                    "limits": {"timeoutMs": 800},
                    "update": {"waitForBootSync": True, "commandTimeoutMs": 800, "updateTimeoutMs": 800},
                },
            }
        },
    )
    with open_memory(config, workspace=ws) as mem:
        ok = mem.search("zephyr", min_score=0.0)
        assert ok.mode == "qmd" and ok.fallback is None
        assert {h.path for h in ok.results} == {"MEMORY.md", "memory/2026-05-01.md"}
        control.write_text("hang")
        started = time.monotonic()
        first = mem.search("zephyr", min_score=0.0)
        assert time.monotonic() - started < 20  # the stand-in hangs forever: any return proves the timeout
        assert first.fallback is not None and "timed out" in first.fallback.reason
        mem.sync(reason="manual")  # brings the fallback index up to date (qmd's update times out too)
        res = mem.search("zephyr", min_score=0.0)
        assert res.fallback is not None and res.fallback.from_ == "qmd"
        assert res.mode != "qmd" and "memory/2026-05-01.md" in {h.path for h in res.results}
        st = mem.status()
        assert st["backend"] == "qmd" and st["fallback"]["from"] == "qmd" and st["collections"]


def test_embed_runs_on_the_first_update_that_succeeds(tmp_path, ws, log_file):
    control = tmp_path / "control"
    control.write_text("crash")
    cmd = standin_command(QMD_STANDIN_CONTROL=str(control), QMD_STANDIN_LOG=str(log_file))
    b = make_backend(tmp_path, cmd, {"update": {"debounceMs": 0, "embedInterval": "60m"}})
    assert b.sync(reason="boot", force=True).errors  # qmd crashes: the update fails before embed
    assert "embed" not in [a[0] for a in calls(log_file)]
    control.write_text("")
    assert b.sync(reason="manual").errors == ()
    assert [a[0] for a in calls(log_file) if a[0] in ("update", "embed")] == ["update", "embed"]


def test_fallback_of_a_started_backend_follows_file_changes_and_stops_on_close(tmp_path, ws):
    import threading

    from symi_memory import load_config
    from symi_memory.manager import open_memory

    config = load_config(
        state_dir=tmp_path / "state",
        overrides={"memory": {"backend": "qmd", "qmd": {"command": str(tmp_path / "no-such-qmd")}}},
    )
    before = set(threading.enumerate())
    mem = open_memory(config, workspace=ws)
    try:
        deadline = time.monotonic() + 10
        while not mem.search("zephyr", min_score=0.0).results and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mem.search("zephyr", min_score=0.0).fallback.from_ == "qmd"
        # Nobody calls sync(): the fallback's own watcher must pick the new note up.
        write(ws / "memory" / "2026-06-01.md", "# 2026-06-01\n\nThe walrus arrived.\n")
        found: list[str] = []
        deadline = time.monotonic() + 15
        while "memory/2026-06-01.md" not in found and time.monotonic() < deadline:
            time.sleep(0.2)
            found = [h.path for h in mem.search("walrus", min_score=0.0).results]
        assert found[0] == "memory/2026-06-01.md"
        started = [t for t in set(threading.enumerate()) - before if t.name.startswith("symi-")]
    finally:
        mem.close()
    for t in started:
        t.join(6)
    assert [t.name for t in started if t.is_alive()] == []


def test_searches_before_the_first_reconcile_start_one_retry_thread(tmp_path, ws):
    import threading

    b = make_backend(tmp_path, str(tmp_path / "no-such-qmd"))
    with b.scheduler._cond:  # holds every retry thread at its first step
        for _ in range(8):
            assert b.search(query("zephyr")).fallback is not None
        retry = [t for t in threading.enumerate() if t.name == "symi-qmd-retry" and t.is_alive()]
        assert len(retry) == 1
    retry[0].join(5)
    b.close()


def test_close_ends_a_sync_waiting_for_another_process_update(tmp_path, ws):
    """A sync someone waits for (``index``, the server's POST /sync) waits up to ~6 min for another process's qmd
    update; closing the backend meanwhile (the server stopping, an agent closed) ended nothing, so the closing
    process could not exit until that wait ran out. It now stops at once, saying it did not update."""
    import subprocess
    import sys
    import threading

    backend = make_backend(tmp_path, standin_command())
    backend.home.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys,time; fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT);"
         "fcntl.flock(fd,fcntl.LOCK_EX); print('held',flush=True); time.sleep(120)", str(backend.home / "update.lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        reports: list = []
        t = threading.Thread(target=lambda: reports.append(backend.sync(reason="manual")), daemon=True)
        t.start()
        time.sleep(1.5)  # past the short grace: now in the long wait
        assert t.is_alive()
        closed_at = time.monotonic()
        backend.close()
        t.join(timeout=10)
        assert not t.is_alive(), "the sync went on waiting for the other process after close()"
        assert time.monotonic() - closed_at < 5
        assert reports and reports[0].errors and "not updated" in reports[0].errors[0]
    finally:
        holder.kill()
        holder.wait()


def test_a_transcript_over_the_limit_exports_its_newest_messages(tmp_path, ws):
    """The export holds a transcript's newest messages up to memorySearch.sync.maxFileBytes of text, as the builtin
    indexes it, and status names the transcript under ``partial``; tool output never counts (stop 32)."""
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    turns = [("user", f"note {n}: remember token word{n:03d}x for later please") for n in range(100)]
    lines = [json.dumps({"type": "message", "message": {"role": r, "content": t}}) for r, t in turns]
    lines.insert(1, json.dumps({"type": "tool_result", "output": "ls output\n" * 5000}))
    write(sessions / "long.jsonl", "\n".join(lines) + "\n")
    _transcript(sessions / "short.jsonl", ("user", "Where is the okapi?"))
    b = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}}, max_transcript_bytes=3000)
    b.sync()
    export = tmp_path / "state" / "agents" / "main" / "qmd" / "sessions"
    text = (export / "long.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 3001 and text.endswith("word099x for later please\n") and "word000x" not in text
    kept = text.count("\n")
    assert {c.path for c in b.search(query("word099x")).candidates} == {"qmd/sessions-main/long.md"}
    assert b.search(query("word000x")).candidates == ()
    (part,) = b.status()["partial"]
    assert part["path"] == "sessions/long.jsonl"
    assert f"only the newest {kept} of 100 are searchable (JSONL lines {102 - kept}-101)" in part["reason"]
    # Another process sees it too (the qmd state), and an unchanged transcript keeps it.
    other = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}}, max_transcript_bytes=3000)
    assert other.status()["partial"] == [part]
    b.sync(reason="manual")
    assert b.status()["partial"] == [part]
    # A limit that holds it all exports it whole.
    whole = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}})
    whole.sync(reason="manual")
    assert whole.search(query("word000x")).candidates and whole.status()["partial"] == []


def _bad_names(tmp_path: Path, ws: Path) -> None:
    """A memory file and a transcript whose names are not valid UTF-8 (Latin-1 "café")."""
    with open(os.path.join(os.fsencode(ws / "memory"), b"caf\xe9.md"), "wb") as fh:
        fh.write(b"- the heron is hidden here\n")
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    with open(os.path.join(os.fsencode(sessions), b"caf\xe9.jsonl"), "wb") as fh:
        fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": "the bittern booms"}}).encode())


BAD = {"memory/caf\\xe9.md": "file name is not valid UTF-8", "sessions/caf\\xe9.jsonl": "file name is not valid UTF-8"}


def test_files_named_in_invalid_utf8_are_listed_as_the_builtin_lists_them(tmp_path, ws):
    """qmd skips a file whose name is not valid UTF-8 without naming it: status.skipped and the sync's warnings
    list it (its bytes shown as \\xNN), with the same paths and reason as builtin-sqlite (stop 32, gap 2)."""
    from support.sqlite_memory import open_mem

    _bad_names(tmp_path, ws)
    _transcript(tmp_path / "state" / "agents" / "main" / "sessions" / "ok.jsonl", ("user", "the okapi is in zone 4"))
    b = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}})
    report = b.sync()
    st = b.status()
    assert {s["path"]: s["reason"] for s in st["skipped"]} == BAD
    assert report.warnings == tuple(f"{p} is not indexed: {why}" for p, why in sorted(BAD.items()))
    export = tmp_path / "state" / "agents" / "main" / "qmd" / "sessions"
    assert sorted(os.listdir(os.fsencode(export))) == [b".symi-export.json", b"ok.md"]  # no export qmd cannot read
    # Another process (a CLI `status`) sees the same list.
    assert make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}}).status()["skipped"] == st["skipped"]
    # builtin-sqlite over the same workspace and transcripts.
    with open_mem(tmp_path, ws, {"experimental": {"sessionMemory": True}, "sources": ["memory", "sessions"]}) as mem:
        built = mem.sync()
        assert mem.status()["skipped"] == st["skipped"]
        assert built.warnings == report.warnings


def test_a_workspace_away_for_a_while_keeps_its_documents_in_qmd(tmp_path, ws):
    # `qmd update` with the workspace renamed away (or unmounted) took every document of its collections for
    # deleted: searches found nothing, while status said its content stayed searchable. The update now waits for
    # it; the other collections of a workspace never indexed (a mistyped path) are updated as before.
    b = make_backend(tmp_path, standin_command(), {"paths": [{"path": "../notes", "name": "Notes"}]})
    assert b.sync().errors == ()
    os.rename(ws, tmp_path / "away")
    assert b.sync().errors == ()
    assert {c.path for c in b.search(query("zephyr")).candidates} == {"MEMORY.md", "memory/2026-05-01.md"}
    os.rename(tmp_path / "away", ws)
    (ws / "memory" / "2026-05-01.md").unlink()  # deleted meanwhile: goes once it is back
    assert b.sync().errors == ()
    assert {c.path for c in b.search(query("zephyr")).candidates} == {"MEMORY.md"}
    b.close()
    typo = make_backend(tmp_path / "typo", standin_command(), {"paths": [{"path": str(tmp_path / "notes")}]})
    assert typo.sync().errors == ()
    assert [c.path for c in typo.search(query("kraken")).candidates] == ["qmd/notes/sub/k.md"]
    typo.close()


def test_a_single_file_path_away_for_a_while_keeps_its_document(tmp_path, ws):
    # A memory.qmd.paths entry naming one .md file is its folder with the file as the mask: with the file gone
    # (moved away for a while, as an absent extra path file is kept by builtin-sqlite) its document stays.
    write(tmp_path / "extra" / "solo.md", "# Solo\n\nThe okapi sleeps standing.\n")
    b = make_backend(tmp_path, standin_command(), {"paths": [{"path": "../extra/solo.md", "name": "solo"}]})
    assert b.sync().errors == ()
    os.rename(tmp_path / "extra" / "solo.md", tmp_path / "solo.md")
    report = b.sync()
    assert [c.path for c in b.search(query("okapi")).candidates] == ["qmd/solo/solo.md"]
    assert report.warnings == (f"memory.qmd.paths entry {tmp_path / 'extra' / 'solo.md'} does not exist: nothing new "
                               "is indexed from it; what qmd already holds from it (collection solo) stays searchable "
                               "until it is back or leaves memory.qmd.paths",)
    os.rename(tmp_path / "solo.md", tmp_path / "extra" / "solo.md")
    write(tmp_path / "extra" / "solo.md", "# Solo\n\nThe okapi now sleeps lying down.\n")
    assert b.sync().warnings == ()
    (hit,) = b.search(query("okapi")).candidates
    assert "lying down" in hit.text
    b.close()


def test_a_new_transcript_limit_makes_the_export_stale(tmp_path, ws):
    """sync.maxFileBytes changed (raised to hold a transcript whole): a one-shot command sees the index stale and
    updates, as builtin-sqlite re-reads every transcript, instead of searching the old, cut export."""
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    turns = [("user", f"note {n}: remember token word{n:03d}x for later please") for n in range(100)]
    write(sessions / "long.jsonl", "\n".join(json.dumps({"type": "message", "message": {"role": r, "content": t}})
                                             for r, t in turns) + "\n")
    cut = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}}, max_transcript_bytes=3000)
    cut.sync()
    assert not cut.is_stale() and cut.status()["partial"]
    whole = make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}})
    assert whole.is_stale()
    whole.sync(reason="search")
    assert whole.search(query("word000x")).candidates and whole.status()["partial"] == []
    assert not whole.is_stale()
    # Back to the small limit: stale again.
    assert make_backend(tmp_path, standin_command(), {"sessions": {"enabled": True}}, max_transcript_bytes=3000).is_stale()


def test_an_update_killed_while_a_folder_is_away_leaves_no_config_the_next_update_keeps(tmp_path, ws):
    """A process SIGKILLed during a `qmd update` that leaves out a folder away cannot remove the temporary config
    that run reads (`update-config-*` in the qmd home). The next update (once that qmd has exited: it holds the
    update lock until then) removes it; before, every such kill left one behind for good."""
    import signal
    import subprocess
    import sys
    import textwrap

    control, pids = tmp_path / "control", tmp_path / "pids"
    control.write_text("")
    cmd = standin_command(QMD_STANDIN_CONTROL=str(control), QMD_STANDIN_FAIL_ON="update",
                          QMD_STANDIN_PIDFILE=str(pids))
    qmd = {"paths": [{"path": "../notes", "name": "Notes"}]}
    b = make_backend(tmp_path, cmd, qmd)
    assert b.sync().errors == ()
    b.close()
    home = tmp_path / "state" / "agents" / "main" / "qmd"
    os.rename(tmp_path / "notes", tmp_path / "notes-away")
    control.write_text("hang")
    body = textwrap.dedent("""
        import json, sys
        sys.path[:0] = json.loads(sys.argv[1])
        from pathlib import Path
        from qmd_standin.helpers import make_backend
        make_backend(Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])).sync()
    """)
    proc = subprocess.Popen([sys.executable, "-c", body, json.dumps(sys.path), str(tmp_path), cmd, json.dumps(qmd)])
    try:
        deadline = time.monotonic() + 30
        while not pids.exists() or not pids.read_text().endswith("\n"):  # the update's qmd runs (and hangs)
            assert proc.poll() is None and time.monotonic() < deadline, "the update did not start"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    for pid in pids.read_text().split():  # the qmd it started exits (it kept the update lock until then)
        os.kill(int(pid), signal.SIGKILL)
        assert _gone(int(pid))
    left = [p.name for p in home.iterdir() if p.name.startswith("update-config-")]
    assert len(left) == 1 and (home / left[0] / "index.yml").is_file(), left
    control.write_text("")
    b = make_backend(tmp_path, cmd, qmd)
    report = b.sync()
    assert report.errors == () and "collection notes" in report.warnings[0], report
    assert [p.name for p in home.iterdir() if p.name.startswith("update-config-")] == []
    assert [c.path for c in b.search(query("kraken")).candidates] == ["qmd/notes/sub/k.md"]
    b.close()


def test_a_qmd_config_dir_in_the_environment_does_not_replace_the_private_config(tmp_path, ws, monkeypatch):
    """QMD_CONFIG_DIR set in the caller's environment (a user's own qmd setup) takes precedence over XDG_CONFIG_HOME
    in qmd: every update read that config instead of the private one (here listing none of the agent's
    collections), so nothing of the workspace was indexed. qmd calls no longer inherit it."""
    mine = tmp_path / "my-qmd-config"
    write(mine / "index.yml", json.dumps({"collections": {}}))
    monkeypatch.setenv("QMD_CONFIG_DIR", str(mine))
    b = make_backend(tmp_path, standin_command())
    assert b.sync().errors == ()
    write(ws / "memory" / "2026-05-02.md", "# 2026-05-02\n\nThe zephyr migration is done.\n")
    assert b.sync().errors == ()
    assert {c.path for c in b.search(query("zephyr")).candidates} == {"MEMORY.md", "memory/2026-05-01.md",
                                                                       "memory/2026-05-02.md"}
    b.close()
    assert [p.name for p in mine.iterdir()] == ["index.yml"]
