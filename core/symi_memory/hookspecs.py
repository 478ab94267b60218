"""The hook specifications: the reference for plugin authors.

Every hook uses the register-callback style: the core calls the hook with a
``register`` function, and the plugin calls ``register(spec)`` once per thing
it provides. The core then resolves config values *by name* against what was
registered; registration order never decides anything.

The core calls every hook through pluggy (one call per implementing plugin,
so it knows who registered what), so ``hookwrapper``/``wrapper``
implementations, ``tryfirst``/``trylast`` and pluggy's tracing all apply. A
wrapper of a register hook sees what the wrapped plugin registered in
``register.registered`` after its ``yield``.

Import the marker with ``from symi_memory import hookimpl``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .specs import BackendSpec, ConfigSection, PostProcessorSpec, ProviderSpec, RerankerSpec

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "symi_memory"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def symi_memory_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Register memory backends.

    Call ``register(BackendSpec(name=..., factory=...))`` for each backend.
    ``plugins.slots.memory`` selects one by ``name``. The factory receives a
    :class:`symi_memory.specs.BackendContext` and returns an object following
    :class:`symi_memory.specs.MemoryBackend`. Import heavy dependencies inside
    the factory, not at module level.

    :param register: callable taking one :class:`~symi_memory.specs.BackendSpec`.
    :return: ignored.

    Added in 0.1.
    """


@hookspec
def symi_memory_register_embedding_providers(register: Callable[[ProviderSpec], None]) -> None:
    """Register embedding providers.

    Call ``register(ProviderSpec(name=..., factory=..., auto_priority=...,
    available=...))``. ``memorySearch.provider`` (and ``fallback``) select one
    by ``name``; ``auto`` tries providers with an ``auto_priority`` in
    ascending order and takes the first whose ``available`` check returns
    None. A factory that cannot work here raises
    :class:`symi_memory.specs.ProviderUnavailable` with an actionable message;
    anything else a third-party factory raises (or a returned object that is
    not a provider) is taken as that, naming the plugin: memory runs on the
    fallback or by keyword, and ``status`` says why. An ``available`` check
    that raises is a reason too: ``auto`` goes on to the next provider.

    :param register: callable taking one :class:`~symi_memory.specs.ProviderSpec`.
    :return: ignored.

    Added in 0.1.
    """


@hookspec
def symi_memory_register_rerankers(register: Callable[[RerankerSpec], None]) -> None:
    """Register rerankers.

    Call ``register(RerankerSpec(name=..., factory=...))``.
    ``memorySearch.query.rerank.provider`` selects one by ``name``; ``none``
    (the default) disables reranking. A reranker that fails at search time
    never fails the search: the core logs and keeps the fused order. Nor does
    a third-party factory that raises, or returns an object without a
    ``rerank`` method: searches then run without reranking (logged once,
    naming the plugin and what the factory returned). A name no plugin
    registers is a config error for every command (exit 2), as a misspelt
    backend or provider name is.

    :param register: callable taking one :class:`~symi_memory.specs.RerankerSpec`.
    :return: ignored.

    Added in 0.1.
    """


@hookspec
def symi_memory_register_postprocessors(register: Callable[[PostProcessorSpec], None]) -> None:
    """Register search post-processors.

    Call ``register(PostProcessorSpec(name=..., factory=..., order=...))``.
    Every registered post-processor's factory is called with the
    ``memorySearch.query.hybrid`` section; it returns None when its config
    leaves it off. Enabled processors run by ascending ``order`` on every
    search, after fusion and reranking and before ``minScore``/``maxResults``.
    They must return new sequences (use ``attrs.evolve``), never mutate.

    Each call gets a :class:`symi_memory.specs.PostProcessContext`: the query,
    ``now``, the search's ``as_of`` cutoff (memory written after it is already
    left out), ``vectors`` to fetch the candidates' stored vectors by
    ``Candidate.id`` (None when the backend stores none; it is the backend's
    :class:`symi_memory.specs.StoredVectors` capability, so every backend that
    stores vectors behaves the same) and ``written_at`` for known write times
    (transcript messages). Dates of notes come from
    :mod:`symi_memory.chronology`. Set ``superseded_by``/``supersedes`` on a
    candidate to have the hit carry ``supersededBy``/``supersedes``.

    :param register: callable taking one :class:`~symi_memory.specs.PostProcessorSpec`.
    :return: ignored.

    Added in 0.1.
    """


@hookspec
def symi_memory_config_defaults() -> dict[str, Any] | None:
    """Contribute config defaults for keys the plugin owns.

    Return a nested dict (camelCase keys, as in the config file) of default
    values, or None. The keys become known to validation, typed by their
    default value, and appear in ``config show``. Keep to a namespace your
    plugin owns, for example ``{"plugins": {"entries": {"my-plugin": {...}}}}``.
    Contributing a key the core already defines is an error. It is called
    once, when plugins load; what it returned then is used for every config
    load in that process.

    :return: a nested dict of defaults, or None.

    Added in 0.1.
    """


@hookspec
def symi_memory_register_commands(subparsers: Any) -> None:
    """Add ``symi-memory`` subcommands.

    ``subparsers`` is the :mod:`argparse` subparsers action of the
    ``symi-memory`` parser. Add one parser per command with
    ``subparsers.add_parser(name, help=...)`` and give it
    ``set_defaults(func=run)``, where ``run(args, app) -> int`` receives the
    parsed :class:`argparse.Namespace` and the CLI's ``App`` (``app.config``,
    ``app.manager()``, ``app.print_json()``) and returns the exit code. The
    core's own commands are added through this same hook. A command name that
    is already taken is an error naming your plugin; a hook that raises
    anything else leaves your commands out, with a warning, and every other
    command works. Keep the hook cheap: import what the command needs inside
    ``run``.

    :param subparsers: the ``argparse`` subparsers action to add commands to.
    :return: ignored.

    Added in 0.1.
    """


@hookspec
def symi_memory_register_config_sections(register: Callable[[ConfigSection], None]) -> None:
    """Declare the typed config sections the plugin owns.

    Call ``register(ConfigSection(key=..., model=...))`` once per section.
    The model is an attrs class built with the same field DSL as the core's
    schema (:func:`symi_memory.config.fields.opt` for a key with its type,
    default, doc, bounds, choices or duration kind; ``section`` for a nested
    table), so plugin keys get the same one-line validation errors and the
    same generated reference as core keys. Settings keyed by your plugin id
    belong under ``plugins.entries.<id>``; keys a spec defines for your plugin
    (``memorySearch.local`` for the local provider) mount where the spec puts
    them. Prefer this over ``symi_memory_config_defaults``.

    :param register: callable taking one :class:`~symi_memory.specs.ConfigSection`.
    :return: ignored.

    Added in 0.1.
    """
