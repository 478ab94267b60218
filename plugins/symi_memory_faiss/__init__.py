"""faiss backend: the SQLite index with a faiss (flat, HNSW or IVF) vector side."""
