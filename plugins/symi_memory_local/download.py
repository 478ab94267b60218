"""One-time, resumable, verified downloads of ``hf:`` model files.

A file lands in ``<cacheDir>/hf/<owner>/<repo>/<path>``. Bytes go to a
``.part`` file first; an interrupted transfer (in this process or an earlier
one) continues with an HTTP ``Range`` request. A finished file is checked
against a sha256 (``local.sha256``, or the server's ``X-Linked-Etag`` /
``ETag`` when that is a 64-hex sha256) or, failing that, its announced size,
and only then renamed into place with a ``.sha256`` sidecar.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx

from symi_memory.specs import ProviderUnavailable

from .integrity import sha256_file, verify_sha256

__all__ = ["HfFile", "NotFoundOnHub", "fetch_hf_file"]

log = logging.getLogger("symi_memory.local")

_SHA = re.compile(r'^(?:W/)?"?([0-9a-fA-F]{64})"?$')
_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class NotFoundOnHub(ProviderUnavailable):
    """The server answered 404 for a file."""


@attrs.frozen
class HfFile:
    """``owner/repo`` plus a path inside the repository (``main`` revision)."""

    repo: str
    path: str

    @classmethod
    def parse(cls, ref: str) -> HfFile:
        """Split ``owner/repo/path/to/file``."""
        owner, repo, path = ref.strip("/").split("/", 2)
        return cls(f"{owner}/{repo}", path)

    def url(self, endpoint: str) -> str:
        """``{endpoint}/{owner}/{repo}/resolve/main/{path}``."""
        return f"{endpoint.rstrip('/')}/{self.repo}/resolve/main/{self.path}"


def fetch_hf_file(
    ref: HfFile,
    *,
    cache_dir: Path,
    endpoint: str,
    sha256: str | None = None,
    token: str | None = None,
    attempts: int = 4,
    client: httpx.Client | None = None,
) -> Path:
    """Return the cached file, downloading (or resuming) it first if needed.

    Concurrent callers (two processes opening the same agent) take a lock
    file, so only one of them transfers; the others then find the file.
    """
    dest = cache_dir / "hf" / ref.repo / ref.path
    if dest.is_file():
        return _checked(dest, sha256, ref)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # One lock for the whole cache: downloads are rare, and no lock files litter the model folders.
    with _exclusive(cache_dir / "hf" / ".lock"):
        if dest.is_file():
            return _checked(dest, sha256, ref)
        return _download(
            ref, dest, endpoint=endpoint, sha256=sha256, token=token, attempts=attempts, client=client
        )


def _checked(dest: Path, sha256: str | None, ref: HfFile) -> Path:
    sidecar = dest.with_name(dest.name + ".sha256")
    known = sidecar.read_text().strip() if sidecar.is_file() else None
    verify_sha256(
        dest,
        sha256 or known,
        what=f"cached model file {ref.repo}/{ref.path}",
        fix=f"delete it to download it again: rm {dest}",
    )
    return dest


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks here; the sha/size check still catches a mixed file.
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _download(
    ref: HfFile,
    dest: Path,
    *,
    endpoint: str,
    sha256: str | None,
    token: str | None,
    attempts: int,
    client: httpx.Client | None,
) -> Path:
    sidecar = dest.with_name(dest.name + ".sha256")
    url = ref.url(endpoint)
    # Byte ranges only line up with the file when the server sends it unencoded.
    headers = {"Accept-Encoding": "identity"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    own = client is None
    client = client or httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0, connect=15.0))
    try:
        part, expect = _transfer(client, url, dest, headers, attempts)
    finally:
        if own:
            client.close()
    want_sha = sha256 or expect.sha256
    actual = sha256_file(part)
    if want_sha and actual != want_sha.lower():
        part.unlink()
        raise ProviderUnavailable(
            f"download of {url} has sha256 {actual}, expected {want_sha}; the partial file was removed, "
            "run again to retry (check memorySearch.local.sha256 if you set it)"
        )
    if not want_sha and expect.size is not None and part.stat().st_size != expect.size:
        part.unlink()
        raise ProviderUnavailable(
            f"download of {url} has {part.stat().st_size} bytes, the server announced {expect.size}; "
            "the partial file was removed, run again to retry"
        )
    part.replace(dest)
    sidecar.write_text(actual + "\n")
    log.info("downloaded %s (%d bytes) to %s", url, dest.stat().st_size, dest)
    return dest


@attrs.define
class _Expect:
    sha256: str | None = None
    size: int | None = None


def _transfer(client: httpx.Client, url: str, dest: Path, headers: dict[str, str], attempts: int):
    part = dest.with_name(dest.name + ".part")
    expect = _Expect()
    last: Exception | None = None
    for _ in range(attempts):
        offset = part.stat().st_size if part.is_file() else 0
        req = dict(headers, Range=f"bytes={offset}-") if offset else headers
        try:
            with client.stream("GET", url, headers=req) as resp:
                if resp.status_code == 416:
                    # Our .part is not a prefix the server recognises: start over.
                    part.unlink(missing_ok=True)
                    continue
                if resp.status_code == 404:
                    raise NotFoundOnHub(
                        f"{url} was not found (404); check the hf: URI in memorySearch.local.modelPath"
                    )
                if resp.status_code >= 400:
                    raise ProviderUnavailable(
                        f"download of {url} failed with HTTP {resp.status_code}; "
                        "for gated or private repositories set HF_TOKEN"
                    )
                if resp.status_code == 206 and _range_start(resp) != offset:
                    part.unlink(missing_ok=True)
                    continue
                expect = _expectation(resp, expect)
                mode = "ab" if resp.status_code == 206 else "wb"
                with open(part, mode) as f:
                    # iter_raw hands over every byte as it arrives, so a cut keeps all it received.
                    for block in resp.iter_raw():
                        f.write(block)
            return part, expect
        except httpx.TransportError as exc:
            last = exc
            log.warning("download of %s interrupted (%s); resuming", url, exc)
    raise ProviderUnavailable(
        f"download of {url} failed after {attempts} attempts ({last}); run again to resume from {part}"
    )


def _expectation(resp: httpx.Response, prev: _Expect) -> _Expect:
    sha, size = prev.sha256, prev.size
    for r in [*resp.history, resp]:
        for name in ("x-linked-etag", "etag"):
            m = _SHA.match(r.headers.get(name, "").strip())
            if m and sha is None:
                sha = m.group(1).lower()
        if r.headers.get("x-linked-size", "").isdigit():
            size = int(r.headers["x-linked-size"])
    m = _RANGE.match(resp.headers.get("content-range", ""))
    if resp.status_code == 206 and m and m.group(3).isdigit():
        size = int(m.group(3))
    elif resp.status_code == 200 and resp.headers.get("content-length", "").isdigit():
        size = int(resp.headers["content-length"])
    return _Expect(sha, size)


def _range_start(resp: httpx.Response) -> int | None:
    m = _RANGE.match(resp.headers.get("content-range", ""))
    return int(m.group(1)) if m else None
