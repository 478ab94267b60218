"""The CLI's human output never hands a terminal the control characters stored in memory.

A memory file's text (and its name) comes from whoever wrote it: an agent's ``memory_append`` of text it read on a
web page, a synced folder. An escape sequence in it (OSC to retitle the terminal or write the clipboard, CSI to
clear the screen or hide what follows) would run in the terminal of whoever looks at ``search``, ``history``,
``status``, ``context`` or ``get``. The readable output shows such characters escaped (``\\x1b``); ``--json`` is
already escaped by JSON, and ``get`` / ``context`` piped into a file or program give the exact text.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\rhidden"
#: How it shows (a lone carriage return is read as a line break, as everywhere in symi-memory).
SHOWN_LINE = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m"


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\nzebra fact " + EVIL + "\n", encoding="utf-8")
    (ws / "memory" / "2026-03-04\x1b[31m.md").write_text("zebra daily note\n", encoding="utf-8")
    cfg = tmp_path / "c.toml"
    cfg.write_text('[agents.defaults.memorySearch]\nprovider = "none"\n', encoding="utf-8")
    return ws, cfg


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What the CLI writes to a pseudo-terminal (stdout and stderr)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "symi_memory.cli", *args], stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        proc.wait(timeout=60)
    return b"".join(chunks).decode("utf-8", "replace")


def test_search_history_and_status_show_stored_control_characters_escaped(cli, tmp_path: Path) -> None:
    ws, cfg = _workspace(tmp_path)
    base = ("--config", str(cfg), "--workspace", str(ws))
    code, out, err = cli(*base, "search", "zebra")
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out, out
    assert SHOWN_LINE in out, out
    assert "memory/2026-03-04\\x1b[31m.md" in out, out
    code, out, err = cli(*base, "history", "zebra fact")
    assert code == 0, err
    assert "\x1b" not in out and SHOWN_LINE in out, out
    code, out, err = cli(*base, "status")
    assert code == 0 and "\x1b" not in out, out
    code, out, err = cli(*base, "explain", "zebra daily")  # the candidates' file names
    assert code == 0, err
    assert "\x1b" not in out and "memory/2026-03-04\\x1b[31m.md" in out, out
    # --json is the tool output: JSON escapes the characters itself, and the text round-trips exactly.
    code, data, _ = cli(*base, "search", "zebra fact", "--json", json_out=True)
    assert code == 0 and EVIL.split("\r")[0] in data["results"][0]["snippet"]


def test_get_and_context_escape_on_a_terminal_and_stay_exact_when_piped(cli, tmp_path: Path) -> None:
    ws, cfg = _workspace(tmp_path)
    base = ["--config", str(cfg), "--workspace", str(ws)]
    code, out, _ = cli(*base, "get", "MEMORY.md")
    assert code == 0 and out == (ws / "MEMORY.md").read_text(encoding="utf-8")  # exact, for a pipe or a file
    env = {**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    shown = _on_a_terminal([*base, "get", "MEMORY.md"], env)
    assert "\x1b" not in shown and "\x07" not in shown and SHOWN_LINE in shown, repr(shown)
    shown = _on_a_terminal([*base, "context"], env)  # MEMORY.md is part of it
    assert "\x1b" not in shown and SHOWN_LINE in shown, repr(shown)
    # A path typed with an escape in it is echoed escaped in the error, too.
    shown = _on_a_terminal([*base, "get", "\x1b]0;x\x07.md"], env)
    assert "\x1b" not in shown and "\\x1b]0;x\\x07.md" in shown, repr(shown)
