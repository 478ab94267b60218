"""Which configured values are credentials, and keeping them out of text.

Secrets are not only ``apiKey``: header values (``Authorization``,
``X-Custom-Auth``, ``Ocp-Apim-Subscription-Key``) and credentials inside a
``baseUrl`` (``https://user:PASS@host/v1?api-key=K``) are too. Everything
that prints config, stores a fingerprint or builds an error message asks
this module, so one list of rules holds everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "header_secrets",
    "is_secret_name",
    "mask_dsn",
    "mask_url",
    "public_url",
    "redact",
    "split_base_url",
    "url_secrets",
]

MASK = "***"

_SECRET_NAMES = {"authorization", "proxy-authorization", "cookie", "x-goog-api-key", "api-key", "x-api-key",
                 "key", "sig", "code"}
_SECRET_WORDS = ("key", "token", "secret", "auth", "password", "passwd", "pwd", "credential", "signature",
                 "session", "cookie")
_SCHEME_WORDS = re.compile(r"^(bearer|basic|token|apikey|key|sharedaccesssignature|digest)\s+", re.IGNORECASE)
_MIN_LEN = 3  # shorter values ("1", "on") would blank out unrelated text


def is_secret_name(name: str) -> bool:
    """True for a header, query parameter or config key whose value authenticates (by name)."""
    lowered = str(name).lower()
    return lowered in _SECRET_NAMES or any(word in lowered for word in _SECRET_WORDS)


def _parts_of(value: str) -> list[str]:
    """A value and, for ``Bearer X`` style values, the credential after the scheme word."""
    value = value.strip()
    out = [value] if len(value) >= _MIN_LEN else []
    rest = _SCHEME_WORDS.sub("", value)
    if rest != value and len(rest.strip()) >= _MIN_LEN:
        out.append(rest.strip())
    return out


def header_secrets(headers: Mapping[str, object] | None) -> list[str]:
    """The values of credential headers (whole, and without their ``Bearer``-style scheme word)."""
    out: list[str] = []
    for name, value in (headers or {}).items():
        if value is not None and is_secret_name(str(name)):
            out.extend(_parts_of(str(value)))
    return out


def url_secrets(url: str | None) -> list[str]:
    """User name, password and every query value of a URL (values an echoing server may repeat)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return []
    out = [v for v in (username, password) if v and len(v) >= _MIN_LEN]
    out += [v for _, v in parse_qsl(parts.query, keep_blank_values=False) if len(v) >= _MIN_LEN]
    # The raw (percent-encoded) forms can show up in text too.
    raw_user = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    out += [v for v in raw_user.split(":") if len(v) >= _MIN_LEN]
    out += [kv.partition("=")[2] for kv in parts.query.split("&") if len(kv.partition("=")[2]) >= _MIN_LEN]
    return list(dict.fromkeys(out))


def split_base_url(url: str) -> tuple[str, list[tuple[str, str]], tuple[str, str] | None]:
    """``(base without credentials or query, query parameters, (user, password) or None)``.

    The caller sends the parameters with every request and the credentials
    as HTTP basic auth, so a path appended to the base stays a valid URL and
    the credentials never sit in a URL that ends up in a message.
    """
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    auth = None
    if parts.username is not None or parts.password is not None:
        from urllib.parse import unquote

        auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    host = parts.netloc.rpartition("@")[2]
    clean = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
    return clean, params, auth


def public_url(url: str) -> str:
    """The URL without user info and without credential query parameters (for fingerprints and display)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    host = parts.netloc.rpartition("@")[2]
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_name(k)]
    return urlunsplit((parts.scheme, host, parts.path, urlencode(kept), ""))


def mask_url(url: str) -> str:
    """The URL with its password and credential query values shown as ``***`` (for ``config show``)."""
    try:
        parts = urlsplit(url)
        has_user = "@" in parts.netloc
    except ValueError:
        return MASK
    netloc = parts.netloc
    if has_user:
        user, _, host = netloc.rpartition("@")
        name, colon, _pw = user.partition(":")
        netloc = f"{name}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = "&".join(
        f"{k}={MASK}" if v and (is_secret_name(k) or len(v) >= 20) else f"{k}={v}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


#: The libpq connection parameters that hold a credential.
_DSN_SECRETS = frozenset({"password", "sslpassword"})


def mask_dsn(dsn: str) -> str:
    """A database DSN (a URL, or libpq's ``key=value`` pairs) with its password shown as ``***`` (for
    ``config show``); the user name, host and every other setting are kept.

    Read as libpq reads it, not as a web URL: a URL's password runs to the ``@`` and may hold ``?``, ``#`` or
    ``:`` unencoded, and a ``key=value`` value may be quoted or hold backslash-escaped spaces.
    """
    head = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", dsn)
    if head is None:
        return _mask_conninfo(dsn)
    rest = dsn[head.end():]
    slash = rest.find("/")
    authority = rest if slash < 0 else rest[:slash]
    at = authority.rfind("@")  # libpq ends the user info at the first '@'; the last one covers either reading
    if at >= 0:
        user, colon, _ = authority[:at].partition(":")
        rest = (f"{user}:{MASK}" if colon else user) + rest[at:]
        after = len(user) + (len(MASK) + 1 if colon else 0) + 1
    else:
        after = 0
    query = rest.find("?", after)
    if query < 0:
        return head.group(0) + rest
    pairs = []
    for pair in rest[query + 1:].split("&"):
        key, eq, value = pair.partition("=")
        pairs.append(f"{key}={MASK}" if eq and value and unquote(key) in _DSN_SECRETS else pair)
    return head.group(0) + rest[:query + 1] + "&".join(pairs)


def _mask_conninfo(dsn: str) -> str:
    """:func:`mask_dsn` of libpq's ``key = value`` form; one it cannot read is shown as ``***`` if it may hold a
    password."""
    out, i, n = [], 0, len(dsn)
    while i < n:
        if dsn[i].isspace():
            i += 1
            continue
        start = i
        while i < n and dsn[i] != "=" and not dsn[i].isspace():
            i += 1
        key = dsn[start:i]
        while i < n and dsn[i].isspace():
            i += 1
        if i >= n or dsn[i] != "=" or not key:
            return MASK if "password" in dsn.lower() else dsn
        i += 1
        while i < n and dsn[i].isspace():
            i += 1
        value = i
        if i < n and dsn[i] == "'":
            i += 1
            while i < n and dsn[i] != "'":
                i += 2 if dsn[i] == "\\" else 1
            if i >= n:
                return MASK if "password" in dsn.lower() else dsn
            i += 1
        else:
            while i < n and not dsn[i].isspace():
                i += 2 if dsn[i] == "\\" else 1
        if key in _DSN_SECRETS:
            out.append((value, min(i, n)))
    for value, end in reversed(out):
        dsn = dsn[:value] + MASK + dsn[end:]
    return dsn


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (longest first) replaced by ``***``."""
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_LEN}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
