"""The acceptance path: the installed plugin driven through the real ``symi-memory`` CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pg_support import PgServer

pytestmark = pytest.mark.postgres

SECRET = "hunter2secret"


def cli(state: Path, *args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYMI_")}
    env.update(SYMI_PG_DSN=dsn, SYMI_MEMORY_PLUGINS="symi_memory.testing.plugin")
    return subprocess.run([sys.executable, "-m", "symi_memory.cli", "--state-dir", str(state), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_note_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n\nanything\n", encoding="utf-8")
    return ws


def set_postgres(state: Path, dsn: str, *settings: tuple[str, str]) -> None:
    """`config set` the postgres backend without an embeddings provider, then each of ``settings`` (key, value)."""
    for key, value in (("plugins.slots.memory", "postgres"), ("agents.defaults.memorySearch.provider", "none"),
                       *settings):
        proc = cli(state, "config", "set", key, value, dsn=dsn)
        assert proc.returncode == 0, proc.stderr


def test_config_set_index_search_status(tmp_path: Path, pg_server: PgServer, pg_schema: str) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-01-01.md").write_text("# Jan\n\nquokka sighting at the harbour\n", encoding="utf-8")
    (ws / "MEMORY.md").write_text("# Memory\n\nPrefers oat milk.\n", encoding="utf-8")
    state = tmp_path / "state"
    dsn = f"postgresql://postgres:{SECRET}@127.0.0.1:{pg_server.port}/postgres"
    outputs: list[str] = []

    def run(*args: str, code: int = 0) -> str:
        proc = cli(state, "--workspace", str(ws), *args, dsn=dsn)
        outputs.extend([proc.stdout, proc.stderr])
        assert proc.returncode == code, proc.stderr
        return proc.stdout

    run("config", "set", "plugins.slots.memory", "postgres")
    run("config", "set", "agents.defaults.memorySearch.store.postgres.schema", pg_schema)
    run("config", "set", "agents.defaults.memorySearch.provider", "hash")
    assert "2 indexed" in run("index")
    found = json.loads(run("search", "quokka harbour", "--json"))
    assert found["results"][0]["path"] == "memory/2026-01-01.md" and found["mode"] == "hybrid"
    st = json.loads(run("status", "--json"))
    assert (st["backend"], st["files"], st["chunks"]) == ("postgres", 2, 2)
    assert st["vector"]["pgvector"] == "0.8.2"
    assert "postgres" in run("status")
    assert SECRET not in "".join(outputs)


def test_server_down_is_one_line(tmp_path: Path, pg_schema: str) -> None:
    ws, state = one_note_workspace(tmp_path), tmp_path / "state"
    dsn = f"postgresql://postgres:{SECRET}@127.0.0.1:{unused_port()}/postgres"
    set_postgres(state, dsn, ("agents.defaults.memorySearch.store.postgres.connectTimeout", "1"))
    index = cli(state, "--workspace", str(ws), "index", dsn=dsn)
    assert index.returncode == 1 and "Traceback" not in index.stderr
    errors = [line for line in index.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "unreachable" in errors[0] and "Connection refused" in errors[0]
    search = cli(state, "--workspace", str(ws), "search", "anything", "--json", dsn=dsn)
    assert search.returncode == 0 and "Traceback" not in search.stderr
    # One line says why (the search's own), not one per step that found the server down.
    said = search.stderr.strip().splitlines()
    assert len(said) == 1 and "unreachable" in said[0], search.stderr
    st = json.loads(cli(state, "--workspace", str(ws), "status", "--json", dsn=dsn).stdout)
    assert st["server"]["available"] is False and st["server"]["reachable"] is False
    assert "server  unreachable: postgres server unreachable" in cli(state, "--workspace", str(ws), "status", dsn=dsn).stdout
    out = json.loads(search.stdout)
    assert out["results"] == [] and "unreachable" in out["fallback"]["reason"]
    assert SECRET not in index.stderr + search.stdout + search.stderr


def test_bad_credentials_database_and_privileges_each_say_what_to_fix(tmp_path: Path, pg_server: PgServer,
                                                                      pg_schema: str) -> None:
    # A wrong password or database was reported as "server unreachable", sending the operator after the network;
    # a role without CREATE got a bare "permission denied"; `status` showed "server None (pid None)" for all.
    import psycopg

    db = "nocreate_" + pg_schema
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'plain') THEN "
                     "CREATE ROLE plain LOGIN; END IF; END $$")
        conn.execute(f"REVOKE CREATE ON DATABASE {db} FROM PUBLIC")
    with psycopg.connect(f"host=127.0.0.1 port={pg_server.port} user=postgres dbname={db}", autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    try:
        ws, state = one_note_workspace(tmp_path), tmp_path / "state"
        base = f"postgresql://plain:{SECRET}@127.0.0.1:{pg_server.port}"
        set_postgres(state, base, ("agents.defaults.memorySearch.store.postgres.schema", pg_schema),
                     ("agents.defaults.memorySearch.store.postgres.connectTimeout", "1"))
        for dsn, says, reachable in ((f"{base}/no_such_db", 'database "no_such_db" does not exist', True),
                                     (f"{base}/{db}", f"grant the role CREATE on the database (schema {pg_schema}",
                                      True)):
            index = cli(state, "--workspace", str(ws), "index", dsn=dsn)
            errors = [line for line in index.stderr.splitlines() if "error" in line]
            assert index.returncode == 1 and "Traceback" not in index.stderr and len(errors) == 1, index.stderr
            assert says in errors[0] and "unreachable" not in errors[0], errors[0]
            human = cli(state, "--workspace", str(ws), "status", dsn=dsn).stdout
            assert "server  unavailable: postgres server" in human and says in human and "pid None" not in human
            st = json.loads(cli(state, "--workspace", str(ws), "status", "--json", dsn=dsn).stdout)
            assert st["server"]["available"] is False and st["server"]["reachable"] is reachable
            assert SECRET not in index.stderr + human + json.dumps(st)
        assert "refused the connection" in cli(state, "--workspace", str(ws), "index", dsn=f"{base}/no_such_db").stderr
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


@pytest.mark.parametrize("dsn", [f"postgresql://postgres:{SECRET}@127.0.0.1:5432/memory",
                                 f"host=127.0.0.1 port=5432 user=postgres password={SECRET} dbname=memory",
                                 f"postgresql://postgres@127.0.0.1/memory?password={SECRET}&sslmode=disable"])
def test_config_set_get_show_mask_the_dsn_password(tmp_path: Path, dsn: str) -> None:
    """`config set/get/show` printed a DSN's password as it is, though a pasted `config show` never leaks a key."""
    state = tmp_path / "state"
    key = "agents.defaults.memorySearch.store.postgres.dsn"
    outputs = []
    for args in (("config", "set", "plugins.slots.memory", "postgres"), ("config", "set", key, dsn),
                 ("config", "get", key), ("config", "show"), ("config", "show", "--json")):
        proc = cli(state, *args, dsn="")
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)
    assert SECRET not in "".join(outputs)
    shown = json.loads(outputs[-1])["agents"]["defaults"]["memorySearch"]["store"]["postgres"]["dsn"]
    assert shown == dsn.replace(SECRET, "***")  # user, host and database still shown
    assert cli(state, "config", "get", key, "--show-secrets", dsn="").stdout.strip() == dsn


@pytest.mark.parametrize(("dsn", "schema", "said"), [("", "", "no DSN"), ("host='unclosed", "", "cannot be parsed"),
                                                      ("host=127.0.0.1", "user", "reserved word")])
def test_a_setting_the_backend_cannot_use_is_a_config_error(tmp_path: Path, dsn: str, schema: str, said: str) -> None:
    """No DSN, a DSN that does not parse or a schema SQL cannot take exited 1, as a runtime failure; the CLI's
    exit code for a config error is 2 (docs/operators.md, Command line)."""
    ws, state = one_note_workspace(tmp_path), tmp_path / "state"
    assert cli(state, "config", "set", "plugins.slots.memory", "postgres", dsn="").returncode == 0
    if schema:
        assert cli(state, "config", "set", "agents.defaults.memorySearch.store.postgres.schema", schema,
                   dsn="").returncode == 0
    for args in (("status",), ("index",), ("search", "anything")):
        proc = cli(state, "--workspace", str(ws), *args, dsn=dsn)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("symi-memory: error: postgres: ") and said in line, line


def test_a_dsn_of_the_wrong_type_is_not_echoed_in_the_config_error(tmp_path: Path) -> None:
    """`config set ...dsn '["postgresql://u:PASS@h/db"]'` (a list by mistake) printed the password in its error."""
    state = tmp_path / "state"
    assert cli(state, "config", "set", "plugins.slots.memory", "postgres", dsn="").returncode == 0
    proc = cli(state, "config", "set", "agents.defaults.memorySearch.store.postgres.dsn",
               f'["postgresql://postgres:{SECRET}@127.0.0.1/memory"]', dsn="")
    assert proc.returncode == 2 and "store.postgres.dsn: '***' is not a string" in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


def test_the_client_key_password_is_kept_out_of_status_and_errors(tmp_path: Path) -> None:
    """`sslpassword` (the client key's password) was shown in status's and the error's DSN; only `password` was
    left out."""
    ws, state, port = one_note_workspace(tmp_path), tmp_path / "state", unused_port()
    dsn = f"host=127.0.0.1 port={port} user=postgres sslpassword={SECRET} connect_timeout=1"
    set_postgres(state, dsn)
    said = []
    for args in (("status",), ("status", "--json"), ("index",)):
        proc = cli(state, "--workspace", str(ws), *args, dsn=dsn)
        said.append(proc.stdout + proc.stderr)
    assert f"port={port}" in said[0] and "unreachable" in said[0], said[0]
    assert SECRET not in "".join(said)
