"""Running part of a test as a user without root's rights (root reads and writes any file).

``Unprivileged`` runs a block of the test itself as ``nobody``; ``run_without_dac_override`` runs a Python snippet in
a child process that, as root, has lost CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (through ``setpriv``), so chmod 000
holds for it as for any other user, while it still owns root's files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Unprivileged", "run_without_dac_override", "without_dac_override"]

TESTS = Path(__file__).resolve().parent.parent


class Unprivileged:
    """As root, run the block with the effective uid and gid of ``nobody`` (restored after); otherwise as is."""

    def __enter__(self) -> None:
        if os.geteuid() == 0:
            os.setegid(65534)
            os.seteuid(65534)

    def __exit__(self, *exc: object) -> None:
        if os.getuid() == 0:
            os.seteuid(0)
            os.setegid(0)


def without_dac_override() -> tuple[str, ...]:
    """The command prefix that runs a program without root's override of file permissions: ``setpriv`` as root
    (the test skips when it is not installed), nothing for any other user."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("as root, a folder is unreadable only without CAP_DAC_OVERRIDE; setpriv is not installed")
    return ("setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search")


def run_without_dac_override(body: str, *args: str, timeout: float = 120) -> Any:
    """Run ``body`` (dedented) with ``args`` as ``sys.argv[1:]`` in a child without root's override, tests/ on its
    path (``support``, ``qmd_standin``); it must exit 0, and its last output line is JSON, returned."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([*without_dac_override(), sys.executable, "-c", textwrap.dedent(body), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
