"""The typed config this plugin owns, declared with the core's field DSL (see symi_memory_register_config_sections)."""

from __future__ import annotations

import attrs

from symi_memory.config.fields import opt

__all__ = ["Local"]


@attrs.define(kw_only=True, eq=False, repr=False)
class Local:
    model: str | None = opt("model", None, kind="str", doc="Builtin local model: all-MiniLM-L6-v2 (default, English) or multilingual-e5-small (the multilingual extra; slower).")
    model_path: str | None = opt("modelPath", None, kind="str", doc="A model directory, .onnx file, .gguf file, or hf:owner/repo/path URI.")
    model_cache_dir: str | None = opt("modelCacheDir", None, kind="str", doc="Where hf: downloads go; default <stateDir>/models.")
    threads: int | None = opt("threads", None, kind="int", lo=1, hi=256, doc="ONNX Runtime threads; default min(2, CPUs).")
    sha256: str | None = opt("sha256", None, kind="str", doc="Expected sha256 of the modelPath model file (checked before loading; downloads too).")
