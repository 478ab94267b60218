"""Mistakes a third-party plugin author makes, seen through the real CLI and server: what the user is told.

Each plugin is installed the real way (a ``*.dist-info`` with an ``entry_points.txt`` on ``PYTHONPATH``) and
driven through ``python -m symi_memory.cli`` in a subprocess. The rule under test is the docs': a plugin's
mistake never takes memory down, the message names the plugin and what it did (what it returned, where it
raised), a user's typo is one config error line, and nothing of it lands in a ``--json`` answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.offline_install import install_plugin as _install
from support.sqlite_memory import write

pytestmark = pytest.mark.filterwarnings("ignore")

NOTES = {
    "MEMORY.md": "# Memory\n\n- The router admin page is at 10.0.0.1.\n",
    "memory/2026-03-04.md": "# 2026-03-04\n\n- Moved the router admin page behind the VPN.\n",
}

# One distribution with a reranker and a post-processor whose behaviour the environment picks, as a plugin
# author would write them from docs/plugin-authors.md (hooks.md: Reranker, PostProcessor).
STAGES = """
import os
import sys

from symi_memory import hookimpl
from symi_memory.specs import PostProcessorSpec, RerankerSpec


class Overlap:
    def rerank(self, query, documents, top_n):
        mode = os.environ.get("STAGES_RERANK", "")
        if mode == "print":
            print("reranking", len(documents), "documents")
        if mode == "dict":
            return {"results": [{"index": 0, "score": 0.9}]}
        words = set(query.lower().split())
        scored = [(i, len(words & set(d.lower().split())) / len(words)) for i, d in enumerate(documents)]
        return sorted(scored, key=lambda p: -p[1])[:top_n]


class NoRerank:
    pass


class Tag:
    def process(self, candidates, ctx):
        if os.environ.get("STAGES_POST") == "none":
            return None  # forgot the return value of a filter
        return list(candidates)


def _reranker(ctx):
    return NoRerank() if os.environ.get("STAGES_RERANK") == "hollow" else Overlap()


@hookimpl
def symi_memory_register_rerankers(register):
    register(RerankerSpec(name="overlap", factory=_reranker))


@hookimpl
def symi_memory_register_postprocessors(register):
    register(PostProcessorSpec(name="tag", factory=lambda hybrid: Tag(), order=300))
"""

# A backend over a dict, built on the documented helpers (docs/backend-authors.md); its faults are picked by
# the environment.
DICT_BACKEND = """
import os

from symi_memory import hookimpl
from symi_memory.chunking import chunk_text
from symi_memory.specs import BackendSpec
from symi_memory.types import BackendResult, Candidate, SyncReport
from symi_memory.workspace import PathRules, decode_text, list_memory_files, read_regular


class DictBackend:
    def __init__(self, ctx):
        self.workspace = ctx.agent.workspace
        self.extra = ctx.agent.memory_search["extraPaths"]
        self.chunks = {}

    def sync(self, *, reason="manual", force=False, progress=None):
        listed = list_memory_files(self.workspace, self.extra)
        self.chunks = {f.path: chunk_text(decode_text(read_regular(f.abs_path)[0])[0], 400, 80) for f in listed}
        return SyncReport(reason=reason, files_scanned=len(listed), files_indexed=len(listed))

    def search(self, query):
        if os.environ.get("DICT_FAULT") == "search":
            raise RuntimeError("lost the dict")
        words = set(query.text.lower().split())
        found = [Candidate(id=f"{p}#{c.start_line}", path=p, start_line=c.start_line, end_line=c.end_line,
                           score=len(words & set(c.text.lower().split())) / (len(words) + 1), text=c.text)
                 for p, cs in self.chunks.items() for c in cs if words & set(c.text.lower().split())]
        return BackendResult(candidates=tuple(sorted(found, key=lambda c: -c.score)), mode="fts-only")

    def read_file(self, path, *, from_line=None, lines=None):
        return PathRules.from_workspace(self.workspace, self.extra).read(path, from_line=from_line, lines=lines)

    def status(self):
        if os.environ.get("DICT_FAULT") == "status":
            return [("files", len(self.chunks))]  # pairs, not the dict the docs ask for
        return {"files": len(self.chunks), "chunks": sum(map(len, self.chunks.values())), "dirty": not self.chunks,
                "workspaceDir": str(self.workspace)}

    def close(self):
        pass


@hookimpl
def symi_memory_register_backends(register):
    register(BackendSpec(name="dict", factory=DictBackend))
"""



@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    _install(site, "stages", "stages_plugin", STAGES)
    _install(site, "dict-store", "dict_store_plugin", DICT_BACKEND)
    for path, text in NOTES.items():
        write(tmp_path / "ws", path, text)
    return site


def _config(tmp_path: Path, text: str) -> Path:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "symi.toml").write_text(textwrap.dedent(text), encoding="utf-8")
    return state


def _env(site: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SYMI_CONFIG", "SYMI_MEMORY_PLUGINS", "STAGES_RERANK", "STAGES_POST", "DICT_FAULT")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _cli(tmp_path: Path, site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "symi_memory.cli", "--state-dir", str(tmp_path / "state"),
                           "--workspace", str(tmp_path / "ws"), *args], capture_output=True, text=True,
                          env=_env(site, **env), timeout=120)


RERANKED = """
[agents.defaults.memorySearch]
provider = "none"
[agents.defaults.memorySearch.query.rerank]
provider = "{name}"
"""


def test_a_misspelt_reranker_name_is_a_config_error_for_every_command(tmp_path: Path, site: Path) -> None:
    # Before, `status` answered (exit 0) showing the name with no plugin, and `search` failed only in its tool
    # answer (exit 1), unlike a misspelt backend or provider, which every command refuses with exit 2.
    _config(tmp_path, RERANKED.format(name="overlp"))
    for args in (("status",), ("search", "router admin", "--json")):
        out = _cli(tmp_path, site, *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stdout == ""
        assert out.stderr.strip().splitlines() == [
            "symi-memory: error: agents.defaults.memorySearch.query.rerank.provider = 'overlp': no reranker of that "
            "name; available: cohere, jina, overlap, voyage. Is the plugin installed (and not listed in "
            "plugins.disabled)?"]


def test_a_reranker_answering_a_dict_is_skipped_saying_what_it_returned(tmp_path: Path, site: Path) -> None:
    # Before: "ValueError: too many values to unpack (expected 2)", the dict having been read as its keys.
    _config(tmp_path, RERANKED.format(name="overlap"))
    out = _cli(tmp_path, site, "search", "router admin", "--json", STAGES_RERANK="dict")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert [h["path"] for h in answer["results"]] == ["MEMORY.md", "memory/2026-03-04.md"]
    assert answer["warnings"] == [
        "reranker failed (TypeError: it returned dict {'results': [{'index': 0, 'score': 0.9}]}, not a list of (index, score) pairs; "
        "reranker 'overlap' of plugin 'stages'); keeping the fused order"]


def test_a_reranker_factory_returning_no_reranker_is_said_once_not_by_every_search(tmp_path: Path,
                                                                                    site: Path) -> None:
    # Before: every search warned "AttributeError: 'NoRerank' object has no attribute 'rerank'".
    _config(tmp_path, RERANKED.format(name="overlap"))
    out = _cli(tmp_path, site, "search", "router admin", "--json", STAGES_RERANK="hollow")
    assert out.returncode == 0, out.stderr
    assert "warnings" not in json.loads(out.stdout)
    assert ("reranker overlap of plugin 'stages' failed to start (its factory returned a NoRerank object, not a "
            "Reranker: it has no rerank method); searching without reranking") in out.stderr
    assert "AttributeError" not in out.stderr


def test_a_post_processor_returning_none_is_skipped_saying_so(tmp_path: Path, site: Path) -> None:
    # Before: "TypeError: 'NoneType' object is not iterable".
    _config(tmp_path, RERANKED.format(name="none"))
    out = _cli(tmp_path, site, "search", "router admin", "--json", STAGES_POST="none")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert len(answer["results"]) == 2
    assert answer["warnings"] == [
        "post-processor 'tag' of plugin 'stages' failed (TypeError: it returned None, not a sequence of Candidate "
        "records); skipped for this search"]


def test_what_a_plugin_prints_goes_to_stderr_not_into_the_json_answer(tmp_path: Path, site: Path) -> None:
    # Before, the reranker's print came first on stdout and `search --json` was not JSON.
    _config(tmp_path, RERANKED.format(name="overlap"))
    out = _cli(tmp_path, site, "search", "router admin", "--json", STAGES_RERANK="print")
    assert out.returncode == 0, out.stderr
    assert [h["path"] for h in json.loads(out.stdout)["results"]] == ["MEMORY.md", "memory/2026-03-04.md"]
    assert "reranking 2 documents" in out.stderr
    # Without --json the output is for people, and the print stays where the plugin put it.
    plain = _cli(tmp_path, site, "search", "router admin", STAGES_RERANK="print")
    assert plain.stdout.startswith("reranking 2 documents\n")


DICT = """
[plugins.slots]
memory = "dict"
[agents.defaults.memorySearch]
provider = "none"
"""


def test_a_backend_status_that_is_not_a_dict_is_an_error_naming_the_plugin(tmp_path: Path, site: Path) -> None:
    # Before: "unexpected ValueError (a bug; the traceback above is for a report)", blaming symi-memory.
    _config(tmp_path, DICT)
    out = _cli(tmp_path, site, "status", DICT_FAULT="status")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "symi-memory: error: the dict backend (plugin 'dict-store') returned list [('files', 0)] from status, not a "
        "dict (a bug of that plugin)"]


def test_a_backend_search_that_raises_is_a_tool_error_naming_the_plugin_and_line(tmp_path: Path,
                                                                                  site: Path) -> None:
    # Before: "memory search failed: lost the dict", with nothing saying whose code raised.
    _config(tmp_path, DICT)
    out = _cli(tmp_path, site, "search", "router admin", "--json", DICT_FAULT="search")
    assert out.returncode == 1
    answer = json.loads(out.stdout)
    line = DICT_BACKEND.splitlines().index('            raise RuntimeError("lost the dict")') + 1
    assert answer == {"results": [], "disabled": True, "error": (
        f"memory search failed: plugin 'dict-store' (dict-store-plugin 1.0) raised RuntimeError at "
        f"dict_store_plugin.py:{line}: lost the dict (a bug of that plugin; plugins.disabled = [\"dict-store\"] "
        f"turns it off)")}
    fine = _cli(tmp_path, site, "search", "router admin", "--json")
    assert [h["path"] for h in json.loads(fine.stdout)["results"]] == ["MEMORY.md", "memory/2026-03-04.md"]


def test_the_server_answers_a_plugin_crash_in_explain_and_history_with_a_json_error(tmp_path: Path,
                                                                                     site: Path) -> None:
    pytest.importorskip("uvicorn")
    from test_serve import running_server

    state = _config(tmp_path, DICT + f'[agents.defaults]\nworkspace = "{tmp_path / "ws"}"\n')
    with running_server(state, env=_env(site, DICT_FAULT="search")) as server:
        for kind in ("explain", "history"):
            # Before: 500 with the framework's bare "Internal Server Error" text.
            status, body = server.request("POST", f"/api/agents/main/{kind}", {"query": "router admin"})
            assert status == 500
            assert isinstance(body, dict) and body["error"].startswith(
                f"{kind} failed: plugin 'dict-store' (dict-store-plugin 1.0) raised RuntimeError at "
                "dict_store_plugin.py:"), body
        status, body = server.request("POST", "/api/agents/main/status", {})
        assert status == 200 and body["backend"] == "dict"


def test_a_served_search_piped_into_head_ends_quietly(tmp_path: Path, site: Path) -> None:
    # Before: the answer the server gave was printed without the in-process path's BrokenPipeError handling:
    # a traceback on stderr.
    pytest.importorskip("uvicorn")
    from test_serve import running_server

    notes = "".join(f"- Router note {i}: the admin page moved again, step {i}.\n" for i in range(400))
    write(tmp_path / "ws", "MEMORY.md", "# Memory\n\n" + notes)
    state = _config(tmp_path, f'[agents.defaults]\nworkspace = "{tmp_path / "ws"}"\n'
                              '[agents.defaults.memorySearch]\nprovider = "none"\n')
    with running_server(state, env=_env(site)) as server:
        cmd = [sys.executable, "-m", "symi_memory.cli", "--state-dir", str(state), "--workspace",
               str(tmp_path / "ws"), "-v", "search", "router admin page", "-n", "40"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(site))
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # `| head -0`: the reader is gone before the answer is printed
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
        assert f"answered by the server at {server.url}" in err
        assert "Traceback" not in err and "BrokenPipeError" not in err


@pytest.mark.parametrize(("fault", "command", "said"), [
    ("read", ("get", "MEMORY.md"),
     "MEMORY.md: the dict backend (plugin 'dict-store') returned str '# Memory' from read_file, not a ReadResult"),
    ("sync", ("index",), "the dict backend (plugin 'dict-store') returned None from sync, not a SyncReport"),
], ids=["read_file", "sync"])
def test_a_backend_answering_the_wrong_type_is_an_error_naming_the_plugin(tmp_path: Path, site: Path, fault: str,
                                                                          command: tuple[str, ...], said: str) -> None:
    # Before: "memory read failed: 'str' object has no attribute 'to_dict'" and "unexpected AttributeError (a bug;
    # ...)", blaming symi-memory's code that used the answer.
    source = DICT_BACKEND.replace('''    def read_file(self, path, *, from_line=None, lines=None):
''', '''    def read_file(self, path, *, from_line=None, lines=None):
        if os.environ.get("DICT_FAULT") == "read":
            return "# Memory"  # the text, not the ReadResult the docs ask for
''').replace('''    def sync(self, *, reason="manual", force=False, progress=None):
''', '''    def sync(self, *, reason="manual", force=False, progress=None):
        if os.environ.get("DICT_FAULT") == "sync":
            return None
''')
    _install(tmp_path / "site2", "dict-store", "dict_store_plugin", source)
    _config(tmp_path, DICT)
    out = _cli(tmp_path, tmp_path / "site2", *command, DICT_FAULT=fault)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        f"symi-memory: error: {said} (a bug of that plugin)")
    assert "Traceback" not in out.stderr


MISSPELT_HOOK = """
from symi_memory import hookimpl
from symi_memory.specs import RerankerSpec


@hookimpl
def symi_memory_register_reranker(register):
    register(RerankerSpec(name="typo", factory=lambda ctx: None))
"""


def test_a_misspelt_hook_name_is_skipped_naming_the_hook_it_is_close_to(tmp_path: Path) -> None:
    # Before: "implements symi_memory_register_reranker, which this symi-memory does not have", leaving the author
    # to find the one letter against the hook reference.
    site = tmp_path / "site"
    _install(site, "typo", "typo_plugin", MISSPELT_HOOK)
    out = _cli(tmp_path, site, "plugins")
    assert out.returncode == 0, out.stderr
    assert ("plugin 'typo' from typo-plugin implements symi_memory_register_reranker (did you mean "
            "symi_memory_register_rerankers?), which this symi-memory") in out.stderr
    assert "did you mean symi_memory_register_rerankers?" in next(
        line for line in out.stdout.splitlines() if line.startswith("typo "))


def test_a_backend_without_read_file_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    # Before: "not a MemoryBackend (search, sync, read_file, status and close)": every method, not the one missing.
    site = tmp_path / "site"
    start = DICT_BACKEND.index("    def read_file(")
    _install(site, "dict-store", "dict_store_plugin",
             DICT_BACKEND[:start] + DICT_BACKEND[DICT_BACKEND.index("    def status(self):"):])
    _config(tmp_path, DICT)
    out = _cli(tmp_path, site, "status")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "symi-memory: error: plugins.slots.memory = 'dict': the factory of plugin 'dict-store' returned DictBackend, "
        "not a MemoryBackend (it has no read_file); fix or uninstall the plugin, or choose another backend"]


def test_settings_under_a_misspelt_plugin_id_are_named_not_silently_unread(tmp_path: Path, site: Path) -> None:
    # Before: `plugins.entries.stagse` was accepted without a word, and the plugin ran on its defaults.
    _config(tmp_path, """
        [agents.defaults.memorySearch]
        provider = "none"
        [plugins.entries.stagse]
        boost = 0.5
        [plugins.entries.not-installed-yet]
        keep = true
    """)
    out = _cli(tmp_path, site, "status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["backend"] == "builtin"
    warned = [line for line in out.stderr.splitlines() if "plugins.entries" in line]
    assert warned == [
        "symi-memory: WARNING: plugins.entries.stagse: no installed plugin has the id 'stagse' (did you mean "
        "'stages'?); these settings reach no plugin",
        "symi-memory: WARNING: plugins.entries.not-installed-yet: no installed plugin has the id 'not-installed-yet'; "
        "`symi-memory plugins` lists the installed ones; these settings reach no plugin"]
    _config(tmp_path, '[agents.defaults.memorySearch]\nprovider = "none"\n[plugins.entries.stages]\nboost = 0.5\n')
    assert "plugins.entries" not in _cli(tmp_path, site, "status").stderr


def test_explain_on_the_command_line_shows_each_plugin_stage_and_what_was_skipped(tmp_path: Path,
                                                                                   site: Path) -> None:
    # Before: there was no `explain` command; the breakdown was only in serve's API and MemoryManager.explain.
    _config(tmp_path, RERANKED.format(name="overlap"))
    out = _cli(tmp_path, site, "explain", "router admin", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["stages"][:3] == ["fused", "rerank", "tag"] and got["stages"][-1] == "final"
    assert [(c["path"], c["outcome"]) for c in got["candidates"]] == [
        ("MEMORY.md", "returned"), ("memory/2026-03-04.md", "returned")]
    assert got["response"]["results"][0]["path"] == "MEMORY.md"
    text = _cli(tmp_path, site, "explain", "router admin", STAGES_RERANK="dict")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("2 candidate(s), 2 returned; mode fts-only")
    assert lines[1].startswith("stages: fused > rerank > tag > ")
    assert any(line.endswith("MEMORY.md:1-4  returned") for line in lines)
    assert lines[-1].startswith("skipped: reranker failed (TypeError: it returned dict {'results'")


def test_a_misspelt_hook_of_a_plugin_under_test_names_the_hook_it_is_close_to() -> None:
    # A plugin handed to load_plugins(extra=...) in its author's tests (docs/plugin-authors.md, "Test it") raises
    # instead of being skipped; before, the error left the author to spot the missing "s".
    from symi_memory import hookimpl
    from symi_memory.errors import PluginError
    from symi_memory.plugins import load_plugins

    class UnderTest:
        @hookimpl
        def symi_memory_register_backend(self, register: object) -> None:
            pass

    with pytest.raises(PluginError, match=r"check the hook name's spelling: symi_memory_register_backend \(did you "
                                          r"mean symi_memory_register_backends\?\)"):
        load_plugins(extra=[("under-test", UnderTest())])


def test_a_plugin_printing_as_it_is_imported_does_not_spoil_a_json_answer(tmp_path: Path, site: Path) -> None:
    # Before: only the command's run was diverted; a plugin printing at import time (when plugins load, before
    # the command runs) wrote into stdout ahead of the JSON, and `search --json` was no longer parseable.
    _install(site, "chatty", "chatty_plugin", 'print("chatty plugin loaded")\n')
    _config(tmp_path, '[agents.defaults.memorySearch]\nprovider = "none"\n')
    out = _cli(tmp_path, site, "search", "router admin", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"][0]["path"] == "MEMORY.md"
    assert "chatty plugin loaded" in out.stderr
    # Without --json the plugin's print stays where it was (stdout): nothing is diverted for people.
    assert "chatty plugin loaded" in _cli(tmp_path, site, "search", "router admin").stdout


def test_settings_of_an_installed_plugin_left_unloaded_by_the_autoload_switch_are_not_called_unknown(
        tmp_path: Path, site: Path) -> None:
    # Before: with SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD=1 (the troubleshooting switch) every installed plugin's
    # settings were warned about as "no installed plugin has the id", which is false.
    _config(tmp_path, """
        [agents.defaults.memorySearch]
        provider = "none"
        [plugins.entries.stages]
        boost = 0.5
        [plugins.entries.stagse]
        boost = 0.5
    """)
    out = _cli(tmp_path, site, "status", SYMI_MEMORY_DISABLE_PLUGIN_AUTOLOAD="1")
    assert out.returncode == 0, out.stderr
    warned = [line for line in out.stderr.splitlines() if "plugins.entries" in line]
    assert len(warned) == 1 and warned[0].startswith("symi-memory: WARNING: plugins.entries.stagse: "), warned
