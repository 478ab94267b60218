"""``config get|set|unset``: typed, validated, atomic edits of the config file."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import parse_config_text, read_config_file

__all__ = ["is_set", "json5_backup", "parse_cli_value", "set_key", "to_toml", "unset_key", "write_atomic"]

log = logging.getLogger("symi_memory.config")


def parse_cli_value(text: str) -> Any:
    """``10`` -> 10, ``true`` -> True, ``[1,2]`` -> list, ``"x"``/``x`` -> "x"."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        try:
            return tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            return text


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value if v is not None]
    return value


def to_toml(data: dict[str, Any]) -> str:
    """TOML text (TOML has no null, so unset keys are left out)."""
    import tomli_w

    return tomli_w.dumps(_strip_none(data))


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file in the same folder, fsync, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    return parse_config_text(read_config_file(path), path.suffix.lower(), str(path))


def _serialise(path: Path, data: dict[str, Any]) -> str:
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return to_toml(data)
    # JSON is valid JSON5: a JSON5 file is rewritten as JSON with every value kept (comments are not).
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def json5_backup(path: Path) -> Path | None:
    """Before a JSON5 file is rewritten as plain JSON, keep the original (comments and all) as ``<name>.bak``.

    Returns the backup path, or None when nothing would be lost (not JSON5,
    missing, or already plain JSON in the layout we write).
    """
    if path.suffix.lower() != ".json5" or not path.exists():
        return None
    text = read_config_file(path)
    try:
        if json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" == text:
            return None
    except json.JSONDecodeError:
        pass
    backup = path.with_name(path.name + ".bak")
    write_atomic(backup, text)
    return backup


def _edit(path: Path, key: str, value: Any, *, remove: bool, validate: Any) -> dict[str, Any]:
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"{key!r} is not a dotted key like memory.citations")
    data = _read(path)
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            if remove:
                return data
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{key}: {part} is a value, not a table; unset it first")
        node = child
    if remove:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    validate(data)  # raises ConfigError before anything is written
    backup = json5_backup(path)
    if backup is not None:
        log.warning("%s is rewritten as JSON (still valid JSON5) with every value kept; comments and layout are "
                    "not, the original is in %s", path, backup)
    write_atomic(path, _serialise(path, data))
    return data


def set_key(path: Path, key: str, value: Any, *, validate: Any) -> dict[str, Any]:
    """Set ``key`` (dotted camelCase) in the file at ``path`` after validating the result."""
    return _edit(path, key, value, remove=False, validate=validate)


def is_set(path: Path, key: str) -> bool:
    """Whether the file at ``path`` sets ``key`` (dotted camelCase) itself."""
    node: Any = _read(path)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def unset_key(path: Path, key: str, *, validate: Any) -> dict[str, Any]:
    """Remove ``key`` from the file (the default applies again)."""
    return _edit(path, key, None, remove=True, validate=validate)
