"""Remote embedding providers ``openai``, ``gemini`` and ``voyage`` (httpx, sync).

Reads ``memorySearch.model``, ``memorySearch.remote.{apiKey, baseUrl, headers,
timeoutMs, batch}`` and ``models.providers.<p>.{apiKey, baseUrl, headers}``
(Gemini: ``google`` or ``gemini``), then ``OPENAI_API_KEY`` / ``GEMINI_API_KEY``
/ ``VOYAGE_API_KEY``. :mod:`.client` and :mod:`.keys` are shared with the
rerankers plugin.
"""
