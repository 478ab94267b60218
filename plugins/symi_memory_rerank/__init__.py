"""Rerankers ``cohere``, ``voyage`` and ``jina`` for the hosted ``/rerank`` APIs.

Reads ``memorySearch.query.rerank.{model, topN, baseUrl, apiKey, headers,
timeoutMs}`` and ``models.providers.<name>.{apiKey, baseUrl, headers}``, then
``COHERE_API_KEY`` / ``VOYAGE_API_KEY`` / ``JINA_API_KEY``.
"""
