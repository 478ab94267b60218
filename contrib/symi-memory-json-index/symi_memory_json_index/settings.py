"""The typed settings this plugin owns, under ``plugins.entries.json-index``."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt

__all__ = ["JsonIndexSettings"]


@attrs.define(kw_only=True)
class JsonIndexSettings:
    file_name: str = opt("fileName", "json-index.json", kind="str",
                         doc="Index file name, kept in <stateDir>/agents/<agentId>/.")
    max_chunks: int = opt("maxChunks", 100_000, lo=1, doc="Refuse to index more chunks than this (the file is read whole).")
