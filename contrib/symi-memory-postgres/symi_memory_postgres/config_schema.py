"""The typed config this plugin owns (``memorySearch.store.postgres``), declared with the core's field DSL."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt, section

__all__ = ["HnswSettings", "PostgresSettings", "ScopeSettings"]


@attrs.define(kw_only=True)
class HnswSettings:
    m: int = opt("m", 16, lo=2, hi=100, doc="HNSW neighbours per node (pgvector m).")
    ef_construction: int = opt("efConstruction", 64, lo=4, hi=1000, doc="HNSW build-time beam width.")
    ef_search: int = opt("efSearch", 100, lo=1, hi=1000, doc="HNSW query-time beam width (hnsw.ef_search).")


@attrs.define(kw_only=True)
class ScopeSettings:
    shared: list = opt("shared", [], item="str", doc="Shared scopes this agent reads and syncs (rows of @NAME).")
    root: str = opt("root", "", doc="Folder holding one folder per shared scope (<root>/NAME/MEMORY.md, memory/).")


@attrs.define(kw_only=True)
class PostgresSettings:
    dsn: str = opt("dsn", "", doc="libpq DSN or URL of the server; empty means the SYMI_PG_DSN environment variable. "
                                  "Its password is never logged or shown; prefer PGPASSWORD or ~/.pgpass.")
    schema: str = opt("schema", "symi_memory", doc="PostgreSQL schema holding the tables (created on first use).")
    agent_id: str = opt("agentId", "", doc="Id the agent's rows are scoped by; empty means the agent id. "
                                           "Unique across the fleet.")
    pool_size: int = opt("poolSize", 4, lo=1, hi=256, doc="Connections per process.")
    connect_timeout: float = opt("connectTimeout", 5.0, lo=0.1, hi=600.0, doc="Seconds to wait for a connection.")
    search_timeout: float = opt("searchTimeout", 10.0, lo=0.1, hi=600.0,
                                doc="Seconds a search (or status) may take on the server before it answers with "
                                    "a one-line error (statement_timeout).")
    sync_timeout: float = opt("syncTimeout", 120.0, lo=0.1, hi=86400.0,
                              doc="Seconds each statement of a sync may take on the server, or wait for a lock "
                                  "(statement_timeout, lock_timeout); a server that does not answer at all is cut "
                                  "off 2 s later. The sync then fails with a one-line error and the next one "
                                  "finishes its work. An HNSW index build is exempt while the server answers.")
    hnsw: HnswSettings = section(HnswSettings, "hnsw")
    scopes: ScopeSettings = section(ScopeSettings, "scopes")
