"""The ``qmd-sidecar`` memory backend: qmd does retrieval, Markdown stays the truth.

When qmd is missing, crashes, hangs or prints garbage, the backend logs a
warning and serves the request from the builtin-sqlite backend, and tries
qmd again after ``retry_after_s``: a sidecar that recovers is used again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from symi_memory import forking
from symi_memory.sessions import SESSIONS_PREFIX, list_session_files
from symi_memory.specs import DEFAULT_BACKEND, MemoryBackend, StartableBackend
from symi_memory.types import (
    BackendResult,
    Fallback,
    ReadResult,
    SearchQuery,
    SnippetBudget,
    SyncProgress,
    SyncReport,
)
from symi_memory.workspace import (
    NOT_UTF8,
    AbsentRoot,
    PathRules,
    absent_roots,
    emptied_why,
    folder_device,
    glob_match,
    printable_path,
    why_unlistable,
)

from .collections import CollectionSpec, derive_collections, reconcile_collections
from .export import DEFAULT_MAX_BYTES, export_sessions
from .lock import UpdateBusy, UpdateLock, holder
from .parse import QmdParseError, added_changes, update_changes, update_counts
from .paths import display_path, is_qmd_path, read_qmd_path
from .runner import QmdError, QmdRunner
from .scope import check_scope
from .search import QmdSearcher, hits_to_candidates
from .settings import QmdSettings
from .updater import UpdateScheduler, UpdateSkipped

__all__ = ["QmdBackend"]

log = logging.getLogger("symi_memory.qmd")

FALLBACK_BACKEND = DEFAULT_BACKEND
STATE_FILE = "symi-state.json"
#: The name of the temporary config folder an update leaving out a collection away runs ``qmd update`` over.
UPDATE_CONFIG_PREFIX = "update-config-"
#: Syncs that never wait for another process's qmd update: background ones and a search's (as with the builtin's
#: full builds, ``symi_memory.index.indexer``), plus this plugin's boot and retry updates.
NO_WAIT_REASONS = frozenset({"search", "stale", "stale-search", "watch", "interval", "session-start", "cli-search",
                             "append", "serve-open", "boot", "retry"})
#: A lock found held is looked at again for this long first: a ``status`` elsewhere holds it for a moment.
BUSY_GRACE_S = 0.5


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
        fallback_factory: Callable[[], MemoryBackend | None] | None = None,
        retry_after_s: float = 60.0,
        start: bool = True,
        max_transcript_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.settings = settings
        self.agent_id = agent_id
        self.workspace = Path(workspace).expanduser().resolve()
        self.state_dir = Path(state_dir).expanduser()
        self.home = self.state_dir / "agents" / agent_id / "qmd"
        self.retry_after_s = retry_after_s
        #: ``memorySearch.sync.maxFileBytes``: the most message text one transcript's export holds.
        self.max_transcript_bytes = max_transcript_bytes
        sess = settings.sessions
        self.sessions_source = self.state_dir / "agents" / agent_id / "sessions"
        self.export_dir = (
            Path(sess["exportDir"]).expanduser() if sess.get("exportDir") else self.home / "sessions"
        ).resolve()
        self.collections: list[CollectionSpec] = derive_collections(
            agent_id=agent_id,
            workspace=self.workspace,
            paths=_with_extra_paths(settings.raw.get("paths") or [], extra_paths, self.workspace),
            include_default_memory=bool(settings.raw.get("includeDefaultMemory", True)),
            sessions_dir=self.export_dir if sess.get("enabled") else None,
        )
        self.by_name = {c.name: c for c in self.collections}
        #: The extra paths, resolved as their collections' roots are: the core's warning names them when absent.
        self._extra_roots = {_resolved(str(e), self.workspace) for e in extra_paths if str(e).strip()}
        self.path_rules = PathRules.from_workspace(self.workspace, extra_paths)
        for c in self.collections:
            # memory.qmd.paths[] inside the workspace: readable by their shown path, within their mask.
            if c.source == "memory" and c.path != self.workspace and c.path != self.workspace / "memory":
                self.path_rules.add_directory(c.path, c.pattern)
        self.runner = QmdRunner(command=settings.command, home=self.home)
        limits = settings.limits
        self.searcher = QmdSearcher(self.runner, settings.search_mode, timeout_ms=int(limits["timeoutMs"]))
        self._fallback_factory = fallback_factory
        self._fallback: MemoryBackend | None = None
        self._lock = threading.Lock()
        self._ready: set[str] = set()
        #: ``.on`` set by a forced sync (``index --force``) for its own update, in its own thread (the scheduler runs
        #: a sync's update in the caller's thread): a root folder that looks emptied is updated (its documents
        #: dropped) instead of left out (:meth:`_emptied`). Per thread: an update of another thread (the interval
        #: timer, a search's or another client's sync) is not forced by it, nor does a sync of another thread
        #: starting meanwhile take the force from it.
        self._forcing = threading.local()
        #: ``{folder: st_dev}`` of each root folder as the last update listed files from it (:meth:`_roots`).
        self._devices: dict[str, int] = {}
        self._reconciled = False
        self._needs_reconcile = True
        self._failure: str | None = None
        self._retry_at = 0.0
        self._started = False
        self._closed = False
        self._closing = threading.Event()  # set by close(): a wait for another process's update ends
        self._kick_thread: threading.Thread | None = None
        forking.track(self)
        self.last_update: float | None = None
        self.export_error: str | None = None
        self.export_partial: dict[str, str] = {}  # transcripts exported in part: {sessions/<name>.jsonl: why}
        self.unnamed: dict[str, str] = {}  # files qmd skips for their name (not valid UTF-8): {shown path: why}
        self._fingerprint_done: str | None = None  # of the files as this process's last update began
        self._counts: dict[str, int] | None = None  # documents per collection after that update
        # What that update did per collection (new, updated, unchanged, removed), for the sync report.
        self._changes: dict[str, tuple[int, int, int, int]] = {}
        self._last_state: dict[str, Any] | None = None
        self.scheduler = UpdateScheduler(
            work=self._update_work,
            interval_s=settings.interval_s,
            debounce_s=settings.debounce_s,
            embed_interval_s=settings.embed_interval_s,
        )
        saved = self._saved_state()
        self.last_embed_at: float | None = saved.get("lastEmbed")
        self.embed_error: str | None = saved.get("embedError")
        if isinstance(self.last_embed_at, (int, float)):
            # `qmd embed` is paced by embedInterval across processes too, not re-run by every CLI command.
            ago = max(0.0, time.time() - self.last_embed_at)
            self.scheduler.last_embed = self.scheduler.clock() - ago
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
        """One update, holding the qmd home's update lock (:mod:`.lock`) across processes.

        A sync someone waits for (``index``, ``sync()``) waits for another process's update, then runs its own;
        a background one, or a search's, skips while another runs (:class:`~.updater.UpdateSkipped`): searches
        meanwhile use qmd's index as it is.
        """
        self._changes = {}  # until this update reports what it did (none, when it does not run qmd)
        lock = UpdateLock(self.home)
        try:
            try:
                fd = lock.acquire(BUSY_GRACE_S, self._closing)
            except UpdateBusy as busy:
                if reason.split(" ")[0] in NO_WAIT_REASONS or self._closing.is_set():
                    raise
                log.warning("%s; waiting for it (at most %.0f s)", busy, self._lock_wait_s())
                # close() ends the wait: a stopping server or an agent closed must not wait ~6 min to exit.
                fd = lock.acquire(self._lock_wait_s(), self._closing)
        except OSError as exc:  # a qmd home that cannot be written: qmd could not update its index there either
            raise QmdError(f"cannot take the qmd update lock {lock.path}: {exc.strerror or exc}") from None
        try:
            self._update_locked(embed, attrs.evolve(self.runner, pass_fds=(fd,)))
        finally:
            lock.release()

    def _lock_wait_s(self) -> float:
        """How long a sync waits for another process's update: as long as that update may take."""
        upd = self.settings.update
        return (int(upd["updateTimeoutMs"]) + int(upd["embedTimeoutMs"]) + 4 * int(upd["commandTimeoutMs"])) / 1000.0

    def _held_while_away(self) -> int:
        """How many documents qmd holds (as the last update, in any process, counted them) from the workspace's
        collections while the workspace is not a folder (renamed, removed, unmounted for a while): ``qmd update``
        would take every one for deleted, so it waits until the workspace is back (the manager's warning says that
        its content stays searchable). 0 while it is there, or when nothing was indexed from it (a mistyped path:
        the other collections are updated as before)."""
        if os.path.isdir(self.workspace):
            return 0
        counts = self._saved_state().get("files") or {}
        ws = self.workspace
        return sum(int(counts.get(c.name) or 0) for c in self.collections
                   if c.source == "memory" and (c.path == ws or ws in c.path.parents))

    def _update_locked(self, embed: bool, runner: QmdRunner) -> None:
        upd = self.settings.update
        held = self._held_while_away()
        if held:
            log.info("qmd update waits until the workspace %s is back: it would drop the %d documents indexed from "
                     "there", self.workspace, held)
            return
        # Listed before anything is read: a file changed after this makes the next staleness check see it.
        fingerprint, self.unnamed = self._scan()
        self.export_error = None
        if self.settings.sessions.get("enabled"):
            try:
                exported = export_sessions(
                    self.sessions_source, self.export_dir, retention_days=self.settings.sessions.get("retentionDays"),
                    max_bytes=self.max_transcript_bytes,
                )
                self.export_partial = exported.partial
            except OSError as exc:
                # The transcripts' collection keeps its last export; memory is updated all the same.
                self.export_error = f"cannot export session transcripts to {self.export_dir}: {exc.strerror or exc}"
                log.warning("%s", self.export_error)
        added: dict[str, str] = {}  # what `qmd collection add` said of each collection it added now
        try:
            if self._needs_reconcile or len(self._ready) < len(self.collections):
                # A collection qmd cannot read all of is not added now: qmd indexes it as it adds it, and fails.
                unread = {c.name for c, _, folder in self._away() if folder is not None}
                pending = reconcile_collections(runner, self.collections, timeout_ms=int(upd["commandTimeoutMs"]),
                                                added=added, later=unread)
                self._ready = {c.name for c in self.collections} - set(pending)
                self._needs_reconcile = False
                self._reconciled = True
            away = {c.name for c, _, _ in self._away() if c.name in self._ready}
            emptied = [] if getattr(self._forcing, "on", False) else self._emptied()
            away |= {c.name for _, cols in emptied for c in cols if c.name in self._ready}
            out = self._run_update(runner, away, timeout_ms=int(upd["updateTimeoutMs"]))
        except QmdError as exc:
            self._needs_reconcile = True
            self._mark_failed(f"qmd update failed: {exc}")
            self._save_state(update_error=str(exc))
            raise
        self.last_update = time.time()
        self._fingerprint_done = fingerprint
        self._counts = update_counts(out.stdout)
        before = self._saved_state().get("files")
        if isinstance(before, dict):  # not updated: what qmd holds from them is what the last update counted
            self._counts.update({n: int(before[n]) for n in away if isinstance(before.get(n), int)})
        # Each root folder's device as files were listed from it now, by its path (as builtin-sqlite records them:
        # a workspace or entry set to another folder is not that folder unmounted): a folder left out keeps the one
        # recorded; a folder no longer a root is forgotten.
        recorded, roots = self._saved_state().get("devices") or {}, self._roots()
        self._devices = {str(f): recorded[str(f)] for _, f, _ in roots if isinstance(recorded.get(str(f)), int)}
        for _key, folder, cols in roots:
            if any(c.name not in away and self._counts.get(c.name) for c in cols) \
                    and (dev := folder_device(folder)) is not None:
                self._devices[str(folder)] = dev
        self._changes = {k: v for k, v in update_changes(out.stdout).items() if k in self.by_name}
        for name, said in added.items():
            # qmd indexed an added collection's files as it added it: the update then finds them unchanged.
            at_add, now = added_changes(said), self._changes.get(name)
            if at_add is not None and now is not None:
                new, updated, unchanged, removed = now
                self._changes[name] = (at_add[0] + new, at_add[1] + updated,
                                       max(0, unchanged - at_add[0] - at_add[1]), at_add[3] + removed)
        self._clear_failure()
        if embed:
            self.last_embed_at = time.time()
            try:
                runner.run(["embed"], timeout_ms=int(upd["embedTimeoutMs"]))
                self.embed_error = None
            except QmdError as exc:
                # Said once: the same failure in a later update or process (a GPU that never comes
                # up) is only logged at debug level; `status` keeps showing it.
                first = self.embed_error is None and self._saved_state().get("embedError") != str(exc)
                (log.warning if first else log.debug)(
                    "qmd embed failed, so vector search is off (keyword search still works); retried every "
                    "memory.qmd.update.embedInterval: %s", exc)
                self.embed_error = str(exc)
        self._save_state(update_error=None)

    def _away(self) -> list[tuple[CollectionSpec, str, Path | None]]:
        """The memory collections qmd cannot update now, why, and the folder that is why when it is not the
        ``memory.qmd.paths[]`` or extra-path entry itself (None then).

        An entry's folder (or file) gone (renamed, removed, unmounted for a while), a file in place of the folder, a
        folder on the way this user may not enter, or a folder it may not list: ``qmd update`` would take every
        document indexed from there for deleted, or fail as a whole. So does any folder qmd would list below a
        collection's folder (the workspace's own included) that it may not (chmod 000, another user's): one
        ``EACCES`` fails the whole update, every collection's. Such a collection is left out of the update instead
        (:meth:`_run_update`), so what qmd holds from it stays searchable until it is back or can be read, and the
        others are updated, as builtin-sqlite keeps an absent or unreadable folder's files."""
        out: list[tuple[CollectionSpec, str, Path | None]] = []
        for c in self.collections:
            if c.source != "memory":
                continue  # the transcripts' export: this backend's own folder
            if c.root is not None:
                found = absent_roots(self.workspace, [str(c.root)])
                # One inside a workspace that is gone is the workspace's (listed only for it).
                gone = [r for r in found if r.kind != "workspace" or self.workspace in c.root.parents]
                if gone:
                    out.append((c, gone[0].why, None))
                    continue
                if c.root.is_dir():
                    try:
                        with os.scandir(c.root):
                            pass
                    except OSError as exc:
                        out.append((c, f"cannot be read ({exc.strerror or exc})", None))
                        continue
            below = _unlistable(c.path, c.pattern)
            if below is not None:
                out.append((c, below[1], below[0]))
        return out

    def _roots(self) -> list[tuple[str, Path, list[CollectionSpec]]]:
        """``(key, folder, collections)`` of each root folder qmd lists memory from: the workspace (its own
        collections), its ``memory/`` folder (often a mount of its own) and each ``memory.qmd.paths`` entry or extra
        path that is a folder: the roots builtin-sqlite records the devices of (:func:`~symi_memory.workspace.
        root_devices`)."""
        own = [c for c in self.collections if c.source == "memory" and c.root is None]
        out: list[tuple[str, Path, list[CollectionSpec]]] = []
        if own:
            out.append(("workspace", self.workspace, own))
        out += [(c.name, c.path, [c]) for c in own if c.path == self.workspace / "memory"]
        out += [(c.name, c.path, [c]) for c in self.collections
                if c.source == "memory" and c.root is not None and c.root == c.path]
        return out

    def _emptied(self) -> list[tuple[AbsentRoot, list[CollectionSpec]]]:
        """The root folders (:meth:`_roots`) that are there but list no memory file while qmd holds documents from
        them, and look unmounted or emptied by accident as builtin-sqlite judges it
        (:func:`~symi_memory.workspace.emptied_why`: on another device than when their files were listed, or empty
        while qmd holds 10 or more documents from them), with their collections. ``qmd update`` would drop every
        document indexed from there: they are left out of it (:meth:`_run_update`) until files are back, or a forced
        sync (``index --force``, the operator's word that they were deleted) updates them."""
        saved = self._saved_state()
        counts, devices = saved.get("files") or {}, saved.get("devices") or {}
        away = {c.name for c, _, _ in self._away()}
        out: list[tuple[AbsentRoot, list[CollectionSpec]]] = []
        for key, folder, cols in self._roots():
            if any(c.name in away for c in cols) or not folder.is_dir():
                continue
            held = sum(int(counts.get(c.name) or 0) for c in cols)
            why = emptied_why(str(folder), held, devices.get(str(folder))) if held else None
            if why is None or any(_any_memory_file(c.path, c.pattern) for c in cols):
                continue
            kind = "workspace" if key == "workspace" else "extra path" if _single_root(cols) in self._extra_roots else "folder"
            out.append((AbsentRoot(kind, str(folder), why.replace("the index holds", "qmd holds"), ""), cols))
        return out

    def _after_fork_in_child(self) -> None:
        """In a forked child: a lock a parent thread held stays held, and the parent's kick thread is not here."""
        self._lock = threading.Lock()
        self._kick_thread = None

    def _away_warnings(self) -> tuple[str, ...]:
        """What a sync and ``status()`` say of :meth:`_away` that the core does not (it names an absent extra
        path; a ``memory.qmd.paths`` entry, and a folder that is there but cannot be read, are this backend's)."""
        out = []
        folders: dict[tuple[Path, str], list[str]] = {}
        for c, why, folder in self._away():
            if folder is not None:
                folders.setdefault((folder, why), []).append(c.name)
                continue
            assert c.root is not None
            if c.root in self._extra_roots and not why.startswith("cannot be read"):
                continue  # the core's warning says it, and it is true here too
            setting = "memorySearch.extraPaths" if c.root in self._extra_roots else "memory.qmd.paths"
            until = "it can be read again" if why.startswith("cannot be read") else "it is back"
            out.append(f"{setting} entry {printable_path(str(c.root))} {why}: nothing new is indexed from it; what "
                       f"qmd already holds from it (collection {c.name}) stays searchable until {until} or leaves "
                       f"{setting}")
        out += [root.warning for root, _ in self._emptied()]
        sessions = next((c for c in self.collections if c.source == "sessions"), None)
        unlisted = why_unlistable(self.sessions_source) if sessions is not None else None
        if sessions is not None and unlisted is not None:
            # The export keeps every transcript's last export meanwhile (export_sessions).
            out.append(f"folder {printable_path(str(self.sessions_source))} {unlisted}: nothing new is indexed from it; "
                       f"what qmd already holds from it (collection {sessions.name}) stays searchable until it can be "
                       "read again")
        for (folder, why), names in folders.items():
            one = len(names) == 1
            out.append(f"folder {printable_path(str(folder))} {why}: qmd updates nothing of collection{'' if one else 's'} "
                       f"{', '.join(names)} meanwhile (it would fail every update); what qmd already holds from "
                       f"{'it' if one else 'them'} stays searchable until it can be read again")
        return tuple(out)

    def _run_update(self, runner: QmdRunner, away: set[str], *, timeout_ms: int) -> Any:
        """``qmd update``; with collections :meth:`_away`, over a config that leaves them out.

        One ``qmd update`` updates every collection its config lists, and takes the files of one whose folder is
        gone for deleted. ``QMD_CONFIG_DIR`` points this one run at a config listing the other collections (qmd
        keeps the collections' documents in its index, not its config); every other qmd call, the next update
        included, reads the config in the qmd home, which lists them all. The config's folder
        (``update-config-*`` in the qmd home) goes when the run ends; one a killed process left behind goes at the
        next update, which holds the update lock that the qmd of any update still running holds too.
        """
        _clear_update_configs(self.home)
        if not away:
            return runner.run(["update"], timeout_ms=timeout_ms)
        log.info("qmd update leaves out %s until %s back: it would drop what was indexed from there",
                 ", ".join(sorted(away)), "it is" if len(away) == 1 else "they are")
        listed = {c.name: {"path": str(c.path), "pattern": c.pattern}
                  for c in self.collections if c.name in self._ready and c.name not in away}
        with tempfile.TemporaryDirectory(prefix=UPDATE_CONFIG_PREFIX, dir=self.home) as tmp:
            # JSON is YAML: qmd reads it as its index.yml.
            Path(tmp, "index.yml").write_text(json.dumps({"collections": listed}), encoding="utf-8")
            only = attrs.evolve(runner, extra_env={**runner.extra_env, "QMD_CONFIG_DIR": tmp})
            return only.run(["update"], timeout_ms=timeout_ms)

    def _spec_key(self) -> list[list[str]]:
        """The collections as this config defines them, as the state file records them."""
        return [[c.name, str(c.path), c.pattern] for c in self.collections]

    def _fingerprint(self) -> str:
        """A digest of every file the collections index (path, mtime, size; transcripts for the sessions one, the
        ``sync.maxFileBytes`` their export is cut to, ``sessions.retentionDays`` and which transcripts it keeps).

        Compared with the one taken when the last update began, it tells a file added, changed, deleted or
        moved in with an old mtime since, which comparing mtimes with the update's time cannot.
        """
        return self._scan()[0]

    def _scan(self) -> tuple[str, dict[str, str]]:
        """:meth:`_fingerprint`, and ``{shown path: why}`` of the files qmd cannot index for their name.

        qmd reads file names as UTF-8: a name that is not valid UTF-8 becomes one no file has, and qmd skips
        it without saying which. Such files are listed as builtin-sqlite lists them (``status.skipped``, the
        name's bytes shown as ``\\xNN``), by the path a hit would show: workspace-relative,
        ``qmd/<collection>/<rel>`` outside the workspace, ``sessions/<name>.jsonl`` for a transcript.
        """
        import hashlib

        digest = hashlib.sha256()
        bad: dict[str, str] = {}
        for c, why, folder in self._away():
            # A collection left out of the update: its files listed below are not what qmd holds, and it is read
            # once it is back (a folder that only becomes readable again may show no file of its own).
            digest.update(f"{c.name}\0away\0{folder}\0{why}\n".encode("utf-8", "surrogateescape"))
        for c in self.collections:
            if c.source == "sessions":
                paths = [str(p) for p in list_session_files(self.sessions_source)]
                # The export holds each transcript's newest messages up to this limit: a new one changes them all.
                digest.update(f"{c.name}\0maxFileBytes\0{self.max_transcript_bytes}\n".encode())
                # And only the transcripts within sessions.retentionDays: a new retention (or a transcript aging
                # past it) changes which are exported.
                days = self.settings.sessions.get("retentionDays")
                digest.update(f"{c.name}\0retentionDays\0{days}\n".encode())
                cutoff = None if days is None else time.time() - float(days) * 86400
            else:
                paths = _memory_files(str(c.path), c.pattern)
                cutoff = None
            for path in paths:
                # The name below the collection's folder (qmd's path for it) is what qmd must read as UTF-8.
                rel = os.path.basename(path) if c.source == "sessions" else os.path.relpath(path, c.path)
                if printable_path(rel) == rel:
                    continue
                if (name := self._shown(c, path)) is not None:
                    bad[printable_path(name)] = NOT_UTF8
            for path in sorted(paths):
                try:
                    st = os.stat(path)
                except OSError:
                    continue  # gone (or unreachable): left out, which differs from a listing that had it
                kept = "" if cutoff is None else f"\0{st.st_mtime >= cutoff:d}"
                # A file qmd may not read is left out of its update without a word: named as builtin-sqlite names
                # it, and part of the digest (a chmod leaves the mtime as it was), so that the update after a chmod
                # either way runs and says so.
                unread = _unreadable(path, st)
                if unread is not None and c.source != "sessions" and (name := self._shown(c, path)) is not None:
                    bad.setdefault(printable_path(name), unread)
                said = "" if unread is None else f"\0{unread}"  # (a readable file's entry as before this was added)
                digest.update(f"{c.name}\0{path}\0{st.st_mtime_ns}\0{st.st_size}{kept}{said}\n".encode(
                    "utf-8", "surrogateescape"))
        return digest.hexdigest(), bad

    def _shown(self, c: CollectionSpec, path: str) -> str | None:
        """The path a hit on the file at ``path`` of collection ``c`` shows (None: outside the collection's mask)."""
        rel = os.path.basename(path) if c.source == "sessions" else os.path.relpath(path, c.path)
        if c.source == "sessions":
            return f"{SESSIONS_PREFIX}/{rel}"
        rel = rel.replace(os.sep, "/")
        if "*" in c.pattern and not glob_match(c.pattern, rel):
            return None
        return display_path(c, c.name, rel, self.workspace)

    def _adopt_saved(self) -> None:
        """In a process that has not updated yet: search the collections the last update (in any process) made
        ready, when they are this config's and it succeeded. This process's first update still reconciles them."""
        if self._reconciled:
            return
        saved = self._saved_state()
        if saved.get("lastUpdate") is None or saved.get("failure") or saved.get("collections") != self._spec_key():
            return
        with self._lock:
            if not self._reconciled:
                self._ready = set(saved.get("ready") or ()) & set(self.by_name)
                self._reconciled = True

    def is_stale(self, *, saved: dict[str, Any] | None = None, **_: Any) -> bool:
        """Whether a one-shot command must update first: never updated, degraded, another config's collections,
        or a file added, changed or deleted since the last update began. ``saved``: the state :meth:`status` read
        (its counts and this answer must be of one update: read twice, an update in another process ending in
        between made it say clean beside the counts from before)."""
        if saved is None:
            saved = self._saved_state()
        if saved.get("lastUpdate") is None or self._failure is not None or saved.get("failure"):
            return True
        if saved.get("collections") != self._spec_key():
            return True
        return saved.get("fingerprint") != self._fingerprint()

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
        ran = False
        try:
            self._forcing.on = force
            ran = self.scheduler.run(reason=reason, force=force or reason == "manual")
        except UpdateSkipped as exc:
            # Another process is updating (a search's sync does not wait for it), or it still was after the
            # longest wait: the index is as that update leaves it, and nothing failed.
            if reason.split(" ")[0] not in NO_WAIT_REASONS:
                errors = (f"not updated: {exc}",)
        except QmdError as exc:
            errors = (str(exc),)
            self._mark_failed(f"qmd update failed: {exc}")
        finally:
            self._forcing.on = False
        # While qmd cannot answer, searches are served by the fallback: a blocking sync (the CLI's
        # `index`, a one-shot `search`) brings that index up to date now, not in a thread a
        # one-shot process would cancel on exit. While degraded it must stay current too.
        warnings = (tuple(f"{p} is not indexed: {why}" for p, why in sorted(self._unnamed().items()))
                    + self._away_warnings())
        fb = self._get_fallback(first_sync=False) if self._failure is not None else self._fallback
        if fb is not None:
            fb_report = fb.sync(reason=reason, force=force, progress=progress)
            return attrs.evolve(fb_report, reason=reason, seconds=time.monotonic() - started,
                                errors=errors + tuple(fb_report.errors),
                                warnings=tuple(dict.fromkeys(warnings + tuple(fb_report.warnings))))
        if progress is not None:
            progress(SyncProgress(phase="done", done=1, total=1))
        # The files qmd's update listed, (re)indexed and dropped: an `index` that ran one says what it did.
        changes = self._changes.values() if ran and not errors else ()
        return SyncReport(reason=reason, seconds=time.monotonic() - started, errors=errors, warnings=warnings,
                          files_scanned=sum(n + u + same for n, u, same, _ in changes),
                          files_indexed=sum(n + u for n, u, _, _ in changes),
                          files_removed=sum(gone for *_, gone in changes))

    def _unnamed(self) -> dict[str, str]:
        """The files qmd skips for their name, as this process's last update or else the newest one listed them."""
        if self._own_view():
            return self.unnamed
        saved = self._saved_state().get("skipped")
        return {str(k): str(v) for k, v in saved.items()} if isinstance(saved, dict) else {}

    def _save_state(self, *, update_error: str | None) -> None:
        """Keep what the last update learnt in the qmd home, for ``status`` and searches in other processes."""
        # The newest update that succeeded, in any process: one that failed in a process that never updated must
        # not make every other process (and `status`) forget that qmd was updated.
        before = self._saved_state().get("lastUpdate")
        last_update = max((t for t in (self.last_update, before) if isinstance(t, (int, float))), default=None)
        state = {"lastUpdate": last_update, "lastUpdateError": update_error,
                 "ready": sorted(self._ready), "failure": self._failure, "command": self.settings.command,
                 "lastEmbed": self.last_embed_at,
                 "embedError": self.embed_error, "collections": self._spec_key() if self._reconciled else None,
                 "fingerprint": self._fingerprint_done, "files": self._counts, "exportError": self.export_error,
                 "partial": self.export_partial, "skipped": self.unnamed,
                 "devices": self._devices or self._saved_state().get("devices") or {}}
        self._last_state = state
        tmp = self.home / f"{STATE_FILE}.tmp{os.getpid()}"
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(state), encoding="utf-8")
            os.replace(tmp, self.home / STATE_FILE)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            log.warning("cannot save the qmd state to %s (other processes do not see this update): %s", self.home,
                        exc)

    def _own_view(self, saved: dict[str, Any] | None = None) -> bool:
        """Whether this process's own update is the newest one saved, so its view (the files skipped for their
        name, the transcripts exported in part, the export's error) is the truth; else another process's update
        since (or before this one's first) saved the newer one."""
        if not self.scheduler.runs:
            return False
        mine = self._last_state
        saved = self._saved_state() if saved is None else saved
        return mine is None or saved is mine or json.loads(json.dumps(mine)) == saved

    def _saved_state(self) -> dict[str, Any]:
        """The newest update's state: the state file (any process), or this process's when it could not write it."""
        try:
            raw = json.loads((self.home / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = {}
        saved = raw if isinstance(raw, dict) else {}
        mine = self._last_state
        if mine is not None and (mine.get("lastUpdate") or 0) > (saved.get("lastUpdate") or 0):
            return mine
        return saved

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
        self._adopt_saved()
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
        candidates = hits_to_candidates(hits, self.by_name, self.workspace)[: int(limits["maxResults"])]
        # The snippet and injected-text caps are applied by the core's presentation, like every backend's.
        budget = SnippetBudget(max_snippet_chars=int(limits["maxSnippetChars"]),
                               max_injected_chars=int(limits["maxInjectedChars"]))
        return BackendResult(candidates=tuple(candidates), mode="qmd", provider="qmd", calibrated=False,
                             budget=budget)

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

    def _get_fallback(self, *, first_sync: bool = True) -> MemoryBackend | None:
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
                    if first_sync:
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
        # What the newest update (in any process) learnt; this process's own view once it has updated.
        saved = self._saved_state()
        updated = bool(self.scheduler.runs)  # this process's search mode: its own once it has updated
        # A failure of another `memory.qmd.command` (the one just fixed in the config) is not this one's.
        foreign = saved.get("command", self.settings.command) != self.settings.command
        failure = self._failure or (None if updated or foreign else saved.get("failure"))
        ready = self._ready if updated else (self._ready or set(saved.get("ready") or ()))
        if not updated:
            # Another config's update (another workspace, extra path or mask under the same collection name) says
            # nothing about this one's collections: they are not ready, and their files unknown, until one runs.
            recorded = saved.get("collections")
            same = {c[0] for c in recorded if isinstance(c, list) and c in self._spec_key()} if isinstance(
                recorded, list) else set()
            ready = ready & same
        last_update = max((t for t in (self.last_update, saved.get("lastUpdate")) if isinstance(t, (int, float))),
                          default=None)
        counts = saved.get("files") if isinstance(saved.get("files"), dict) and saved.get("files") else None
        fb = self._fallback
        if fb is None and failure is not None and self._fallback_factory is not None:
            fb = self._get_fallback(first_sync=False)
        fallback_index = None
        if fb is not None:
            fst = fb.status()
            fallback_index = {k: fst.get(k) for k in ("backend", "files", "chunks", "dirty", "dbPath")}
        own = self._own_view(saved)  # what the newest update learnt: this process's, or another's since
        last_error = (self.scheduler.last_error if own else None) or (None if foreign else saved.get("lastUpdateError"))
        export_error = self.export_error if own else saved.get("exportError")
        partial = self.export_partial if own else saved.get("partial")
        skipped = self._unnamed()
        return {
            "backend": "qmd",
            "plugin": "qmd-sidecar",
            "provider": "qmd",
            "model": None,
            "searchMode": self.searcher.mode,
            "workspaceDir": printable_path(str(self.workspace)),
            "qmdHome": printable_path(str(self.home)),
            "files": None if counts is None or not ready else sum(counts.get(c, 0) for c in ready if c in self.by_name),
            "collections": [
                {"name": c.name, "path": str(c.path), "pattern": c.pattern, "source": c.source,
                 "ready": c.name in ready, "files": None if counts is None or c.name not in ready
                 else counts.get(c.name)}
                for c in self.collections
            ],
            "ready": bool(ready) and failure is None,
            "lastUpdate": None if last_update is None else int(last_update * 1000),
            "lastUpdateError": last_error,
            "lastError": failure or last_error or export_error,
            # Never "clean" while a file differs from what the last update saw (behaviour §3).
            "dirty": self.is_stale(saved=saved),
            "build": _build_status(holder(self.home)),
            "fallback": None if failure is None else {"from": "qmd", "reason": failure},
            "fallbackIndex": fallback_index,
            "embedding": {"enabled": self.embed_error is None, "error": self.embed_error},
            "sessions": {"enabled": bool(self.settings.sessions.get("enabled")), "exportDir": str(self.export_dir),
                         "error": export_error},
            # Files qmd cannot index (names not valid UTF-8), listed as builtin-sqlite lists what it skips.
            "skipped": [{"path": p, "reason": why} for p, why in sorted(skipped.items())],
            # Transcripts whose messages exceed memorySearch.sync.maxFileBytes: their newest messages are exported.
            "partial": [{"path": p, "reason": str(why)} for p, why in sorted((partial if isinstance(partial, dict)
                                                                             else {}).items())],
            # memory.qmd.paths entries (and folders) qmd cannot read now; the core adds an absent extra path's.
            "warnings": list(self._away_warnings()),
        }

    def close(self) -> None:
        """Stop the update timer and close (and so stop) the fallback, if one was opened."""
        with self._lock:
            self._closed = True
            self._closing.set()
            fb, self._fallback = self._fallback, None
        self.scheduler.stop()
        if fb is not None:
            fb.close()


def _with_extra_paths(paths: Sequence[Any], extra_paths: Sequence[str], workspace: Path) -> list[Any]:
    """``memory.qmd.paths`` plus ``memorySearch.extraPaths``, so qmd indexes what builtin-sqlite would.

    An extra path that a ``paths`` entry already names is not added twice.
    """
    def resolved(raw: str) -> Path:
        return _resolved(raw, workspace)

    named = {resolved(str(e if isinstance(e, str) else e.get("path") or "")) for e in paths}
    out = list(paths)
    for extra in extra_paths:
        if str(extra).strip() and resolved(str(extra)) not in named:
            named.add(resolved(str(extra)))
            out.append(str(extra))
    return out


def _clear_update_configs(home: Path) -> None:
    """Remove the temporary configs (:meth:`QmdBackend._run_update`) of updates killed before they removed theirs
    (SIGKILL, a power cut). Called holding the update lock: no qmd reads one then."""
    try:
        entries = list(os.scandir(home))
    except OSError:
        return  # no qmd home yet
    for entry in entries:
        if entry.name.startswith(UPDATE_CONFIG_PREFIX) and entry.is_dir(follow_symlinks=False):
            log.info("removing %s, the temporary qmd config of an update that was killed", entry.path)
            shutil.rmtree(entry.path, ignore_errors=True)


def _resolved(raw: str, workspace: Path) -> Path:
    """A configured path as its collection's root: ``~`` expanded, relative to the workspace, resolved."""
    p = Path(raw).expanduser()
    return (p if p.is_absolute() else workspace / p).resolve()


def _unreadable(path: str, st: os.stat_result) -> str | None:
    """``cannot read: <why>`` when this process may not read the file at ``path`` (``st``: its stat), else None.
    Tried only for a file whose mode does not let everyone read it (chmod 000, 600 of another user): the others
    cost no more than the stat."""
    if st.st_mode & 0o444 == 0o444:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    os.close(fd)
    return None


#: The folders qmd's update never lists (its ``excludeDirs``): one that cannot be read there fails nothing.
QMD_EXCLUDED_DIRS = frozenset({"node_modules", ".git", ".cache", "vendor", "dist", "build"})


def _single_root(cols: list[CollectionSpec]) -> Path | None:
    """The entry a root's one collection was made from (None for the workspace's own)."""
    return cols[0].root if len(cols) == 1 else None


def _unlistable(folder: Path, pattern: str) -> tuple[Path, str] | None:
    """The first folder ``qmd update`` would list for a collection (``folder`` itself, and below it for a ``**``
    pattern, hidden folders included as qmd lists them) that cannot be listed now, and why; None when all can (or
    ``folder`` is not there: the collection waits for it)."""
    try:
        with os.scandir(folder):
            pass
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return folder, f"cannot be read ({exc.strerror or exc})"
    if "**" not in pattern:
        return None
    failed: list[OSError] = []

    def unlisted(error: OSError) -> None:
        if not isinstance(error, FileNotFoundError):  # one gone since its folder was listed: qmd skips it too
            failed.append(error)

    for _, dirs, _ in os.walk(folder, onerror=unlisted):
        if failed:
            break
        dirs[:] = [d for d in dirs if d not in QMD_EXCLUDED_DIRS]
    if not failed:
        return None
    error = failed[0]
    return Path(error.filename or folder), f"cannot be read ({error.strerror or error})"


def _any_memory_file(root: Path, pattern: str) -> bool:
    """Whether one collection lists a file now (:func:`_memory_files`, stopping at the first)."""
    if "*" not in pattern:
        return (root / pattern).is_file()
    for _folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "node_modules"]
        if any(f.endswith(".md") for f in files):
            return True
    return False


def _memory_files(root: str, pattern: str) -> list[str]:
    """The files of one collection (``pattern`` is ``**/*.md`` or a file name), for staleness checks."""
    if "*" not in pattern:
        return [os.path.join(root, pattern)]
    out: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "node_modules"]
        out.extend(os.path.join(folder, f) for f in files if f.endswith(".md"))
    return out


def _start_backend(backend: MemoryBackend) -> None:
    if isinstance(backend, StartableBackend):
        backend.start()


def _first_sync(backend: MemoryBackend) -> None:
    try:
        backend.sync(reason="qmd-fallback")
    except Exception as exc:  # e.g. closed meanwhile; the next search or the watcher tries again
        log.warning("%s fallback sync failed: %s", FALLBACK_BACKEND, exc)


def _build_status(found: dict[str, Any] | None) -> dict[str, Any]:
    """The qmd update running now, in this process or another, in the shape of builtin-sqlite's ``build``."""
    if found is None:
        return {"running": False, "pid": None, "thisProcess": False, "elsewhere": False, "startedAt": None,
                "fileBytes": None}
    started = found.get("startedAt")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if isinstance(started, (int, float)) else None
    return {"running": True, "pid": found.get("pid"), "thisProcess": bool(found.get("thisProcess")), "elsewhere": False,
            "startedAt": stamp, "fileBytes": None}
