"""The one HTTP path for remote calls: timeouts, retries with backoff, secret-safe errors.

Both the embedding providers and the rerankers go through :class:`RemoteClient`,
so a fix to retrying or redaction lands everywhere at once.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from symi_memory import forking
from symi_memory.errors import EmbeddingError
from symi_memory.secrets import header_secrets, redact, split_base_url, url_secrets

__all__ = ["MAX_RETRIES", "RemoteClient", "backoff_delay", "is_rate_limit_message"]

log = logging.getLogger("symi_memory.remote")

MAX_RETRIES = 3
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0
_RATE_LIMIT_HINTS = (
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "resource_exhausted",
    "resource has been exhausted",
    "quota exceeded",
)


class _HttpxLogRedactor(logging.Filter):
    """Redacts the credentials of every RemoteClient from httpx's own log lines.

    httpx logs each request URL at INFO (``-v``), query string included: a
    ``baseUrl`` with ``?api-key=...`` would otherwise reach the log.
    """

    def __init__(self) -> None:
        super().__init__("symi-memory-redact")
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = redact(record.getMessage(), self.secrets)
            record.msg, record.args = message, None
        return True


_HTTPX_REDACTOR = _HttpxLogRedactor()
logging.getLogger("httpx").addFilter(_HTTPX_REDACTOR)


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): 0.5 s doubling, +-25% jitter, capped at 8 s."""
    base = min(MAX_DELAY_S, BASE_DELAY_S * (2**attempt))
    jitter = (rng or random).uniform(0.75, 1.25)
    return min(MAX_DELAY_S, base * jitter)


def is_rate_limit_message(text: str) -> bool:
    """True when an error body reads like a rate-limit refusal, whatever its status code."""
    lowered = text.lower()
    return any(hint in lowered for hint in _RATE_LIMIT_HINTS)


class RemoteClient:
    """A sync httpx client with per-request timeout, retries and redacted errors.

    ``secrets`` are scrubbed from every message this client produces, so even
    a server that echoes the key back cannot leak it into logs or exceptions.
    ``sleep`` is injectable so tests run the backoff without waiting.
    """

    def __init__(
        self,
        *,
        provider: str,
        headers: Mapping[str, str],
        timeout_s: float,
        secrets: Iterable[str | None] = (),
        base_url: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.timeout_s = timeout_s
        # Credential headers (Authorization, X-Custom-Auth, ...) and URL credentials are secrets too.
        self._secrets = [s for s in [*secrets, *header_secrets(headers), *url_secrets(base_url)] if s]
        _HTTPX_REDACTOR.secrets.update(self._secrets)
        self._sleep = sleep
        self._rng = rng
        params: list[tuple[str, str]] = []
        auth = None
        if base_url:
            # A base URL's query (?api-version=...&api-key=...) goes with every request, its user info as
            # basic auth: paths appended to the base stay valid and credentials stay out of URLs we print.
            _, params, auth = split_base_url(base_url)
        self._client_args: dict[str, Any] = dict(headers=dict(headers), timeout=timeout_s, transport=transport,
                                                 params=tuple(params) or None, auth=auth)
        self._client: httpx.Client | None = httpx.Client(**self._client_args)
        forking.track(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: the pooled connections are the parent's sockets (a request on one would interleave
        with the parent's, and one answer go to the other process): a new pool; the parent's is kept open, never
        closed (closing would end the parent's TLS sessions)."""
        if self._client is not None:
            forking.keep(self._client)
        self._client = None  # made at the child's first request: a child that never asks makes none

    def _http(self) -> httpx.Client:
        client = self._client
        if client is None:
            client = self._client = httpx.Client(**self._client_args)
        return client

    def redact(self, text: str) -> str:
        """``text`` with every known secret replaced by ``***``."""
        return redact(text, self._secrets)

    def error(self, message: str, *, retryable: bool = False) -> EmbeddingError:
        """An :class:`EmbeddingError` for this provider with secrets scrubbed."""
        return EmbeddingError(self.redact(message), provider=self.provider, retryable=retryable)

    def request(self, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        """Send a request, retrying 429, 5xx and rate-limit answers up to :data:`MAX_RETRIES` times."""
        for attempt in range(MAX_RETRIES + 1):
            try:
                response = self._http().request(method, url, **kwargs)
            except httpx.TimeoutException:
                # Not retried: a hung endpoint would otherwise block a sync for 4x the timeout.
                raise self.error(
                    f"{what} timed out after {self.timeout_s:g} s ({method} {url}); "
                    "check the endpoint or raise the timeout (remote.timeoutMs)",
                    retryable=True,
                ) from None
            except httpx.HTTPError as exc:
                raise self.error(
                    f"{what} failed: {type(exc).__name__}: {exc} ({method} {url})", retryable=True
                ) from None
            except (httpx.InvalidURL, ValueError) as exc:
                # A header value that is not ASCII, a malformed URL: a config problem, said without secrets.
                raise self.error(f"{what} failed: {type(exc).__name__}: {exc} ({method} {url}); check "
                                 "baseUrl and headers") from None
            if response.is_success:
                return response
            # Redacted before it is cut, so a cut can never leave half a secret behind.
            body = self.redact(response.text)[:400].strip()
            retryable = (
                response.status_code == 429 or response.status_code >= 500 or is_rate_limit_message(body)
            )
            if retryable and attempt < MAX_RETRIES:
                delay = backoff_delay(attempt, self._rng)
                log.warning(
                    "%s: HTTP %s from %s, retry %d/%d in %.2f s",
                    what,
                    response.status_code,
                    self.redact(url),
                    attempt + 1,
                    MAX_RETRIES,
                    delay,
                )
                self._sleep(delay)
                continue
            tries = f" after {attempt + 1} attempts" if retryable else ""
            raise self.error(
                f"{what} failed{tries}: HTTP {response.status_code} from {method} {url}: {body or '(empty body)'}",
                retryable=retryable,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def json_of(self, response: httpx.Response, *, what: str) -> Any:
        """The decoded JSON body, or an :class:`EmbeddingError` naming the endpoint."""
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            snippet = self.redact(response.text)[:200].strip()
            raise self.error(
                f"{what}: malformed JSON from {response.request.method} {response.request.url}: {snippet!r}"
            ) from None

    def post_json(self, url: str, body: Any, *, what: str) -> Any:
        """POST a JSON body and return the decoded JSON answer."""
        return self.json_of(self.request("POST", url, what=what, json=body), what=what)

    def get_json(self, url: str, *, what: str) -> Any:
        """GET and return the decoded JSON answer."""
        return self.json_of(self.request("GET", url, what=what), what=what)

    def close(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            self._client.close()
