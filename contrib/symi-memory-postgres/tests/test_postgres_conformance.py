"""The core's backend conformance suite, unchanged, against the postgres backend on a real server."""

from __future__ import annotations

from typing import Any

import pytest
from pg_support import PgServer, pg_config

from symi_memory.testing.conformance import *  # noqa: F403  (the suite's test functions)

pytestmark = pytest.mark.parametrize("symi_backend", ["postgres"], indirect=True)


@pytest.fixture
def symi_extra_config(pg_server: PgServer, pg_schema: str) -> dict[str, Any]:
    return pg_config(pg_server, pg_schema)
