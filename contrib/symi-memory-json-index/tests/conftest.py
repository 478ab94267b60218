"""Run from a checkout without installing: make the package importable and load it as a plugin.

Installed (``pip install .``), the entry point registers it and this adds nothing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

if importlib.util.find_spec("symi_memory_json_index") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    # The documented opt-in for in-process plugins; subprocesses inherit it.
    os.environ["SYMI_MEMORY_PLUGINS"] = ",".join(
        p for p in (os.environ.get("SYMI_MEMORY_PLUGINS", ""), "symi_memory_json_index.hooks") if p)
