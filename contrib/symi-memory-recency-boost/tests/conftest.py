"""Make the package importable when these tests run from a checkout without installing it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("symi_memory_recency_boost") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
