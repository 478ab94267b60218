"""The ``qmd-sidecar`` memory backend: qmd does retrieval, Markdown stays the truth.

When qmd is missing, crashes, hangs or prints garbage, the backend logs a
warning and serves the request from the builtin-sqlite backend, and tries
qmd again after ``retry_after_s``: a sidecar that recovers is used again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from symi_memory.citations import should_cite
from symi_memory.specs import MemoryBackend, StartableBackend
from symi_memory.types import BackendResult, Fallback, ReadResult, SearchQuery, SyncProgress, SyncReport
from symi_memory.workspace import PathRules

from .collections import CollectionSpec, derive_collections, reconcile_collections
from .export import export_sessions
from .parse import QmdParseError
from .paths import is_qmd_path, read_qmd_path
from .runner import QmdError, QmdRunner
from .scope import check_scope
from .search import QmdSearcher, apply_limits, hits_to_candidates
from .settings import QmdSettings
from .updater import UpdateScheduler

__all__ = ["QmdBackend"]

log = logging.getLogger("symi_memory.qmd")

FALLBACK_BACKEND = "builtin-sqlite"


class QmdBackend:
    """Follows :class:`symi_memory.specs.MemoryBackend`; see the module docstring."""

    def __init__(
        self,
        settings: QmdSettings,
        *,
        agent_id: str,
        workspace: Path,
        state_dir: Path,
        extra_paths: Sequence[str] = (),
        citations: str = "auto",
        fallback_factory: Callable[[], MemoryBackend | None] | None = None,
        retry_after_s: float = 60.0,
        start: bool = True,
    ) -> None:
        self.settings = settings
        self.agent_id = agent_id
        self.workspace = Path(workspace).expanduser().resolve()
        self.state_dir = Path(state_dir).expanduser()
        self.home = self.state_dir / "agents" / agent_id / "qmd"
        self.citations = citations
        self.retry_after_s = retry_after_s
        sess = settings.sessions
        self.sessions_source = self.state_dir / "agents" / agent_id / "sessions"
        self.export_dir = (
            Path(sess["exportDir"]).expanduser() if sess.get("exportDir") else self.home / "sessions"
        ).resolve()
        self.collections: list[CollectionSpec] = derive_collections(
            agent_id=agent_id,
            workspace=self.workspace,
            paths=settings.raw.get("paths") or [],
            include_default_memory=bool(settings.raw.get("includeDefaultMemory", True)),
            sessions_dir=self.export_dir if sess.get("enabled") else None,
        )
        self.by_name = {c.name: c for c in self.collections}
        inside = [str(c.path) for c in self.collections if c.source == "memory" and c.path != self.workspace]
        self.path_rules = PathRules.from_workspace(self.workspace, [*extra_paths, *inside])
        self.runner = QmdRunner(command=settings.command, home=self.home)
        limits = settings.limits
        self.searcher = QmdSearcher(self.runner, settings.search_mode, timeout_ms=int(limits["timeoutMs"]))
        self._fallback_factory = fallback_factory
        self._fallback: MemoryBackend | None = None
        self._lock = threading.Lock()
        self._ready: set[str] = set()
        self._reconciled = False
        self._needs_reconcile = True
        self._failure: str | None = None
        self._retry_at = 0.0
        self._started = False
        self._closed = False
        self._kick_thread: threading.Thread | None = None
        self.last_update: float | None = None
        self.scheduler = UpdateScheduler(
            work=self._update_work,
            interval_s=settings.interval_s,
            debounce_s=settings.debounce_s,
            embed_interval_s=settings.embed_interval_s,
        )
        if start:
            self.start()

    def start(self) -> None:
        """Arm the update timer and run the boot update (the manager calls this once).

        A fallback opened later is started too, so its watcher keeps it current.
        """
        upd = self.settings.update
        with self._lock:
            self._started = True
            fb = self._fallback
        if fb is not None:
            _start_backend(fb)
        self.scheduler.start(on_boot=bool(upd["onBoot"]), wait_for_boot=bool(upd["waitForBootSync"]))

    # ------------------------------------------------------------ updates

    def _update_work(self, reason: str, embed: bool) -> None:
        upd = self.settings.update
        try:
            if self.settings.sessions.get("enabled"):
                export_sessions(
                    self.sessions_source, self.export_dir, retention_days=self.settings.sessions.get("retentionDays")
                )
            if self._needs_reconcile or len(self._ready) < len(self.collections):
                pending = reconcile_collections(self.runner, self.collections, timeout_ms=int(upd["commandTimeoutMs"]))
                self._ready = {c.name for c in self.collections} - set(pending)
                self._needs_reconcile = False
                self._reconciled = True
            self.runner.run(["update"], timeout_ms=int(upd["updateTimeoutMs"]))
        except QmdError as exc:
            self._needs_reconcile = True
            self._mark_failed(f"qmd update failed: {exc}")
            raise
        self.last_update = time.time()
        if embed:
            try:
                self.runner.run(["embed"], timeout_ms=int(upd["embedTimeoutMs"]))
            except QmdError as exc:
                log.warning("qmd embed failed (keyword search still works): %s", exc)

    def sync(
        self,
        *,
        reason: str = "manual",
        force: bool = False,
        progress: Callable[[SyncProgress], None] | None = None,
    ) -> SyncReport:
        """Run ``qmd update`` now (a non-forced run inside ``debounceMs`` is skipped)."""
        started = time.monotonic()
        errors: tuple[str, ...] = ()
        try:
            self.scheduler.run(reason=reason, force=force or reason == "manual")
        except QmdError as exc:
            errors = (str(exc),)
        if self._fallback is not None:
            # While degraded, the fallback index must stay current too.
            self._fallback.sync(reason=reason, force=force, progress=progress)
        if progress is not None:
            progress(SyncProgress(phase="done", done=1, total=1))
        return SyncReport(reason=reason, seconds=time.monotonic() - started, errors=errors)

    # ------------------------------------------------------------- search

    def search(self, query: SearchQuery) -> BackendResult:
        decision = check_scope(self.settings.scope, query.session_key)
        if not decision.allowed:
            log.warning(
                "qmd search denied by memory.qmd.scope (channel=%s, chatType=%s, key=%r)",
                decision.channel,
                decision.chat_type,
                decision.normalised_key,
            )
            return BackendResult(candidates=(), mode="qmd", provider="qmd")
        if self._failure is not None and time.monotonic() < self._retry_at:
            return self._from_fallback(query, self._failure)
        if not self._reconciled:
            self._kick_update()
            return self._from_fallback(query, self._failure or "qmd collections are not indexed yet")
        ready = [c.name for c in self.collections if c.name in self._ready]
        limits = self.settings.limits
        try:
            hits = self.searcher.search(query.text, int(limits["maxResults"]), ready)
        except (QmdError, QmdParseError) as exc:
            self._needs_reconcile = True
            self._mark_failed(f"qmd search failed: {exc}")
            return self._from_fallback(query, self._failure or str(exc))
        self._clear_failure()
        candidates = apply_limits(
            hits_to_candidates(hits, self.by_name, self.workspace),
            max_results=int(limits["maxResults"]),
            max_snippet_chars=int(limits["maxSnippetChars"]),
            max_injected_chars=int(limits["maxInjectedChars"]),
            cite=should_cite(self.citations, query.session_key),
        )
        return BackendResult(candidates=tuple(candidates), mode="qmd", provider="qmd", calibrated=False)

    def _kick_update(self) -> None:
        """Start a background update (debounced) so a qmd that was down gets retried.

        At most one such thread at a time: searches arriving meanwhile add none.
        """
        with self._lock:
            if self._closed or (self._kick_thread is not None and self._kick_thread.is_alive()):
                return
            self._kick_thread = threading.Thread(
                target=self.scheduler.run_quietly, args=("retry",), name="symi-qmd-retry", daemon=True
            )
            self._kick_thread.start()

    def _mark_failed(self, reason: str) -> None:
        if self._failure is None:
            log.warning("%s; serving memory from %s until qmd recovers", reason, FALLBACK_BACKEND)
        self._failure = reason
        self._retry_at = time.monotonic() + self.retry_after_s

    def _clear_failure(self) -> None:
        if self._failure is not None:
            log.info("qmd answered again; no longer using %s", FALLBACK_BACKEND)
        self._failure = None

    def _get_fallback(self) -> MemoryBackend | None:
        with self._lock:
            if self._fallback is None and self._fallback_factory is not None and not self._closed:
                try:
                    self._fallback = self._fallback_factory()
                except Exception as exc:
                    log.warning("cannot open the %s fallback: %s", FALLBACK_BACKEND, exc)
                    self._fallback_factory = None
                    return None
                if self._fallback is not None:
                    fb = self._fallback
                    if self._started:
                        # A long-running host: the fallback watches the files like a primary would.
                        _start_backend(fb)
                    threading.Thread(
                        target=_first_sync, args=(fb,), name="symi-qmd-fallback-sync", daemon=True
                    ).start()
            return self._fallback

    def _from_fallback(self, query: SearchQuery, reason: str) -> BackendResult:
        fb = self._get_fallback()
        if fb is None:
            why = f"{reason}; no {FALLBACK_BACKEND} fallback is available"
            return BackendResult(candidates=(), mode="qmd", fallback=Fallback(from_="qmd", reason=why))
        result = fb.search(query)
        return attrs.evolve(result, fallback=Fallback(from_="qmd", reason=reason))

    # ------------------------------------------------------- memory_get

    def read_file(self, path: str, *, from_line: int | None = None, lines: int | None = None) -> ReadResult:
        if is_qmd_path(path):
            return read_qmd_path(path, self.by_name, from_line=from_line, lines=lines)
        return self.path_rules.read(path, from_line=from_line, lines=lines)

    # ------------------------------------------------------------- status

    def status(self) -> dict[str, Any]:
        failure = self._failure
        return {
            "backend": "qmd",
            "plugin": "qmd-sidecar",
            "provider": "qmd",
            "model": None,
            "searchMode": self.searcher.mode,
            "workspaceDir": str(self.workspace),
            "qmdHome": str(self.home),
            "collections": [
                {"name": c.name, "path": str(c.path), "pattern": c.pattern, "source": c.source, "ready": c.name in self._ready}
                for c in self.collections
            ],
            "lastUpdate": None if self.last_update is None else int(self.last_update * 1000),
            "lastUpdateError": self.scheduler.last_error,
            "dirty": not self._reconciled,
            "fallback": None if failure is None else {"from": "qmd", "reason": failure},
            "sessions": {"enabled": bool(self.settings.sessions.get("enabled")), "exportDir": str(self.export_dir)},
        }

    def close(self) -> None:
        """Stop the update timer and close (and so stop) the fallback, if one was opened."""
        with self._lock:
            self._closed = True
            fb, self._fallback = self._fallback, None
        self.scheduler.stop()
        if fb is not None:
            fb.close()


def _start_backend(backend: MemoryBackend) -> None:
    if isinstance(backend, StartableBackend):
        backend.start()


def _first_sync(backend: MemoryBackend) -> None:
    try:
        backend.sync(reason="qmd-fallback")
    except Exception as exc:  # e.g. closed meanwhile; the next search or the watcher tries again
        log.warning("%s fallback sync failed: %s", FALLBACK_BACKEND, exc)
