"""Reading ``memorySearch.local`` and deciding which model file to run.

Keys read (all under the agent's ``memorySearch`` dict): ``local.modelPath``,
``local.modelCacheDir``, ``local.threads``, ``local.sha256``, ``local.model``;
plus ``ProviderContext.model`` (``memorySearch.model``) and ``HF_ENDPOINT`` /
``HF_TOKEN`` from ``ctx.env`` or the process environment.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from symi_memory.specs import ProviderUnavailable

if TYPE_CHECKING:
    from symi_memory.specs import ProviderContext

__all__ = [
    "DEFAULT_MODEL",
    "E5_MODEL",
    "LocalSettings",
    "ModelChoice",
    "choose_model",
    "default_threads",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
E5_MODEL = "multilingual-e5-small"
_ALIASES = {
    DEFAULT_MODEL.lower(): DEFAULT_MODEL,
    "sentence-transformers/all-minilm-l6-v2": DEFAULT_MODEL,
    E5_MODEL: E5_MODEL,
    "intfloat/multilingual-e5-small": E5_MODEL,
}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def default_threads() -> int:
    """Embedding threads when ``local.threads`` is unset: at most 2, so indexing leaves the host usable."""
    return max(1, min(2, os.cpu_count() or 1))


@attrs.frozen(kw_only=True)
class LocalSettings:
    """The validated ``memorySearch.local`` section."""

    model_path: str | None
    cache_dir: Path
    threads: int
    sha256: str | None
    model: str | None
    model_key: str
    endpoint: str
    hf_token: str | None

    @classmethod
    def from_context(cls, ctx: ProviderContext) -> LocalSettings:
        """Validate the keys; a bad value raises ProviderUnavailable naming the key and the fix."""
        local = ctx.settings.get("local") or {}
        threads = local.get("threads")
        if threads is None:
            threads = default_threads()
        elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ProviderUnavailable(
                f"memorySearch.local.threads = {threads!r} is invalid; use a whole number >= 1 or leave it unset"
            )
        sha = local.get("sha256")
        if sha is not None:
            sha = str(sha).strip().lower()
            if not _HEX64.match(sha):
                raise ProviderUnavailable(
                    f"memorySearch.local.sha256 = {local.get('sha256')!r} is not a sha256; give 64 hex digits"
                )
        cache = local.get("modelCacheDir")
        cache_dir = Path(os.path.expanduser(cache)) if cache else Path(ctx.state_dir) / "models"
        model, key = local.get("model"), "memorySearch.local.model"
        if not model and ctx.model:
            model, key = ctx.model, "memorySearch.model"
        return cls(
            model_path=local.get("modelPath") or None,
            cache_dir=cache_dir,
            threads=threads,
            sha256=sha,
            model=str(model) if model else None,
            model_key=key,
            endpoint=_env(ctx, "HF_ENDPOINT") or "https://huggingface.co",
            hf_token=_env(ctx, "HF_TOKEN"),
        )


def _env(ctx: ProviderContext, name: str) -> str | None:
    return ctx.env.get(name) or os.environ.get(name) or None


@attrs.frozen(kw_only=True)
class ModelChoice:
    """What to run: a bundled model by name, or a configured location.

    ``kind`` is ``"bundled"`` (``name`` is a known model), ``"hf"``
    (``location`` is ``owner/repo/path``), ``"gguf"`` or ``"onnx"``
    (``location`` is a local path). ``label`` is what the provider reports as
    its ``model``.
    """

    kind: Literal["bundled", "hf", "gguf", "onnx"]
    label: str
    name: str | None = None
    location: str | None = None


def choose_model(s: LocalSettings) -> ModelChoice:
    """Map settings to a model; an unknown bundled name raises ProviderUnavailable."""
    path, model = s.model_path, s.model
    if not path and model and _looks_like_location(model):
        path, model = model, None
    if path:
        # The core fills in the provider's default model name; that must not label a custom file.
        label = model if model and model.lower() not in _ALIASES else path
        if path.startswith("hf:"):
            ref = path[3:].strip("/")
            if ref.count("/") < 2:
                raise ProviderUnavailable(
                    f"memorySearch.local.modelPath = {path!r} is not a valid hf: URI; "
                    "use hf:<owner>/<repo>/<path/to/model.onnx>"
                )
            return ModelChoice(kind="hf", label=label, location=ref)
        local = os.path.expanduser(path)
        kind: Literal["gguf", "onnx"] = "gguf" if local.lower().endswith(".gguf") else "onnx"
        return ModelChoice(kind=kind, label=label, location=local)
    name = _ALIASES.get((model or DEFAULT_MODEL).lower())
    if name is None:
        raise ProviderUnavailable(
            f"{s.model_key} = {model!r} is not a bundled local model (bundled: {DEFAULT_MODEL}, {E5_MODEL}); "
            "pick one of them or point memorySearch.local.modelPath at an ONNX or GGUF model"
        )
    return ModelChoice(kind="bundled", label=name, name=name)


def _looks_like_location(value: str) -> bool:
    if value.lower() in _ALIASES:
        return False
    return value.startswith("hf:") or value.lower().endswith((".onnx", ".gguf")) or os.sep in value
