"""A ``stall`` embedding provider: HashEmbedder vectors, but a query naming ``stallN.Ns`` takes N.N seconds.

A plugin module for ``SYMI_MEMORY_PLUGINS`` (``support.stalling_provider``, with ``tests`` on the path), so a
real server process answers one slow search when a test asks for one: the query ``"launch code stall2.5s"``
waits 2.5 s in its embedding, as a remote model would on a bad day. A batch of documents waits as long as the
longest its texts name.

A text naming ``hold-NAME`` waits (at most 120 s) until the file ``NAME`` exists in the folder
``$SYMI_TEST_HOLD_DIR``: a test holds a sync in its embedding for exactly as long as it needs, then lets it go.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from symi_memory import hookimpl
from symi_memory.specs import ProviderSpec
from symi_memory.testing import HashEmbedder

PLUGIN_ID = "stalling-test"
_STALL = re.compile(r"stall(\d+(?:\.\d+)?)s")
_HOLD = re.compile(r"hold-(\w+)")


def _hold(texts: Sequence[str]) -> None:
    names = {m.group(1) for m in map(_HOLD.search, texts) if m}
    if not names:
        return
    folder = os.environ["SYMI_TEST_HOLD_DIR"]
    deadline = time.monotonic() + 120
    while not all(os.path.exists(os.path.join(folder, n)) for n in names) and time.monotonic() < deadline:
        time.sleep(0.05)


class StallingEmbedder(HashEmbedder):
    def embed_query(self, text: str) -> list[float]:
        m = _STALL.search(text)
        if m:
            time.sleep(float(m.group(1)))
        return super().embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        stalls = [float(m.group(1)) for m in map(_STALL.search, texts) if m]
        if stalls:
            time.sleep(max(stalls))
        _hold(texts)
        return super().embed_documents(texts)


@hookimpl
def symi_memory_register_embedding_providers(register: Callable[[Any], None]) -> None:
    register(ProviderSpec(name="stall", factory=lambda ctx: StallingEmbedder(id="stall", model="stall-384"),
                          default_model="stall-384"))
