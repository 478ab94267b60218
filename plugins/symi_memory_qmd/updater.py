"""When ``qmd update`` and ``qmd embed`` run.

A boot update (in the background unless ``waitForBootSync``), then one every
``interval``. A non-forced run inside ``debounceMs`` of the last one is
skipped, a non-forced run while one is active is dropped, and a forced run
waits for the active one and then runs. ``embed`` runs on the first update
and then once ``embedInterval`` has passed; its failure only warns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import attrs

from symi_memory import forking

__all__ = ["UpdateScheduler", "UpdateSkipped"]

log = logging.getLogger("symi_memory.qmd")


class UpdateSkipped(Exception):
    """Raised by ``work`` when it did not run (another process was updating): neither a run nor a failure."""


@attrs.define(eq=False)
class UpdateScheduler:
    """Serialises update runs. ``work(reason, embed)`` does one run.

    ``work`` raises only when the update itself failed (embed was then not
    attempted), or :class:`UpdateSkipped` when it did not run; an embed
    failure must be logged and swallowed by ``work``.
    """

    work: Callable[[str, bool], None]
    interval_s: float
    debounce_s: float
    embed_interval_s: float
    clock: Callable[[], float] = time.monotonic
    last_end: float | None = None
    last_embed: float | None = None
    last_error: str | None = None
    runs: int = 0
    _cond: threading.Condition = attrs.field(factory=threading.Condition)
    _running: bool = False
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _thread: threading.Thread | None = None

    def __attrs_post_init__(self) -> None:
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: an update the parent's thread was running is not running here (``_running`` would
        make every forced update of the child wait for it for ever), and its condition's lock may be held. The
        interval timer is the parent's (the parent's updates keep qmd's index current); the child updates when it
        syncs."""
        self._cond = threading.Condition()
        self._running = False
        stopped, self._stop = self._stop.is_set(), threading.Event()
        if stopped:
            self._stop.set()
        self._thread = None

    def run(self, *, reason: str, force: bool = False) -> bool:
        """Run one update now unless debounced; return whether it ran. Raises what ``work`` raised."""
        with self._cond:
            if self._running:
                if not force:
                    log.debug("qmd update (%s) skipped: one is running", reason)
                    return False
                while self._running:
                    self._cond.wait()
            elif not force and self.last_end is not None and self.clock() - self.last_end < self.debounce_s:
                log.debug("qmd update (%s) skipped: within debounce", reason)
                return False
            self._running = True
        embed = self.last_embed is None or self.clock() - self.last_embed >= self.embed_interval_s
        ok = skipped = False
        try:
            self.work(reason, embed)
            self.last_error = None
            ok = True
        except UpdateSkipped:
            skipped = True
            raise
        except Exception as exc:
            self.last_error = str(exc)
            raise
        finally:
            with self._cond:
                self._running = False
                if not skipped:
                    self.runs += 1
                    self.last_end = self.clock()
                if embed and ok:
                    # ``work`` raises only when the update failed, before embed ran; an embed failure
                    # is swallowed and still counted, so an offline model is not retried every update.
                    self.last_embed = self.last_end
                self._cond.notify_all()
        return True

    def run_quietly(self, reason: str, force: bool = False) -> None:
        """Like :meth:`run`, but a failure is logged instead of raised (for threads)."""
        self._safe_run(reason, force)

    def _safe_run(self, reason: str, force: bool) -> None:
        try:
            self.run(reason=reason, force=force)
        except UpdateSkipped as exc:
            log.info("qmd update (%s) skipped: %s", reason, exc)
        except Exception as exc:
            log.warning("qmd update (%s) failed: %s", reason, exc)

    def start(self, *, on_boot: bool, wait_for_boot: bool) -> None:
        """Arm the interval timer and do the boot update."""
        if on_boot and wait_for_boot:
            self._safe_run("boot", True)
        self._thread = threading.Thread(
            target=self._loop, args=(on_boot and not wait_for_boot,), name="symi-qmd-update", daemon=True
        )
        self._thread.start()

    def _loop(self, boot: bool) -> None:
        if boot:
            self._safe_run("boot", True)
        if self.interval_s <= 0:
            return
        while not self._stop.wait(self.interval_s):
            self._safe_run("interval", False)

    def stop(self) -> None:
        """Stop the timer; a run in progress finishes (its calls have timeouts)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
