"""The backend conformance suite, run against every builtin backend that can run here."""

from __future__ import annotations

import importlib.util

import pytest
from symi_memory.testing.conformance import *  # noqa: F403  (the suite's test functions)

BACKENDS = ["in-memory", "builtin-sqlite"]
if importlib.util.find_spec("faiss") is not None and importlib.util.find_spec("symi_memory_faiss.backend"):
    BACKENDS.append("faiss")

pytestmark = pytest.mark.parametrize("symi_backend", BACKENDS, indirect=True)
