"""Running the qmd CLI: private home, timeouts, process-tree kills, output caps.

Every call runs with ``XDG_CONFIG_HOME``/``XDG_CACHE_HOME`` inside the agent's
qmd home (``QMD_CONFIG_DIR`` and ``INDEX_PATH`` of the caller's environment
left out) and the cwd there too, so a ``.qmd/`` folder in some parent of the
caller's cwd can never hijack the index. qmd is a Node program that may spawn
helpers, so each call gets its own session and a timeout kills the group.
"""

from __future__ import annotations

import logging
import os
import re
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "QmdError",
    "QmdFailed",
    "QmdMissing",
    "QmdOutput",
    "QmdOutputTooLarge",
    "QmdRunner",
    "QmdTimeout",
]

log = logging.getLogger("symi_memory.qmd")

DEFAULT_MAX_OUTPUT_BYTES = 8 * 1024 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: qmd settings of the caller's environment that would move qmd's config or index out of the private home.
_NOT_INHERITED = frozenset({"QMD_CONFIG_DIR", "INDEX_PATH"})
_ERROR_LINE = re.compile(r"^[A-Za-z]*Error: \S")  # "SqliteError: constraint failed", "Error: ..."


class QmdError(Exception):
    """A qmd call did not give a usable answer; the message says why."""


class QmdMissing(QmdError):
    """The qmd program could not be started."""


class QmdTimeout(QmdError):
    """A qmd call ran past its timeout and was killed."""


class QmdOutputTooLarge(QmdError):
    """A qmd call printed more than the output cap and was killed."""


class QmdFailed(QmdError):
    """qmd exited non-zero. ``stderr`` and ``stdout`` keep what it said."""

    def __init__(self, message: str, *, returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


@attrs.frozen(kw_only=True)
class QmdOutput:
    """What a successful call printed."""

    returncode: int
    stdout: str
    stderr: str


@attrs.define
class QmdRunner:
    """Runs ``command`` (a shell-split string such as ``"qmd"``) in ``home``."""

    command: str
    home: Path
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    extra_env: Mapping[str, str] = attrs.field(factory=dict)
    #: Descriptors each qmd process inherits: an update's lock (:mod:`.lock`), held while any of its qmd runs.
    pass_fds: tuple[int, ...] = ()

    @property
    def argv0(self) -> list[str]:
        parts = shlex.split(self.command)
        if not parts:
            raise QmdMissing("memory.qmd.command is empty; set it to the qmd executable, e.g. \"qmd\"")
        return parts

    def env(self) -> dict[str, str]:
        # QMD_CONFIG_DIR and INDEX_PATH (a user's own qmd setup, in the caller's environment) take precedence over
        # XDG_*: qmd would read and write that config and index instead of the ones in this home.
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(self.extra_env)
        env["XDG_CONFIG_HOME"] = str(self.home / "xdg-config")
        env["XDG_CACHE_HOME"] = str(self.home / "xdg-cache")
        env["NO_COLOR"] = "1"
        return env

    def run(self, args: Sequence[str], *, timeout_ms: int, check: bool = True) -> QmdOutput:
        """Run ``qmd <args>``; raise a :class:`QmdError` on any failure."""
        self.home.mkdir(parents=True, exist_ok=True)
        argv = [*self.argv0, *args]
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=self.home,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=self.pass_fds,
            )
        except OSError as exc:
            raise QmdMissing(
                f"cannot run {argv[0]!r} ({exc.strerror or exc}); install qmd or set memory.qmd.command"
            ) from None
        try:
            out, err = self._collect(proc, argv, timeout_ms / 1000.0)
        finally:
            if proc.poll() is None:
                _kill_tree(proc)
        stdout = out.decode("utf-8", errors="replace")
        stderr = err.decode("utf-8", errors="replace")
        log.debug("qmd %s -> %s in %.0f ms", " ".join(args[:2])[:120], proc.returncode, (time.monotonic() - started) * 1000)
        if check and proc.returncode != 0:
            said = [ln.strip() for ln in _ANSI.sub("", stderr.strip() or stdout.strip()).splitlines() if ln.strip()]
            # Node prints a crash as the source location, the code line and a caret before the error itself.
            first = next((ln for ln in said if _ERROR_LINE.match(ln)), said[0] if said else "no output")
            raise QmdFailed(
                f"qmd {args[0] if args else ''} exited {proc.returncode}: {first}",
                returncode=proc.returncode,
                stdout=stdout,
                stderr=stderr,
            )
        return QmdOutput(returncode=proc.returncode, stdout=stdout, stderr=stderr)

    def _collect(self, proc: subprocess.Popen[bytes], argv: list[str], timeout: float) -> tuple[bytes, bytes]:
        """Read stdout and stderr until exit, the deadline, or the output cap."""
        assert proc.stdout is not None and proc.stderr is not None
        what = " ".join(argv[len(self.argv0):][:2]) or "qmd"
        if len(what) > 120:  # a search's query: a pasted document is not repeated in every message
            what = what[:117] + "..."
        deadline = time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        total = 0
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    _kill_tree(proc)
                    raise QmdTimeout(f"qmd {what} timed out after {timeout * 1000:.0f} ms and was killed")
                for key, _ in sel.select(min(left, 0.25)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.extend(chunk)
                    total += len(chunk)
                    if total > self.max_output_bytes:
                        _kill_tree(proc)
                        raise QmdOutputTooLarge(
                            f"qmd {what} printed more than {self.max_output_bytes} bytes and was killed; "
                            "that is not a usable answer"
                        )
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
                raise QmdTimeout(f"qmd {what} timed out after {timeout * 1000:.0f} ms and was killed") from None
        finally:
            sel.close()
            proc.stdout.close()
            proc.stderr.close()
        return bytes(out), bytes(err)


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the whole process group the call started (qmd plus its helpers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log.warning("qmd process %s did not exit after SIGKILL", proc.pid)
