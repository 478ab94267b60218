"""The core's backend conformance suite, run against json-index."""

from __future__ import annotations

import pytest

from symi_memory.testing.conformance import *  # noqa: F403  (the suite's test functions)

pytestmark = pytest.mark.parametrize("symi_backend", ["json-index"], indirect=True)
