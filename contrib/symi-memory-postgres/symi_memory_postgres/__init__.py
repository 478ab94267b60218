"""symi-memory-postgres: a memory backend on PostgreSQL + pgvector shared by many agents."""
