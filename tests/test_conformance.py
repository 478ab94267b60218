"""The backend conformance suite, run against every builtin backend that can run here."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from qmd_standin.helpers import PATIENT_SEARCH, QUICK_EMBED, real_qmd

from symi_memory.testing.conformance import *  # noqa: F403  (the suite's test functions)

QMD = real_qmd()
# A backend that cannot run here is reported as a skip with the reason, never silently dropped.
BACKENDS = [
    "in-memory",
    "builtin-sqlite",
    pytest.param("faiss", marks=pytest.mark.skipif(
        importlib.util.find_spec("faiss") is None, reason="faiss-cpu is not installed (the faiss extra)")),
    pytest.param("qmd-sidecar", marks=pytest.mark.skipif(
        QMD is None, reason="the real qmd CLI is not installed (bash .ci/install-qmd.sh)")),
]

pytestmark = pytest.mark.parametrize("symi_backend", BACKENDS, indirect=True)


@pytest.fixture
def symi_extra_config(symi_backend: str) -> dict[str, Any]:
    """qmd-sidecar runs the real qmd CLI, updated synchronously by sync(); no conformance check is about embed."""
    if symi_backend == "qmd-sidecar":
        return {"memory": {"qmd": {"command": QMD, "update": {"waitForBootSync": True, **QUICK_EMBED},
                                   "limits": PATIENT_SEARCH}}}
    return {}
