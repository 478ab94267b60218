"""Another process's full build, as `status` and a waiting `index` see it: named, bounded, never a dead builder's.

Every builder here is a real `symi-memory index` process building on a slow loopback embedding endpoint.
"""

from __future__ import annotations

import calendar
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.loopback_http import LoopbackServer, Recorded, Reply
from support.sqlite_memory import write

from symi_memory import load_config
from symi_memory.index.rebuild import running_build
from symi_memory.manager import open_memory

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="telling a live build needs flock")

FILES = 60


class _Slow:
    """The embedding endpoint: a batch answered after ``delay`` s (a single text at once). A test sets ``delay`` to
    0 once no build needs to be caught running any more: the builds after that run at full speed."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __call__(self, req: Recorded) -> Reply:
        inputs = req.json()["input"]
        data = [{"index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3 + 0.01 * len(t)]} for i, t in enumerate(inputs)]
        return Reply(json={"data": data}, delay=self.delay if len(inputs) > 1 else 0)


def _slow(delay: float) -> _Slow:
    return _Slow(delay)


def _config(tmp_path: Path, url: str) -> Path:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[agents.defaults.memorySearch]\nprovider = "openai"\n'
                   f'[agents.defaults.memorySearch.remote]\nbaseUrl = "{url}/v1"\n'
                   'apiKey = "sk-test-build-state-0123456789"\n', encoding="utf-8")
    return cfg


def _cli(tmp_path: Path, ws: Path, url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "symi_memory.cli", "--config", str(_config(tmp_path, url)), "--workspace", str(ws),
            "--state-dir", str(tmp_path / "state"), *args]


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for i in range(FILES):
        write(ws, f"memory/n{i}.md", "\n".join(f"- note {i} line {j}: the marmot burrow {j * i}" for j in range(30)) + "\n")
    return ws


def _index(tmp_path: Path) -> Path | None:
    found = list((tmp_path / "state").rglob("*.sqlite"))
    return found[0] if found else None


def _builds(index: Path) -> list[Path]:
    return sorted(index.parent.glob(index.name + ".build-*"))


@contextmanager
def _builder(tmp_path: Path, ws: Path, url: str, *args: str,
             prefix: tuple[str, ...] = ()) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A real `symi-memory index` process, yielded once its full build holds its build file."""
    proc = subprocess.Popen([*prefix, *_cli(tmp_path, ws, url, "index", "--json", *args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        index = None
        while time.monotonic() < deadline and proc.poll() is None:
            index = _index(tmp_path)
            if index is not None and running_build(index) is not None:
                break
            time.sleep(0.05)
        assert index is not None and running_build(index) is not None, "the builder's build never started"
        yield proc, index
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def test_status_names_another_processs_running_build_in_cli_json_text_and_python(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", slow := _slow(0.4))
        before = time.time()
        with _builder(tmp_path, ws, server.url) as (builder, _index_path):
            st = json.loads(subprocess.run(_cli(tmp_path, ws, server.url, "status", "--json", "--no-server"),
                                           capture_output=True, text=True, timeout=60, check=True).stdout)
            build = st["build"]
            assert build["running"] is True and build["pid"] == builder.pid and build["thisProcess"] is False, build
            assert build["elsewhere"] is False, build
            started = calendar.timegm(time.strptime(build["startedAt"], "%Y-%m-%dT%H:%M:%SZ"))
            assert before - 2 <= started <= time.time() + 1, build
            assert isinstance(build["fileBytes"], int)
            text = subprocess.run(_cli(tmp_path, ws, server.url, "status", "--no-server"), capture_output=True,
                                  text=True, timeout=60, check=True).stdout
            assert f"a full build is running in process {builder.pid} since {build['startedAt']}" in text, text
            # The library's status in this process, on the same index.
            cfg = load_config(_config(tmp_path, server.url), state_dir=tmp_path / "state")
            with open_memory(cfg, workspace=ws) as mem:
                mine = mem.status()["build"]
                assert (mine["running"], mine["pid"], mine["thisProcess"]) == (True, builder.pid, False), mine
            assert builder.poll() is None, "the build ended before status was asked: make the endpoint slower"
            slow.delay = 0  # it may end now
            out, err = builder.communicate(timeout=120)
            assert builder.returncode == 0, err
        st = json.loads(subprocess.run(_cli(tmp_path, ws, server.url, "status", "--json", "--no-server"),
                                       capture_output=True, text=True, timeout=60, check=True).stdout)
        assert st["build"] == {"running": False, "pid": None, "thisProcess": False, "elsewhere": False,
                               "startedAt": None, "fileBytes": None}
        assert st["files"] == FILES
        text = subprocess.run(_cli(tmp_path, ws, server.url, "status", "--no-server"), capture_output=True,
                              text=True, timeout=60, check=True).stdout
        assert "full build is running" not in text


def test_index_waiting_on_a_build_that_outlasts_build_wait_exits_1_naming_the_builder(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", slow := _slow(1.0))
        with _builder(tmp_path, ws, server.url) as (builder, index):
            started = time.monotonic()
            follower = subprocess.run(_cli(tmp_path, ws, server.url, "index", "--build-wait", "2"),
                                      capture_output=True, text=True, timeout=120)
            took = time.monotonic() - started
            assert follower.returncode == 1, follower.stderr
            assert builder.poll() is None, "the build ended before the wait gave up: make the endpoint slower"
            err = follower.stderr
            assert f"pid {builder.pid}" in err and "waiting for that build to land, at most 2 s" in err, err
            assert "symi-memory: error: another process is still building the index" in err, err
            assert "--build-wait SECONDS" in err and f"kill {builder.pid}" in err, err
            assert took < 20, f"gave up after {took:.1f} s, not about 2 s"
            assert running_build(index) is not None  # the other build goes on
            slow.delay = 0  # and may end now
            out, err_b = builder.communicate(timeout=180)
            assert builder.returncode == 0, err_b
            assert json.loads(out)["filesIndexed"] == FILES


def test_index_on_a_terminal_shows_a_wait_line_naming_the_other_build(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", _slow(1.0))
        with _builder(tmp_path, ws, server.url) as (builder, _index_path):
            master, slave = pty.openpty()
            follower = subprocess.Popen(_cli(tmp_path, ws, server.url, "index", "--build-wait", "3"),
                                        stdout=subprocess.PIPE, stderr=slave, text=True)
            os.close(slave)
            seen = b""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.5)
                if ready:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError:  # the follower closed its end
                        break
                    if not chunk:
                        break
                    seen += chunk
                elif follower.poll() is not None:
                    break
            os.close(master)
            follower.communicate(timeout=30)
            shown = seen.decode("utf-8", "replace")
            assert follower.returncode == 1, shown
            assert "\r  wait 1/3 s for another build of the index: pid " + str(builder.pid) in shown, shown
            assert "MB so far" in shown, shown
            # The error starts on a line of its own, not after the wait line.
            assert "\r\nsymi-memory: error: another process is still building" in shown.replace("\033[K", ""), shown


def test_a_killed_builder_never_makes_index_wait_and_its_build_file_is_removed(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", slow := _slow(1.0))
        with _builder(tmp_path, ws, server.url) as (builder, index):
            # An `index` that is waiting for that build when its builder is SIGKILLed.
            log = tmp_path / "follower.err"
            with log.open("w") as err:
                follower = subprocess.Popen(_cli(tmp_path, ws, server.url, "index", "--json"),
                                            stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                deadline = time.monotonic() + 60
                while "waiting for that build" not in log.read_text() and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert f"pid {builder.pid}" in log.read_text(), log.read_text()
                leftover = _builds(index)
                assert leftover
                os.kill(builder.pid, signal.SIGKILL)
                builder.wait(timeout=30)
                killed_at = time.monotonic()
                slow.delay = 0  # the follower's own build: nothing to catch running in it
                out, _ = follower.communicate(timeout=120)
            finally:
                if follower.poll() is None:
                    follower.kill()
            assert follower.returncode == 0, log.read_text()
            report = json.loads(out)
            assert report["full"] and report["filesIndexed"] == FILES, report
            assert time.monotonic() - killed_at < 60
            assert _builds(index) == [], "the killed builder's file was left behind"

        # A reindex killed with nobody waiting: its file stays until an open; status does not take it for a
        # running build, and `index --force` that would give up at once on a live one rebuilds.
        slow.delay = 1.0
        with _builder(tmp_path, ws, server.url, "--force") as (second, index):
            second.send_signal(signal.SIGKILL)
            second.wait(timeout=30)
            slow.delay = 0
            assert _builds(index), "no leftover to test with"
            assert running_build(index) is None
            st = json.loads(subprocess.run(_cli(tmp_path, ws, server.url, "status", "--json", "--no-server"),
                                           capture_output=True, text=True, timeout=60, check=True).stdout)
            assert st["build"]["running"] is False
            started = time.monotonic()
            again = subprocess.run(_cli(tmp_path, ws, server.url, "index", "--json", "--force", "--build-wait", "0"),
                                   capture_output=True, text=True, timeout=120)
            assert again.returncode == 0, again.stderr
            assert "waiting" not in again.stderr, again.stderr
            assert json.loads(again.stdout)["full"]
            assert time.monotonic() - started < 60
            assert _builds(index) == []


def test_the_servers_sync_beside_a_build_that_outlasts_build_wait_answers_503_naming_the_builder(
        tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    from test_serve import running_server

    ws = _workspace(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "symi.toml").write_text(f'[agents.defaults]\nworkspace = "{ws}"\n[agents.defaults.memorySearch]\n'
                                     'provider = "hash"\n[agents.defaults.memorySearch.sync]\nbuildWaitSeconds = 1\n'
                                     'watch = false\n', encoding="utf-8")
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", _slow(1.0))
        with _builder(tmp_path, ws, server.url) as (builder, _index_path), running_server(state) as srv:
            code, body = srv.request("POST", "/api/agents/main/sync", {"force": True})
            assert code == 503, body
            assert f"pid {builder.pid}" in body["error"] and "still building" in body["error"], body
            code, st = srv.request("GET", "/api/agents/main/status")
            assert code == 200 and st["build"]["running"] and st["build"]["pid"] == builder.pid, st
            assert builder.poll() is None, "the build ended before the server's sync gave up: make it slower"


def _own_pid_namespace() -> tuple[str, ...]:
    """A command prefix that runs a process in a pid namespace of its own, as in another container."""
    import shutil

    prefix = ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc")
    if shutil.which("unshare") is None or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("no unshare for a process in a pid namespace of its own")
    return prefix


def test_a_builder_in_another_container_is_not_named_by_a_pid_that_is_another_process_here(tmp_path: Path) -> None:
    """A builder in another pid namespace (a container sharing the state dir) names itself pid 1 or so, which here
    is another process (this container's init): `index` told the operator to `kill 1`, status said process 1."""
    ws = _workspace(tmp_path)
    with LoopbackServer() as server:
        server.add("POST", "/v1/embeddings", _slow(1.0))
        with _builder(tmp_path, ws, server.url, prefix=_own_pid_namespace()) as (builder, index):
            named = running_build(index)
            assert named is not None and named.pid is not None and named.pid != builder.pid, named
            follower = subprocess.run(_cli(tmp_path, ws, server.url, "index", "--build-wait", "1"),
                                      capture_output=True, text=True, timeout=120)
            assert follower.returncode == 1, follower.stderr
            err = follower.stderr
            assert f"kill {named.pid}" not in err, err
            assert f"pid {named.pid} in another container or on another host" in err, err
            st = json.loads(subprocess.run(_cli(tmp_path, ws, server.url, "status", "--json", "--no-server"),
                                           capture_output=True, text=True, timeout=60, check=True).stdout)
            assert st["build"]["running"] and st["build"]["pid"] == named.pid and st["build"]["elsewhere"], st
            text = subprocess.run(_cli(tmp_path, ws, server.url, "status", "--no-server"), capture_output=True,
                                  text=True, timeout=60, check=True).stdout
            assert f"process {named.pid} in another container or on another host" in text, text
            assert builder.poll() is None, "the build ended before the checks: make the endpoint slower"
        # A builder here is still named for what it is.
        assert running_build(index) is None
