"""Incremental writes: replacing and deleting the rows of files, embedder ids, change notices."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from .db import new_index_id
from .fts_segments import merge_after_write
from .parts import StoreParts
from .records import ChunkRow, FileRow, IndexChange

__all__ = ["FileWrites"]

log = logging.getLogger("symi_memory.index")


class FileWrites(StoreParts):
    """Writes of files' rows in one transaction each, and the listeners told of them."""

    def _note_dims(self, dims: int) -> None:
        """sqlite-vec can answer KNN over vectors of this width (the first vector written sets it)."""
        if self.vec.available and self.vector_wanted and self.vec_dims is None:
            self.vec_dims = dims

    def _embedder(self, meta: dict[str, str] | None) -> int | None:
        """The ``embedders`` id of the identity being written (``meta``), else the stored one; writer only."""
        raw = (meta or {}).get("identity")
        if raw is None:
            row = self.conn.execute("SELECT value FROM meta WHERE key='identity'").fetchone()
            raw = row[0] if row else None
        try:
            ident = json.loads(raw) if raw else None
        except ValueError:
            ident = None
        if not isinstance(ident, dict) or ident.get("provider") in (None, "none"):
            return None
        return self._embedder_id(str(ident["provider"]), str(ident.get("model") or ""),
                                 str(ident.get("fingerprint") or ""))

    def _embedder_id(self, provider: str, model: str, fingerprint: str, *, create: bool = True) -> int | None:
        """The ``embedders`` id of this provider, model and fingerprint (inserted unless ``create`` is false, then
        None when it has none); writer only, under ``lock`` (inside the caller's transaction, when it has one).

        Kept per index id (meta ``index_id``, read here on the same connection): an index dropped and created
        again (another schema version's open) numbers its embedders from 1 again, in the order its syncs met them,
        and an id kept for the old index would name another provider's vectors, or none, in the new one. An index
        without an id (an older release's drop) keeps none."""
        key = (provider, model, fingerprint)
        conn = self.conn
        row = conn.execute("SELECT value FROM meta WHERE key = 'index_id'").fetchone()
        index_id = None if row is None else str(row[0])
        if index_id is None or index_id != self._embedder_ids_of:
            self._embedder_ids.clear()
            self._embedder_ids_of = index_id
        else:
            cached = self._embedder_ids.get(key)
            if cached is not None:
                return cached
        if create:
            conn.execute("INSERT OR IGNORE INTO embedders(provider, model, fingerprint) VALUES (?,?,?)", key)
        row = conn.execute("SELECT id FROM embedders WHERE provider=? AND model=? AND fingerprint=?", key).fetchone()
        if row is None:
            return None
        if index_id is not None:
            self._embedder_ids[key] = int(row[0])  # forgotten when a write rolls back (_forget_uncommitted)
        return int(row[0])

    def _forget_uncommitted(self, saved_dims: int | None) -> None:
        """After a rolled-back write: what it created (the vector width, embedder ids) is gone too."""
        self.vec_dims = saved_dims
        self._embedder_ids.clear()

    def replace_files(
        self,
        files: Iterable[tuple[FileRow, list[ChunkRow]]],
        *,
        remove: Iterable[str] = (),
        skipped: dict[str, str] | None = None,
        meta: dict[str, str] | None = None,
    ) -> int:
        """Write new rows for files (dropping their old rows) in one transaction."""
        removed: list[int] = []
        added: list[tuple[int, bytes]] = []
        with self.lock:
            saved_dims = self.vec_dims
            try:
                with self.write():
                    written = self._replace(files, remove, skipped, meta, removed, added)
            except BaseException:
                self._forget_uncommitted(saved_dims)
                raise
            self._notify(IndexChange(generation=self.generation_now(), full=False, removed=tuple(removed),
                                     added=tuple(added), index_id=self.index_id_now()))
        return written

    def _notify(self, change: IndexChange) -> None:
        for listener in list(self.listeners):
            try:
                listener(change)
            except Exception:  # a vector side's bookkeeping must never fail a sync
                log.exception("index change listener failed")

    def _replace(self, files: Iterable[tuple[FileRow, list[ChunkRow]]], remove: Iterable[str],
                 skipped: dict[str, str] | None, meta: dict[str, str] | None,
                 removed: list[int], added: list[tuple[int, bytes]]) -> int:
        written = 0
        embedder = self._embedder(meta)
        for path in remove:
            removed += self._delete_path(path)
        # The keyword index's rows of the chunks written, inserted together at the end: FTS5 writes the terms it
        # holds as a segment whenever another statement of the transaction opens a statement journal (an upsert,
        # say), so inserted between the other rows a 10,000-chunk write left 7 segments (fts_segments).
        # By rowid: a path written twice in one call deletes its first chunks before their rows went in, and its
        # new chunks take the same rowids.
        keyword_rows: dict[int, tuple[str, str]] = {}
        for frow, chunks in files:
            appended = frow.drop is not None
            if appended and not self._has_file(frow.path, frow.base):
                # Another process wrote this file's rows since this sync read them: what this sync read was
                # appended to other rows. Left as that process wrote them; their size tells the next sync to read.
                log.info("%s: written by another sync meanwhile; read again by the next one", frow.path)
                continue
            if appended:
                # Only what a transcript appended: the chunks its last chunk became are replaced, the rest kept.
                # A chunk's line analysis depends on its path, first line and text alone: computed anew, the same.
                kept: dict[tuple[int, str], bytes] = {}
                gone = self._delete_chunks(frow.drop or ())
                if frow.cut is not None:  # the chunks the window of a transcript past maxFileBytes left
                    gone += self._delete_chunks(str(r[0]) for r in self.conn.execute(
                        "SELECT id FROM chunks WHERE path = ? AND start_line < ?", (frow.path, frow.cut)).fetchall())
            else:
                kept = self._kept_analyses(self.conn, frow.path)
                gone = self._delete_path(frow.path)
            removed += gone
            for rowid in gone:
                keyword_rows.pop(rowid, None)
            self.conn.execute(
                "INSERT OR REPLACE INTO files(path, source, hash, mtime, size, chunks, bad_utf8, lines) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (frow.path, frow.source, frow.hash, frow.mtime, frow.size, len(chunks), frow.bad_utf8, frow.lines),
            )
            for c in chunks:
                rowid = self._insert_chunk(c, embedder, kept.get((c.start_line, c.text)), keyword_rows)
                if c.embedding is not None and self.listeners:
                    added.append((rowid, c.embedding))
                written += 1
            if appended:
                self.conn.execute("UPDATE files SET chunks = (SELECT COUNT(*) FROM chunks WHERE path = ?1) "
                                  "WHERE path = ?1", (frow.path,))
            if frow.tail is not None:
                self.conn.execute("INSERT OR REPLACE INTO transcript_tails(path, state) VALUES (?, ?)",
                                  (frow.path, frow.tail))
            elif appended or frow.source == "sessions":
                self.conn.execute("DELETE FROM transcript_tails WHERE path = ?", (frow.path,))
        if keyword_rows:
            self.conn.executemany("INSERT INTO chunks_fts(rowid, text, cjk) VALUES (?, ?, ?)",
                                  [(rowid, text, cjk) for rowid, (text, cjk) in keyword_rows.items()])
        if skipped is not None:
            self.conn.execute("DELETE FROM skipped")
            self.conn.executemany("INSERT INTO skipped(path, reason) VALUES (?, ?)", list(skipped.items()))
        if self.fts_error is None:
            merge_after_write(self.conn, written)  # a large write: the keyword index in one segment again
        for k, v in (meta or {}).items():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (k, v))
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES ('generation', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        # An index an older release rebuilt while this process ran has no id: it gets one with this write.
        self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('index_id', ?)", (new_index_id(),))
        return written

    def _has_file(self, path: str, hash: str | None) -> bool:
        """Whether the index holds ``path`` written with this ``hash`` (and its tail state)."""
        return self.conn.execute("SELECT 1 FROM files JOIN transcript_tails USING (path) WHERE path = ? AND hash = ?",
                                 (path, hash)).fetchone() is not None

    def _delete_chunks(self, ids: Iterable[str]) -> list[int]:
        """Delete the chunks with these ids (their keyword rows and units); returns their rowids."""
        rowids = [r[0] for i in ids for r in self.conn.execute("SELECT rowid FROM chunks WHERE id = ?", (i,))]
        if rowids:
            marks = ",".join("?" * len(rowids))
            if self.fts_error is None:
                self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", rowids)
            self.conn.execute(f"DELETE FROM chunk_units WHERE chunk IN ({marks})", rowids)
            self.conn.execute(f"DELETE FROM chunks WHERE rowid IN ({marks})", rowids)
        return rowids

    def transcript_tail(self, path: str) -> str | None:
        """The state the last sync stored for the transcript ``path`` (:attr:`~.records.FileRow.tail`), or None."""
        row = self._read("SELECT state FROM transcript_tails WHERE path = ?", (path,)).fetchone()
        return None if row is None else str(row[0])

    def _delete_path(self, path: str) -> list[int]:
        rowids = [r[0] for r in self.conn.execute("SELECT rowid FROM chunks WHERE path=?", (path,))]
        if rowids:
            marks = ",".join("?" * len(rowids))
            if self.fts_error is None:
                self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", rowids)
            self.conn.execute(f"DELETE FROM chunk_units WHERE chunk IN ({marks})", rowids)
            self.conn.execute("DELETE FROM chunks WHERE path=?", (path,))
        self.conn.execute("DELETE FROM files WHERE path=?", (path,))
        self.conn.execute("DELETE FROM transcript_tails WHERE path=?", (path,))
        return rowids

    def _kept_analyses(self, conn: Any, path: str) -> dict[tuple[int, str], bytes]:
        """``{(start line, text): stored line analysis}`` of the chunks of ``path`` in the index, those of
        this ``LINE_ANALYSIS_VERSION``. A chunk written again with the same path, start line and text has the
        same analysis (it depends on nothing else), so it keeps the stored one instead of analysing its lines
        again: a full reindex, a switch of provider, an edit further down the file."""
        from ..supersession import LINE_ANALYSIS_VERSION

        return {(start, text): blob for start, text, blob in conn.execute(
            "SELECT start_line, text, lines FROM chunks WHERE path = ?", (path,))
            if blob and blob[0] == LINE_ANALYSIS_VERSION}

    def _insert_chunk(self, c: ChunkRow, embedder: int | None, analysis: bytes | None = None,
                      keyword_rows: dict[int, tuple[str, str]] | None = None) -> int:
        """Insert one chunk (its vector into the cache, its units); its keyword index row is inserted here, or
        kept in ``keyword_rows`` (by rowid) for the caller to insert."""
        from ..supersession import line_analysis, plain_fact
        from .keyword import cjk_bigrams

        vector = None
        if c.embedding is not None and embedder is not None:
            vector = self.conn.execute(
                "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
                "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at RETURNING id",
                (embedder, c.hash, c.embedding, time.time()),
            ).fetchone()[0]  # type: ignore[index]
            self._note_dims(len(c.embedding) // 4)
        self.conn.execute(
            "INSERT OR REPLACE INTO chunks(id, path, source, start_line, end_line, hash, text, vector, lines, plain) "
            "VALUES (?,?,?,?,?,?,?,?,?,?)",
            (c.id, c.path, c.source, c.start_line, c.end_line, c.hash, c.text, vector,
             analysis or line_analysis(c.path, c.start_line, c.text), plain_fact(c.text)),
        )
        rowid = self.conn.last_insert_rowid()
        if vector is not None and embedder is not None and c.units:
            now = time.time()
            for u in c.units:  # each line's vector once in the cache (identical lines share it)
                self.conn.execute(
                    "INSERT INTO embedding_cache(embedder, hash, embedding, used_at) VALUES (?,?,?,?) "
                    "ON CONFLICT(embedder, hash) DO UPDATE SET used_at = excluded.used_at",
                    (embedder, u.hash, u.embedding, now),
                )
            self.conn.executemany(
                "INSERT OR IGNORE INTO chunk_units(chunk, start_line, end_line, vector) VALUES (?, ?, ?, "
                "(SELECT id FROM embedding_cache WHERE embedder = ? AND hash = ?))",
                [(rowid, u.start_line, u.end_line, embedder, u.hash) for u in c.units],
            )
        if self.fts_error is None:
            if keyword_rows is None:
                self.conn.execute("INSERT INTO chunks_fts(rowid, text, cjk) VALUES (?, ?, ?)",
                                  (rowid, c.text, cjk_bigrams(c.text)))
            else:
                keyword_rows[rowid] = (c.text, cjk_bigrams(c.text))
        return rowid

    def fill_line_analysis(self, batch: int = 500, should_stop: Callable[[], bool] | None = None) -> int:
        """Store what each chunk's text tells supersession once and for all where a chunk has none (an index from
        before the column) or one told by other rules: its line analysis (``chunks.lines``, of another
        ``LINE_ANALYSIS_VERSION``; meta ``lines_version`` records the version the index was filled with) and its
        plain-chunk answer (``chunks.plain``, a ``supersession.plain_fact`` of other versions; meta
        ``plain_version``). In short transactions of ``batch`` chunks, one pass over the chunks for both; returns
        how many chunks were filled. Searches meanwhile tell those chunks from their text, with the same result."""
        from ..supersession import LINE_ANALYSIS_VERSION, PLAIN_FACT, line_analysis, plain_fact

        version, plain_version = str(LINE_ANALYSIS_VERSION), str(PLAIN_FACT >> 1)
        kept = dict(self._read("SELECT key, value FROM meta WHERE key IN ('lines_version', 'plain_version')").fetchall())
        if kept.get("lines_version") != version or kept.get("plain_version") != plain_version:
            # What other rules stored is never read (search tells those chunks from their text instead): it is
            # refilled like what is missing.
            with self.write():
                for key, value in (("lines", version), ("plain", plain_version)):
                    if kept.get(f"{key}_version") != value:
                        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (f"{key}_pending",))
                        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (f"{key}_version", value))
        pending = {k for (k,) in self._read("SELECT key FROM meta WHERE key IN ('lines_pending', 'plain_pending')")}
        if not pending:
            return 0  # every chunk written since the columns exist has both
        lines, plain = "lines_pending" in pending, "plain_pending" in pending
        # line_analysis's encoding starts with its version byte; plain_fact's names its versions above its lowest bit.
        prefix = bytes((LINE_ANALYSIS_VERSION,))
        stale_lines = "(lines IS NULL OR substr(lines, 1, 1) != ?1)"
        stale_plain = "(plain IS NULL OR (plain >> 1) != ?2)"
        where = " OR ".join(([stale_lines] if lines else []) + ([stale_plain] if plain else []))
        filled, after = 0, -1
        while should_stop is None or not should_stop():
            with self.write():
                rows: list[Any] = self.conn.execute(
                    f"SELECT rowid, path, start_line, text, {stale_lines if lines else '0'}, "
                    f"{stale_plain if plain else '0'} FROM chunks WHERE rowid > ?3 AND ({where}) ORDER BY rowid "
                    "LIMIT ?4", (prefix, PLAIN_FACT >> 1, after, batch)).fetchall()
                if rows:
                    after = rows[-1][0]
                    self.conn.executemany("UPDATE chunks SET lines = ? WHERE rowid = ?",
                                          [(line_analysis(path, start, text), rowid)
                                           for rowid, path, start, text, old, _ in rows if old])
                    self.conn.executemany("UPDATE chunks SET plain = ? WHERE rowid = ?",
                                          [(plain_fact(text), rowid) for rowid, _, _, text, _, old in rows if old])
                if len(rows) < batch:
                    self.conn.execute("DELETE FROM meta WHERE key IN ('lines_pending', 'plain_pending')")
            filled += len(rows)
            if len(rows) < batch:
                break
        if filled:
            log.info("stored the line analysis or plain-chunk answer of %d chunks", filled)
        return filled

    def touch_file(self, path: str, mtime: float, size: int, lines: int) -> None:
        """Record a new mtime/size for a file whose content hash did not change."""
        with self.write():
            self.conn.execute("UPDATE files SET mtime=?, size=?, lines=? WHERE path=?", (mtime, size, lines, path))
            # A candidate row carries its file's mtime: rows kept for the generation are read again after this.
            self.conn.execute("INSERT INTO meta(key, value) VALUES ('touches', '1') "
                              "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")
