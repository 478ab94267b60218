"""API key, base URL and header resolution shared by embedding providers and rerankers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from symi_memory.secrets import header_secrets, is_secret_name, public_url, url_secrets

__all__ = [
    "client_secrets",
    "fingerprint",
    "is_secret_header",
    "merge_headers",
    "positive_number",
    "provider_entry",
    "resolve_api_key",
    "resolve_base_url",
    "section",
]


def section(mapping: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """``mapping[key]`` when it is a mapping, else an empty one (missing or null config keys)."""
    value = (mapping or {}).get(key)
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def positive_number(value: Any, default: float) -> float:
    """``value`` when it is a real number above zero (not a bool), else ``default``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default


def provider_entry(models: Mapping[str, Any] | None, names: Iterable[str]) -> Mapping[str, Any]:
    """The first ``models.providers.<name>`` entry that exists among ``names``."""
    providers = section(models, "providers")
    for name in names:
        entry = providers.get(name)
        if isinstance(entry, Mapping):
            return entry
    return {}


def resolve_api_key(
    own: Mapping[str, Any],
    models: Mapping[str, Any] | None,
    env: Mapping[str, str],
    *,
    provider_names: Iterable[str],
    env_var: str,
) -> str | None:
    """The key from ``own["apiKey"]``, then ``models.providers.<name>.apiKey``, then ``env[env_var]``."""
    key = _text(own.get("apiKey"))
    if key:
        return key
    providers = section(models, "providers")
    for name in provider_names:
        key = _text(section(providers, name).get("apiKey"))
        if key:
            return key
    return _text(env.get(env_var))


def resolve_base_url(own: Mapping[str, Any], entry: Mapping[str, Any], default: str) -> str:
    """``own.baseUrl``, then the provider entry's ``baseUrl``, then ``default``; no trailing ``/``."""
    base = _text(own.get("baseUrl")) or _text(entry.get("baseUrl")) or default
    return base.rstrip("/")


def merge_headers(*layers: Mapping[str, Any] | None) -> dict[str, str]:
    """Merge header dicts left to right, later layers winning, case-insensitively by name."""
    merged: dict[str, tuple[str, str]] = {}
    for layer in layers:
        for name, value in (layer or {}).items():
            if value is None:
                continue
            merged[str(name).lower()] = (str(name), str(value))
    return dict(merged.values())


def is_secret_header(name: str) -> bool:
    """True for headers that carry credentials (by name)."""
    return is_secret_name(name)


def fingerprint(
    base_url: str, model: str, headers: Mapping[str, str], *, secrets: Iterable[str | None] = ()
) -> str:
    """A stable identity for what shapes the vectors: base URL, model and non-secret headers.

    The base URL loses its user info and credential query parameters, secret
    headers are dropped by name, and any header whose value contains a known
    secret is dropped too, so no credential ever ends up in the index meta.
    """
    known = [s for s in [*secrets, *url_secrets(base_url), *header_secrets(headers)] if s]
    kept = {
        name.lower(): value
        for name, value in headers.items()
        if not is_secret_header(name) and not any(s in value for s in known)
    }
    return json.dumps(
        {"baseUrl": public_url(base_url), "model": model, "headers": kept}, sort_keys=True, separators=(",", ":")
    )


def client_secrets(api_key: str | None, base_url: str, headers: Mapping[str, str]) -> list[str]:
    """Every configured value an error message must not repeat: key, URL credentials, credential headers."""
    return [s for s in [api_key, *url_secrets(base_url), *header_secrets(headers)] if s]
