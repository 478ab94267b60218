"""symi-memory builtin plugin."""
