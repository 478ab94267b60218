"""Running part of a test as a user without root's rights (root reads and writes any file)."""

from __future__ import annotations

import os

__all__ = ["Unprivileged"]


class Unprivileged:
    """As root, run the block with the effective uid and gid of ``nobody`` (restored after); otherwise as is."""

    def __enter__(self) -> None:
        if os.geteuid() == 0:
            os.setegid(65534)
            os.seteuid(65534)

    def __exit__(self, *exc: object) -> None:
        if os.getuid() == 0:
            os.seteuid(0)
            os.setegid(0)
