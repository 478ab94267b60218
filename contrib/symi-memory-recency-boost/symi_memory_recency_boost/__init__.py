"""symi-memory-recency-boost: lift recently written notes in search results.

The example third-party plugin of docs/plugin-authors.md. It registers one
post-processor, ``recency-boost``, and contributes the defaults of its
settings under ``agents.defaults.memorySearch.query.hybrid.recencyBoost``.
"""

from __future__ import annotations

__all__: list[str] = []
__version__ = "0.1.0"
