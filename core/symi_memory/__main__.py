"""``python -m symi_memory``: the ``symi-memory`` command."""

from .cli import console

console()
