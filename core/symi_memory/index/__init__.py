"""The SQLite index shared by the SQLite-based backends (builtin-sqlite, faiss).

Files, chunks, meta, the embedding cache and the FTS5 keyword index live in
one SQLite file per agent (opened with apsw, which can load extensions).
Backends differ only in their vector side.
"""
