"""A third-party plugin that misbehaves while memory runs (not while it loads): what the user sees.

Each plugin is written as its author would from docs/plugin-authors.md (an embedding provider, a
reranker, a post-processor, a backend), registered in-process like the other plugin tests, and
driven through ``open_memory`` on the real builtin-sqlite index; the last tests install one as a
``*.dist-info`` and run the real CLI in a subprocess. The rule under test is the docs' "a plugin
never takes memory down": a provider that fails is keyword search saying why, a reranker or
post-processor that fails is the search without it, nothing is lost from the index, and whatever
cannot go on names the plugin.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from support.offline_install import install_plugin as _install
from support.sqlite_memory import open_mem, write

from symi_memory import hookimpl, load_config, open_memory
from symi_memory.errors import BackendError
from symi_memory.specs import BackendSpec, PostProcessorSpec, ProviderSpec, RerankerSpec

pytestmark = pytest.mark.filterwarnings("ignore")

DIMS = 16
NOTE = "# Memory\n\n- The router admin page is at 10.0.0.1.\n"


def _vector(text: str) -> list[float]:
    out = [0.0] * DIMS
    for word in text.lower().split():
        out[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMS] += 1.0
    norm = math.sqrt(sum(x * x for x in out)) or 1.0
    return [x / norm for x in out]


class Unclosable:
    """An embedding provider following the documented protocol but for the optional ``close``; ``mode`` says how
    it misbehaves."""

    id = "flaky"
    model = "flaky-1"
    fingerprint = "flaky"
    max_input_bytes = 8000

    def __init__(self, mode: dict[str, str]) -> None:
        self.mode = mode

    def _one(self, text: str) -> Any:
        bad = self.mode["now"]
        if bad == "raise":
            raise KeyError("data")  # what a response parser of its own raises on an unexpected body
        if bad == "strings":
            return ["x"] * DIMS
        if bad == "empty":
            return []
        if bad == "nan":
            return [math.nan] * DIMS
        if bad == "narrow":
            return _vector(text)[:8]
        return _vector(text)

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)  # type: ignore[no-any-return]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]


class Flaky(Unclosable):
    def close(self) -> None:
        pass


def _provider_plugin(mode: dict[str, str], kind: type = Flaky) -> Any:
    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Any) -> None:
            register(ProviderSpec(name="flaky", factory=lambda ctx: kind(mode)))

    return Plugin()


def _open(tmp_path: Path, plugins: list[tuple[str, object]], **memory_search: Any) -> Any:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTE)
    return open_mem(tmp_path, ws, {"provider": "flaky", "fallback": "none", **memory_search}, plugins=plugins)


@pytest.mark.parametrize("bad", ["raise", "strings", "empty", "narrow"])
def test_a_provider_failing_its_own_way_at_query_time_is_keyword_search_saying_why(tmp_path: Path, bad: str) -> None:
    mode = {"now": "ok"}
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode))]) as mem:
        mem.sync()
        assert mem.search("router admin").mode == "hybrid"
        mode["now"] = bad
        resp = mem.search("router admin")
    assert [h.path for h in resp.results] == ["MEMORY.md"]
    assert resp.mode == "fts-only"  # not "hybrid" while no vector took part
    assert resp.fallback is not None and "flaky" in resp.fallback.reason


@pytest.mark.parametrize("bad", ["raise", "strings", "empty", "nan"])
def test_a_provider_failing_its_own_way_at_sync_leaves_the_files_searchable_and_retried(tmp_path: Path,
                                                                                        bad: str) -> None:
    mode = {"now": bad}
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode))]) as mem:
        report = mem.sync()
        status = mem.status()
        assert report.files_indexed == 1 and status["files"] == 1
        assert status["dirty"] is True and "flaky" in (status["lastError"] or "")
        assert status["vector"]["dims"] is None  # no vector no search could score against was stored
        assert [h.path for h in mem.search("router admin").results] == ["MEMORY.md"]
        mode["now"] = "ok"
        mem.sync()
        assert mem.status()["dirty"] is False
        assert mem.search("router admin").mode == "hybrid"


def test_a_provider_factory_that_raises_is_keyword_search_naming_the_plugin(tmp_path: Path) -> None:
    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Any) -> None:
            def factory(ctx: Any) -> Any:
                raise RuntimeError("no endpoint configured")

            register(ProviderSpec(name="flaky", factory=factory))

    with _open(tmp_path, [("flaky-plugin", Plugin())]) as mem:
        mem.sync()
        resp = mem.search("router admin")
        status = mem.status()
    assert [h.path for h in resp.results] == ["MEMORY.md"]
    assert status["provider"] is None or status["provider"] == "none"
    assert "'flaky-plugin'" in status["providerReason"] and "no endpoint configured" in status["providerReason"]


class NoClose:
    """A reranker without ``close``: ``Closeable`` is optional, the docs say."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> Any:
        return self.answer(documents)


class Picky(NoClose):
    def close(self) -> None:
        pass


def _reranker_plugin(answer: Any, kind: type = Picky) -> Any:
    class Plugin:
        @hookimpl
        def symi_memory_register_rerankers(self, register: Any) -> None:
            register(RerankerSpec(name="picky", factory=lambda ctx: kind(answer)))

    return Plugin()


def _two_notes(tmp_path: Path) -> None:
    write(tmp_path / "ws", "memory/2026-01-02.md", "# Log\n\n- The router was rebooted after the admin change.\n")


def test_a_reranker_and_a_provider_without_close_are_closed_without_an_error(tmp_path: Path) -> None:
    mode = {"now": "ok"}
    mem = _open(tmp_path, [("flaky-plugin", _provider_plugin(mode, Unclosable)),
                           ("picky-plugin", _reranker_plugin(lambda docs: [(i, 0.5) for i in range(len(docs))], NoClose))],
                query={"rerank": {"provider": "picky"}})
    mem.sync()
    assert [h.score for h in mem.search("router admin").results] == [0.5]
    mem.close()  # neither object defines close(): nothing to call, nothing raised


class LoudClose(Picky):
    def close(self) -> None:
        raise OSError("socket already closed")


def test_a_reranker_whose_close_raises_does_not_fail_closing_memory(tmp_path: Path) -> None:
    mem = _open(tmp_path, [("flaky-plugin", _provider_plugin({"now": "ok"})),
                           ("picky-plugin", _reranker_plugin(lambda docs: [(0, 0.5)], LoudClose))],
                query={"rerank": {"provider": "picky"}})
    mem.sync()
    assert len(mem.search("router admin").results) == 1
    mem.close()
    with pytest.raises(Exception, match="closed"):
        mem.search("router admin")  # closed all the same


@pytest.mark.parametrize("answer", [
    lambda docs: None,
    lambda docs: [("0", "high")],
    lambda docs: [(0.0, 0.9)],
    lambda docs: [(i, math.nan) for i in range(len(docs))],
], ids=["none", "strings", "float-index", "nan-scores"])
def test_a_reranker_answer_of_the_wrong_shape_keeps_the_fused_order(tmp_path: Path, answer: Any) -> None:
    mode = {"now": "ok"}
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode))]) as plain:
        _two_notes(tmp_path)
        plain.sync()
        fused = [(h.path, h.score) for h in plain.search("router admin").results]
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode)), ("picky-plugin", _reranker_plugin(answer))],
               query={"rerank": {"provider": "picky"}}) as mem:
        got = [(h.path, h.score) for h in mem.search("router admin").results]
    assert len(fused) == 2 and got == fused


def test_a_reranker_factory_that_raises_is_search_without_reranking(tmp_path: Path) -> None:
    class Plugin:
        @hookimpl
        def symi_memory_register_rerankers(self, register: Any) -> None:
            def factory(ctx: Any) -> Any:
                raise ImportError("vendor SDK missing")

            register(RerankerSpec(name="picky", factory=factory))

    with _open(tmp_path, [("flaky-plugin", _provider_plugin({"now": "ok"})), ("picky-plugin", Plugin())],
               query={"rerank": {"provider": "picky"}}) as mem:
        mem.sync()
        assert [h.path for h in mem.search("router admin").results] == ["MEMORY.md"]


class Tagger:
    def __init__(self, bad: str) -> None:
        self.bad = bad

    def process(self, candidates: Sequence[Any], ctx: Any) -> Any:
        if self.bad == "raise":
            raise ValueError("window must be positive")
        if self.bad == "none":
            return None
        if self.bad == "dicts":
            return [{"path": c.path} for c in candidates]
        return [attrs.evolve(c, score=math.nan) for c in candidates]


def _postprocessor_plugin(bad: str) -> Any:
    class Plugin:
        @hookimpl
        def symi_memory_register_postprocessors(self, register: Any) -> None:
            def factory(hybrid: Any) -> Any:
                if bad == "factory":
                    raise KeyError("windowDays")
                return Tagger(bad)

            register(PostProcessorSpec(name="tagger", factory=factory, order=200))

    return Plugin()


@pytest.mark.parametrize("bad", ["raise", "none", "dicts", "nan", "factory"])
def test_a_failing_post_processor_is_skipped_and_the_search_keeps_its_hits(tmp_path: Path, bad: str) -> None:
    mode = {"now": "ok"}
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode))]) as plain:
        _two_notes(tmp_path)
        plain.sync()
        expected = [(h.path, h.score) for h in plain.search("router admin").results]
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode)), ("tagger-plugin", _postprocessor_plugin(bad))],
               ) as mem:
        got = [(h.path, h.score) for h in mem.search("router admin").results]
    assert len(expected) == 2 and got == expected


def test_a_backend_search_returning_none_is_an_error_naming_the_plugin(tmp_path: Path) -> None:
    class Backend:
        def search(self, query: Any) -> Any:
            return None

        def sync(self, **kwargs: Any) -> Any:
            raise AssertionError("not called")

        def read_file(self, path: str, **kwargs: Any) -> Any:
            raise AssertionError("not called")

        def status(self) -> dict[str, Any]:
            return {"files": 0, "chunks": 0, "dirty": False, "workspaceDir": str(tmp_path)}

        def close(self) -> None:
            pass

    class Plugin:
        @hookimpl
        def symi_memory_register_backends(self, register: Any) -> None:
            register(BackendSpec(name="hollow", factory=lambda ctx: Backend()))

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTE)
    cfg = load_config(None, state_dir=tmp_path / "state", overrides={"plugins": {"slots": {"memory": "hollow"}}})
    with open_memory(cfg, workspace=ws, start=False, plugins=[("hollow-plugin", Plugin())]) as mem:
        with pytest.raises(BackendError, match=r"hollow backend \(plugin 'hollow-plugin'\) returned None"):
            mem.search("router")


# --- the CLI, with the plugin installed as a distribution ---------------------------------------------------



def _cli(tmp_path: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTE)
    env = {k: v for k, v in os.environ.items() if k not in ("SYMI_CONFIG", "SYMI_MEMORY_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "symi_memory.cli", "--state-dir", str(tmp_path / "state"),
                           "--workspace", str(ws), *args], capture_output=True, text=True, env=env, timeout=120)


SYNC_RAISES = """
from symi_memory import hookimpl, load_config, open_memory
from symi_memory.specs import BackendSpec


class Backend:
    def search(self, query): ...
    def read_file(self, path, *, from_line=None, lines=None): ...
    def status(self):
        return {"files": 0, "chunks": 0, "dirty": True, "workspaceDir": "."}
    def close(self): ...
    def sync(self, *, reason="manual", force=False, progress=None):
        raise RuntimeError("lost the connection to the store")


@hookimpl
def symi_memory_register_backends(register):
    register(BackendSpec(name="remote-store", factory=lambda ctx: Backend()))
"""


def test_a_backend_that_raises_in_the_cli_is_an_error_line_naming_its_plugin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "remote-store", "remote_store_plugin", SYNC_RAISES)
    assert _cli(tmp_path, site, "config", "set", "plugins.slots.memory", "remote-store").returncode == 0
    out = _cli(tmp_path, site, "index")
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("symi-memory: error: plugin 'remote-store' (remote-store-plugin 1.0) raised RuntimeError")
    assert "lost the connection to the store" in last and "a bug of that plugin" in last


CLAIMS_HASH = """
from symi_memory import hookimpl, load_config, open_memory
from symi_memory.specs import ProviderSpec


@hookimpl
def symi_memory_register_embedding_providers(register):
    register(ProviderSpec(name="{name}", factory=lambda ctx: None))
"""


def test_two_plugins_claiming_one_name_can_be_resolved_with_config_set_as_the_error_says(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(site, "first", "first_plugin", CLAIMS_HASH.format(name="shared"))
    _install(site, "second", "second_plugin", CLAIMS_HASH.format(name="shared"))
    clash = _cli(tmp_path, site, "status")
    assert clash.returncode != 0 and "registered twice" in clash.stderr and "plugins.disabled" in clash.stderr

    fixed = _cli(tmp_path, site, "config", "set", "plugins.disabled", '["second"]')
    assert fixed.returncode == 0, fixed.stderr
    assert "Traceback" not in fixed.stderr
    status = _cli(tmp_path, site, "status")
    assert status.returncode == 0, status.stderr
    listed = _cli(tmp_path, site, "plugins")
    assert "first" in listed.stdout


# --- versions a plugin author reads ---------------------------------------------------------------------------


REPO = Path(__file__).resolve().parents[1]


def test_the_versions_the_docs_and_contrib_plugins_name_are_ones_this_release_satisfies() -> None:
    """`pip install ./contrib/<plugin>` as the tutorials say must resolve against this symi-memory, and a hook the
    reference says was "Added in" a version must not be newer than the version that ships it (an author who
    writes `symi-memory>=<that version>`, as json-index did, gets a plugin pip cannot install)."""
    import re
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    own = Version(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    for project in sorted((REPO / "contrib").glob("*/pyproject.toml")):
        deps = tomllib.loads(project.read_text(encoding="utf-8"))["project"]["dependencies"]
        for dep in map(Requirement, deps):
            if dep.name == "symi-memory":
                assert dep.specifier.contains(own), f"{project.parent.name} requires {dep}, this is {own}"
    added = re.findall(r"Added in (\d+(?:\.\d+)*)\.", (REPO / "docs" / "hooks.md").read_text(encoding="utf-8"))
    assert added and all(Version(v) <= own for v in added), (added, own)


class EntryDefaults:
    """Defaults in the namespace the hook reference suggests: ``plugins.entries.<plugin id>``."""

    @hookimpl
    def symi_memory_config_defaults(self) -> dict[str, Any]:
        return {"plugins": {"entries": {"tagger-plugin": {"enabled": False, "mode": "soft"}}}}


@pytest.mark.parametrize(("entry", "message"), [
    ({"enabeld": True}, 'plugins.entries.tagger-plugin.enabeld: unknown key (did you mean "enabled"?)'),
    ({"enabled": "yes"}, "plugins.entries.tagger-plugin.enabled: 'yes' is not a boolean"),
    ({"mode": 12}, "plugins.entries.tagger-plugin.mode: 12 is not a string"),
], ids=["typo", "bool", "str"])
def test_defaults_contributed_under_plugins_entries_type_their_keys_as_documented(tmp_path: Path, entry: Any,
                                                                                 message: str) -> None:
    from symi_memory.errors import ConfigError

    overrides = {"plugins": {"entries": {"tagger-plugin": entry, "someone-else": {"free": [1]}}}}
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, state_dir=tmp_path, overrides=overrides, extra_plugins=[("tagger-plugin", EntryDefaults())])
    good = {"plugins": {"entries": {"tagger-plugin": {"enabled": True}, "someone-else": {"free": [1]}}}}
    cfg = load_config(None, state_dir=tmp_path, overrides=good, extra_plugins=[("tagger-plugin", EntryDefaults())])
    assert cfg.data["plugins"]["entries"]["tagger-plugin"] == {"enabled": True, "mode": "soft"}
    assert cfg.data["plugins"]["entries"]["someone-else"] == {"free": [1]}


NEWER_HOOK = """
from symi_memory import hookimpl


@hookimpl
def symi_memory_register_exporters(register):
    pass
"""


def test_an_installed_plugin_with_a_hook_this_version_lacks_is_skipped_naming_it(tmp_path: Path) -> None:
    """Made for a newer symi-memory (or a misspelt hook): like a plugin that fails to import, not every command's
    failure."""
    site = tmp_path / "site"
    _install(site, "exporter", "exporter_plugin", NEWER_HOOK)
    assert _cli(tmp_path, site, "config", "set", "agents.defaults.memorySearch.provider", "none").returncode == 0
    out = _cli(tmp_path, site, "search", "router admin", "--no-server")
    assert out.returncode == 0, out.stderr
    assert "MEMORY.md" in out.stdout
    (warning,) = [ln for ln in out.stderr.splitlines() if "exporter" in ln]
    assert "plugin 'exporter' from exporter-plugin implements symi_memory_register_exporters" in warning
    listed = _cli(tmp_path, site, "plugins")
    assert listed.returncode == 0
    assert "needs a newer symi-memory" in next(ln for ln in listed.stdout.splitlines() if ln.startswith("exporter"))


def test_an_available_check_that_raises_is_skipped_by_auto_not_every_search(tmp_path: Path) -> None:
    """``provider = "auto"`` asks every provider with an ``auto_priority``: one plugin's broken check (a provider
    nobody named) must leave the next provider to be chosen."""

    class Eager:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Any) -> None:
            def available(ctx: Any) -> str | None:
                raise KeyError("EAGER_API_KEY")

            register(ProviderSpec(name="eager", factory=lambda ctx: Flaky({"now": "ok"}), auto_priority=-10,
                                  available=available))
            register(ProviderSpec(name="flaky", factory=lambda ctx: Flaky({"now": "ok"}), auto_priority=-5))

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTE)
    with open_mem(tmp_path, ws, {"provider": "auto"}, plugins=[("eager-plugin", Eager())]) as mem:
        mem.sync()
        resp = mem.search("router admin")
    assert resp.provider == "flaky" and [h.path for h in resp.results] == ["MEMORY.md"]


def test_plugins_json_lists_a_plugin_that_failed_to_load_with_why(tmp_path: Path) -> None:
    """The text listing says "failed to load"; --json (what a monitoring script reads) must not drop it."""
    import json

    site = tmp_path / "site"
    _install(site, "exporter", "exporter_plugin", "raise ImportError('needs vendor-sdk')\n")
    out = _cli(tmp_path, site, "plugins", "--json")
    assert out.returncode == 0, out.stderr
    (entry,) = [p for p in json.loads(out.stdout) if p["id"] == "exporter"]
    assert entry["distribution"] == "exporter-plugin" and entry["registers"]["backends"] == []
    assert entry["error"] == "ImportError: needs vendor-sdk"


# --- the rule is for third-party plugins: a builtin's own bug is not hidden -------------------------------------


class Unreachable(Flaky):
    """A provider whose HTTP client raises its own error (not an EmbeddingError) after waiting out its timeout."""

    def __init__(self, mode: dict[str, str]) -> None:
        super().__init__(mode)
        self.document_calls = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.document_calls += 1
        if self.mode["now"] == "down":
            raise ConnectionError("timed out connecting to embed.example")
        return super().embed_documents(texts)


def test_a_provider_raising_its_own_error_at_sync_is_asked_once_that_sync_and_only_the_missing_next(
        tmp_path: Path) -> None:
    """Down for the whole sync, as a builtin's timeout is: not asked again for every group of files (each call
    waiting out its client's timeout); the next sync embeds what is missing, once."""
    mode = {"now": "down"}
    made: list[Unreachable] = []

    class Plugin:
        @hookimpl
        def symi_memory_register_embedding_providers(self, register: Any) -> None:
            register(ProviderSpec(name="flaky", factory=lambda ctx: made.append(Unreachable(mode)) or made[-1]))

    ws = tmp_path / "ws"
    for i in range(120):  # more than one group of chunks (EMBED_BATCH * 4): several embed_documents calls a sync
        write(ws, f"memory/n{i:03d}.md", "\n\n".join(f"## Part {j}\n\nnote {i} item {j} topic{i}x{j}"
                                                    for j in range(8)) + "\n")
    with open_mem(tmp_path, ws, {"provider": "flaky", "fallback": "none", "chunking": {"tokens": 16, "overlap": 0}},
                  plugins=[("flaky-plugin", Plugin())]) as mem:
        (provider,) = made
        mem.sync()
        status = mem.status()
        assert status["files"] == 120 and status["pendingFiles"] == 120 and status["dirty"] is True
        assert "timed out connecting" in (status["lastError"] or "")
        assert provider.document_calls == 1
        mode["now"] = "ok"
        mem.sync()
        calls = provider.document_calls
        assert calls > 2 and mem.status()["pendingFiles"] == 0 and mem.status()["dirty"] is False
        mem.sync()
        assert provider.document_calls == calls  # nothing left to embed: nothing asked
        assert mem.search("topic3x5").mode == "hybrid"


def _openai(tmp_path: Path) -> Any:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", NOTE)
    # Never contacted: the simulated bug is in the provider's own code, before any request.
    return open_mem(tmp_path, ws, {"provider": "openai", "fallback": "none",
                                   "remote": {"baseUrl": "http://127.0.0.1:9/v1", "apiKey": "sk-test-0123456789"}})


def test_a_builtin_providers_own_bug_at_query_time_is_raised_not_turned_into_keyword_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyError in the builtin openai provider's code is a bug of ours: the search says so, as every other builtin
    part's does, instead of answering by keyword as for an endpoint that failed."""
    from symi_memory_remote.openai_compat import OpenAIEmbeddings

    def parser_bug(self: Any, texts: Sequence[str], kind: str) -> Any:
        raise KeyError("embedding")

    monkeypatch.setattr(OpenAIEmbeddings, "_embed_request", parser_bug)
    with _openai(tmp_path) as mem:
        assert mem.status()["provider"] == "openai"
        with pytest.raises(KeyError, match="embedding"):
            mem.search("router admin")


def test_a_builtin_providers_own_bug_at_sync_fails_the_sync_not_hidden_as_keyword_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from symi_memory_remote.openai_compat import OpenAIEmbeddings

    def parser_bug(self: Any, texts: Sequence[str], kind: str) -> Any:
        raise KeyError("embedding")

    monkeypatch.setattr(OpenAIEmbeddings, "_embed_request", parser_bug)
    with _openai(tmp_path) as mem, pytest.raises(KeyError, match="embedding"):
        mem.sync()


def test_a_reranker_failing_is_a_warning_naming_it_and_its_plugin_as_documented(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """docs/plugin-authors.md: skipped for that search "with a warning naming its plugin" (what to disable)."""
    with _open(tmp_path, [("flaky-plugin", _provider_plugin({"now": "ok"})),
                          ("picky-plugin", _reranker_plugin(lambda docs: [(0, math.nan)]))],
               query={"rerank": {"provider": "picky"}}) as mem:
        mem.sync()
        with caplog.at_level("WARNING", logger="symi_memory"):
            assert [h.path for h in mem.search("router admin").results] == ["MEMORY.md"]
    (line,) = [r.getMessage() for r in caplog.records if "keeping the fused order" in r.getMessage()]
    assert "'picky'" in line and "'picky-plugin'" in line


def test_a_provider_raising_while_embedding_a_querys_unknown_words_is_keyword_search_not_a_failure(
        tmp_path: Path) -> None:
    """With local synonyms on (``minCosine`` set), a query word the index lacks is embedded too: the provider's own
    exception there must be what it is at the query's embedding, keyword search saying why."""
    mode = {"now": "ok"}
    with _open(tmp_path, [("flaky-plugin", _provider_plugin(mode))],
               query={"hybrid": {"synonyms": {"minCosine": 0.3}}}) as mem:
        mem.sync()
        assert mem.search("router gateway").mode == "hybrid"
        mode["now"] = "raise"
        resp = mem.search("router firewall")  # "firewall": in no chunk, so its word vector is asked for
    assert [h.path for h in resp.results] == ["MEMORY.md"]
    assert resp.mode == "fts-only" and resp.fallback is not None and "flaky" in resp.fallback.reason
