"""Exception types. Every message says what is wrong and how to fix it."""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BuildWaitExpired",
    "ConfigError",
    "EmbeddingError",
    "EmbeddingPending",
    "PathRefused",
    "PluginError",
    "SymiMemoryError",
]


class SymiMemoryError(Exception):
    """Base class for expected errors; the CLI prints them as one line."""

    exit_code = 1


class ConfigError(SymiMemoryError):
    """Bad configuration. ``problems`` holds one line per problem."""

    exit_code = 2

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class PluginError(SymiMemoryError):
    """A plugin could not be loaded or registered something invalid."""

    exit_code = 2


class EmbeddingError(SymiMemoryError):
    """An embedding (or rerank) request failed.

    ``retryable`` tells whether trying again later may succeed (429, 5xx,
    timeouts). Messages must never contain an API key.
    """

    def __init__(self, message: str, *, provider: str = "", retryable: bool = False) -> None:
        self.provider = provider
        self.retryable = retryable
        super().__init__(message)


class BackendError(SymiMemoryError):
    """A memory backend failed at run time."""


class BuildWaitExpired(BackendError):
    """An explicit sync waited ``sync.buildWaitSeconds`` for another process's full build of the index, which
    still runs; the index was not synced (that build lands on its own). The message names the builder."""


class PathRefused(SymiMemoryError):
    """``memory_get`` refused a path; the tool error text is ``path required``."""

    def __init__(self, message: str = "path required") -> None:
        super().__init__(message)


class EmbeddingPending(EmbeddingError):
    """Embeddings are not ready yet (a batch job still running with ``batch.wait = false``).

    Not a failure: the core indexes the text for keyword search, keeps the
    files marked pending and collects the vectors on a later sync. It never
    triggers a provider fallback.
    """

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message, provider=provider, retryable=True)
