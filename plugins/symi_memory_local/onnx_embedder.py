"""The ONNX Runtime embedder: tokenise, window, batch, run, pool.

Sentence-transformer models read a bounded number of word pieces (256 for
all-MiniLM-L6-v2) while a default chunk is ~400 tokens. Instead of cutting
the tail off, a long input is split into overlapping windows of at most
``max_tokens`` pieces (the tokenizer's own overflow handling, so special
tokens are right for any model); each window is mean-pooled and the windows
are averaged weighted by their token counts, then normalised.

Windows run length-sorted in small batches (little padding, activations that
stay in cache), ``threads`` batches at once, each on one ONNX Runtime thread.
A window's vector does not depend on its batch, so the vectors are those of
running every window alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .integrity import onnx_fingerprint

if TYPE_CHECKING:
    from .wordpiece import WordPiece

__all__ = ["OnnxEmbedder", "load_onnx_embedder"]

log = logging.getLogger("symi_memory.local")
#: Padded tokens per inference batch. Small batches are faster per token on CPU: the attention tensors of a
#: batch (batch x 12 heads x length x length floats per layer) and the 1,536-wide feed-forward activations stay
#: in cache. 8,192 (32 windows of 256 pieces) ran 400-token chunks at ~0.65x the rate of 512 on the 2-core VM
#: (bench/bench_local_embed.py), with the same vectors: each window's result does not depend on its batch mates.
BATCH_TOKENS = 512
_MAX_BATCH = 64
# How long close() waits for the background build of the optimised session (see OnnxEmbedder.close).
OPTIMISE_JOIN_S = 60.0


@attrs.define
class OnnxEmbedder:
    """An :class:`~symi_memory.specs.EmbeddingProvider` backed by an ONNX sentence encoder."""

    model: str
    fingerprint: str
    session: Any
    #: The ``tokenizers`` tokenizer; None until ``load_tokenizer`` has made it (see :attr:`tokenizer`).
    _tokenizer: Any = attrs.field(default=None, alias="tokenizer")
    _load_tokenizer: Callable[[], Any] | None = attrs.field(default=None, alias="load_tokenizer")
    windowed: bool = True
    #: Token ids of plain ASCII text without the ``tokenizers`` package (the bundled tokenizer only).
    wordpiece: WordPiece | None = None
    _tokenizer_lock: threading.Lock = attrs.field(factory=threading.Lock)
    id: str = "local"
    max_input_bytes: int = 65536
    _feeds: tuple[str, ...] = ()
    _output: int = 0
    _pooled_output: bool = False
    #: Builds the fully optimised session; set when this one was opened unoptimised for a fast start.
    _optimise: Callable[[], Any] | None = None
    _calls: int = 0
    _optimiser: threading.Thread | None = None
    #: Padded-token budget per inference batch (see BATCH_TOKENS).
    batch_tokens: int = BATCH_TOKENS
    #: Inference batches run at once (``local.threads``); the session runs each on one thread.
    threads: int = 1

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers`` tokenizer, loaded on first use when the embedder was made without it."""
        if self._tokenizer is None and self._load_tokenizer is not None:
            with self._tokenizer_lock:
                if self._tokenizer is None:
                    self._tokenizer = self._load_tokenizer()
        return self._tokenizer

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        """Each text's encoding: by :attr:`wordpiece` when it takes every text (the same ids), else the tokenizer."""
        if self.wordpiece is not None:
            encoded = [self.wordpiece.encode(t) for t in texts]
            if all(e is not None for e in encoded):
                return encoded
        return list(self.tokenizer.encode_batch(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        """One unit vector for a search query."""
        return self.embed_documents([text])[0]

    def _maybe_optimise(self, *, now: bool = False) -> None:
        """From the second call on, build the optimised session in the background and swap it in.

        Opening the model unoptimised takes a tenth of the time (ONNX Runtime's constant folding expands
        the int8 weights at load) and gives the same vectors, but each run then dequantises the weights
        again, which costs a single query ~20 ms of CPU. A one-shot command embeds once and exits; a
        long-running process switches to the optimised session after its first use.

        ``now``: a call with several inference batches (an index run's chunks) builds the optimised session
        first, in this thread: the build costs less than dequantising the weights again for every batch.
        """
        self._calls += 1
        if self._calls < 2 and not now:
            return
        build, self._optimise = self._optimise, None
        if build is None:  # another thread took it
            return
        if now:
            try:
                self.session = build()
            except Exception as exc:  # the unoptimised session keeps working
                log.warning("could not build the optimised session for %s (%s); keeping the first one", self.model, exc)
            return

        def swap() -> None:
            try:
                session = build()
            except Exception as exc:  # the unoptimised session keeps working
                log.warning("could not build the optimised session for %s (%s); keeping the first one", self.model, exc)
                return
            if self.session is not None:
                self.session = session

        # Not a daemon: a process that exits while ONNX Runtime is still building the session (a one-shot
        # `search` that indexed first: documents, then the query) aborted in its C++ teardown (SIGABRT).
        # Python waits for the build at exit instead, a few hundred milliseconds at most.
        self._optimiser = threading.Thread(target=swap, name="symi-local-optimise", daemon=False)
        self._optimiser.start()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for ``texts``, in order."""
        import numpy as np

        from .pooling import combine_windows

        if not texts:
            return []
        windows, owners = [], []
        for i, enc in enumerate(self._encode(texts)):
            for w in [enc, *enc.overflowing] if self.windowed else [enc]:
                windows.append(w)
                owners.append(i)
        lengths = [len(w.ids) for w in windows]
        # Length-sorted, so a batch pads little; the pooled rows go back to their windows' places.
        order = sorted(range(len(windows)), key=lengths.__getitem__)
        batches = _batches(order, lengths, self.batch_tokens)
        if self._optimise is not None:
            self._maybe_optimise(now=len(batches) > 1)
        workers = min(self.threads, len(batches))
        run = lambda batch: self._run([windows[k] for k in batch])  # noqa: E731
        if workers > 1:
            from concurrent.futures import ThreadPoolExecutor

            # ONNX Runtime releases the GIL while it runs: whole batches in parallel, each on one thread, keep
            # both cores busy without the per-operator hand-offs of intra-op threading (which, without
            # spinning workers, left cores idle between the many small operators of a small batch).
            with ThreadPoolExecutor(workers, thread_name_prefix="symi-local-embed") as pool:
                outs = list(pool.map(run, batches))
        else:
            outs = [run(batch) for batch in batches]
        vectors = np.empty((len(windows), outs[0].shape[1]), dtype=np.float32)
        for batch, out in zip(batches, outs, strict=True):
            vectors[batch] = out
        # Windows are unpadded, so a window's token count is its length.
        return combine_windows(vectors, owners, lengths, len(texts)).tolist()

    def close(self) -> None:
        """Drop the session; ONNX Runtime frees its memory when it is collected.

        A background build of the optimised session is waited for: a process that exits while
        ONNX Runtime is still initialising a session aborts ("terminate called without an
        active exception").
        """
        optimiser = self._optimiser
        if optimiser is not None and optimiser is not threading.current_thread():
            optimiser.join(OPTIMISE_JOIN_S)
        self.session = None

    def _run(self, encs: list[Any]) -> Any:
        import numpy as np

        from .pooling import mean_pool

        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encs):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = e.attention_mask
            types[row, :n] = e.type_ids
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out = self.session.run(None, {name: available[name] for name in self._feeds})[self._output]
        return out if self._pooled_output else mean_pool(out, mask)


def _batches(order: list[int], lengths: list[int], budget: int = BATCH_TOKENS) -> list[list[int]]:
    """Cut length-sorted window indexes into batches under the padded-token ``budget``."""
    batches: list[list[int]] = []
    current: list[int] = []
    for k in order:
        # Sorted ascending, so the newest window is the longest one in the batch.
        if current and (len(current) >= _MAX_BATCH or (len(current) + 1) * lengths[k] > budget):
            batches.append(current)
            current = []
        current.append(k)
    if current:
        batches.append(current)
    return batches


def load_onnx_embedder(
    model_file: Path,
    tokenizer_file: Path,
    *,
    model: str,
    model_sha256: str,
    threads: int,
    max_tokens: int = 256,
    stride: int = 32,
    windowed: bool = True,
    fast_start: bool = False,
    graph_cache: Path | None = None,
    fuse: bool = True,
    wordpiece_cache: Path | None = None,
) -> OnnxEmbedder:
    """Open the model and tokenizer (already verified by the caller) and return a ready embedder.

    ``fast_start`` opens the session without graph optimisations (same vectors, a fraction of the load
    time) and upgrades to the optimised one in the background once the embedder is used again.

    ``graph_cache`` (a folder) keeps the optimised graph of each model once it has been built, keyed by
    the model's sha256, the ONNX Runtime version and the CPU architecture: a later process loads it
    ready-made (a fraction of the optimisation's time, and none of the fast start's per-run
    dequantisation) and computes exactly the vectors of the optimised session.

    ``fuse``: the optimised session runs the model rewritten with ONNX Runtime's fused attention, GELU
    and elementwise layer normalisation (:mod:`.fusion`; needs the ``onnx`` package), once the rewritten
    graph has given the plain graph's vectors on a probe batch; otherwise the plain graph.

    ``wordpiece_cache`` (a folder; only for the bundled tokenizer, whose rules :mod:`.wordpiece` follows):
    where its vocabulary is saved once the tokenizer is loaded. When it is there, plain ASCII texts are
    encoded from it and ``tokenizers`` is loaded only for another text.
    """
    fuse = fuse and _fusion_available()
    if graph_cache is not None and not _utf8(str(graph_cache)):
        # ONNX Runtime takes the path it saves the graph to as UTF-8 text: a state dir whose path holds other
        # bytes keeps no optimised graph (each process optimises the model again), rather than failing each time.
        log.info("not keeping optimised graphs in %s: its path is not UTF-8",
                 str(graph_cache).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
        graph_cache = None
    cache = _graph_dir(graph_cache, model_sha256, fused=fuse) if graph_cache is not None else None
    build: Callable[[], Any] | None = None

    def open_session() -> Any:
        nonlocal build
        session = _cached_session(cache) if cache is not None else None
        if session is None:
            build = lambda: _optimised_session(model_file, cache, fuse=fuse)  # noqa: E731
            if fast_start:
                session = _session(model_file, optimise=False)
            else:
                session, build = build(), None
        return session

    # ONNX Runtime releases the GIL while it creates a session (most of it prepacking the weights), and the
    # tokenizer's file is parsed meanwhile: opening both at once takes the longer of the two, not their sum.
    opened: dict[str, Any] = {}

    def open_in_background() -> None:
        try:
            opened["session"] = open_session()
        except BaseException as exc:  # handed to the loading thread below
            opened["error"] = exc

    def load_tokenizer() -> Any:
        tok = _tokenizer(tokenizer_file, max_tokens=max_tokens, stride=stride)
        if wordpiece_cache is not None:
            from .wordpiece import save_wordpiece

            save_wordpiece(wordpiece_cache, tok)
        return tok

    opener = threading.Thread(target=open_in_background, name="symi-local-session")
    opener.start()
    try:
        wordpiece = None
        if wordpiece_cache is not None:
            from .wordpiece import load_wordpiece

            wordpiece = load_wordpiece(wordpiece_cache, max_tokens=max_tokens)
        tok = None if wordpiece is not None else load_tokenizer()
    finally:
        opener.join()  # never left running: a process that exits under a session being built aborts
    if "error" in opened:
        raise opened["error"]
    session = opened["session"]
    feeds = tuple(i.name for i in session.get_inputs())
    unknown = set(feeds) - {"input_ids", "attention_mask", "token_type_ids"}
    if unknown:
        from symi_memory.specs import ProviderUnavailable

        raise ProviderUnavailable(
            f"{model_file} wants inputs {sorted(unknown)}; the local provider feeds only input_ids, "
            "attention_mask and token_type_ids (BERT-style sentence encoders). Pick such a model."
        )
    index, pooled = _pick_output(session)
    fingerprint = onnx_fingerprint(model_sha256, pooled=pooled, max_tokens=max_tokens, stride=stride,
                                   windowed=windowed)
    log.debug("loaded %s (%s) with %d threads", model, fingerprint, threads)
    return OnnxEmbedder(
        optimise=build,
        model=model,
        fingerprint=fingerprint,
        session=session,
        tokenizer=tok,
        load_tokenizer=load_tokenizer,
        wordpiece=wordpiece,
        windowed=windowed,
        feeds=feeds,
        output=index,
        pooled_output=pooled,
        threads=threads,
    )


#: The optimised graph's weights go to this file beside it (ONNX external data, which ONNX Runtime maps).
_GRAPH_DATA = "model.data"
#: In the cache entry's name: its files were flushed to disk before the entry was renamed into place, so a
#: crash leaves no entry or a complete one. Entries saved without that (earlier versions) are not read.
_DURABLE = "-synced"


def _tokenizer(tokenizer_file: Path, *, max_tokens: int, stride: int) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    # The tokenizer file's own truncation (128 for MiniLM) would silently drop text: windows replace it.
    tok.enable_truncation(max_length=max_tokens, stride=stride)
    return tok


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _graph_dir(cache: Path, model_sha256: str, *, fused: bool = False) -> Path:
    import onnxruntime as ort

    from .fusion import FUSION_VERSION

    rewrite = f"-fused{FUSION_VERSION}" if fused else ""
    return cache / f"{model_sha256[:32]}-ort{ort.__version__}-{os.uname().machine}{_DURABLE}{rewrite}"


def _fusion_available() -> bool:
    """Whether the graph rewrite can run: it reads and writes the model with the ``onnx`` package."""
    import importlib.util

    return importlib.util.find_spec("onnx") is not None


#: Least cosine between the fused and the plain graph's pooled vectors on the probe batch for the fused
#: graph to be used (the vectors must stay those of the plain graph: >= 0.9999 on real text).
FUSED_MIN_COSINE = 0.99999


def _fused_graph(model_file: Path) -> bytes | None:
    """The model rewritten with fused operators (see :mod:`.fusion`), serialised; None when nothing fused."""
    from .fusion import fuse_encoder

    try:
        import onnx

        fused = fuse_encoder(onnx.load(str(model_file)))
    except Exception as exc:  # an unusual graph (or a broken onnx install): the plain one serves
        log.debug("could not rewrite %s (%s); using the plain graph", model_file, exc)
        return None
    if fused is None:
        log.debug("nothing to fuse in %s; using the plain graph", model_file)
        return None
    model, counts = fused
    log.debug("fused %s: %s", model_file, counts)
    return bytes(model.SerializeToString())


def _probe_vectors(session: Any, width: int = 48, short: int = 29) -> Any:
    """Unit mean-pooled vectors of a fixed two-row batch (the second row padded to ``width`` from ``short``)."""
    import numpy as np

    from .pooling import mean_pool

    lengths = (width, short)
    ids = ((np.arange(2 * width, dtype=np.int64) * 7919) % 900 + 100).reshape(2, width)
    mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    available = {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    feeds = {i.name: available[i.name] for i in session.get_inputs() if i.name in available}
    index, pooled = _pick_output(session)
    out = session.run(None, feeds)[index]
    vectors = out if pooled else mean_pool(out, mask)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _fused_matches(fused: Any, model_file: Path) -> bool:
    """Whether the fused session gives the plain graph's vectors on the probe batch (padding included)."""
    try:
        plain = _probe_vectors(_session(model_file, optimise=False))
        cosine = float((_probe_vectors(fused) * plain).sum(axis=1).min())
    except Exception as exc:
        log.warning("the fused graph of %s does not run (%s); using the plain graph", model_file, exc)
        return False
    if cosine < FUSED_MIN_COSINE:
        log.warning("the fused graph of %s gives other vectors (cosine %.6f); using the plain graph",
                    model_file, cosine)
        return False
    return True


def _cached_session(folder: Path) -> Any | None:
    """A session over the optimised graph saved in ``folder``; None when there is none (or it is unusable)."""
    graph = folder / "model.onnx"
    if not graph.is_file():
        return _adopt_unflushed(folder)
    try:
        # Optimised already: nothing is left to do at load. The entry's files reached the disk before it
        # was renamed into place (see _optimised_session), so no crash leaves it with zeroed weights.
        return _session(graph, optimise=False)
    except Exception as exc:  # a damaged cache entry is rebuilt, never trusted
        log.warning("the cached optimised graph in %s does not load (%s); building it again", folder, exc)
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _adopt_unflushed(folder: Path) -> Any | None:
    """The session of the entry an earlier version saved for ``folder`` (renamed into place without flushing
    its files first), once it is checked and flushed; that entry then becomes ``folder``. None when there
    is none, or it is damaged (it is removed: the graph is built again)."""
    legacy = folder.with_name(folder.name.replace(_DURABLE, "", 1))
    graph = legacy / "model.onnx"
    if legacy == folder or not graph.is_file():
        return None
    try:
        import numpy as np

        session = _session(graph, optimise=False)
        # A crash could leave its weights file its full size but zeroed: that loads, and every vector is NaN.
        with np.errstate(all="ignore"):
            probe = _probe_vectors(session, width=8, short=5)
        if not np.isfinite(probe).all():
            raise ValueError("the probe batch gives non-finite vectors")
    except Exception as exc:
        log.warning("the cached optimised graph in %s does not load (%s); building it again", legacy, exc)
        shutil.rmtree(legacy, ignore_errors=True)
        return None
    try:  # checked once: flushed and renamed, later processes load it without the probe
        _flush(legacy)
        os.rename(legacy, folder)
        _fsync(folder.parent)
    except OSError as exc:  # another process adopted it first, or the cache is read-only: it still serves
        log.debug("could not adopt the cached graph in %s (%s)", legacy, exc)
    return session


def _optimised_session(model_file: Path, folder: Path | None, *, fuse: bool = False) -> Any:
    """The optimised session (of the fused graph when ``fuse`` and it checks out, see :mod:`.fusion`);
    its graph is saved into ``folder`` for later processes (best effort).

    ONNX Runtime writes the graph and its weights into a private folder that is then renamed into
    place in one step, so a reader finds either no entry or a complete one.
    """
    fused = _fused_graph(model_file) if fuse else None

    def build(save_to: Path | None) -> Any:
        if fused is not None:
            try:
                session = _session(fused, optimise=True, save_to=save_to)
            except Exception as exc:  # e.g. an ONNX Runtime without the fused operators
                log.warning("the fused graph of %s does not load (%s); using the plain graph", model_file, exc)
            else:
                if _fused_matches(session, model_file):
                    return session
            if save_to is not None:  # the plain graph must not be saved over a rejected fused one's files
                for leftover in save_to.parent.iterdir():
                    leftover.unlink()
        return _session(model_file, optimise=True, save_to=save_to)

    if folder is None:
        return build(None)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.mkdir(parents=True)
    except OSError as exc:
        log.debug("cannot cache the optimised graph in %s (%s)", folder.parent, exc)
        return build(None)
    try:
        session = build(tmp / "model.onnx")
        try:
            _flush(tmp)
            os.rename(tmp, folder)
            _fsync(folder.parent)  # the rename itself
        except OSError:  # another process saved it first (or the folder cannot be written): theirs stands
            pass
        return session
    except Exception as exc:
        log.debug("could not save the optimised graph of %s (%s)", model_file, exc)
        return build(None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _flush(folder: Path) -> None:
    """Write the files in ``folder`` and the folder itself through to the disk (before it is renamed into
    place: otherwise a crash can leave the renamed entry with files of the right size but no data)."""
    for path in folder.iterdir():
        _fsync(path)
    _fsync(folder)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _session(model_file: Path | bytes, *, optimise: bool, save_to: Path | None = None) -> Any:
    """A session that runs each call on the calling thread: the embedder runs ``threads`` batches at once.

    ``model_file``: a path, or a serialised graph (the fused one).
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    level = ort.GraphOptimizationLevel
    opts.graph_optimization_level = level.ORT_ENABLE_ALL if optimise else level.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    # Indexing runs beside the agent's own work; spinning idle workers measurably slowed a busy 2-core host.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if save_to is not None:
        opts.optimized_model_filepath = str(save_to)
        # The weights in a file of their own, which ONNX Runtime maps at load instead of parsing them.
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", _GRAPH_DATA)
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    source = model_file if isinstance(model_file, bytes) else str(model_file)
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def _pick_output(session: Any) -> tuple[int, bool]:
    """Index of the token-embedding output, or of an already pooled one as a fallback."""
    outs = session.get_outputs()
    for i, o in enumerate(outs):
        if o.name in ("last_hidden_state", "token_embeddings"):
            return i, False
    for i, o in enumerate(outs):
        if len(o.shape) == 3:
            return i, False
    for i, o in enumerate(outs):
        if len(o.shape) == 2:
            return i, True
    return 0, False
