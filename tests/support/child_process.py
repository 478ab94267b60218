"""Run a test's Python snippet in another process on the same state dir and workspace.

``FILE_LIMIT`` is the snippet's prelude for a disk that fills up, simulated without root: ``limit(nbytes)`` sets
``RLIMIT_FSIZE`` with SIGXFSZ ignored, so a write past it fails with EFBIG as a full disk fails with ENOSPC;
``unlimit()`` gives the room back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

__all__ = ["FILE_LIMIT", "run_child"]

TESTS = Path(__file__).resolve().parent.parent

FILE_LIMIT = textwrap.dedent("""
    import json, resource, signal, sys
    from pathlib import Path
    from support.sqlite_memory import open_mem, write
    from symi_memory import tools
    from symi_memory.errors import SymiMemoryError

    def limit(nbytes):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, resource.RLIM_INFINITY))

    def unlimit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

""")


def run_child(prelude: str, body: str, *args: str) -> Any:
    """Run ``prelude`` then ``body`` (dedented) with ``args`` as ``sys.argv[1:]``; its last output line is JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(body), *args],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
