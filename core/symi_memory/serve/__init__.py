"""``symi-memory serve``: one warm memory service per machine.

The server side (``pool``, ``app``, ``runner``, ``inspector``) imports the
whole stack; ``record`` and ``client`` use the standard library only, so a
one-shot CLI call that a running server answers stays cheap.
"""
