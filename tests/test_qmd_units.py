"""qmd-sidecar pieces that need no qmd at all: scope, parsing, names, paths, settings.

qmd's snippet and injected-text limits are the core's presentation: tests/test_presentation.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symi_memory.errors import ConfigError, PathRefused
from symi_memory_qmd.collections import CollectionSpec, derive_collections
from symi_memory_qmd.parse import (
    QmdParseError,
    is_flag_rejection,
    parse_search_output,
    snippet_lines,
    update_counts,
)
from symi_memory_qmd.paths import display_path, read_qmd_path
from symi_memory_qmd.runner import QmdFailed, QmdRunner
from symi_memory_qmd.scope import check_scope
from symi_memory_qmd.settings import QmdSettings

DEFAULT_SCOPE = {"default": "deny", "rules": [{"action": "allow", "match": {"chatType": "direct"}}]}


# ---------------------------------------------------------------- scope


@pytest.mark.parametrize(
    ("key", "allowed", "channel", "chat"),
    [
        (None, True, None, "direct"),
        ("agent:main:main", True, None, "direct"),
        ("agent:main:discord:group:42", False, "discord", "group"),
        ("agent:main:slack:channel:c1", False, "slack", "channel"),
        ("agent:main:telegram:dm:99", True, "telegram", "direct"),
        ("agent:main:whatsapp:direct:+1", True, "whatsapp", "direct"),
        ("agent:main:x:y:group:z", False, None, "group"),
        ("AGENT:Main:Signal:Group:7", False, "signal", "group"),
    ],
)
def test_default_scope_allows_only_direct_chats(key, allowed, channel, chat):
    d = check_scope(DEFAULT_SCOPE, key)
    assert (d.allowed, d.channel, d.chat_type) == (allowed, channel, chat)


def test_scope_rule_fields_each_decide():
    scope = {
        "default": "deny",
        "rules": [
            {"action": "deny", "match": {"channel": "discord", "chatType": "direct"}},
            {"action": "allow", "match": {"channel": "discord"}},
            {"action": "allow", "match": {"keyPrefix": "slack:channel:ops"}},
            {"action": "allow", "match": {"rawKeyPrefix": "agent:work:"}},
            {"action": "allow", "match": {"keyPrefix": "agent:legacy:teams:"}},
        ],
    }
    assert not check_scope(scope, "agent:main:discord:direct:1").allowed  # first match wins
    assert check_scope(scope, "agent:main:discord:group:1").allowed  # channel
    assert check_scope(scope, "agent:main:slack:channel:ops-alerts").allowed  # normalised keyPrefix
    assert not check_scope(scope, "agent:main:slack:channel:random").allowed
    assert check_scope(scope, "agent:work:slack:channel:random").allowed  # rawKeyPrefix
    assert not check_scope(scope, "agent:main:work:slack").allowed
    assert check_scope(scope, "agent:legacy:teams:group:1").allowed  # legacy agent: keyPrefix is raw
    assert not check_scope(scope, "agent:other:teams:group:1").allowed


def test_scope_unset_default_allows_and_bad_rules_say_what_to_fix():
    assert check_scope({"rules": []}, "agent:main:discord:group:1").allowed
    assert check_scope(None, "x:channel:y").allowed
    with pytest.raises(ValueError, match="action"):
        check_scope({"rules": [{"action": "maybe", "match": {}}]}, "k")
    with pytest.raises(ValueError, match="chatTyp"):
        check_scope({"rules": [{"action": "allow", "match": {"chatTyp": "direct"}}]}, "k")


# ---------------------------------------------------------------- parsing

REAL_OUTPUT = """[
  {
    "docid": "#840496",
    "score": 0.46,
    "file": "qmd://memory-dir-main/2026-05-01.md",
    "line": 3,
    "title": "2026-05-01",
    "snippet": "@@ -2,4 @@ (1 before, 0 after)\\n\\nMet with Bob about the zephyr migration.\\nDecided to pin PostgreSQL at 16.2.\\n"
  }
]
"""


def test_parse_real_shape_with_line_range_from_header():
    (hit,) = parse_search_output(REAL_OUTPUT)
    assert (hit.collection, hit.rel, hit.score) == ("memory-dir-main", "2026-05-01.md", 0.46)
    assert (hit.start_line, hit.end_line) == (2, 4)
    assert hit.text == "\nMet with Bob about the zephyr migration.\nDecided to pin PostgreSQL at 16.2."


def test_parse_tolerates_noise_and_reads_no_results():
    noisy = "Expanding query...\n[warn] 3 docs need embeddings [sic]\n" + REAL_OUTPUT + "Done in 3ms\n"
    assert [h.rel for h in parse_search_output(noisy)] == ["2026-05-01.md"]
    assert parse_search_output("No results found.\n") == []
    assert parse_search_output("[]\n") == []
    with pytest.raises(QmdParseError, match="no JSON"):
        parse_search_output("\x1b[31m%%% <html>garbage{not json")


def test_snippet_header_edge_cases():
    assert snippet_lines("@@ -6,3 @@ (5 before, 0 after)\n## Projects\nProject zephyr.\n", 7)[:2] == (6, 7)
    assert snippet_lines("@@ -10 @@\none line", 10)[:2] == (10, 10)
    assert snippet_lines("no header here", 12)[:2] == (12, 12)


def test_flag_rejection_texts():
    assert is_flag_rejection("error: unknown option '--json'")
    assert is_flag_rejection("Unrecognized option: -c")
    assert is_flag_rejection("error: unknown flag: --json")
    assert not is_flag_rejection("Collection not found: notes")


# ---------------------------------------------------------------- collections and paths


def test_collection_names_and_clashes(tmp_path):
    ws = tmp_path / "ws"
    specs = derive_collections(
        agent_id="Main Bot",
        workspace=ws,
        paths=[
            {"path": "../notes", "name": "Team Notes!"},
            {"path": str(tmp_path / "other" / "notes")},
            {"path": "docs/one.md"},
            "../notes2",
        ],
        sessions_dir=tmp_path / "exports",
    )
    names = [s.name for s in specs]
    assert names == [
        "memory-root-main-bot",
        "memory-alt-main-bot",
        "memory-dir-main-bot",
        "team-notes",
        "notes",
        "docs",
        "notes2",
        "sessions-main-bot",
    ]
    assert (specs[0].path, specs[0].pattern) == (ws.resolve() if ws.exists() else ws, "MEMORY.md")
    assert (specs[5].path, specs[5].pattern) == ((ws / "docs").resolve(), "one.md")
    assert specs[-1].source == "sessions"
    clash = derive_collections(agent_id="a", workspace=ws, paths=["x/notes", "y/notes", "z/notes"], include_default_memory=False)
    assert [s.name for s in clash] == ["notes", "notes-2", "notes-3"]


def test_display_path_inside_and_outside_workspace(tmp_path):
    ws = tmp_path / "ws"
    inside = CollectionSpec(name="memory-dir-main", path=ws / "memory", pattern="**/*.md")
    outside = CollectionSpec(name="notes", path=tmp_path / "notes", pattern="**/*.md")
    assert display_path(inside, "memory-dir-main", "sub/2026-05-01.md", ws) == "memory/sub/2026-05-01.md"
    assert display_path(outside, "notes", "a b/x.md", ws) == "qmd/notes/a b/x.md"
    assert display_path(None, "gone", "x.md", ws) == "qmd/gone/x.md"


def test_memory_get_qmd_paths(tmp_path):
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "sub" / "k.md").write_text("one\ntwo\nthree\n")
    (notes / "data.txt").write_text("not markdown")
    (tmp_path / "secret.md").write_text("outside")
    os.symlink(tmp_path / "secret.md", notes / "link.md")
    colls = {"notes": CollectionSpec(name="notes", path=notes, pattern="**/*.md")}
    assert read_qmd_path("qmd/notes/sub/k.md", colls).text == "one\ntwo\nthree\n"
    got = read_qmd_path("qmd/notes/sub/k.md", colls, from_line=2, lines=1)
    assert (got.path, got.text) == ("qmd/notes/sub/k.md", "two")
    assert read_qmd_path("qmd/notes/missing.md", colls).text == ""
    cases = {
        "qmd/notes/../../secret.md": "qmd path escapes collection",
        "qmd/notes/sub/../../secret.md": "qmd path escapes collection",
        "qmd/notes/link.md": "qmd path escapes collection",
        "qmd/nope/x.md": "unknown qmd collection: nope",
        "qmd/notes": "invalid qmd path",
        "qmd//x.md": "invalid qmd path",
        "qmd/notes/data.txt": "path required",
        "qmd/notes/sub": "path required",
    }
    for path, message in cases.items():
        with pytest.raises(PathRefused) as err:
            read_qmd_path(path, colls)
        assert str(err.value) == message, path


# ---------------------------------------------------------------- settings


def test_settings_defaults_and_durations():
    s = QmdSettings.from_config({"update": {"interval": "90s", "embedInterval": "2"}})
    assert (s.interval_s, s.embed_interval_s, s.debounce_s) == (90.0, 120.0, 15.0)
    assert s.limits == {"maxResults": 6, "maxSnippetChars": 700, "maxInjectedChars": 4000, "timeoutMs": 4000}
    assert s.scope == DEFAULT_SCOPE and s.command == "qmd" and s.search_mode == "search"
    for bad in ("5 minutes", "-1m", "1w", ""):
        with pytest.raises(ConfigError, match="memory.qmd.update.interval"):
            QmdSettings.from_config({"update": {"interval": bad}})
    with pytest.raises(ConfigError, match="searchMode"):
        QmdSettings.from_config({"searchMode": "grep"})


@pytest.mark.parametrize(
    ("scope", "line"),
    [
        ({"rules": [{"action": "maybe", "match": {}}]}, "memory.qmd.scope.rules[0].action is 'maybe'; use allow or deny"),
        (
            {"default": "allow", "rules": [{"action": "deny", "match": {"chatTyp": "group"}}]},
            "memory.qmd.scope.rules[0].match: unknown field(s) ['chatTyp']; use chatType, channel, keyPrefix, rawKeyPrefix",
        ),
        ({"default": "nope", "rules": []}, "memory.qmd.scope.default is 'nope'; use allow or deny"),
    ],
)
def test_bad_scope_stops_open_memory_with_one_line(tmp_path, scope, line):
    from symi_memory import load_config
    from symi_memory.manager import open_memory

    cfg_file = tmp_path / "config.json"
    cfg_file.write_text(json.dumps({"memory": {"backend": "qmd", "qmd": {"command": "qmd", "scope": scope}}}))
    config = load_config(cfg_file, state_dir=tmp_path / "state")  # the file itself loads
    (tmp_path / "ws").mkdir()
    with pytest.raises(ConfigError) as err:
        open_memory(config, workspace=tmp_path / "ws", start=False)
    assert err.value.problems == [line]


def test_hooks_register_the_backend_by_name():
    from importlib.metadata import entry_points

    from symi_memory.plugins import load_plugins

    # Only this plugin: the others are other engineers' work in progress.
    others = {ep.name for ep in entry_points(group="symi_memory")} - {"qmd-sidecar"}
    spec = load_plugins(disabled=others).backend("qmd-sidecar")
    assert spec.short_name == "qmd"
    assert Path(spec.factory.__code__.co_filename).name == "hooks.py"


# ---------------------------------------------------------------- update report and failures


def test_update_counts_read_qmds_report():
    report = """Updating 3 collection(s)...

[1/3] memory-root-main (MEMORY.md)
Collection: /ws (MEMORY.md)

Indexed: 0 new, 0 updated, 1 unchanged, 0 removed

[2/3] memory-alt-main (memory.md)
Collection: /ws (memory.md)
No files found matching pattern.

Indexed: 0 new, 0 updated, 0 unchanged, 0 removed

[3/3] memory-dir-main (**/*.md)
Collection: /ws/memory (**/*.md)

Indexed: 2 new, 1 updated, 397 unchanged, 3 removed

\u2713 All collections updated.
"""
    assert update_counts(report) == {"memory-root-main": 1, "memory-alt-main": 0, "memory-dir-main": 400}
    assert update_counts("garbage\nIndexed: 1 new, 0 updated, 0 unchanged, 0 removed\n") == {}


def test_a_node_crash_is_reported_by_its_error_line_not_its_source_location(tmp_path):
    """Node prints an uncaught error as the source location, the code line and a caret first: the status and the
    warning said ``qmd update exited 1: file:///.../store.js:2254``."""
    import shlex
    import sys

    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nsys.stderr.write('file:///q/dist/store.js:2254\\n    stmt.run(id);\\n    ^\\n\\n"
                     "SqliteError: constraint failed\\n    at rebuildDocumentFTS (file:///q/dist/store.js:2240:6)\\n')\n"
                     "sys.exit(1)\n", encoding="utf-8")
    runner = QmdRunner(command=shlex.join([sys.executable, str(crash)]), home=tmp_path / "home")
    with pytest.raises(QmdFailed) as failed:
        runner.run(["update"], timeout_ms=20_000)
    assert str(failed.value) == "qmd update exited 1: SqliteError: constraint failed"


def test_one_transcript_that_cannot_be_exported_skips_only_itself(tmp_path, caplog):
    """One transcript whose export cannot be written (here a folder in the way; a transcript gone or swapped for a
    FIFO since the listing the same) raised out of the export, and so out of the whole qmd update."""
    from symi_memory_qmd.export import export_sessions

    src, out = tmp_path / "sessions", tmp_path / "export"
    src.mkdir()
    for name, text in (("a", "the kestrel nests on the tower"), ("b", "the heron waits")):
        (src / f"{name}.jsonl").write_text(
            json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\n", encoding="utf-8")
    (out / "b.md").mkdir(parents=True)
    report = export_sessions(src, out)
    assert report.written == ("a.md",)
    assert (out / "a.md").read_text(encoding="utf-8") == "User: the kestrel nests on the tower\n"
    assert "cannot export session transcript" in caplog.text and "b.jsonl" in caplog.text
    assert not list(out.glob("*.tmp*"))


def test_a_qmd_home_that_cannot_be_written_is_a_qmd_failure_not_a_crash(tmp_path):
    """Without write access to the qmd home the update lock cannot be taken: that is reported like any qmd failure
    (the sync's errors, status's fallback reason), not raised as an OSError out of the sync."""
    from qmd_standin.helpers import make_backend, standin_command
    from support.unprivileged import Unprivileged

    (tmp_path / "ws").mkdir()
    home = tmp_path / "state" / "agents" / "main" / "qmd"
    home.mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    home.chmod(0o555)
    b = make_backend(tmp_path, standin_command())
    with Unprivileged():
        report = b.sync()
        st = b.status()
    assert any("cannot take the qmd update lock" in e for e in report.errors), report.errors
    assert "cannot take the qmd update lock" in st["fallback"]["reason"]


def test_exporting_a_large_transcript_holds_about_the_limit_in_memory(tmp_path):
    """A transcript is exported a line at a time: memory holds its newest messages up to the limit, not the file."""
    import tracemalloc

    from symi_memory_qmd.export import export_sessions

    src, out = tmp_path / "sessions", tmp_path / "export"
    src.mkdir()
    with open(src / "big.jsonl", "w", encoding="utf-8") as fh:
        for n in range(15_000):
            fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": f"turn {n} lanterns"}}) + "\n")
            if n % 50 == 0:
                fh.write(json.dumps({"type": "tool_result", "output": "ls -la output line\n" * 200}) + "\n")
        fh.write(json.dumps({"type": "message", "message": {"role": "user", "content": "the ocelot sleeps"}}) + "\n")
    size = (src / "big.jsonl").stat().st_size
    assert size > 1_000_000
    export_sessions(src, out, max_bytes=50_000)  # warm: imports and caches are not the transcript's
    (src / "big.jsonl").touch()
    (out / ".symi-export.json").unlink()
    tracemalloc.start()
    try:
        report = export_sessions(src, out, max_bytes=50_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.written == ("big.md",) and list(report.partial) == ["sessions/big.jsonl"]
    text = (out / "big.md").read_text(encoding="utf-8")
    assert text.endswith("User: the ocelot sleeps\n") and len(text.encode()) <= 50_001
    assert peak < size / 4, f"peak Python allocation {peak >> 10} KiB for a {size >> 10} KiB transcript"


def test_a_growing_transcript_is_exported_by_appending_what_it_gained(tmp_path):
    """A transcript that only grew is read from where the last export stopped and its new lines appended to its
    export (stop 34: the same file, where a whole export replaces it by a new one); the export equals a whole export
    of the file at every step, and one cut short, or whose export was changed behind the manifest's back, is
    exported whole again."""
    import random

    from symi_memory_qmd.export import export_sessions

    src, out, whole = tmp_path / "sessions", tmp_path / "export", tmp_path / "whole"
    src.mkdir()
    path = src / "s.jsonl"
    rng = random.Random(5)
    n = 0

    def grow(count):
        nonlocal n
        with path.open("a", encoding="utf-8") as fh:
            for _ in range(count):
                fh.write(json.dumps({"type": "tool_result", "output": "x" * 300}) + "\n" if n % 4 == 3 else
                         json.dumps({"type": "message", "message": {"role": "user", "content": f"turn {n} "
                                     f"token=abcdefghijk {'lantern ' * rng.randint(1, 30)}"}}) + "\n")
                n += 1

    def export():
        """Export, check it against a whole export, and tell whether the export file is the one there before."""
        before = (out / "s.md").stat().st_ino if (out / "s.md").exists() else None
        export_sessions(src, out, max_bytes=20_000)
        (whole / ".symi-export.json").unlink(missing_ok=True)
        export_sessions(src, whole, max_bytes=20_000)
        assert (out / "s.md").read_bytes() == (whole / "s.md").read_bytes()
        return (out / "s.md").stat().st_ino == before

    path.write_text("", encoding="utf-8")
    assert not export()
    appended = []
    for _ in range(12):
        grow(rng.randint(1, 8))
        appended.append(export())
    assert appended == [True] * 12
    path.write_text(path.read_text(encoding="utf-8")[: path.stat().st_size // 2].rsplit("\n", 1)[0] + "\n")
    assert not export()  # cut short
    with (out / "s.md").open("a", encoding="utf-8") as fh:
        fh.write("User: appended by someone else\n")
    grow(1)
    assert not export()  # its export changed behind the manifest: written whole, not appended to
    grow(150)
    export()  # past the limit: the oldest messages leave the export
    assert "partial" in json.loads((out / ".symi-export.json").read_text(encoding="utf-8"))["s.md"]


def test_a_transcript_rewritten_in_place_at_the_same_size_is_exported_whole(tmp_path):
    """Review rev16: a word scrubbed in place (same inode, same size, a new mtime) far from the end of a transcript
    must leave its export too: the file did not grow, so it is not read on from the last export's mark."""
    from symi_memory_qmd.export import export_sessions

    src, out = tmp_path / "sessions", tmp_path / "export"
    src.mkdir()
    path = src / "s.jsonl"
    lines = [json.dumps({"type": "message", "message": {"role": "assistant", "content": f"step {n}: " + "heron " * 50}})
             for n in range(500)]
    lines.insert(10, json.dumps({"type": "message", "message": {"role": "user", "content": "vault code kumquat"}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    export_sessions(src, out, max_bytes=10_000_000)
    assert "kumquat" in (out / "s.md").read_text(encoding="utf-8")
    with path.open("r+b") as fh:
        fh.seek(fh.read().index(b"kumquat"))
        fh.write(b"*******")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    export_sessions(src, out, max_bytes=10_000_000)
    assert "kumquat" not in (out / "s.md").read_text(encoding="utf-8")


def _lock_fds(lock_path: Path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(lock_path):
                out.append(fd)
        except OSError:
            pass
    return out


def _other_holder(lock_path: Path) -> subprocess.Popen[str]:
    """Another process holding the update lock without writing a note (another tool, an older release)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT); "
         "fcntl.flock(fd,fcntl.LOCK_EX); print('held',flush=True); sys.stdin.readline()", str(lock_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_a_wait_for_the_qmd_update_lock_ended_by_a_signal_leaves_no_descriptor_open(tmp_path: Path) -> None:
    # An exception raised in the wait's sleep (Ctrl-C, a signal handler's) ended the wait with the lock file's
    # descriptor open for the process's lifetime: one more at each interrupted wait of a long-lived server.
    import signal

    from symi_memory_qmd.lock import UpdateLock

    lock = UpdateLock(tmp_path)
    other = _other_holder(lock.path)

    class Interrupted(Exception):
        pass

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Interrupted):
            lock.acquire(10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        assert other.stdin is not None
        other.stdin.write("done\n")
        other.stdin.flush()
        other.wait(10)
    assert _lock_fds(lock.path) == []
    lock.acquire(0)  # and the lock is free for this process's next update
    lock.release()


def test_the_qmd_update_lock_held_by_a_process_that_wrote_no_note_is_not_named_by_an_earlier_holders_pid(
        tmp_path: Path) -> None:
    # The note names the last update that wrote one: this process's own, finished, while another process holds the
    # lock now. Status said this process was updating, and the "waiting" warning named this process's own pid.
    from symi_memory_qmd.lock import UpdateBusy, UpdateLock, holder

    lock = UpdateLock(tmp_path / "a")
    lock.acquire(0)
    assert holder(lock.home) is not None and holder(lock.home)["thisProcess"] is True  # type: ignore[index]
    lock.release()
    other = _other_holder(lock.path)
    elsewhere = UpdateLock(tmp_path / "b")  # this process updating another qmd home meanwhile
    elsewhere.acquire(0)
    try:
        found = holder(lock.home)
        assert found is not None and found["thisProcess"] is False and found["pid"] in (None, other.pid), found
        with pytest.raises(UpdateBusy) as busy:
            lock.acquire(0)
        assert f"pid {os.getpid()}" not in str(busy.value)
    finally:
        elsewhere.release()
        assert other.stdin is not None
        other.stdin.write("done\n")
        other.stdin.flush()
        other.wait(10)
