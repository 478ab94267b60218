"""The ``memorySearch.store.postgres`` settings and the DSN, which never shows its password."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from symi_memory.errors import BackendError, ConfigError

__all__ = ["PgSettings", "redact_dsn"]

NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# PostgreSQL's reserved and type/function-name keywords (pg_get_keywords() catcode R and T, PostgreSQL 17): as a bare
# schema name each is a syntax error ("user", "order", "table", ...).
RESERVED = frozenset("""
all analyse analyze and any array as asc asymmetric both case cast check collate column constraint create
current_catalog current_date current_role current_time current_timestamp current_user default deferrable desc
distinct do else end except false fetch for foreign from grant group having in initially intersect into lateral
leading limit localtime localtimestamp not null offset on only or order placing primary references returning select
session_user some symmetric system_user table then to trailing true union unique user using variadic when where
window with authorization binary collation concurrently cross current_schema freeze full ilike inner is isnull join
left like natural notnull outer overlaps right similar tablesample verbose""".split())


class PgSettingsError(ConfigError, BackendError):
    """A ``memorySearch.store.postgres`` setting (or ``SYMI_PG_DSN``) the backend cannot use: a config error (the CLI
    exits 2), and a :class:`BackendError` for callers that catch what opening the backend raises."""


#: The libpq parameters that hold a credential: never shown in status or messages.
SECRET_KEYS = ("password", "sslpassword")


def _conninfo(dsn: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        return conninfo_to_dict(dsn)
    except Exception:  # a malformed DSN: never echo it, it may hold the password
        raise PgSettingsError("postgres: the DSN cannot be parsed (check memorySearch.store.postgres.dsn or SYMI_PG_DSN)") from None


def redact_dsn(dsn: str) -> str:
    """The DSN as ``key=value`` pairs without the password (for status and messages)."""
    try:
        parts = _conninfo(dsn)
    except BackendError:
        return "(unparsable DSN)"
    return " ".join(f"{k}={v}" for k, v in sorted(parts.items()) if k not in SECRET_KEYS) or "(libpq defaults)"


@attrs.frozen(kw_only=True)
class PgSettings:
    dsn: str = attrs.field(repr=False)
    schema: str
    owner: str
    pool_size: int
    connect_timeout: float
    search_timeout: float
    sync_timeout: float
    m: int
    ef_construction: int
    ef_search: int
    shared: tuple[str, ...]
    shared_root: Path | None

    @property
    def password(self) -> str | None:
        pw = _conninfo(self.dsn).get("password")
        return str(pw) if pw else None

    @property
    def conninfo_keys(self) -> frozenset[str]:
        """The libpq parameters the DSN sets itself."""
        return frozenset(_conninfo(self.dsn))

    @property
    def safe_dsn(self) -> str:
        return redact_dsn(self.dsn)

    def scrub(self, text: str) -> str:
        """``text`` with the password (and the client key's, ``sslpassword``) replaced by ``***`` wherever it
        appears."""
        parts = _conninfo(self.dsn)
        for key in SECRET_KEYS:
            if parts.get(key):
                text = text.replace(str(parts[key]), "***")
        return text

    @classmethod
    def from_agent(cls, agent: Any, env: Mapping[str, str]) -> PgSettings:
        pg = ((agent.memory_search.get("store") or {}).get("postgres")) or {}
        dsn = pg.get("dsn") or env.get("SYMI_PG_DSN") or ""
        if not dsn:
            raise PgSettingsError("postgres: no DSN; set memorySearch.store.postgres.dsn or SYMI_PG_DSN "
                               "(e.g. postgresql://symi@db.example:5432/memory)")
        _conninfo(dsn)  # fail early, and without echoing it, on a malformed DSN
        schema = pg.get("schema") or "symi_memory"
        if not NAME_RE.match(schema):
            raise PgSettingsError(f"postgres: schema {schema!r} must be a lower-case SQL identifier")
        if schema in RESERVED or schema.startswith("pg_"):
            why = "is a reserved word in SQL" if schema in RESERVED else "starts with pg_, reserved for system schemas"
            raise PgSettingsError(f"postgres: schema {schema!r} {why}; set memorySearch.store.postgres.schema to another "
                               f"name (e.g. symi_{schema.removeprefix('pg_')})")
        shared = tuple(dict.fromkeys(s.strip() for s in pg.get("scopes", {}).get("shared", []) if s.strip()))
        for name in shared:
            if not re.match(r"^[\w.-]+$", name):
                raise PgSettingsError(f"postgres: shared scope name {name!r} may hold letters, digits, '_', '.', '-' only")
        root = (pg.get("scopes") or {}).get("root") or ""
        if shared and not root:
            raise PgSettingsError("postgres: scopes.shared needs scopes.root, the folder holding one folder per scope")
        owner = pg.get("agentId") or agent.id
        if owner.startswith("@"):
            # "@NAME" are the rows of the shared scope NAME: such an agent would sync its own files over the
            # scope's (deleting them) and every agent sharing the scope would read its private notes.
            raise PgSettingsError(f"postgres: agent id {owner!r} cannot scope rows: ids starting with '@' name shared "
                               "scopes; set memorySearch.store.postgres.agentId to a name without it")
        hnsw = pg.get("hnsw") or {}
        return cls(dsn=dsn, schema=schema, owner=owner, pool_size=max(1, int(pg.get("poolSize", 4))),
                   connect_timeout=float(pg.get("connectTimeout", 5.0)),
                   search_timeout=float(pg.get("searchTimeout", 10.0)),
                   sync_timeout=float(pg.get("syncTimeout", 120.0)), m=int(hnsw.get("m", 16)),
                   ef_construction=int(hnsw.get("efConstruction", 64)), ef_search=int(hnsw.get("efSearch", 100)),
                   shared=shared, shared_root=Path(root).expanduser().resolve() if root else None)
