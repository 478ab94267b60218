"""The postgres backend under hostile inputs, bad configuration and a server that goes away (a real server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_support import PgServer
from test_postgres_backend import make_workspace, open_pg, paths, rows

pytestmark = pytest.mark.postgres


def test_a_nul_byte_in_one_file_never_stops_indexing_the_others(tmp_path: Path, pg_server: PgServer,
                                                                 pg_schema: str) -> None:
    # PostgreSQL text refuses NUL: the file's chunk failed the COPY, and with it the whole sync.
    ws = make_workspace(tmp_path / "ws", {"MEMORY.md": "# M\n\nthe pelican roosts on the pier\n"})
    (ws / "memory").mkdir()
    (ws / "memory" / "nul.md").write_bytes(b"# N\n\na nul \x00 byte beside the heron\n")
    (ws / "memory" / "latin1.md").write_bytes(b"# L\n\ninvalid \xff\xfe bytes beside the ibis\n")
    with open_pg(tmp_path, pg_server, pg_schema, ws) as mem:
        report = mem.sync()
        assert report.errors == () and report.files_indexed == 3
        assert paths(mem, "pelican")[0] == "MEMORY.md"
        hits = mem.search("heron", min_score=0).results
        assert hits[0].path == "memory/nul.md" and "\ufffd byte beside the heron" in hits[0].snippet
        assert paths(mem, "ibis")[0] == "memory/latin1.md"
        st = mem.status()
        assert (st["files"], st["invalidUtf8Files"], st["lastError"], st["dirty"]) == (3, 1, None, False)
    assert rows(pg_server, f"SELECT count(*) FROM {pg_schema}.chunks WHERE text LIKE %s", ("%\ufffd%",)) == [(2,)]
