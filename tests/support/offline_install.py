"""Install a project from this repo like a user would: offline, into a directory only the tests put on a path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def pip_install_offline(project: Path, target: Path, scratch: Path) -> None:
    """``pip install --target target project`` with no index, no deps and no build isolation.

    ``scratch`` holds pip's cache and temporary files, so the run leaves nothing elsewhere.
    """
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
           "--disable-pip-version-check", "--target", str(target), str(project)]
    env = {**os.environ, "PIP_CACHE_DIR": str(scratch / "cache"), "TMPDIR": str(scratch)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"pip install of {project.name} failed:\n{proc.stdout}\n{proc.stderr}"


def install_plugin(site: Path, plugin_id: str, module: str, source: str) -> None:
    """Install plugin ``plugin_id`` (a ``symi_memory`` entry point -> one-file ``module`` holding ``source``) into
    ``site`` as a distribution: a dist-info with its metadata and entry points, found like any pip-installed one."""
    info = site / f"{module}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[symi_memory]\n{plugin_id} = {module}\n", encoding="utf-8")
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
